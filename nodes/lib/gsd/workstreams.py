"""GSD workstreams: ``.planning/workstreams/<name>/`` with its own STATE.md, ROADMAP.md and
``phases/`` (get-shit-done's ``planningDir``: the scoped files of a workstream live there; the
archived milestones ``milestones/*-phases/`` and PROJECT.md stay at the top of ``.planning/``).
The active one is named by ``.planning/active-workstream`` (one line, letters, digits, ``-``
and ``_``).

Which files the position is read from: the workstream ``active-workstream`` names; else the
top-level STATE.md when there is one; else the one workstream whose STATE.md names a phase or
has phase folders (the others are named in the evidence: "not started"); several such and no
pointer: the first with work in progress (else the first by name) is read, and a warning names
each workstream's STATE.md and its position.
"""

from __future__ import annotations

from dataclasses import replace

from ..regex import lazy_regex
from .position import BODY, FRONTMATTER, GsdFiles, GsdPosition, position_of

_NAME = lazy_regex(r"^[A-Za-z0-9_-]+$")


def _with_archives(ws: GsdFiles, root: GsdFiles) -> GsdFiles:
    """A workstream's files with the top-level archived milestone folders added."""
    archived = {k: v for k, v in root.folders.items() if k.startswith("milestones/")}
    return replace(ws, folders={**archived, **ws.folders}, warnings=(*root.warnings, *ws.warnings))


def _started(own: GsdFiles, pos: GsdPosition) -> bool:
    """A workstream has a position of its own: its STATE.md names a phase or a milestone, or it has
    phase folders (a workstream just created, "Current Phase: None", has none: the archived
    milestones it would fall back on are the project's, not its own)."""
    return pos.phase is not None and (pos.source in (FRONTMATTER, BODY) or bool(own.folders) or bool(pos.milestone))


def _summary(ws: GsdFiles, pos: GsdPosition, started: bool) -> str:
    """One workstream's position in a few words, for the evidence and the warning."""
    if not started:
        return f"{ws.state_path}: no phase (not started)"
    state = "complete" if pos.phase_complete else f"{pos.plans_done} of {pos.plans_total} plans done"
    return (f"{ws.state_path}: " + (f"milestone {pos.milestone}, " if pos.milestone else "")
            + f"phase {pos.phase} ({state})" + (" (milestone complete)" if pos.milestone_complete else ""))


def workstream_files(files: GsdFiles) -> GsdFiles:
    """The files the position is read from when ``.planning/`` has workstreams (see the module
    docstring); ``files`` itself when it has none or the top-level STATE.md is read. The choice
    is in ``chosen`` (evidence) and, when ambiguous, ``chosen_warnings``."""
    if not files.workstreams:
        return files
    pointer = (files.active_workstream or "").strip()
    if _NAME.match(pointer) and pointer in files.workstreams:
        ws = _with_archives(files.workstreams[pointer], files)
        return replace(ws, chosen=(f".planning/active-workstream names workstream {pointer}: {ws.state_path} is read",))
    if pointer:
        files = replace(files, chosen_warnings=(_bad_pointer_warning(pointer, files),))
    if files.state_text is not None:
        return replace(files, chosen=(f"{files.state_path} is read (workstreams "
                                      f"{', '.join(sorted(files.workstreams))} not active)",))
    return _workstream_by_position(files)


def _bad_pointer_warning(pointer: str, files: GsdFiles) -> str:
    """The warning for an active-workstream pointer that names no workstream."""
    return (f".planning/active-workstream names {pointer!r}, which is no workstream under "
            f".planning/workstreams/ ({', '.join(sorted(files.workstreams))}); it is ignored")


def _workstream_by_position(files: GsdFiles) -> GsdFiles:
    """Without a pointer or a top-level STATE.md: the one workstream with a position of its own;
    none: the first by name; several: the first with work in progress (else the first), with a
    warning naming each one's position."""
    read = {name: _with_archives(ws, files) for name, ws in sorted(files.workstreams.items())}
    positions = {name: position_of(ws) for name, ws in read.items()}
    placed = [name for name in read if _started(files.workstreams[name], positions[name])]
    summaries = "; ".join(_summary(read[name], positions[name], name in placed) for name in read)
    if not placed:
        return replace(read[next(iter(read))], chosen=(f"no .planning/STATE.md; workstreams: {summaries}",),
                       chosen_warnings=files.chosen_warnings)
    if len(placed) == 1:
        return replace(read[placed[0]], chosen=(f"no .planning/STATE.md; workstream {placed[0]} is the one with a "
                                                f"position ({summaries})",), chosen_warnings=files.chosen_warnings)
    return _first_working(read, positions, placed, summaries, files.chosen_warnings)


def _first_working(read: dict[str, GsdFiles], positions: dict[str, GsdPosition], placed: list[str], summaries: str,
                   warnings: tuple[str, ...]) -> GsdFiles:
    """Of several workstreams with a position, the first with work in progress (else the first),
    with a warning that the choice is ambiguous and how to settle it."""
    working = [n for n in placed if not positions[n].phase_complete]
    name = (working or placed)[0]
    warning = (f".planning/workstreams/: {len(placed)} workstreams with a position and no .planning/active-workstream "
               f"({summaries}); workstream {name} is read (write its name to .planning/active-workstream)")
    return replace(read[name], chosen=(f"workstream {name} read of {', '.join(placed)}",),
                   chosen_warnings=(*warnings, warning))
