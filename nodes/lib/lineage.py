"""What the ledger says became of a section (for the lineage graph and the run report)."""

from __future__ import annotations

from typing import Iterable

#: The reductions a section's fate names, strongest first.
REDUCTIONS = ("cut", "summarized", "compacted")


def section_fate(actions: Iterable[str], in_final: bool) -> str:
    """"dropped" when the section is not in the final context, else its strongest reduction on
    the ledger (cut, summarized, compacted), else "kept"."""
    if not in_final:
        return "dropped"
    done = set(actions)
    return next((action for action in REDUCTIONS if action in done), "kept")
