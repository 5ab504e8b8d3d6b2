"""Which GSD phase type the position calls for (``--phase auto``) and which phase folder the
phase rules' ``{phase}`` names: the work that comes next, never a finished phase's planning.

* nothing planned in the current phase: ``plan`` (its CONTEXT and RESEARCH), or ``discuss``
  when it has neither yet;
* plans pending: ``execute``;
* every plan done: the roadmap's next phase, ``discuss`` (or ``plan`` when its folder already
  holds a CONTEXT or RESEARCH); with no next phase, ``verify`` of the finished one;
* between milestones (STATE.md names no phase, the last milestone is over): ``discuss``, the
  next milestone's goals (GSD's ``/gsd:new-milestone``), no phase folder; ``verify`` of the last
  finished phase only when STATE.md says it still awaits verification.

An explicit phase type wins, but its ``{phase}`` folder follows the same reading: after a
finished phase, ``plan``, ``discuss``, ``research`` and ``execute`` point at the next phase
(which may not be planned yet), ``verify`` and ``repair`` at the finished one; between
milestones every explicit type names the last finished phase's folder (asked for, not chosen).
"""

from __future__ import annotations

from dataclasses import dataclass

from .position import NONE, GsdPosition

AUTO = "auto"
_FORWARD = ("plan", "discuss", "research", "execute")  # work on the next phase once the current one is done


@dataclass(frozen=True)
class PhaseWork:
    """The GSD phase type whose files load, the phase folder ``{phase}`` stands for, and why."""

    type: str | None = None
    folder: str | None = None  # relative to .planning/
    why: str = ""
    auto: bool = False  # chosen from the position (``--phase auto``), not given
    phase: str | None = None  # the phase number the folder belongs to (or would)

    def as_dict(self) -> dict:
        return {"type": self.type, "phase": self.phase, "folder": self.folder, "why": self.why, "auto": self.auto}


def phase_work(position: GsdPosition, requested: str | None, gsd: bool = True) -> PhaseWork:
    """The phase work for ``requested`` (a phase type, ``auto``, or None for no phase files)
    at ``position``; ``gsd``: whether the project has a GSD layout (auto loads nothing else)."""
    if not requested:
        return PhaseWork(None, None, "no phase type (disclosure.phase is empty)")
    if requested != AUTO:
        return _given(position, requested)
    if not gsd or position.source == NONE and position.phase is None:
        return PhaseWork(None, None, "auto: not a GSD project with a position; no phase files load", True)
    if position.between:
        return _between(position)
    if position.phase is None:
        return PhaseWork(None, None, "auto: no current phase (" + position.note() + "); no phase files load", True)
    here = f"phase {position.phase}"
    if not position.phase_complete:
        if position.plan:
            return PhaseWork("execute", position.folder, f"auto: {here} has plans to run, next {position.plan} "
                             f"({position.plans_done} of {position.plans_total} done)", True, position.phase)
        if position.context:
            return PhaseWork("plan", position.folder, f"auto: {here} has no PLAN yet; plan it from its "
                             f"{', '.join(position.context)}", True, position.phase)
        return PhaseWork("discuss", position.folder, f"auto: {here} has no CONTEXT and no PLAN yet; discuss "
                         "or plan it", True, position.phase)
    if position.next_phase:
        nxt = position.next_title or f"phase {position.next_phase}"
        done = f"auto: {here} is complete ({position.plans_done} of {position.plans_total} plans)"
        if position.next_context:
            return PhaseWork("plan", position.next_folder, f"{done}; next is {nxt}: plan it from its "
                             f"{', '.join(position.next_context)}", True, position.next_phase)
        return PhaseWork("discuss", position.next_folder, f"{done}; next is {nxt}, not planned yet: discuss or "
                         "plan it", True, position.next_phase)
    return PhaseWork("verify", position.folder, f"auto: {here} is complete and the roadmap names no next phase "
                     "of the milestone; verify it", True, position.phase)


def _between(position: GsdPosition) -> PhaseWork:
    """Between milestones: discuss the next milestone (no folder yet), or verify the last
    finished phase when STATE.md says it awaits verification."""
    done = (f"milestone {position.milestone} " + ("complete" if position.milestone_complete else "not started")
            if position.milestone else "the last milestone complete")
    last = f"the last finished phase is {position.phase} ({position.folder}/)" if position.folder else "no phase folder"
    if position.unverified and position.folder:
        return PhaseWork("verify", position.folder, f"auto: between milestones ({done}); {last}, and STATE.md says "
                         "it awaits verification: verify it", True, position.phase)
    return PhaseWork("discuss", None, f"auto: between milestones ({done}); {last}; no phase is current: start the "
                     "next milestone with /gsd:new-milestone (discuss its goals, then its roadmap)", True, None)


def _given(position: GsdPosition, requested: str) -> PhaseWork:
    """An explicit phase type: the current folder, or the next phase's after a finished phase
    (between milestones: the last finished phase's, the only folder there is)."""
    if requested in _FORWARD and position.phase_complete and position.next_phase:
        nxt = position.next_title or f"phase {position.next_phase}"
        state = (f"its folder {position.next_folder}/" if position.next_folder
                 else "not planned yet: discuss or plan it")
        return PhaseWork(requested, position.next_folder,
                         f"phase {position.phase} is complete; {requested} works on the next one, {nxt} ({state})",
                         False, position.next_phase)
    return PhaseWork(requested, position.folder, position.note(), False, position.phase)
