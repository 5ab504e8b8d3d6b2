"""ROADMAP.md narrowed to the current milestone: every other milestone's block (a ``<details>``
block or a heading naming another version) becomes a one-line mention."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..fences import fenced
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


_MILESTONE_N = re.compile(r"\bMilestone\s+(\d+)\b", re.I)


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
    n = len(lines)
    blocks: list[tuple[int, int, tuple[str, ...], str]] = []
    i = 0
    code = fenced(lines)
    while i < n:
        line = lines[i]
        if not code[i] and _DETAILS_OPEN.match(line):
            depth, j = 0, i
            while j < n:
                if _DETAILS_OPEN.match(lines[j]):
                    depth += 1
                if _DETAILS_CLOSE.match(lines[j]):
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            j = min(j, n - 1)
            chunk = "\n".join(lines[i : j + 1])
            summary = _SUMMARY_TAG.search(chunk)
            label = summary.group(1) if summary else lines[i]
            tokens = milestone_tokens(label)
            if tokens:
                blocks.append((i, j, tokens, _mention(label)))
            i = j + 1
            continue
        i += 1
    inside_details = set()
    for a, b, _, _ in blocks:
        inside_details.update(range(a, b + 1))
    for level, title, first, last in _sections(lines):
        if first in inside_details or level == 1 or _PHASE_HEADING.match(title.replace("**", "").strip()):
            continue  # a phase heading naming a version ("Phase 57: v7 review polish") is not a milestone
        tokens = milestone_tokens(title)
        if tokens:
            blocks.append((first, last, tokens, _mention(title)))
    return blocks


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
    """
    lines = _lines_of(text)
    n = len(lines)

    blocks = milestone_blocks(lines)

    # The current milestone's phase range, from its block or its mention in a list.
    phase_range = None
    for line in lines if milestone else ():
        if _names(milestone_tokens(line), milestone):
            found = _RANGE.search(line)
            if found:
                phase_range = (phase_key(found.group(1)), phase_key(found.group(2)))
                break
    versions: list[str] = []
    for block in blocks:
        if not any(_names(block[2], v) for v in versions):
            versions.append(block[2][0])
    current = [bl for bl in blocks if _names(bl[2], milestone)]
    matched = bool(current) or phase_range is not None

    drop: set[int] = set()
    replace: dict[int, str] = {}
    folded: list[str] = []
    current_lines: set[int] = set()
    for a, b, version, mention in sorted(blocks) if matched else ():
        if _names(version, milestone):
            current_lines.update(range(a, b + 1))
    for a, b, version, mention in sorted(blocks) if matched else ():
        if _names(version, milestone) or a in drop:
            continue
        if any(x in current_lines for x in range(a, b + 1)) and not all(x in current_lines for x in range(a, b + 1)):
            continue  # a block around the current one: keep it
        if a in current_lines:
            continue
        drop.update(range(a, b + 1))
        replace[a] = f"- (other milestone, folded: ROADMAP.md lines {a + 1}-{b + 1}) {mention}"
        folded.append(mention)

    def in_range(key: tuple[int, ...] | None) -> bool:
        if phase_range is None or key is None or None in phase_range or key == done_before:
            return True  # the current phase is kept even when added after the range was written
        low, high = phase_range
        return low[:1] <= key[:1] <= high[:1]

    if phase_range is not None:
        for level, title, first, last in _sections(lines):
            match = _PHASE_HEADING.match(title)
            if match and first not in drop and not in_range(phase_key(match.group(1))):
                drop.update(range(first, last + 1))
        for idx, line in enumerate(lines):
            match = _PHASE_ITEM.match(line)
            if match and idx not in drop and not in_range(phase_key(match.group(1))):
                drop.add(idx)

    # Progress-table rows that name only other milestones.
    rows_dropped = 0
    last_table_row = None
    for idx, line in enumerate(lines if matched else ()):
        if idx in drop or not line.lstrip().startswith("|"):
            continue
        versions = _VERSION.findall(line)
        if versions and not any(_same_version(v, milestone) for v in versions) and not _names(
                milestone_tokens(line), milestone):
            drop.add(idx)
            rows_dropped += 1
            last_table_row = idx
        elif phase_range is not None and not versions:
            cell = re.match(r"\s*\|\s*(\d+(?:\.\d+)*)\.", line)
            if cell and not in_range(phase_key(cell.group(1))):
                drop.add(idx)
                rows_dropped += 1
                last_table_row = idx
    if rows_dropped and last_table_row is not None:
        end = last_table_row
        while end + 1 < n and lines[end + 1].lstrip().startswith("|"):
            end += 1
        note = f"(progress rows of other milestones omitted: {rows_dropped})"
        replace[end] = note if end in drop else lines[end] + "\n" + note

    shortened: list[str] = []
    open_keys = {phase_key(p) for p in unfinished} | _unticked_phases(lines)
    if done_before is not None:
        for level, title, first, last in _sections(lines):
            match = _PHASE_HEADING.match(title)
            key = phase_key(match.group(1)) if match else None
            if (key is not None and key < done_before and first not in drop and last > first
                    and not (key in open_keys and not _all_ticked(lines[first + 1:last + 1]))):
                drop.update(range(first + 1, last + 1))
                replace[first] = lines[first] + " (done; details cut, ROADMAP.md lines " f"{first + 1}-{last + 1})"
                shortened.append(match.group(1))

    out: list[str] = []
    kept: list[tuple[int, int]] = []
    for idx, line in enumerate(lines):
        if idx in replace and idx in drop:
            out.append(replace[idx])
            continue
        if idx in drop:
            continue
        out.append(replace.get(idx, line))
        if kept and kept[-1][1] == idx:
            kept[-1] = (kept[-1][0], idx + 1)
        else:
            kept.append((idx + 1, idx + 1))
    content = re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")
    content = _FOLDED_GAP.sub(r"\1\n", content)
    return RoadmapView(content, tuple(kept), tuple(folded), milestone, matched, tuple(versions), tuple(shortened))


