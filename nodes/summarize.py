"""Summarizers without a model (placeholder until the truncation engine lands)."""
