"""ROADMAP.md narrowed to the current milestone: every other milestone's block (a ``<details>``
block or a heading naming another version) becomes a one-line mention."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable

from ..fences import fenced
from ..regex import lazy_regex
from .common import (_DETAILS_CLOSE, _DETAILS_OPEN, _PHASE_HEADING, _PHASE_ITEM, _RANGE, _SUMMARY_TAG,
                     _TAG, _VERSION, _lines_of, _sections, phase_key)


@dataclass(frozen=True)
class RoadmapView:
    """ROADMAP.md narrowed to one milestone: the text, the kept line ranges, what was folded."""

    content: str
    kept: tuple[tuple[int, int], ...]
    folded: tuple[str, ...] = ()  # one-line mentions of the other milestones
    milestone: str | None = None
    matched: bool = False  # a block of the roadmap names the milestone
    milestones: tuple[str, ...] = ()  # the versions of the roadmap's milestone blocks, once each
    shortened: tuple[str, ...] = ()  # finished phases whose details were cut to their heading


def _same_version(a: str, b: str) -> bool:
    def norm(v: str) -> tuple[int, ...]:
        parts = [int(p) for p in v.lstrip("vV").split(".")]
        while len(parts) > 2 and parts[-1] == 0:
            parts.pop()
        return tuple(parts)

    try:
        return norm(a) == norm(b)
    except ValueError:
        return a == b


_MILESTONE_N = lazy_regex(r"\bMilestone\s+(\d+)\b", re.I)


def milestone_tokens(label: str) -> tuple[str, ...]:
    """The names a milestone label goes by: its version ("v1.2") and its "Milestone N" (a
    roadmap written "Milestone 2: Production v1.0 (Phases 11-17)" has both), version first."""
    out = []
    version = _VERSION.search(label)
    if version:
        out.append(version.group(0))
    number = _MILESTONE_N.search(_TAG.sub("", label).replace("**", ""))
    if number:
        out.append(f"Milestone {number.group(1)}")
    return tuple(out)


def _names(tokens: tuple[str, ...], milestone: str | None) -> bool:
    return bool(milestone) and any(_same_version(t, milestone) for t in tokens)


def _mention(text: str) -> str:
    text = _TAG.sub("", text).replace("**", "").strip(" #-")
    return " ".join(text.split())


def milestone_blocks(lines: list[str]) -> list[tuple[int, int, tuple[str, ...], str]]:
    """The milestone blocks of ROADMAP.md's ``lines``: (first index, last index, its version
    tokens, its mention): ``<details>`` blocks whose summary names a version, and headings that
    name a version (down to the next heading of the same or a higher level)."""
    blocks = _details_blocks(lines)
    inside_details = {x for a, b, _, _ in blocks for x in range(a, b + 1)}
    for level, title, first, last in _sections(lines):
        if first in inside_details or level == 1 or _PHASE_HEADING.match(title.replace("**", "").strip()):
            continue  # a phase heading naming a version ("Phase 57: v7 review polish") is not a milestone
        tokens = milestone_tokens(title)
        if tokens:
            blocks.append((first, last, tokens, _mention(title)))
    return blocks


def _details_blocks(lines: list[str]) -> list[tuple[int, int, tuple[str, ...], str]]:
    """The ``<details>`` blocks (outside code, outermost only) whose summary (or first line) names
    a version, as :func:`milestone_blocks` gives them."""
    blocks: list[tuple[int, int, tuple[str, ...], str]] = []
    code = fenced(lines)
    i = 0
    while i < len(lines):
        if code[i] or not _DETAILS_OPEN.match(lines[i]):
            i += 1
            continue
        j = _details_end(lines, i)
        summary = _SUMMARY_TAG.search("\n".join(lines[i : j + 1]))
        label = summary.group(1) if summary else lines[i]
        tokens = milestone_tokens(label)
        if tokens:
            blocks.append((i, j, tokens, _mention(label)))
        i = j + 1
    return blocks


def _details_end(lines: list[str], start: int) -> int:
    """The index of the ``</details>`` closing the block opened at ``start`` (nested blocks
    counted), the last line when none does."""
    depth = 0
    for j in range(start, len(lines)):
        if _DETAILS_OPEN.match(lines[j]):
            depth += 1
        if _DETAILS_CLOSE.match(lines[j]):
            depth -= 1
            if depth == 0:
                return j
    return len(lines) - 1


_Block = tuple[int, int, tuple[str, ...], str]  # (first index, last index, version tokens, mention)
_PhaseRange = tuple[tuple[int, ...] | None, tuple[int, ...] | None]


def narrow_roadmap(text: str, milestone: str | None, done_before: tuple[int, ...] | None = None,
                   unfinished: tuple[str, ...] = ()) -> RoadmapView:
    """ROADMAP.md with every milestone block other than ``milestone`` folded to one line.

    Milestone blocks are ``<details>`` blocks whose summary names a version, and headings
    that name a version (down to the next heading of the same or a higher level). When the
    current milestone's phase range is known ("Phases 32-36"), phase detail headings and
    phase checklist items outside it are dropped too, and progress-table rows naming another
    milestone only. Without a milestone, or when no block names it, the roadmap is kept whole.
    ``done_before`` (the current phase's number): the detail sections of the finished phases
    before it shrink to their heading line (their details are the first thing to go), except
    unfinished ones (``unfinished`` phase numbers: a folder with plans without a SUMMARY, or no
    plans; and phases whose roadmap checklist item is unchecked, ``- [ ] **Phase 11``) unless
    every box of their section is checked.

    The steps: the milestone blocks and the milestone's phase range; the other milestones'
    blocks folded; the phases out of the range dropped; the progress rows of other milestones
    dropped; the finished phases' details cut; the lines kept joined.
    """
    lines = _lines_of(text)
    blocks = milestone_blocks(lines)
    phase_range = _phase_range(lines, milestone)
    matched = any(_names(block[2], milestone) for block in blocks) or phase_range is not None
    drop, swaps, folded = _folded_blocks(blocks, milestone) if matched else (set(), {}, [])
    in_range = partial(_in_range, phase_range, done_before)
    if phase_range is not None:
        drop = _out_of_range(lines, drop, in_range)
    if matched:
        rows, note = _other_rows(lines, drop, milestone, in_range if phase_range is not None else None)
        drop |= rows
        swaps.update(note)
    cut, headings, shortened = _finished_details(lines, drop, done_before, unfinished)
    drop |= cut
    swaps.update(headings)
    content, kept = _kept_text(lines, drop, swaps)
    return RoadmapView(content, kept, tuple(folded), milestone, matched, _block_versions(blocks), tuple(shortened))


def _phase_range(lines: list[str], milestone: str | None) -> _PhaseRange | None:
    """The current milestone's phase range ("Phases 32-36"), from the first line naming it that
    gives one (its block's heading or its mention in a list); None when none does."""
    if not milestone:
        return None
    for line in lines:
        if _names(milestone_tokens(line), milestone):
            found = _RANGE.search(line)
            if found:
                return phase_key(found.group(1)), phase_key(found.group(2))
    return None


def _block_versions(blocks: list[_Block]) -> tuple[str, ...]:
    """The versions of the milestone blocks, once each, in order."""
    versions: list[str] = []
    for block in blocks:
        if not any(_names(block[2], v) for v in versions):
            versions.append(block[2][0])
    return tuple(versions)


def _folded_blocks(blocks: list[_Block], milestone: str | None) -> tuple[set[int], dict[int, str], list[str]]:
    """(lines dropped, line -> the one-line mention in their place, the mentions): every block of
    another milestone folded, except one around (or inside) the current milestone's block."""
    current = {x for a, b, version, _ in blocks if _names(version, milestone) for x in range(a, b + 1)}
    drop: set[int] = set()
    swaps: dict[int, str] = {}
    folded: list[str] = []
    for a, b, version, mention in sorted(blocks):
        if _names(version, milestone) or a in drop or any(x in current for x in range(a, b + 1)):
            continue  # the current milestone's block, one folded already, one around or inside it: kept
        drop.update(range(a, b + 1))
        swaps[a] = f"- (other milestone, folded: ROADMAP.md lines {a + 1}-{b + 1}) {mention}"
        folded.append(mention)
    return drop, swaps, folded


def _in_range(phase_range: _PhaseRange | None, done_before: tuple[int, ...] | None,
              key: tuple[int, ...] | None) -> bool:
    """Phase ``key`` belongs to the milestone's range (by its major number), or nothing says it
    does not (no range, no number; the current phase ``done_before`` is kept even when added
    after the range was written)."""
    if phase_range is None or key is None or None in phase_range or key == done_before:
        return True
    low, high = phase_range
    return low[:1] <= key[:1] <= high[:1]


def _out_of_range(lines: list[str], drop: set[int], in_range: Callable[[tuple[int, ...] | None], bool]) -> set[int]:
    """``drop`` with the phase sections (under a heading) and phase checklist items outside the
    milestone's range added."""
    drop = set(drop)
    for _, title, first, last in _sections(lines):
        match = _PHASE_HEADING.match(title)
        if match and first not in drop and not in_range(phase_key(match.group(1))):
            drop.update(range(first, last + 1))
    for idx, line in enumerate(lines):
        match = _PHASE_ITEM.match(line)
        if match and idx not in drop and not in_range(phase_key(match.group(1))):
            drop.add(idx)
    return drop


def _other_rows(lines: list[str], drop: set[int], milestone: str | None,
                in_range: Callable[[tuple[int, ...] | None], bool] | None) -> tuple[set[int], dict[int, str]]:
    """(rows dropped, the note saying how many): the progress-table rows not yet dropped that name
    only other milestones' versions, or (``in_range`` given: the phase range is known) name a
    phase outside the range. The note goes after the last row of the table of the last one."""
    rows = {idx for idx, line in enumerate(lines)
            if idx not in drop and line.lstrip().startswith("|") and _other_row(line, milestone, in_range)}
    if not rows:
        return rows, {}
    end = max(rows)
    while end + 1 < len(lines) and lines[end + 1].lstrip().startswith("|"):
        end += 1
    note = f"(progress rows of other milestones omitted: {len(rows)})"
    return rows, {end: note if end in drop or end in rows else lines[end] + "\n" + note}


def _other_row(line: str, milestone: str | None, in_range: Callable[[tuple[int, ...] | None], bool] | None) -> bool:
    """A table row of another milestone: it names versions, none the milestone's; or it names no
    version and its first cell is a phase number out of range (``in_range`` given)."""
    versions = _VERSION.findall(line)
    if versions:
        return not any(_same_version(v, milestone) for v in versions) and not _names(milestone_tokens(line), milestone)
    cell = re.match(r"\s*\|\s*(\d+(?:\.\d+)*)\.", line) if in_range is not None else None
    return bool(cell) and not in_range(phase_key(cell.group(1)))


def _finished_details(lines: list[str], drop: set[int], done_before: tuple[int, ...] | None,
                      unfinished: tuple[str, ...]) -> tuple[set[int], dict[int, str], list[str]]:
    """(lines cut, heading line -> the heading with a note, the phases shortened): the detail of
    each phase section before ``done_before`` not yet dropped, unless the phase is unfinished
    (``unfinished``, or its checklist item unchecked) and not every box of its section is checked."""
    cut: set[int] = set()
    swaps: dict[int, str] = {}
    shortened: list[str] = []
    if done_before is None:
        return cut, swaps, shortened
    open_keys = {phase_key(p) for p in unfinished} | _unticked_phases(lines)
    for _, title, first, last in _sections(lines):
        match = _PHASE_HEADING.match(title)
        key = phase_key(match.group(1)) if match else None
        if (key is not None and key < done_before and first not in drop and first not in cut and last > first
                and not (key in open_keys and not _all_ticked(lines[first + 1:last + 1]))):
            cut.update(range(first + 1, last + 1))
            swaps[first] = lines[first] + " (done; details cut, ROADMAP.md lines " f"{first + 1}-{last + 1})"
            shortened.append(match.group(1))
    return cut, swaps, shortened


def _kept_text(lines: list[str], drop: set[int], swaps: dict[int, str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """(the text, the 1-based line ranges kept): the lines not dropped, each replacement in its
    line's place (a dropped line's too), runs of blank lines squeezed and folded mentions joined."""
    out: list[str] = []
    kept: list[tuple[int, int]] = []
    for idx, line in enumerate(lines):
        if idx in drop:
            if idx in swaps:
                out.append(swaps[idx])
            continue
        out.append(swaps.get(idx, line))
        if kept and kept[-1][1] == idx:
            kept[-1] = (kept[-1][0], idx + 1)
        else:
            kept.append((idx + 1, idx + 1))
    content = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")
    return _FOLDED_GAP.sub(r"\1\n", content), tuple(kept)


def milestone_phases(text: str, milestone: str | None, view: RoadmapView | None = None) -> tuple[str, ...]:
    """The phase numbers ROADMAP.md lists for ``milestone`` (headings and checklist items);
    ``view``: ``narrow_roadmap(text, milestone)`` when the caller has it already."""
    content = (view or narrow_roadmap(text, milestone)).content.split("\n")
    found: list[str] = []
    for line in content:
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        match = _PHASE_HEADING.match(heading.group(1).replace("**", "")) if heading else _PHASE_ITEM.match(line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return tuple(found)


_TICKED = lazy_regex(r"^\s*[-*]\s+\[[xX]\]")


_UNTICKED = lazy_regex(r"^\s*[-*]\s+\[ \]")


def _all_ticked(section: list[str]) -> bool:
    """Whether a phase section has checked boxes and no unchecked one (its plans all ticked)."""
    return any(_TICKED.match(line) for line in section) and not any(_UNTICKED.match(line) for line in section)


def _unticked_phases(lines: list[str]) -> set[tuple[int, ...]]:
    """The phases whose checklist item in the roadmap is unchecked (``- [ ] **Phase 11: ...``)."""
    out = set()
    for line in lines:
        match = _PHASE_ITEM.match(line)
        if match and _UNTICKED.match(line):
            out.add(phase_key(match.group(1)))
    return out


_FOLDED_GAP = lazy_regex(r"(- \(other milestone, folded[^\n]*)\n\n(?=- \(other milestone, folded)")


_PLAN_ITEM = lazy_regex(r"^\s*[-*]\s+\[([ xX])\]\s+\**(\d+(?:\.\d+)*)-(\d+)-PLAN(?:\.md)?\b", re.I)
_PLANS_COUNT = lazy_regex(r"\b(\d+)\s*/\s*(\d+)\s+plans?\b", re.I)


@dataclass(frozen=True)
class RoadmapPlans:
    """What ROADMAP.md says of one phase's plans: the plan files it lists (number -> (line,
    text)) and the total of a "1/2 plans executed" line (total, line, text)."""

    listed: tuple[tuple[int, int, str], ...] = ()  # (plan number, 1-based line, the line)
    ticked: tuple[int, ...] = ()  # the listed plans whose box is checked
    total: tuple[int, int, str] | None = None
    done: tuple[int, str] | None = None  # the phase's own checklist item, checked: (1-based line, the line)


def roadmap_plans(text: str, milestone: str | None = None,
                  view: RoadmapView | None = None) -> dict[tuple[int, ...], RoadmapPlans]:
    """Per phase (its number as a key), the plans ROADMAP.md names in the phase's section
    (``- [ ] 15-02-PLAN.md``), the total of its "**Plans:** 1/2 plans executed" line and its
    checked checklist item (``- [x] Phase 36: ... (3/3 plans) — completed``), in the part of
    the roadmap :func:`narrow_roadmap` keeps for ``milestone``. Real projects do not always
    commit their PLAN or SUMMARY files: these name the plans still to run, and the phases done.
    ``view``: ``narrow_roadmap(text, milestone)`` when the caller has it already."""
    lines = _lines_of(text)
    kept = {n for a, b in (view or narrow_roadmap(text, milestone)).kept for n in range(a, b + 1)}
    out: dict[tuple[int, ...], RoadmapPlans] = {}
    for _, title, first, last in _sections(lines):
        match = _PHASE_HEADING.match(title.replace("**", "").strip())
        key = phase_key(match.group(1)) if match else None
        if key is None or key in out:
            continue  # the first section of a phase that names plans
        plans = _section_plans(lines, range(first + 1, last + 1), key, kept)
        if plans is not None:
            out[key] = plans
    return _with_checked_phases(out, lines, kept)


def _section_plans(lines: list[str], span: range, key: tuple[int, ...], kept: set[int]) -> RoadmapPlans | None:
    """What the kept lines ``span`` of phase ``key``'s section say of its plans: the plan files
    it lists (and which are checked) and the first "N/M plans" count; None when neither."""
    listed: list[tuple[int, int, str]] = []
    ticked: list[int] = []
    total = None
    for i in (i for i in span if i + 1 in kept):
        item = _PLAN_ITEM.match(lines[i])
        if item and phase_key(item.group(2)) == key:
            listed.append((int(item.group(3)), i + 1, lines[i].strip()))
            if item.group(1) in "xX":
                ticked.append(int(item.group(3)))
            continue
        count = _PLANS_COUNT.search(lines[i])
        if count and total is None and "plan" in lines[i].lower():
            total = (int(count.group(2)), i + 1, lines[i].strip())
    return RoadmapPlans(tuple(listed), tuple(ticked), total) if listed or total else None


def _with_checked_phases(plans: dict[tuple[int, ...], RoadmapPlans], lines: list[str],
                         kept: set[int]) -> dict[tuple[int, ...], RoadmapPlans]:
    """``plans`` with each phase's first checked checklist item (kept, outside code) as its ``done``."""
    out = dict(plans)
    code = fenced(lines)
    for i, line in enumerate(lines):
        item = _PHASE_ITEM.match(line)
        if item and i + 1 in kept and not code[i] and not _UNTICKED.match(line):
            key = phase_key(item.group(1))
            if out.get(key, RoadmapPlans()).done is None:
                out[key] = replace(out.get(key, RoadmapPlans()), done=(i + 1, line.strip()))
    return out


_TABLE_PHASE = lazy_regex(r"^\s*\|\s*(?:Phase\s+)?(\d+(?:\.\d+)*)\.?\s*[:.\-—–]?\s*([A-Za-z][^|]*?)\s*\|")


def phase_names(text: str) -> dict[tuple[int, ...], tuple[tuple[int, str], ...]]:
    """Every name ROADMAP.md gives each phase number, in any milestone block: headings
    (``### Phase 15: Database Stability & Recovery``), checklist items and progress-table rows
    (``| 15. Database Stability | v1.1 |``), as (1-based line, name). A roadmap whose milestones
    restart their numbering gives one number several names; a phase folder's name tells which
    one it belongs to."""
    out: dict[tuple[int, ...], list[tuple[int, str]]] = {}
    lines = _lines_of(text)
    code = fenced(lines)
    for i, line in enumerate(lines):
        if code[i]:
            continue
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        match = (_PHASE_HEADING.match(heading.group(1).replace("**", "").strip()) if heading
                 else _PHASE_ITEM.match(line))
        if match:
            rest = (heading.group(1) if heading else line).replace("**", "")
            name = re.sub(r"^.*?Phase\s+\d+(?:\.\d+)*\s*[:.\-—–]?\s*", "", rest, count=1, flags=re.I)
        else:
            row = _TABLE_PHASE.match(line)
            if not row:
                continue
            match, name = row, row.group(2)
        name = name.split(" - ")[0].split(" — ")[0].strip()
        if name:
            out.setdefault(phase_key(match.group(1)), []).append((i + 1, name))
    return {k: tuple(v) for k, v in out.items()}
