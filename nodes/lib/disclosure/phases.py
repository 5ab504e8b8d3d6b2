"""The documents the current GSD phase's rules load (``phases:`` of the rules), with
``{phase}`` standing for the current phase folder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..quote import quoted
from .globs import glob_match, natural_key
from .rules import DisclosureRules

def _open_plans_in(paths: Sequence[str], names: set[str]) -> list[str]:
    """The PLAN files among ``paths`` that have no SUMMARY beside them, in the order given."""
    return [p for p in paths if p.endswith("-PLAN.md") and p[: -len("-PLAN.md")] + "-SUMMARY.md" not in names]


@dataclass(frozen=True)
class PhaseSelection:
    """The files the current phase's rules name, and the warnings of required ones missing."""

    files: Mapping[str, str]  # path (relative to .planning/) -> rule text
    warnings: tuple[str, ...] = ()


def phase_selection(
    rules: DisclosureRules, phase: str, files: Sequence[str], folder: str | None, folder_note: str
) -> PhaseSelection:
    """Which files the phase's rules load; a required glob matching nothing is a warning."""
    chosen: dict[str, str] = {}
    warnings: list[str] = []
    for entry in rules.phases.get(phase, ()):
        kind = "required" if entry.required else "optional"
        label = f"phase {phase}: {entry.glob} ({kind})"
        if "{phase}" in entry.glob:
            if folder is None:
                if entry.required:
                    warnings.append(f".planning/{entry.glob}: required for phase {quoted(phase)}, but there is no "
                                    f"current phase folder ({folder_note})")
                continue
            pattern = entry.glob.replace("{phase}", folder)
            label = f"phase {phase}: {entry.glob} ({kind}; {{phase}} = {folder}: {folder_note})"
        else:
            pattern = entry.glob
        matched = sorted((f for f in files if glob_match(pattern, f)), key=natural_key)
        if entry.pick == "first":
            matched = matched[:1]
        elif entry.pick == "last":
            matched = matched[-1:]
        elif entry.pick == "open":
            matched = (_open_plans_in(matched, set(files)) or matched[-1:])[:1]
        if not matched and entry.required:
            warnings.append(f".planning/{pattern}: required for phase {quoted(phase)} ({rules.source}) "
                            "but no file matches")
        for path in matched:
            chosen.setdefault(path, label)
    return PhaseSelection(chosen, tuple(warnings))
