"""Truncation (placeholder until the truncation engine lands): nothing is cut yet."""

from hamilton.function_modifiers import tag


@tag(stage="truncation")
def budget_pools() -> dict:
    """Budget pools (not computed yet)."""
    return {}


@tag(stage="truncation")
def truncation_ledger() -> list:
    """What truncation did to each section (nothing yet)."""
    return []


@tag(stage="truncation")
def truncation_summary() -> dict:
    """Whether truncation ran, and why."""
    return {"triggered": False, "reason": None, "strategy": None}


@tag(stage="truncation")
def truncation_warnings() -> tuple:
    """Warnings of the truncation stage."""
    return ()
