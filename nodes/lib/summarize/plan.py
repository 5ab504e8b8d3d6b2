"""The plan summary: whole lines of an article plan.md or a GSD plan, the current work first."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from .. import plan as _plan
from ..regex import lazy_regex
from ..tokens import TokenCounter, estimate_tokens
from .code import code_line_order, render_code
from .document import HEADING
from .fit import Problem, fits_quickly, solve
from .frontmatter import compact_frontmatter, frontmatter_within, split_frontmatter
from ..fences import Fence, fences
from .markdown import summarize_text

_COUNT_LINE = lazy_regex(r"^[ \t]*(?:Tasks|Plans):[ \t]*\d+[ \t]+done\b")
_OPEN_TAG = lazy_regex(r"^[ \t]*<([A-Za-z_][\w-]*)\b[^>]*>")
_KEY_TAGS = frozenset({"name", "files", "verify", "done", "acceptance", "acceptance_criteria"})
_NOISE_TAGS = frozenset({"context", "execution_context"})
_WRAPPER_TAGS = frozenset({"task", "tasks"})
_LEAD_TAGS = frozenset({"objective"})
_KEY_LABEL = lazy_regex(r"^[ \t]*(?:[-*+][ \t]+)?\**(?:files?|verify|verification|done|acceptance)\**[ \t]*:", re.I)
_AT_LINE = lazy_regex(r"^[ \t]*@\S")
_POSITION_LINE = lazy_regex(r"^(?:Position|Decided by):[ \t]")  # the GSD plan section's position
# ranks of plan units, kept first to last (see plan_summary): the skeleton of the work left
# (names, then the files / verify / done lines), the frontmatter, the current task's details,
# other prose, the other tasks' details (a code block's first and definition lines among
# them), done task lines, the other code lines, noise
(_R_COUNT, _R_NAME, _R_KEY, _R_FRONTMATTER, _R_OPEN_DETAIL, _R_PROSE, _R_PENDING_DETAIL,
 _R_DONE_BOX, _R_CODE, _R_NOISE) = range(10)


@dataclass
class _PlanUnit:
    first: int  # body line indices, inclusive
    last: int
    role: str  # count | box | heading | key | lead | prose | noise | open | close | frontmatter | fence | code
    owner: int | None = None  # line index of the top-level task box it belongs to
    pair: int | None = None  # unit id of the matching open / close tag line
    closing: str | None = None  # the fence line that closes a code block its lines leave open
    fence: int | None = None  # a code line: the unit id of its block's fence
    tag: str = ""  # the element a key unit is (name, files, ...; /task for a closing wrapper)
    wrappers: tuple[int, ...] = ()  # unit ids of the <tasks> / <task> open lines around it
    task: int | None = None  # unit id of the <task> open line it is in


def _close_line(lines: Sequence[str], start: int, tag: str) -> int | None:
    """Index of the line at or after ``start`` that closes ``<tag>`` (None when none does)."""
    closing = f"</{tag}>"
    first = lines[start]
    if closing in first[first.index(">") + 1:]:
        return start
    for j in range(start + 1, len(lines)):
        if closing in lines[j]:
            return j
    return None


_PROSE_TAGS = _LEAD_TAGS | {"action", "output", "success_criteria", "verification", "notes"}


def _plan_units(lines: Sequence[str], boxes) -> list[_PlanUnit]:
    """The plan's lines as units: task boxes, headings, the count line, whole GSD task
    elements (<name>, <files>, <verify>, <done>) and the <task> wrappers as key units, the
    first line of an <objective>, @ lines and <context> blocks as noise, a code block as its
    fence (opening and closing lines) and one code unit per non-blank line, the open and
    close tag lines of other elements as pairs, and every other line as prose. Code blocks
    are read by :func:`~ctxengine.nodes.lib.fences.fences` with elements: one left open ends
    at the closing tag of the element it opened in (``</action>``); one left open at the top
    level runs to the end and its lines are prose.

    Each non-blank line is read by the first reader of :data:`_UNIT_READERS` that takes it
    (each returns the index after what it read), else as one line (:func:`_line_role`)."""
    owner_of, box_lines = _task_owners(boxes)
    reader = _UnitReader(lines, owner_of, box_lines, {block.start: block for block in fences(lines, elements=True)})
    i = 0
    while i < len(lines):
        i = reader.read(i)
    _pair_wrappers(reader.units)
    return reader.units


def _task_owners(boxes) -> tuple[dict[int, int], set[int]]:
    """(line index -> the top-level task box whose detail it is, the top-level boxes' lines): a
    nested task is detail of its parent."""
    owner_of: dict[int, int] = {}
    top = []
    for box in boxes:
        if any(t.index < box.index <= t.end for t in top):
            continue
        top.append(box)
        for i in range(box.index + 1, box.end + 1):
            owner_of[i] = box.index
    return owner_of, {box.index for box in top}


@dataclass
class _UnitReader:
    """Reading a plan's lines into units: the task owner of each line, the top-level task boxes' lines, the code blocks by their
    first line, the units so far, the elements open (tag, unit id of the open line) and whether
    the next prose line is an element's lead (the first line of an <objective>)."""

    lines: Sequence[str]
    owner_of: dict[int, int]
    box_lines: set[int]
    blocks: dict[int, Fence]
    units: list[_PlanUnit] = field(default_factory=list)
    stack: list[tuple[str, int]] = field(default_factory=list)
    lead_wanted: bool = False

    def read(self, i: int) -> int:
        """The index after the unit(s) line ``i`` starts (a blank line: just the next)."""
        line = self.lines[i]
        if not line.strip():
            return i + 1
        tag = _OPEN_TAG.match(line)
        name = tag.group(1).lower() if tag else ""
        for reader in _UNIT_READERS:
            after = reader(self, i, name)
            if after is not None:
                return after
        return self.read_line(i)

    @property
    def in_noise(self) -> bool:
        """Inside a <context> block: its lines are noise."""
        return any(tag_name in _NOISE_TAGS for tag_name, _ in self.stack)

    @property
    def parent(self) -> int | None:
        """The unit id of the innermost open element's open line."""
        return self.stack[-1][1] if self.stack else None

    def add(self, first: int, last: int, role: str, **more) -> int:
        """The id of a new unit of lines ``first``-``last`` (its task owner: ``first``'s)."""
        self.units.append(_PlanUnit(first, last, role, self.owner_of.get(first), **more))
        return len(self.units) - 1

    def read_box(self, i: int, name: str) -> int | None:
        """A top-level task box line: one box unit."""
        if i not in self.box_lines:
            return None
        self.units.append(_PlanUnit(i, i, "box", i))
        return i + 1

    def read_code(self, i: int, name: str) -> int | None:
        """A code block (closed, or ended by its element's closing tag): its fence unit and one
        code unit per non-blank line (noise inside a <context>)."""
        block = self.blocks.get(i)
        if block is None or not (block.closed or block.end < len(self.lines) - 1):
            return None
        parent = self.parent
        fence = self.add(i, block.end, "fence", pair=parent, closing=None if block.closed else block.closing)
        role = "noise" if self.in_noise else "code"  # code in a <context> is noise like its prose
        owner = self.owner_of.get(i)
        self.units.extend(_PlanUnit(k, k, role, owner, parent, fence=fence)
                          for k in range(i + 1, block.end if block.closed else block.end + 1) if self.lines[k].strip())
        return block.end + 1

    def read_wrapper_close(self, i: int, name: str) -> int | None:
        """A ``</task>`` or ``</tasks>`` line: a key unit (paired with its open line later)."""
        closing = self.lines[i].strip().lower()
        if closing not in ("</task>", "</tasks>"):
            return None
        self.add(i, i, "key", tag=closing[1:-1])
        return i + 1

    def read_element_close(self, i: int, name: str) -> int | None:
        """The closing tag of the innermost open element: a close unit paired with its open line."""
        if not self.stack or self.lines[i].strip().lower() != f"</{self.stack[-1][0]}>":
            return None
        _, opened = self.stack.pop()
        self.units[opened].pair = self.add(i, i, "close", pair=opened)
        return i + 1

    def read_noise_open(self, i: int, name: str) -> int | None:
        """A <context> block over several lines: its open line; its lines are noise one by one."""
        if name not in _NOISE_TAGS or _close_line(self.lines, i, name) in (None, i):
            return None
        self.open_element(i, name)
        return i + 1

    def read_whole_element(self, i: int, name: str) -> int | None:
        """A <name>, <files>, <verify>, <done> (key) or one-line <context> (noise) element: one
        unit to its closing tag (its line alone when none closes it)."""
        if name not in _KEY_TAGS | _NOISE_TAGS:
            return None
        j = _close_line(self.lines, i, name)
        j = i if j is None else j
        self.add(i, j, "key" if name in _KEY_TAGS else "noise", tag=name)
        return j + 1

    def read_wrapper_open(self, i: int, name: str) -> int | None:
        """A <task> or <tasks> open line: a key unit (paired with its close line later)."""
        if name not in _WRAPPER_TAGS:
            return None
        self.add(i, i, "key", tag=name)
        return i + 1

    def read_prose_open(self, i: int, name: str) -> int | None:
        """Another element (<objective>, <action>, ..., or any closed on a later line): on one
        line a lead or prose unit; over several its open line (and its first line is the lead
        of an <objective>)."""
        if not name:
            return None
        close = _close_line(self.lines, i, name)
        if name not in _PROSE_TAGS and close in (None, i):
            return None
        if close == i:  # a one-line element
            self.add(i, i, "lead" if name in _LEAD_TAGS else "prose")
        else:
            self.open_element(i, name)
            self.lead_wanted = name in _LEAD_TAGS
        return i + 1

    def open_element(self, i: int, name: str) -> None:
        """Line ``i`` opens element ``name``: an open unit, on the stack."""
        self.stack.append((name, len(self.units)))
        self.add(i, i, "open")

    def read_line(self, i: int) -> int:
        """Any other line: one unit of the role :func:`_line_role` gives it."""
        line = self.lines[i]
        role = _line_role(line, self.owner_of.get(i) is None, self.in_noise, self.lead_wanted and bool(self.stack))
        self.lead_wanted = self.lead_wanted and role != "lead"
        self.add(i, i, role, pair=self.parent,
                 tag="name" if role in ("heading", "key") and _TASK_HEADING.match(line) else "")
        return i + 1


# The readers of a line that starts a unit of its own, in the order they are tried.
_UNIT_READERS = (_UnitReader.read_box, _UnitReader.read_code, _UnitReader.read_wrapper_close,
                 _UnitReader.read_element_close, _UnitReader.read_noise_open, _UnitReader.read_whole_element,
                 _UnitReader.read_wrapper_open, _UnitReader.read_prose_open)


def _line_role(line: str, top: bool, noise: bool, lead: bool) -> str:
    """The role of a line no element reader took: outside task boxes (``top``) the count line,
    the GSD position lines and headings; a "Task N:" heading (a task's name) and ``Files:`` /
    ``Verify:`` / ``Done:`` labels and task boxes are key; @ lines and lines in a <context>
    (``noise``) noise; the first line of an <objective> (``lead``) its lead; else prose."""
    if top and _COUNT_LINE.match(line):
        return "count"
    if top and _POSITION_LINE.match(line):
        return "position"
    if top and HEADING.match(line):
        return "heading"  # a "Task N: ..." heading is a task's name as well (see _rank)
    if _TASK_HEADING.match(line):
        return "key"  # a "Task N: ..." heading in a task box's detail (the next GSD plan, shown in full)
    if _AT_LINE.match(line) or noise:
        return "noise"
    if _KEY_LABEL.match(line) or _TASK_BOX.match(line):
        return "key"
    return "lead" if lead else "prose"


def _pair_wrappers(units: list[_PlanUnit]) -> None:
    """The <tasks> and <task> wrapper lines as open / close pairs; every unit between them
    records them (``wrappers``) and its <task> (``task``)."""
    open_wrappers: list[int] = []
    for uid, unit in enumerate(units):
        if unit.role == "key" and unit.tag in _WRAPPER_TAGS:
            unit.role, unit.wrappers = "open", tuple(open_wrappers)
            unit.task = next((w for w in reversed(open_wrappers) if units[w].tag == "task"), None)
            open_wrappers.append(uid)
        elif unit.role == "key" and unit.tag.startswith("/") and unit.tag[1:] in _WRAPPER_TAGS:
            opened = next((w for w in reversed(open_wrappers) if units[w].tag == unit.tag[1:]), None)
            if opened is None:
                continue
            del open_wrappers[open_wrappers.index(opened):]
            unit.role, unit.pair, units[opened].pair = "close", opened, uid
            unit.wrappers = units[opened].wrappers
        else:
            unit.wrappers = tuple(open_wrappers)
            unit.task = next((w for w in reversed(open_wrappers) if units[w].tag == "task"), None)


_TASK_HEADING = lazy_regex(r"^[ \t]*#{2,6}[ \t]+Task[ \t]+\d+\b")  # a task's name as a heading (GSD)
_TASK_BOX = lazy_regex(r"^[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+\[.\][ \t]")


def plan_summary(text: str, max_tokens: int, counter: TokenCounter, method: str = "extractive") -> str:
    """A plan (article plan.md with task boxes, or the GSD plan section and PLAN.md with
    <task> blocks) within ``max_tokens``: whole source lines only, in their order, and a last
    line saying how many were left out. Kept first: the task count line, in-progress task
    lines, the GSD position lines; then the skeleton of the current work (every task's <name> or ``Task N:`` heading, <files>, <verify> and
    <done>, the <task> tags, Files/Verify/Done lines, the objective's first line, an
    in-progress task's own detail lines); then pending task lines, the prose of in-progress
    elements (<action>), other prose, pending tasks' skeletons and detail, done task lines;
    the other code lines; @ lines and <context> blocks last. A code block is kept in part
    as documents keep it (:func:`~.code.code_line_order`): its first line and definition
    lines with its task's details, the other lines from the top of each block with the
    blocks in step; fences closed, ``⋮ N lines left out`` for each gap. A heading comes with
    the first line under it that is kept; done
    and cancelled tasks' detail is only counted. Text with
    neither task boxes nor <task> blocks gets the ``method`` summary (extractive | headings)."""
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    raw_fm, body = split_frontmatter(text.replace("\r\n", "\n"))
    lines = body.split("\n")
    boxes = _plan.task_boxes(lines)
    if not boxes and "<task" not in body:
        return summarize_text(text, max_tokens, counter, method)
    plan = _PlanView(lines, _plan_units(lines, boxes), {box.index: box.status or _plan.PENDING for box in boxes},
                     compact_frontmatter(raw_fm, tight=True) if raw_fm is not None else None)
    problem = plan.problem()
    if raw_fm is not None:
        problem.fuller = lambda sel, room: plan.with_frontmatter(
            sel, frontmatter_within(raw_fm, counter.count(plan.texts[-1]) + room, counter))
    solved = solve(problem, max_tokens, counter)
    if solved is None:
        note = plan.synthesized or (plan.texts[plan.existing] if plan.existing is not None else "")
        return note if note and counter.count(note) <= max_tokens else ""
    return solved[0]


def _rank(unit: _PlanUnit, state: str | None, code_head: bool = False) -> int | None:
    """The rank a unit is kept by (lower first; see plan_summary), None for a unit that only
    comes with others (headings, tag lines, fences) or is only counted (done tasks' detail).
    ``code_head``: a code line kept with its task's details (a block's first line, a
    definition line); other code lines come after every task's details."""
    ranked = _line_rank(unit, state)
    if ranked is not None:
        return ranked
    if state in (_plan.DONE, _plan.CANCELLED) or unit.role in ("heading", "open", "close", "fence"):
        return None
    return _detail_rank(unit, state, code_head)


def _line_rank(unit: _PlanUnit, state: str | None) -> int | None:
    """The rank of a line ranked whatever task it is in: the count and position lines, the
    frontmatter, a task box (by its status), a task's name heading (unless done); else None."""
    if unit.role in ("count", "position"):
        return _R_COUNT
    if unit.role == "frontmatter":
        return _R_FRONTMATTER
    if unit.role == "box":
        return _R_NAME if state in (_plan.IN_PROGRESS, _plan.PENDING) else _R_DONE_BOX
    if unit.role == "heading" and unit.tag == "name" and state not in (_plan.DONE, _plan.CANCELLED):
        return _R_NAME
    return None


def _detail_rank(unit: _PlanUnit, state: str | None, code_head: bool) -> int:
    """The rank of a line of a task not done (or outside any task): noise, code (unless kept
    with its task's details), a name or lead, a key line, else by its task's status."""
    if unit.role == "noise":
        return _R_NOISE
    if unit.role == "code" and not code_head:
        return _R_CODE
    if unit.role == "lead" or unit.tag == "name":
        return _R_NAME
    if unit.role == "key":
        return _R_KEY
    return _status_rank(state)


def _status_rank(state: str | None) -> int:
    """The rank of a detail line by its task's status: pending, in progress, or no task (prose)."""
    if state == _plan.PENDING:
        return _R_PENDING_DETAIL
    if state == _plan.IN_PROGRESS:
        return _R_OPEN_DETAIL
    return _R_PROSE


def _count_line_uid(units: list[_PlanUnit]) -> int | None:
    """The unit id of the plan's own task count line, None when it has none."""
    return next((u for u, unit in enumerate(units) if unit.role == "count"), None)


def _synthesized_count(units: list[_PlanUnit], status: dict, existing: int | None) -> str | None:
    """The count line to add to a plan with top-level task boxes and no count line of its own, else None."""
    top = [status[unit.first] for unit in units if unit.role == "box"]
    return None if existing is not None or not top else _plan.count_line(Counter(top))


def _code_lines_by_fence(units: list[_PlanUnit]) -> dict[int, list[int]]:
    """Fence unit id -> the unit ids of its code lines, in order."""
    code_lines: dict[int, list[int]] = {}
    for uid, unit in enumerate(units):
        if unit.fence is not None:
            code_lines.setdefault(unit.fence, []).append(uid)
    return code_lines


def _code_heads_and_steps(lines: Sequence[str], units: list[_PlanUnit],
                          code_lines: dict[int, list[int]]) -> tuple[set[int], dict[int, int]]:
    """(the code lines kept with their task's details: each block's first line and definition
    lines; the other code lines' order, blocks in step) by :func:`~.code.code_line_order`."""
    firsts, definitions, others = code_line_order(
        [[(uid, lines[units[uid].first]) for uid in ids if units[uid].role == "code"] for ids in code_lines.values()])
    return set(firsts + definitions), {uid: k for k, uid in enumerate(others)}


def _first_box_line(units: list[_PlanUnit]) -> int:
    """The line index of the first top-level task box (0 when there is none)."""
    return next((u.first for u in units if u.role == "box"), 0)


def _first_task_uid(units: list[_PlanUnit]) -> int | None:
    """The unit id of the first <task> open line (None when there is none)."""
    return next((uid for uid, u in enumerate(units) if u.role == "open" and u.tag == "task"), None)


def _open_headings(heads: list[tuple[int, int]], level: int, uid: int) -> list[tuple[int, int]]:
    """The open headings (level, unit id) after heading ``uid`` of ``level``: those of a lower
    level stay, then it."""
    kept = list(heads)
    while kept and kept[-1][0] >= level:
        kept.pop()
    return kept + [(level, uid)]


class _PlanView:
    """A plan's units as a selection problem: unit 0 is the synthesized count line when the
    plan has task boxes but no count line (``extra``), then one unit per plan unit, the
    compact frontmatter last (rendered first)."""

    def __init__(self, lines: Sequence[str], units: list[_PlanUnit], status: dict, fm: str | None):
        self.lines, self.status = lines, status
        self.units = units + ([_PlanUnit(-1, -2, "frontmatter")] if fm is not None else [])
        self.existing = _count_line_uid(units)
        self.synthesized = _synthesized_count(units, status, self.existing)
        self.extra = 1 if self.synthesized is not None else 0
        self.texts = [_unit_text(lines, u) for u in units] + ([fm] if fm is not None else [])
        self.total_lines = sum(1 for line in lines if line.strip())
        self.first_box = _first_box_line(units)
        self.current_task = _first_task_uid(units)  # the current <task> of a GSD plan without task boxes
        self.code_lines = _code_lines_by_fence(units)  # fence unit id -> its code line unit ids
        self.code_head, self.code_step = _code_heads_and_steps(lines, units, self.code_lines)

    def state(self, uid: int) -> str | None:
        """The status of the task a unit belongs to: its task box's, or for a GSD <task>, in
        progress for the first one and pending for the others; None outside any task."""
        unit = self.units[uid]
        if unit.owner is not None:
            return self.status.get(unit.owner)
        task = uid if unit.role == "open" and unit.tag == "task" else unit.task
        if task is None:
            return None
        return _plan.IN_PROGRESS if task == self.current_task else _plan.PENDING

    def problem(self) -> Problem:
        """The selection problem: each unit's cost, what it requires, the order units are kept in,
        the units that block (count and name lines), and the renderer."""
        ranks = [_rank(u, self.state(uid), uid in self.code_head) for uid, u in enumerate(self.units)]
        return Problem(self._costs(), self.requirements(), self._order(ranks), self.render,
                       blocking=self._blocking(ranks))

    def _order(self, ranks: list[int | None]) -> list[int]:
        """The ids of the ranked units, first kept first: the synthesized count line, then by rank,
        then code lines in their step and other units in plan order."""
        extra = self.extra
        ranked = sorted((u for u in range(len(self.units)) if ranks[u] is not None),
                        key=lambda u: (ranks[u], self.code_step.get(u, self.units[u].first)))
        return ([0] if extra else []) + [uid + extra for uid in ranked]

    def _blocking(self, ranks: list[int | None]) -> frozenset[int]:
        """The ids of the units kept before any other unit: the count line (synthesized or the
        plan's own) and the task boxes and key lines ranked as count or name lines."""
        extra = self.extra
        blocking = frozenset(uid + extra for uid, unit in enumerate(self.units)
                             if ranks[uid] in (_R_COUNT, _R_NAME) and unit.role in ("box", "key"))
        return blocking | ({0} if extra else ({self.existing} if self.existing is not None else set()))

    def _costs(self) -> list[int]:
        """Each unit's estimated cost in tokens (one for its newline), the count line's with room
        for the note of lines left out."""
        extra = self.extra
        costs = [estimate_tokens(t) + 1 for t in ([self.synthesized] if extra else []) + self.texts]
        costs[0 if extra else (self.existing + extra if self.existing is not None else 0)] += 12  # the note
        return costs

    def requirements(self) -> list[tuple[int, ...]]:
        """Per unit: its headings (a task line stands on its own), its task box, its element's
        tag lines, the <tasks> / <task> lines around it."""
        units, extra = self.units, self.extra
        box_uid = {u.first: k for k, u in enumerate(units) if u.role == "box"}
        requires: list[tuple[int, ...]] = [()] * (len(units) + extra)
        heads: list[tuple[int, int]] = []  # the open headings: (level, unit id)
        for uid, unit in enumerate(units):
            if unit.role == "frontmatter":
                continue
            if unit.role == "heading":
                heads = _open_headings(heads, len(HEADING.match(self.lines[unit.first]).group(1)), uid)
            need = self._line_needs(uid, heads, box_uid) + self._tag_needs(uid)
            requires[uid + extra] = tuple(dict.fromkeys(k for k in need if k != uid + extra))
        return requires

    def _line_needs(self, uid: int, heads: list[tuple[int, int]], box_uid: dict[int, int]) -> list[int]:
        """The ids unit ``uid`` comes with for its place: its code block's fence, and (but for a
        task box) its open headings and its task box."""
        unit, extra = self.units[uid], self.extra
        need = [unit.fence + extra] if unit.fence is not None else []  # a code line comes with its block's fences
        if unit.role != "box":
            need.extend(h + extra for _, h in heads if h != uid)
            if unit.owner is not None:
                need.append(box_uid[unit.owner] + extra)
        return need

    def _tag_needs(self, uid: int) -> list[int]:
        """The ids unit ``uid`` comes with for its elements: the open and close tag lines of the
        <tasks> / <task> around it and of its own element."""
        units, extra = self.units, self.extra
        need: list[int] = []
        for opened in self._element_opens(uid):
            need.append(opened + extra)  # an element's lines come with its open and close tag lines
            if units[opened].pair is not None:
                need.append(units[opened].pair + extra)
        return need

    def _element_opens(self, uid: int) -> tuple[int, ...]:
        """The open lines of the elements unit ``uid`` is in: the wrappers around it, then its own
        element's (its pair, or itself for an open line that has a pair)."""
        unit = self.units[uid]
        if unit.pair is None:
            return unit.wrappers
        return unit.wrappers + ((unit.pair,) if unit.role != "open" else (uid,))

    def render(self, sel: set[int]) -> str:
        """The selected lines in their order, a blank line where the plan had one, the count
        line before the first task, and a note of how many lines were left out."""
        out = self._frontmatter_shown(sel)
        last_line = None
        shown = 0
        for uid, unit in enumerate(self.units):
            if unit.role == "frontmatter":
                continue
            if self._count_line_due(unit, sel, out):
                out.extend(([""] if out else []) + [self.synthesized, ""])
                last_line = None
            if uid + self.extra not in sel or unit.fence is not None:
                continue  # a code line is rendered with its block
            if self._blank_before(last_line, unit):
                out.append("")
            text, count = self._shown(uid, sel)
            out.append(text)
            shown += count
            last_line = unit.last
        return "\n".join(out + self._left_out_note(shown)).strip("\n")

    def _frontmatter_shown(self, sel: set[int]) -> list[str]:
        """The compact frontmatter as the first output line when it is selected, else nothing."""
        units = self.units
        shown = units and units[-1].role == "frontmatter" and len(units) - 1 + self.extra in sel
        return [self.texts[-1]] if shown else []

    def _count_line_due(self, unit: _PlanUnit, sel: set[int], out: list[str]) -> bool:
        """Whether the synthesized count line goes before ``unit``: selected, not out yet, and
        ``unit`` at or after the first task box."""
        return bool(self.extra) and unit.first >= self.first_box and 0 in sel and self.synthesized not in out

    def _blank_before(self, last_line: int | None, unit: _PlanUnit) -> bool:
        """Whether a blank line goes before ``unit``: the plan had one between it and the last line shown."""
        return last_line is not None and any(not self.lines[k].strip() for k in range(last_line + 1, unit.first))

    def _shown(self, uid: int, sel: set[int]) -> tuple[str, int]:
        """The text of selected unit ``uid`` (a fence: its block with its selected lines) and how
        many plan lines it shows."""
        unit = self.units[uid]
        if unit.role == "fence":
            kept = sum(1 for k in self.code_lines.get(uid, ()) if k + self.extra in sel)
            return self._block(uid, sel), 1 + (unit.closing is None) + kept
        return self.texts[uid], sum(1 for k in range(unit.first, unit.last + 1) if self.lines[k].strip())

    def _left_out_note(self, shown: int) -> list[str]:
        """The note of how many plan lines are not shown, when some are not."""
        if self.total_lines > shown:
            return [f"[… {self.total_lines - shown} of {self.total_lines} plan lines not shown]"]
        return []

    def with_frontmatter(self, sel: set[int], fm: str | None) -> str | None:
        """The selection ``sel`` rendered with ``fm`` for the frontmatter (None: None)."""
        if fm is None:
            return None
        compact, self.texts[-1] = self.texts[-1], fm
        try:
            return self.render(sel)
        finally:
            self.texts[-1] = compact

    def _block(self, fence: int, sel: set[int]) -> str:
        """The code block of ``fence`` with its selected lines (:func:`~.code.render_code`)."""
        unit, lines, extra = self.units[fence], self.lines, self.extra
        body_end = unit.last if unit.closing is None else unit.last + 1
        kept = {self.units[uid].first for uid in self.code_lines.get(fence, ()) if uid + extra in sel}
        return render_code(lines[unit.first], lines[unit.last] if unit.closing is None else unit.closing,
                           lines[unit.first + 1:body_end], [k in kept for k in range(unit.first + 1, body_end)])


def _unit_text(lines: Sequence[str], unit: _PlanUnit) -> str:
    """A unit's own text (what its estimated cost is of): its lines; a fence's opening and
    closing lines."""
    if unit.role == "fence":
        return lines[unit.first] + "\n" + (lines[unit.last] if unit.closing is None else unit.closing)
    return "\n".join(lines[unit.first:unit.last + 1] + ([unit.closing] if unit.closing else []))
