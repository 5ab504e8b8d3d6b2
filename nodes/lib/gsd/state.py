"""STATE.md: the "Current Position" block (milestone, phase, plan, status, last activity,
progress), the current focus, blockers, pending todos, session continuity / next action, and the
YAML frontmatter newer GSD versions write."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..markdown import FrontmatterError, split_frontmatter
from ..regex import lazy_regex
from .common import _FIELD, _FOCUS, _NUMBER, _OF, _VERSION, _flat, _lines_of, _sections

_NEXT = lazy_regex(r"\b(?:next|plan(?:ning)?|upcoming)\b", re.I)

# STATE.md blocks shown besides the current position, by words in their heading.
_STATE_BLOCKS = (
    ("blockers", ("blocker", "concern")),
    ("todos", ("pending todo", "todos")),
    ("session", ("session continuity",)),
    ("next", ("next action", "next step")),
)
_BLOCK_MAX_LINES = 30


@dataclass(frozen=True)
class StateBlock:
    """A block of STATE.md: its heading, body and 1-based line range."""

    name: str
    heading: str
    text: str
    lines: tuple[int, int]


@dataclass(frozen=True)
class GsdState:
    """What STATE.md says about where the project is."""

    frontmatter: Mapping[str, Any] = field(default_factory=dict)
    fields: tuple[tuple[str, str], ...] = ()  # ("Phase", "8.1 of 8.2 (...)"), in file order
    position: StateBlock | None = None
    blocks: tuple[StateBlock, ...] = ()
    focus: tuple[str, int] | None = None  # (text, line)
    milestone: str | None = None  # version, e.g. "v1.2"
    milestone_name: str | None = None
    phase: str | None = None  # "8.1"
    phase_total: str | None = None
    plan: int | None = None
    plan_total: int | None = None
    status: str | None = None
    complete: bool = False  # STATE.md reports the current phase (or milestone) complete
    frontmatter_lines: tuple[int, int] | None = None
    warnings: tuple[str, ...] = ()
    field_lines: tuple[tuple[str, int], ...] = ()  # ("Phase", 12): the 1-based line of each field
    key_lines: Mapping[str, int] = field(default_factory=dict)  # frontmatter key -> its line
    body_phase: str | None = None  # the phase the body's "Phase:" line names
    body_complete: bool = False  # the body's Phase / Plan / Status lines say complete
    fm_phase: tuple[str, str] | None = None  # (key, phase) from active_phase / current_phase / next_phases
    fm_complete: bool = False  # frontmatter status complete(d) or progress all phases done
    fm_progress: tuple[int, int] | None = None  # (completed_phases, total_phases)
    stopped_at: tuple[str, int, str] | None = None  # (phase, plan, text) of ``stopped_at: Completed 28-01-PLAN.md``

    def line_of(self, name: str) -> int | None:
        """The line of the body field ``name`` (case-insensitive), or None."""
        for key, line in self.field_lines:
            if key.lower() == name.lower():
                return line
        return None

    def field(self, name: str) -> str | None:
        for key, value in self.fields:
            if key.lower() == name.lower():
                return value
        return None



def _stacked_frontmatter(lines: list[str], start: int) -> list[tuple[int, int]]:
    """The 1-based line ranges of ``---`` blocks that follow the frontmatter directly (blank
    lines between), as when a tool prepends a fresh frontmatter without removing the old one."""
    out: list[tuple[int, int]] = []
    i = start
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        if lines[i].strip() != "---":
            break
        end = next((j for j in range(i + 1, min(len(lines), i + 200)) if lines[j].strip() == "---"), None)
        if end is None or any(lines[j].startswith("#") for j in range(i + 1, end)):
            break
        out.append((i + 1, end + 1))
        i = end + 1
    return out


def parse_state(text: str, path: str = "STATE.md") -> GsdState:
    """The current position, focus, blockers, todos and session notes of STATE.md.

    The steps: the frontmatter (and a warning for stale blocks stacked after it), the sections,
    the Current Position block and the other blocks shown, the position's ``Key: value`` fields
    and the current focus; then what they say: the milestone and its name, the phase, the plan,
    the status and whether the phase (or the milestone) is complete."""
    frontmatter, fm_lines, warnings = _frontmatter_of(text, path)
    body_start = fm_lines[1] if fm_lines else 0
    lines = _lines_of(text)
    warnings += _stacked_warnings(lines, fm_lines, path)
    sections = _sections(lines, body_start)
    position = _position_block(lines, sections)
    fields = _position_fields(lines, position, body_start)
    values = tuple((key, value) for key, value, _ in fields)
    focus = _focus(lines, body_start)
    phase_text = _get(values, "phase") or _get(values, "current phase")
    body_phase, phase_total = _phase_of(phase_text)
    fm_phase = _frontmatter_phase(frontmatter)
    plan_text = _get(values, "plan")
    plan, plan_total = _plan_of(plan_text)
    fm_progress = _progress(frontmatter)
    body_complete = _body_complete(phase_text, plan_text, plan, plan_total, _get(values, "status"))
    if position is None:
        warnings.append(f"{path}: no 'Current Position' section; position read from the fields found")
    return GsdState(
        frontmatter=frontmatter,
        fields=values,
        position=position,
        blocks=_state_blocks(lines, sections, position, path),
        focus=focus,
        milestone=_milestone_version(frontmatter, values, focus),
        milestone_name=_milestone_name(frontmatter, values),
        phase=fm_phase[1] if fm_phase is not None else body_phase,
        phase_total=phase_total,
        plan=plan,
        plan_total=plan_total,
        status=_get(values, "status") or (str(frontmatter.get("status")) if frontmatter.get("status") else None),
        complete=body_complete or _says_complete(frontmatter),
        frontmatter_lines=fm_lines,
        warnings=tuple(warnings),
        field_lines=tuple((key, line) for key, _, line in fields),
        key_lines=_key_lines(lines, fm_lines),
        body_phase=body_phase,
        body_complete=body_complete,
        fm_phase=fm_phase,
        fm_complete=_frontmatter_complete(frontmatter, fm_progress),
        fm_progress=fm_progress,
        stopped_at=_stopped_at(frontmatter.get("stopped_at")),
    )


def _frontmatter_of(text: str, path: str) -> tuple[dict[str, Any], tuple[int, int] | None, list[str]]:
    """(frontmatter, its 1-based line range or None, warnings): YAML that does not parse is
    ignored with a warning naming its line."""
    try:
        frontmatter, _, start_line = split_frontmatter(text)
    except FrontmatterError as exc:
        return {}, None, [f"{path}:{exc.line or 1}: {exc}; frontmatter ignored"]
    if not frontmatter:
        return frontmatter, None, []
    return frontmatter, (1, start_line - 1), []


def _stacked_warnings(lines: list[str], fm_lines: tuple[int, int] | None, path: str) -> list[str]:
    """A warning when more ``---`` blocks follow the frontmatter (only the first is read)."""
    stacked = _stacked_frontmatter(lines, fm_lines[1]) if fm_lines else []
    if not stacked:
        return []
    return [f"{path}:{stacked[0][0]}: {len(stacked)} more frontmatter block(s) follow the first (lines "
            f"{', '.join(f'{a}-{b}' for a, b in stacked[:3])}{' ...' if len(stacked) > 3 else ''}); only "
            f"lines {fm_lines[0]}-{fm_lines[1]} are read (delete the stale blocks)"]


def _position_block(lines: list[str], sections: list[tuple[int, str, int, int]]) -> StateBlock | None:
    """The first section whose heading says "Current Position", or None."""
    for _, title, first, last in sections:
        if "current position" in title.lower():
            return StateBlock("position", title, "\n".join(lines[first + 1 : last + 1]).strip("\n"),
                              (first + 1, last + 1))
    return None


def _state_blocks(lines: list[str], sections: list[tuple[int, str, int, int]], position: StateBlock | None,
                  path: str) -> tuple[StateBlock, ...]:
    """The blocks shown besides the position (blockers, todos, session, next), the first section
    of each, by the words of its heading (see :func:`_block_name`)."""
    blocks: list[StateBlock] = []
    for level, title, first, last in sections:
        if position is not None and first + 1 == position.lines[0]:
            continue
        name = _block_name(title, {b.name for b in blocks})
        if name is not None:
            body = _block_body(lines, sections, level, first, last, path)
            blocks.append(StateBlock(name, title, "\n".join(body).strip("\n"), (first + 1, last + 1)))
    return tuple(blocks)


def _block_name(title: str, taken: set[str]) -> str | None:
    """The name of the STATE.md block a heading starts (its words, see ``_STATE_BLOCKS``), or
    None when it starts none or only blocks already ``taken``."""
    low = title.lower()
    for name, words in _STATE_BLOCKS:
        if any(w in low for w in words) and name not in taken:
            return name
    return None


def _block_body(lines: list[str], sections: list[tuple[int, str, int, int]], level: int, first: int, last: int,
                path: str) -> list[str]:
    """A block's lines under its heading: sub-sections left out with a note naming them, at most
    ``_BLOCK_MAX_LINES`` lines and a note naming the rest."""
    body = lines[first + 1 : last + 1]
    nested = [(t, f) for lv, t, f, _ in sections if first < f <= last and lv > level]
    if nested:  # sub-sections (e.g. a table of quick tasks) stay out
        body = lines[first + 1 : nested[0][1]]
        while body and not body[-1].strip():
            body.pop()
        body.append("(subsections omitted: " + ", ".join(f"{t} (line {f + 1})" for t, f in nested) + ")")
    if len(body) > _BLOCK_MAX_LINES:
        more = len(body) - _BLOCK_MAX_LINES
        body = body[:_BLOCK_MAX_LINES] + [f"... ({more} more lines in {path} lines {first + 2 + _BLOCK_MAX_LINES}-{last + 1})"]
    return body


def _position_fields(lines: list[str], position: StateBlock | None, body_start: int) -> list[tuple[str, str, int]]:
    """(key, value, 1-based line) of each ``Key: value`` line of the position block (no block:
    of the body's first 60 lines)."""
    scan = range(position.lines[0], position.lines[1]) if position else range(body_start, min(len(lines), body_start + 60))
    out = []
    for i in scan:
        match = _FIELD.match(lines[i].strip())
        if match:
            out.append((match.group(1).strip(), match.group(2).strip(), i + 1))
    return out


def _focus(lines: list[str], body_start: int) -> tuple[str, int] | None:
    """(text, 1-based line) of the body's first "Current focus" line, or None."""
    for i in range(body_start, len(lines)):
        match = _FOCUS.match(lines[i].strip())
        if match:
            return match.group(1).strip(), i + 1
    return None


def _get(fields: tuple[tuple[str, str], ...], name: str) -> str | None:
    """The value of the first field called ``name`` (lower case; the key in any case), or None."""
    for key, value in fields:
        if key.lower() == name:
            return value
    return None


def _milestone_version(frontmatter: Mapping[str, Any], fields: tuple[tuple[str, str], ...],
                       focus: tuple[str, int] | None) -> str | None:
    """The milestone's version: from the frontmatter's ``milestone:``, else the ``Milestone:``
    field, the current focus or the status (in these two, not a version after "next" or "plan":
    that is the milestone to come); a bare "1.2" reads as "v1.2"."""
    fm_milestone = frontmatter.get("milestone")
    candidates = [str(fm_milestone) if fm_milestone is not None else None, _get(fields, "milestone"),
                  focus[0] if focus else None, _get(fields, "status")]
    for n, candidate in enumerate(candidates):
        if candidate and n >= 2:
            candidate = _NEXT.split(candidate, 1)[0]
        if candidate:
            match = _VERSION.search(candidate if candidate.startswith("v") or "v" in candidate else "v" + candidate)
            if match:
                return match.group(0)
    return None


def _milestone_name(frontmatter: Mapping[str, Any], fields: tuple[tuple[str, str], ...]) -> str | None:
    """The milestone's name: the frontmatter's ``milestone_name``, else the ``Milestone:`` field
    without its version and parenthesis; None for none or GSD's placeholder."""
    name = frontmatter.get("milestone_name")
    if isinstance(name, str):
        return _real_name(name)
    said = _get(fields, "milestone")
    return _real_name(_VERSION.sub("", said).split("(")[0]) if said else None


def _phase_of(phase_text: str | None) -> tuple[str | None, str | None]:
    """(phase, total) the ``Phase:`` field says: "8.1 of 8.2 (...)" -> 8.1, 8.2; "All complete
    (12/12)" -> 12, 12; "All v1.0 phases complete" -> none (a version is not a phase)."""
    if not phase_text:
        return None, None
    of = _OF.search(phase_text)
    if of and not re.match(r"\s*\d", phase_text) and "complete" in phase_text.lower():
        return of.group(2), of.group(2)
    if of:
        return of.group(1), of.group(2)
    number = _NUMBER.search(_VERSION.sub(" ", phase_text))
    return (number.group(0) if number else None), None


def _plan_of(plan_text: str | None) -> tuple[int | None, int | None]:
    """(plan, total) the ``Plan:`` field says: "2 of 5" -> 2, 5; "3" -> 3, None; "8 of 12 total
    plans complete" -> none (the project's count, no plan of the phase)."""
    if not plan_text:
        return None, None
    of = _OF.search(plan_text)
    if of and re.match(r"\s*total\b", plan_text[of.end():], re.I):
        return None, None
    if of:
        return int(float(of.group(1))), int(float(of.group(2)))
    number = re.match(r"\s*(\d+)", plan_text)
    return (int(number.group(1)) if number else None), None


def _body_complete(phase_text: str | None, plan_text: str | None, plan: int | None, plan_total: int | None,
                   status: str | None) -> bool:
    """The body's Phase, Plan and Status fields say complete (the Plan field only when it is not
    a plan under way: "1 of 3 (completed)" is the first plan done, not the phase)."""
    plan_said = plan_text if plan is None or plan_total is None or plan >= plan_total else None
    return bool(_COMPLETE.search(" ".join(filter(None, [phase_text, plan_said, status])).lower()))


def _says_complete(frontmatter: Mapping[str, Any]) -> bool:
    """The frontmatter's ``status:`` says complete (or shipped, done)."""
    return bool(_COMPLETE.search(str(frontmatter.get("status") or "").lower()))


def _frontmatter_complete(frontmatter: Mapping[str, Any], progress: tuple[int, int] | None) -> bool:
    """The frontmatter says the milestone is complete: ``progress`` counts every phase done, or
    its status says complete while ``progress`` has no phase open ("status: completed" with
    phases still open is the phase complete, not the milestone)."""
    all_done = bool(progress and progress[1] and progress[0] >= progress[1])
    return all_done or _says_complete(frontmatter) and not (progress and progress[1] and not all_done)


_COMPLETE = lazy_regex(r"(?<!in)complete|shipped|\bdone\b")
_FM_KEY = lazy_regex(r"^([ \t]*)([A-Za-z_][\w-]*)[ \t]*:")


def _frontmatter_phase(frontmatter: Mapping[str, Any]) -> tuple[str, str] | None:
    """(key, phase) the frontmatter names: ``active_phase`` (work in flight), else
    ``current_phase``, else the first of ``next_phases``; None when it names none."""
    for key in ("active_phase", "current_phase", "next_phases"):
        value = frontmatter.get(key)
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value in (None, "", False):
            continue
        number = _NUMBER.search(str(value))
        if number:
            return key, number.group(0)
    return None


_STOPPED_PLAN = lazy_regex(r"(?<![\w.-])(\d{1,3}(?:\.\d+)*)-(\d{1,3})(?:-(?:PLAN|SUMMARY)\b|(?![\w.-]))", re.I)


def _stopped_at(value: Any) -> tuple[str, int, str] | None:
    """(phase, plan, text) of the frontmatter's ``stopped_at`` when it names a plan file
    ("Completed 28-01-PLAN.md", "Completed 25-08 — Phase 25 COMPLETE"); None otherwise (free
    prose, a phase only, a date)."""
    if not isinstance(value, str):
        return None
    match = _STOPPED_PLAN.search(value)
    return (match.group(1), int(match.group(2)), value.strip()) if match else None


def _progress(frontmatter: Mapping[str, Any]) -> tuple[int, int] | None:
    """(completed_phases, total_phases) of the frontmatter's ``progress:`` block, or None."""
    progress = frontmatter.get("progress")
    if not isinstance(progress, Mapping):
        return None
    done, total = progress.get("completed_phases"), progress.get("total_phases")
    if isinstance(done, int) and isinstance(total, int) and not isinstance(done, bool):
        return done, total
    return None


def _key_lines(lines: list[str], fm_lines: tuple[int, int] | None) -> dict[str, int]:
    """Each frontmatter key's line (nested keys as ``parent.key``)."""
    out: dict[str, int] = {}
    if not fm_lines:
        return out
    parent = None
    for i in range(fm_lines[0] - 1, min(fm_lines[1], len(lines))):
        match = _FM_KEY.match(lines[i])
        if not match:
            continue
        if match.group(1):
            if parent:
                out.setdefault(f"{parent}.{match.group(2)}", i + 1)
        else:
            parent = match.group(2)
            out.setdefault(parent, i + 1)
    return out


def _real_name(text: str) -> str | None:
    """A milestone's name, or None for none or GSD's placeholder ``milestone_name: milestone``
    (which made the position read "milestone v4.0 milestone")."""
    name = text.strip(" -—–")
    return None if name.casefold() in ("", "milestone") else name


def position_line(state: GsdState) -> str:
    """One line naming the current position: milestone, phase, plan, status."""
    parts = []
    if state.milestone:
        parts.append(f"milestone {state.milestone}" + (f" {state.milestone_name}" if state.milestone_name else ""))
    phase = state.field("phase")
    if phase:
        parts.append(f"phase {phase}")
    plan = state.field("plan")
    if plan:
        parts.append(f"plan {plan}")
    if state.status:
        parts.append(f"status {state.status}")
    return "Current position: " + ("; ".join(parts) if parts else "unknown (STATE.md names none)")


def render_state(state: GsdState, path: str, headline: bool = True) -> str:
    """STATE.md as the context shows it: (its position line,) frontmatter, position, focus,
    blockers, todos, session."""
    out = [position_line(state)] if headline else []
    if state.frontmatter:
        out.append("STATE.md frontmatter: " + "; ".join(f"{k}: {_flat(v)}" for k, v in state.frontmatter.items()))
    if state.focus:
        out.append(f"Current focus: {state.focus[0]}")
    if state.position is not None:
        out.append("")
        out.append(f"### {state.position.heading} (STATE.md lines {state.position.lines[0]}-{state.position.lines[1]})")
        out.append(state.position.text)
    for block in state.blocks:
        if block.text.strip():
            out.append("")
            out.append(f"### {block.heading} (STATE.md lines {block.lines[0]}-{block.lines[1]})")
            out.append(block.text)
    return "\n".join(out)