def milestone_phases(text: str, milestone: str | None) -> tuple[str, ...]:
    """The phase numbers ROADMAP.md lists for ``milestone`` (headings and checklist items)."""
    content = narrow_roadmap(text, milestone).content.split("\n")
    found: list[str] = []
    for line in content:
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        match = _PHASE_HEADING.match(heading.group(1).replace("**", "")) if heading else _PHASE_ITEM.match(line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return tuple(found)


_TICKED = re.compile(r"^\s*[-*]\s+\[[xX]\]")


_UNTICKED = re.compile(r"^\s*[-*]\s+\[ \]")


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


_FOLDED_GAP = re.compile(r"(- \(other milestone, folded[^\n]*)\n\n(?=- \(other milestone, folded)")


_PLAN_ITEM = re.compile(r"^\s*[-*]\s+\[([ xX])\]\s+\**(\d+(?:\.\d+)*)-(\d+)-PLAN(?:\.md)?\b", re.I)
_PLANS_COUNT = re.compile(r"\b(\d+)\s*/\s*(\d+)\s+plans?\b", re.I)


@dataclass(frozen=True)
class RoadmapPlans:
    """What ROADMAP.md says of one phase's plans: the plan files it lists (number -> (line,
    text)) and the total of a "1/2 plans executed" line (total, line, text)."""

    listed: tuple[tuple[int, int, str], ...] = ()  # (plan number, 1-based line, the line)
    ticked: tuple[int, ...] = ()  # the listed plans whose box is checked
    total: tuple[int, int, str] | None = None
    done: tuple[int, str] | None = None  # the phase's own checklist item, checked: (1-based line, the line)


def roadmap_plans(text: str, milestone: str | None = None) -> dict[tuple[int, ...], RoadmapPlans]:
    """Per phase (its number as a key), the plans ROADMAP.md names in the phase's section
    (``- [ ] 15-02-PLAN.md``), the total of its "**Plans:** 1/2 plans executed" line and its
    checked checklist item (``- [x] Phase 36: ... (3/3 plans) — completed``), in the part of
    the roadmap :func:`narrow_roadmap` keeps for ``milestone``. Real projects do not always
    commit their PLAN or SUMMARY files: these name the plans still to run, and the phases done."""
    lines = _lines_of(text)
    kept = {n for a, b in narrow_roadmap(text, milestone).kept for n in range(a, b + 1)}
    out: dict[tuple[int, ...], RoadmapPlans] = {}
    for _, title, first, last in _sections(lines):
        match = _PHASE_HEADING.match(title.replace("**", "").strip())
        key = phase_key(match.group(1)) if match else None
        if key is None or key in out:
            continue
        listed: list[tuple[int, int, str]] = []
        ticked: list[int] = []
        total = None
        for i in range(first + 1, last + 1):
            if i + 1 not in kept:
                continue
            item = _PLAN_ITEM.match(lines[i])
            if item and phase_key(item.group(2)) == key:
                listed.append((int(item.group(3)), i + 1, lines[i].strip()))
                if item.group(1) in "xX":
                    ticked.append(int(item.group(3)))
                continue
            count = _PLANS_COUNT.search(lines[i])
            if count and total is None and "plan" in lines[i].lower():
                total = (int(count.group(2)), i + 1, lines[i].strip())
        if listed or total:
            out[key] = RoadmapPlans(tuple(listed), tuple(ticked), total)
    code = fenced(lines)
    for i, line in enumerate(lines):
        item = _PHASE_ITEM.match(line)
        if item and i + 1 in kept and not code[i] and not _UNTICKED.match(line):
            key = phase_key(item.group(1))
            if out.get(key, RoadmapPlans()).done is None:
                out[key] = replace(out.get(key, RoadmapPlans()), done=(i + 1, line.strip()))
    return out


_TABLE_PHASE = re.compile(r"^\s*\|\s*(?:Phase\s+)?(\d+(?:\.\d+)*)\.?\s*[:.\-—–]?\s*([A-Za-z][^|]*?)\s*\|")


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
