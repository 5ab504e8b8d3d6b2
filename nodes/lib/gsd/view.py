"""What the plan and roadmap sections show of a GSD project, from the loaded files and the position."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...types import Source
from ..markdown import demote_headings
from ..plan import PlanView
from .plans import DONE, GsdPlan, phase_plans, render_plans
from .position import GsdPosition
from .roadmap import narrow_roadmap
from .common import phase_key
from .state import GsdState, parse_state, render_state

_SEP = "/"


def _rel(path: str, project_dir: str) -> str:
    root = project_dir.rstrip(_SEP) + _SEP
    return path[len(root):] if path.startswith(root) else path


def gsd_view(
    files: Mapping[str, str],
    planning_dir: str,
    project_dir: str,
    position: GsdPosition,
    pending_detail: str = "outline",
) -> PlanView:
    """The GSD plan section from the loaded files (path -> text; the position's phase folder is
    the key ending in "/", its value the folder's file names): the position, STATE.md's blocks,
    and the phase's plans (done ones as their SUMMARY's one-liner, the next one in full, later
    ones as an outline). The roadmap is a section of its own (:func:`roadmap_view`)."""
    state_path = planning_dir.rstrip(_SEP) + _SEP + "STATE.md"
    roadmap_path = planning_dir.rstrip(_SEP) + _SEP + "ROADMAP.md"
    state, state_parts, sources, warnings = _state_part(files, state_path)
    parts = _position_lines(position, state_path, project_dir, state_path in files) + state_parts
    plans: tuple[GsdPlan, ...] = ()
    phase_dir = next((k for k in sorted(files) if k.endswith(_SEP)), None)
    if phase_dir is not None:
        plans = _phase_plans(files, phase_dir, position, pending_detail)
        parts += _plans_lines(plans, phase_dir, position, project_dir)
        sources += _plan_sources(plans)
    content = "\n".join(parts).strip("\n")
    found = state_path in files or roadmap_path in files
    return PlanView("gsd", found, content, tuple(sources), _view_data(position, state, plans), tuple(warnings),
                    position.line())


def _position_lines(position: GsdPosition, state_path: str, project_dir: str, has_state: bool) -> list[str]:
    """The position's heading (naming STATE.md when there is one), its line and what decided it."""
    heading = f"## Position ({_rel(state_path, project_dir)})" if has_state else "## Position"
    return [heading, position.line()] + (["Decided by: " + position.note()] if position.evidence else [])


def _state_part(files: Mapping[str, str], state_path: str) -> tuple[GsdState, list[str], list[Source], list[str]]:
    """STATE.md read: (its parsed state, its rendered blocks, the sources of its blocks, its
    warnings); without one an empty state and a warning that the position is unknown."""
    if state_path not in files:
        return GsdState(), [], [], [
            f"{state_path}: not found; the current position is unknown (a GSD project keeps it in .planning/STATE.md)"]
    state = parse_state(files[state_path], state_path)
    return (state, [render_state(state, state_path, headline=False)], _state_sources(state, state_path),
            list(state.warnings))


def _state_sources(state: GsdState, state_path: str) -> list[Source]:
    """The lines of STATE.md shown: its position block and other blocks, its focus line, its frontmatter."""
    sources = [Source("file", state_path, block.lines)
               for block in ((state.position,) if state.position else ()) + state.blocks]
    if state.focus:
        sources.append(Source("file", state_path, (state.focus[1], state.focus[1])))
    if state.frontmatter_lines:
        sources.append(Source("file", state_path, state.frontmatter_lines))
    return sources


def _phase_plans(files: Mapping[str, str], phase_dir: str, position: GsdPosition,
                 pending_detail: str) -> tuple[GsdPlan, ...]:
    """The plans of the phase folder ``phase_dir`` (its file names under the key), paths made
    full (the folder joined to the plan's and the summary's)."""
    names = {k[len(phase_dir):]: v for k, v in files.items() if k.startswith(phase_dir) and k != phase_dir}
    return tuple(
        GsdPlan(p.plan_id, p.number, p.status, p.title,
                phase_dir + p.plan_path if p.plan_path else None, p.plan_lines,
                phase_dir + p.summary_path if p.summary_path else None, p.summary_line, p.detail)
        for p in phase_plans(names, position.plan, pending_detail, position.phase_complete)
    )


def _plans_lines(plans: Sequence[GsdPlan], phase_dir: str, position: GsdPosition, project_dir: str) -> list[str]:
    """The phase's plans under their heading (paths relative to the project), or a line saying
    the folder has none yet."""
    shown = (_relative_paths(render_plans(plans), plans, project_dir) if plans
             else "(no PLAN or SUMMARY files in this phase folder yet)")
    return ["", f"## Phase {position.phase} plans ({_rel(phase_dir, project_dir)})", shown]


def _plan_sources(plans: Sequence[GsdPlan]) -> list[Source]:
    """The lines shown of each plan: a done plan's SUMMARY one-liner, else its PLAN's lines."""
    sources = []
    for plan in plans:
        if plan.status == DONE and plan.summary_path:
            sources.append(Source("file", plan.summary_path, (plan.summary_line or 1, plan.summary_line or 1)))
        elif plan.plan_path:
            sources.append(Source("file", plan.plan_path, plan.plan_lines))
    return sources


def _view_data(position: GsdPosition, state: GsdState, plans: Sequence[GsdPlan]) -> dict:
    """The plan view's data: the layout, the position's fields, STATE.md's status and frontmatter,
    the plans."""
    return {
        "layout": "gsd",
        "milestone": position.milestone,
        "phase": position.phase,
        "plan": position.plan,
        "status": state.status,
        "complete": position.phase_complete,
        "frontmatter": dict(state.frontmatter),
        "tasks": tuple(p.as_dict() for p in plans),
        "position": position.as_dict(),
    }


def roadmap_view(files: Mapping[str, str], planning_dir: str, project_dir: str, position: GsdPosition) -> PlanView:
    """ROADMAP.md for its own section: the current milestone only (others folded to one line),
    the finished phases' details cut to their heading. A warning only when the roadmap holds
    several milestones and none is the current one."""
    roadmap_path = planning_dir.rstrip(_SEP) + _SEP + "ROADMAP.md"
    if roadmap_path not in files:
        return PlanView("gsd", False, warnings=(f"{roadmap_path}: not found; the context shows no roadmap",))
    done_before = (phase_key(position.phase) if position.phase and not (position.milestone_complete or position.between)
                   else None)
    view = narrow_roadmap(files[roadmap_path], position.milestone, done_before, position.unfinished)
    warnings = []
    if position.milestone and not view.matched and len(view.milestones) > 1:
        warnings.append(
            f"{roadmap_path}: {len(view.milestones)} milestones ({', '.join(view.milestones)}) and none is "
            f"{position.milestone} (from STATE.md); the roadmap is kept whole"
        )
    label = f"milestone {position.milestone}" if view.matched else "whole roadmap"
    content = f"ROADMAP.md, {label} ({_rel(roadmap_path, project_dir)})\n\n" + demote_headings(view.content, 1)
    sources = tuple(Source("file", roadmap_path, lines) for lines in view.kept)
    data = {"milestone": position.milestone, "matched": view.matched, "folded_milestones": view.folded,
            "shortened_phases": view.shortened}
    return PlanView("gsd", True, content, sources, data, tuple(warnings), None)


def _relative_paths(text: str, plans: Sequence[GsdPlan], project_dir: str) -> str:
    for plan in plans:
        for path in (plan.plan_path, plan.summary_path):
            if path:
                text = text.replace(f"({path})", f"({_rel(path, project_dir)})")
    return text
