"""Drawings of what the pipeline hands over: the DAG, section lineage, run reports."""
