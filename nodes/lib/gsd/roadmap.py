"""ROADMAP.md narrowed to the current milestone: every other milestone's block (a ``<details>``
block or a heading naming another version) becomes a one-line mention."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..regex import lazy_regex
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


def _mention(text: str) -> str:
    text = _TAG.sub("", text).replace("**", "").strip(" #-")
    return " ".join(text.split())


def narrow_roadmap(text: str, milestone: str | None, done_before: tuple[int, ...] | None = None,
                   unfinished: tuple[str, ...] = ()) -> RoadmapView:
    """ROADMAP.md with every milestone block other than ``milestone`` folded to one line.

    Milestone blocks are ``<details>`` blocks whose summary names a version, and headings
    that name a version (down to the next heading of the same or a higher level). When the
    current milestone's phase range is known ("Phases 32-36"), phase detail headings and
    phase checklist items outside it are dropped too, and progress-table rows naming another
    milestone only. Without a milestone, or when no block names it, the roadmap is kept whole.
    ``done_before`` (the current phase's number): the detail sections of the finished phases
    before it shrink to their heading line (their details
    are the first thing to go), except ``unfinished`` ones (phase numbers whose folder has plans
    without a SUMMARY, or no plans) when no box of their section is checked.
    """
    lines = _lines_of(text)
    n = len(lines)

    # Blocks: (first index, last index, version, mention)
    blocks: list[tuple[int, int, str, str]] = []
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
            version = _VERSION.search(label)
            if version:
                blocks.append((i, j, version.group(0), _mention(label)))
            i = j + 1
            continue
        i += 1
    inside_details = set()
    for a, b, _, _ in blocks:
        inside_details.update(range(a, b + 1))
    for level, title, first, last in _sections(lines):
        if first in inside_details or level == 1 or _PHASE_HEADING.match(title.replace("**", "").strip()):
            continue  # a phase heading naming a version ("Phase 57: v7 review polish") is not a milestone
        version = _VERSION.search(title)
        if version:
            blocks.append((first, last, version.group(0), _mention(title)))

    # The current milestone's phase range, from its block or its mention in a list.
    phase_range = None
    for line in lines if milestone else ():
        version = _VERSION.search(line)
        if version and _same_version(version.group(0), milestone):
            found = _RANGE.search(line)
            if found:
                phase_range = (phase_key(found.group(1)), phase_key(found.group(2)))
                break
    versions: list[str] = []
    for block in blocks:
        if not any(_same_version(block[2], v) for v in versions):
            versions.append(block[2])
    current = [bl for bl in blocks if milestone and _same_version(bl[2], milestone)]
    matched = bool(current) or phase_range is not None

    drop: set[int] = set()
    replace: dict[int, str] = {}
    folded: list[str] = []
    current_lines: set[int] = set()
    for a, b, version, mention in sorted(blocks) if matched else ():
        if _same_version(version, milestone):
            current_lines.update(range(a, b + 1))
    for a, b, version, mention in sorted(blocks) if matched else ():
        if _same_version(version, milestone) or a in drop:
            continue
        if any(x in current_lines for x in range(a, b + 1)) and not all(x in current_lines for x in range(a, b + 1)):
            continue  # a block around the current one: keep it
        if a in current_lines:
            continue
        drop.update(range(a, b + 1))
        replace[a] = f"- (other milestone, folded: ROADMAP.md lines {a + 1}-{b + 1}) {mention}"
        folded.append(mention)

    def in_range(key: tuple[int, ...] | None) -> bool:
        if phase_range is None or key is None or None in phase_range:
            return True
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
        if versions and not any(_same_version(v, milestone) for v in versions):
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
    open_keys = {phase_key(p) for p in unfinished}
    if done_before is not None:
        for level, title, first, last in _sections(lines):
            match = _PHASE_HEADING.match(title)
            key = phase_key(match.group(1)) if match else None
            if (key is not None and key < done_before and first not in drop and last > first
                    and not (key in open_keys and not _ticked(lines[first + 1:last + 1]))):
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


_TICKED = lazy_regex(r"^\s*[-*]\s+\[[xX]\]")


def _ticked(section: list[str]) -> bool:
    """Whether a phase section has a checked box (real roadmaps leave some boxes of finished phases unticked)."""
    return any(_TICKED.match(line) for line in section)


_FOLDED_GAP = lazy_regex(r"(- \(other milestone, folded[^\n]*)\n\n(?=- \(other milestone, folded)")
