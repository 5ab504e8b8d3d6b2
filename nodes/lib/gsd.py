"""Real GSD ``.planning/`` folders: STATE.md, ROADMAP.md and the plans of the current phase.

DESIGN.md ("Project layouts read"): no task has a status field; progress is which SUMMARY
files exist plus STATE.md's "Plan A of B". This module reads:

* STATE.md: the "Current Position" block (milestone, phase, plan, status, last activity,
  progress), the current focus, blockers, pending todos, session continuity / next action,
  and the YAML frontmatter newer GSD versions write;
* ROADMAP.md narrowed to the milestone STATE.md names: every other milestone's block (a
  ``<details>`` block or a heading naming another version) becomes a one-line mention;
* the plans of the current phase folder (``phases/NN-name/`` or an archived
  ``milestones/vX-phases/NN-name/``; decimal phases such as ``02.1-...`` included): a PLAN
  with a SUMMARY is done and shows the SUMMARY's one-liner, the plan STATE.md names is in
  progress and shows in full, any other PLAN without a SUMMARY is pending.

Everything here is pure: the loader node hands in file contents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..types import Source
from .markdown import FrontmatterError, demote_headings, frontmatter_block, split_frontmatter
from .plan import PlanView

DONE = "done"
IN_PROGRESS = "in_progress"
PENDING = "pending"

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")
_FIELD = re.compile(r"^[-*]?\s*\*{0,2}([A-Z][A-Za-z /_-]{1,30}?)\*{0,2}\s*:\s*\*{0,2}\s*(.*)$")
_FOCUS = re.compile(r"^\*\*Current focus:?\*\*:?\s*(.+)$", re.I)
_VERSION = re.compile(r"(?<![\w.])v\d+(?:\.\d+)*(?![\w])")
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_OF = re.compile(r"(\d+(?:\.\d+)*)\s*(?:of|/)\s*(\d+(?:\.\d+)*)")
_PHASE_DIR = re.compile(r"^(\d+(?:\.\d+)*)-")
_PLAN_FILE = re.compile(r"^(\d+(?:\.\d+)*)-(\d+)-(PLAN|SUMMARY)\.md$")
_RANGE = re.compile(r"Phases?\s+(\d+(?:\.\d+)?)\s*(?:-|–|—|to)\s*(\d+(?:\.\d+)?)", re.I)
_PHASE_HEADING = re.compile(r"^Phase\s+(\d+(?:\.\d+)*)\b", re.I)
_PHASE_ITEM = re.compile(r"^\s*[-*]\s+\[[ xX]\]\s+\**Phase\s+(\d+(?:\.\d+)*)\b", re.I)
_DETAILS_OPEN = re.compile(r"^\s*<details\b", re.I)
_DETAILS_CLOSE = re.compile(r"^\s*</details>", re.I)
_SUMMARY_TAG = re.compile(r"<summary>(.*?)</summary>", re.I | re.S)
_TAG = re.compile(r"<[^>]+>")
_TASK_NAME = re.compile(r"<name>(.*?)</name>", re.S)
_TASK_FILES = re.compile(r"<files>(.*?)</files>", re.S)
_TASK_HEADING = re.compile(r"^#{2,4}\s+(Task\s+\d+\b.*)$")
_OBJECTIVE = re.compile(r"<objective>\s*(.*?)\s*</objective>", re.S)
_BOLD_LINE = re.compile(r"^\*\*(.+?)\*\*\s*$")
_SUMMARY_TITLE = re.compile(r"^(?:Phase\s+[\w.]+\s+Plan\s+[\w.]+\s*(?:Summary)?\s*[:\-—]\s*)", re.I)

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

    def field(self, name: str) -> str | None:
        for key, value in self.fields:
            if key.lower() == name.lower():
                return value
        return None


@dataclass(frozen=True)
class GsdPlan:
    """One plan of the current phase and what the context shows of it."""

    plan_id: str  # "08.1-05"
    number: int
    status: str  # done | in_progress | pending
    title: str
    plan_path: str | None = None
    plan_lines: tuple[int, int] | None = None
    summary_path: str | None = None
    summary_line: int | None = None
    detail: str = ""  # what the context shows under the plan's line

    def as_dict(self) -> dict:
        return {
            "id": self.plan_id,
            "title": self.title,
            "status": self.status,
            "plan": self.plan_path,
            "summary": self.summary_path,
            "lines": self.plan_lines,
        }


@dataclass(frozen=True)
class RoadmapView:
    """ROADMAP.md narrowed to one milestone: the text, the kept line ranges, what was folded."""

    content: str
    kept: tuple[tuple[int, int], ...]
    folded: tuple[str, ...] = ()  # one-line mentions of the other milestones
    milestone: str | None = None
    matched: bool = False  # a block of the roadmap names the milestone


# ----------------------------------------------------------------------------- helpers


def phase_key(text: str | None) -> tuple[int, ...] | None:
    """``"08.1"`` and ``"8.1"`` -> (8, 1); None when the text holds no number."""
    if not text:
        return None
    match = _NUMBER.search(text)
    if not match:
        return None
    return tuple(int(part) for part in match.group(0).split("."))


def is_phase_file(name: str) -> bool:
    """True for a phase folder's ``NN-MM-PLAN.md`` or ``NN-MM-SUMMARY.md`` (decimal NN too)."""
    return _PLAN_FILE.match(name) is not None


def dir_phase_key(name: str) -> tuple[int, ...] | None:
    """The phase number of a phase folder name (``02.1-critical-math-fixes`` -> (2, 1))."""
    match = _PHASE_DIR.match(name)
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def _lines_of(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _sections(lines: Sequence[str], start: int = 0) -> list[tuple[int, str, int, int]]:
    """(level, title, first index, last index) of each heading's section (outside fences)."""
    heads: list[tuple[int, str, int]] = []
    in_fence = False
    for i in range(start, len(lines)):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            match = _HEADING.match(line)
            if match:
                heads.append((len(match.group(1)), match.group(2).strip(), i))
    out = []
    for n, (level, title, i) in enumerate(heads):
        end = len(lines) - 1
        for level2, _, j in heads[n + 1 :]:
            if level2 <= level:
                end = j - 1
                break
        while end > i and not lines[end].strip():
            end -= 1
        out.append((level, title, i, end))
    return out


def _split_fm(text: str) -> tuple[str, str, int]:
    """(frontmatter text, body, body's first line) without parsing the YAML: PLAN and SUMMARY
    frontmatter is long (must_haves, key-files) and only a few top-level keys are read."""
    raw, body, start = frontmatter_block(text)
    return raw or "", body, start


def _fm_value(frontmatter: str, key: str) -> str | None:
    """A top-level key of YAML frontmatter as text: a scalar, a flow list, or a block list joined."""
    match = re.search(rf"^{re.escape(key)}:[ \t]*(.*)$", frontmatter, re.M)
    if not match:
        return None
    value = match.group(1).strip()
    if value and value[0] in "\"'" and value[-1] == value[0] and len(value) > 1:
        return value[1:-1]
    if value:
        return value
    items = []
    for line in frontmatter[match.end():].split("\n")[1:]:
        item = re.match(r"^[ \t]+-[ \t]+(.*)$", line)
        if not item:
            if line.strip() and not line.startswith((" ", "\t")):
                break
            continue
        items.append(item.group(1).strip().strip("\"'"))
    return "[" + ", ".join(items) + "]" if items else None


def _flat(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_flat(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    return str(value)


# ----------------------------------------------------------------------------- STATE.md


def parse_state(text: str, path: str = "STATE.md") -> GsdState:
    """The current position, focus, blockers, todos and session notes of STATE.md."""
    warnings: list[str] = []
    frontmatter: dict[str, Any] = {}
    body_start = 0
    fm_lines = None
    try:
        frontmatter, _, start_line = split_frontmatter(text)
        if frontmatter:
            body_start = start_line - 1
            fm_lines = (1, start_line - 1)
    except FrontmatterError as exc:
        warnings.append(f"{path}:{exc.line or 1}: {exc}; frontmatter ignored")
    lines = _lines_of(text)
    sections = _sections(lines, body_start)

    position = None
    blocks: list[StateBlock] = []
    for level, title, first, last in sections:
        low = title.lower()
        if position is None and "current position" in low:
            position = StateBlock("position", title, "\n".join(lines[first + 1 : last + 1]).strip("\n"), (first + 1, last + 1))
            continue
        for name, words in _STATE_BLOCKS:
            if any(w in low for w in words) and not any(b.name == name for b in blocks):
                body = lines[first + 1 : last + 1]
                nested = [(t, f) for lv, t, f, _ in sections if first < f <= last and lv > level]
                if nested:  # sub-sections (e.g. a table of quick tasks) stay out
                    body = lines[first + 1 : nested[0][1]]
                    while body and not body[-1].strip():
                        body.pop()
                    body.append("(subsections omitted: " + ", ".join(
                        f"{t} (line {f + 1})" for t, f in nested) + ")")
                if len(body) > _BLOCK_MAX_LINES:
                    more = len(body) - _BLOCK_MAX_LINES
                    body = body[:_BLOCK_MAX_LINES] + [f"... ({more} more lines in {path} lines {first + 2 + _BLOCK_MAX_LINES}-{last + 1})"]
                blocks.append(StateBlock(name, title, "\n".join(body).strip("\n"), (first + 1, last + 1)))
                break

    fields: list[tuple[str, str]] = []
    scan = range(position.lines[0], position.lines[1]) if position else range(body_start, min(len(lines), body_start + 60))
    for i in scan:
        match = _FIELD.match(lines[i].strip())
        if match:
            fields.append((match.group(1).strip(), match.group(2).strip()))
    focus = None
    for i in range(body_start, len(lines)):
        match = _FOCUS.match(lines[i].strip())
        if match:
            focus = (match.group(1).strip(), i + 1)
            break

    def get(name: str) -> str | None:
        for key, value in fields:
            if key.lower() == name:
                return value
        return None

    milestone = None
    fm_milestone = frontmatter.get("milestone")
    candidates = [str(fm_milestone) if fm_milestone is not None else None, get("milestone"),
                  focus[0] if focus else None, get("status")]
    for candidate in candidates:
        if candidate:
            match = _VERSION.search(candidate if candidate.startswith("v") or "v" in candidate else "v" + candidate)
            if match:
                milestone = match.group(0)
                break
    milestone_name = frontmatter.get("milestone_name")
    if isinstance(milestone_name, str):
        milestone_name = milestone_name.strip(" -—–")
    elif get("milestone"):
        milestone_name = _VERSION.sub("", get("milestone") or "").split("(")[0].strip(" -—–") or None
    else:
        milestone_name = None

    phase_text = get("phase") or (str(frontmatter["current_phase"]) if "current_phase" in frontmatter else None)
    phase = phase_total = None
    if phase_text:
        of = _OF.search(phase_text)
        if of and not re.match(r"\s*\d", phase_text) and "complete" in phase_text.lower():
            phase, phase_total = of.group(2), of.group(2)  # "All complete (12/12)"
        elif of:
            phase, phase_total = of.group(1), of.group(2)
        else:
            number = _NUMBER.search(phase_text)
            phase = number.group(0) if number else None
    plan = plan_total = None
    plan_text = get("plan")
    if plan_text:
        of = _OF.search(plan_text)
        if of:
            plan, plan_total = int(float(of.group(1))), int(float(of.group(2)))
        else:
            number = re.match(r"\s*(\d+)", plan_text)
            plan = int(number.group(1)) if number else None
    status = get("status") or (str(frontmatter.get("status")) if frontmatter.get("status") else None)
    said = " ".join(filter(None, [phase_text, plan_text, get("status"), str(frontmatter.get("status") or "")])).lower()
    complete = bool(re.search(r"(?<!in)complete|shipped|\bdone\b", said))

    if position is None:
        warnings.append(f"{path}: no 'Current Position' section; position read from the fields found")
    return GsdState(
        frontmatter=frontmatter,
        fields=tuple(fields),
        position=position,
        blocks=tuple(blocks),
        focus=focus,
        milestone=milestone,
        milestone_name=milestone_name if isinstance(milestone_name, str) else None,
        phase=phase,
        phase_total=phase_total,
        plan=plan,
        plan_total=plan_total,
        status=status,
        complete=complete,
        frontmatter_lines=fm_lines,
        warnings=tuple(warnings),
    )


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


def render_state(state: GsdState, path: str) -> str:
    """STATE.md as the context shows it: frontmatter, position, focus, blockers, todos, session."""
    out = [position_line(state)]
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


# ----------------------------------------------------------------------------- ROADMAP.md


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


def narrow_roadmap(text: str, milestone: str | None) -> RoadmapView:
    """ROADMAP.md with every milestone block other than ``milestone`` folded to one line.

    Milestone blocks are ``<details>`` blocks whose summary names a version, and headings
    that name a version (down to the next heading of the same or a higher level). When the
    current milestone's phase range is known ("Phases 32-36"), phase detail headings and
    phase checklist items outside it are dropped too, and progress-table rows naming another
    milestone only. Without a milestone, or when no block names it, the roadmap is kept whole.
    """
    lines = _lines_of(text)
    n = len(lines)
    if not milestone:
        return RoadmapView(text.strip("\n"), ((1, n),) if n else (), (), None, False)

    # Blocks: (first index, last index, version, mention)
    blocks: list[tuple[int, int, str, str]] = []
    i = 0
    in_fence = False
    while i < n:
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
        if not in_fence and _DETAILS_OPEN.match(line):
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
        if first in inside_details or level == 1:
            continue
        version = _VERSION.search(title)
        if version:
            blocks.append((first, last, version.group(0), _mention(title)))

    # The current milestone's phase range, from its block or its mention in a list.
    phase_range = None
    for line in lines:
        version = _VERSION.search(line)
        if version and _same_version(version.group(0), milestone):
            found = _RANGE.search(line)
            if found:
                phase_range = (phase_key(found.group(1)), phase_key(found.group(2)))
                break
    current = [bl for bl in blocks if _same_version(bl[2], milestone)]
    if not current and phase_range is None:
        return RoadmapView(text.strip("\n"), ((1, n),) if n else (), (), milestone, False)

    drop: set[int] = set()
    replace: dict[int, str] = {}
    folded: list[str] = []
    current_lines: set[int] = set()
    for a, b, version, mention in sorted(blocks):
        if _same_version(version, milestone):
            current_lines.update(range(a, b + 1))
    for a, b, version, mention in sorted(blocks):
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
    for idx, line in enumerate(lines):
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
    return RoadmapView(content, tuple(kept), tuple(folded), milestone, True)


_FOLDED_GAP = re.compile(r"(- \(other milestone, folded[^\n]*)\n\n(?=- \(other milestone, folded)")


# ----------------------------------------------------------------------------- plans


def summary_one_liner(text: str) -> tuple[str, int]:
    """A SUMMARY's one-liner and its line: frontmatter ``one_liner``, else the first line that
    is bold as a whole after the title, else the title without its "Phase N Plan M" prefix."""
    frontmatter, _, start = _split_fm(text)
    for key in ("one_liner", "one-liner", "oneliner"):
        value = _fm_value(frontmatter, key)
        if value:
            return value, 1
    lines = _lines_of(text)
    title, title_line = None, start
    in_fence = False
    for i in range(start - 1, len(lines)):
        line = lines[i].strip()
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line:
            continue
        heading = _HEADING.match(line)
        if heading:
            if title is None:
                title, title_line = heading.group(2).strip(), i + 1
                continue
            if heading.group(1) in ("#", "##"):
                break
            continue
        bold = _BOLD_LINE.match(line)
        if bold and ":" not in bold.group(1)[-2:]:
            return bold.group(1).strip(), i + 1
    if title:
        short = _SUMMARY_TITLE.sub("", title).strip()
        return (short or title), title_line
    return "(SUMMARY without a title)", 1


def plan_title(text: str) -> str:
    """A PLAN's title: frontmatter ``title``, else the first sentence of its objective, else its first heading."""
    frontmatter, body, _ = _split_fm(text)
    title = _fm_value(frontmatter, "title")
    if title:
        return title
    objective = _OBJECTIVE.search(body)
    if objective:
        for line in objective.group(1).split("\n"):
            if line.strip():
                line = " ".join(line.split())
                sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
                return sentence if len(sentence) <= 160 else sentence[:159].rstrip() + "…"
    for line in body.split("\n"):
        heading = _HEADING.match(line.strip())
        if heading:
            return heading.group(2).strip()
    return "(untitled plan)"


def plan_outline(text: str) -> str:
    """A pending PLAN in short: its objective's first paragraph and the names of its tasks."""
    _, body, _ = _split_fm(text)
    out = []
    objective = _OBJECTIVE.search(body)
    if objective:
        paragraph = objective.group(1).strip().split("\n\n")[0]
        out.append("Objective: " + " ".join(paragraph.split()))
    tasks = []
    for block in re.finditer(r"<task\b[^>]*>(.*?)</task>", body, re.S):
        name = _TASK_NAME.search(block.group(1))
        files = _TASK_FILES.search(block.group(1))
        if name:
            entry = " ".join(name.group(1).split())
            if files:
                entry += f" (files: {' '.join(files.group(1).split())})"
            tasks.append(entry)
    if not tasks:
        in_fence = False
        for line in body.split("\n"):
            if _FENCE.match(line):
                in_fence = not in_fence
                continue
            match = None if in_fence else _TASK_HEADING.match(line.strip())
            if match:
                tasks.append(match.group(1).strip())
    if tasks:
        out.append("Tasks:")
        out.extend(f"  - {t}" for t in tasks)
    return "\n".join(out)


def plan_body(text: str) -> str:
    """A PLAN in full for the context: the body without the YAML frontmatter, after its
    wave, depends_on and files_modified."""
    frontmatter, body, _ = _split_fm(text)
    head = []
    for key in ("wave", "depends_on", "files_modified"):
        value = _fm_value(frontmatter, key)
        if value is not None:
            head.append(f"{key}: {value}")
    return ("\n".join(head) + "\n\n" if head else "") + body.strip("\n")


def phase_plans(
    files: Mapping[str, str],
    state: GsdState,
    pending_detail: str = "outline",
) -> tuple[GsdPlan, ...]:
    """The plans of one phase folder (``files``: file name -> text) with their status.

    A PLAN with a SUMMARY is done (its SUMMARY's one-liner is shown); the plan STATE.md
    names ("Plan: A of B") is in progress unless it has a SUMMARY or STATE.md calls it
    complete; every other PLAN without a SUMMARY is pending. ``pending_detail`` is
    ``outline`` (objective and task names) or ``full``.
    """
    plans: dict[int, dict[str, Any]] = {}
    for name, text in files.items():
        match = _PLAN_FILE.match(name)
        if not match:
            continue
        number = int(match.group(2))
        entry = plans.setdefault(number, {"id": f"{match.group(1)}-{match.group(2)}"})
        entry[match.group(3)] = (name, text)
    out = []
    for number in sorted(plans):
        entry = plans[number]
        plan = entry.get("PLAN")
        summary = entry.get("SUMMARY")
        plan_lines = (1, len(_lines_of(plan[1]))) if plan else None
        if summary:
            liner, line = summary_one_liner(summary[1])
            out.append(GsdPlan(entry["id"], number, DONE, liner, plan[0] if plan else None, plan_lines,
                               summary[0], line, ""))
            continue
        title = plan_title(plan[1])
        outline = plan_outline(plan[1])
        if outline.startswith("Objective: ") and outline.split("\n", 1)[0][len("Objective: "):] == title:
            outline = outline.split("\n", 1)[1] if "\n" in outline else ""
        in_progress = state.plan == number and not state.complete
        if in_progress:
            out.append(GsdPlan(entry["id"], number, IN_PROGRESS, title, plan[0], plan_lines, None, None,
                               plan_body(plan[1])))
        else:
            detail = plan_body(plan[1]) if pending_detail == "full" else outline
            out.append(GsdPlan(entry["id"], number, PENDING, title, plan[0], plan_lines, None, None, detail))
    return tuple(out)


_BOX = {DONE: "[x]", IN_PROGRESS: "[>]", PENDING: "[ ]"}


def render_plans(plans: Sequence[GsdPlan], state: GsdState, phase_dir: str) -> str:
    """The current phase's plans: a count line, then one entry per plan."""
    counts = {DONE: 0, IN_PROGRESS: 0, PENDING: 0}
    for plan in plans:
        counts[plan.status] += 1
    out = [f"Plans: {counts[DONE]} done / {counts[IN_PROGRESS]} in progress / {counts[PENDING]} pending"]
    if state.complete and counts[PENDING]:
        out.append(
            "Note: STATE.md reports this phase complete, but the plans marked pending have no SUMMARY file."
        )
    for plan in plans:
        source = plan.summary_path if plan.status == DONE else plan.plan_path
        out.append(f"- {_BOX[plan.status]} {plan.plan_id}: {plan.title} ({source})")
        if plan.detail:
            detail = demote_headings(plan.detail, 3)
            out.append("\n".join("  " + line if line else "" for line in detail.split("\n")))
    return "\n".join(out)


# ----------------------------------------------------------------------------- the plan view


def find_phase_dir(phase: str | None, dirs: Sequence[str]) -> str | None:
    """The folder of ``phase`` among ``dirs`` (paths of phase folders): ``8.1`` finds
    ``phases/08.1-name``; an active ``phases/`` folder wins over an archived
    ``milestones/vX-phases/`` one."""
    key = phase_key(phase)
    if key is None:
        return None
    matches = [d for d in dirs if dir_phase_key(d.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]) == key]
    if not matches:
        return None
    matches.sort(key=lambda d: ("/milestones/" in d.replace("\\", "/"), d))
    return matches[0]


def gsd_view(files: Mapping[str, str], planning_dir: str, project_dir: str, pending_detail: str = "outline") -> PlanView:
    """The GSD plan section from the loaded files (path -> text; the current phase folder is
    the key ending in "/", its value the folder's file names): STATE.md's position,
    ROADMAP.md narrowed to the current milestone, and the current phase's plans."""
    sep = "/"
    state_path = planning_dir.rstrip(sep) + sep + "STATE.md"
    roadmap_path = planning_dir.rstrip(sep) + sep + "ROADMAP.md"

    def rel(path: str) -> str:
        return path[len(project_dir.rstrip(sep)) + 1 :] if path.startswith(project_dir.rstrip(sep) + sep) else path

    warnings: list[str] = []
    sources: list[Source] = []
    parts: list[str] = []
    state = GsdState()
    if state_path in files:
        state = parse_state(files[state_path], state_path)
        warnings.extend(state.warnings)
        parts.append(f"## Position ({rel(state_path)})")
        parts.append(render_state(state, state_path))
        for block in ((state.position,) if state.position else ()) + state.blocks:
            sources.append(Source("file", state_path, block.lines))
        if state.focus:
            sources.append(Source("file", state_path, (state.focus[1], state.focus[1])))
        if state.frontmatter_lines:
            sources.append(Source("file", state_path, state.frontmatter_lines))
    else:
        warnings.append(
            f"{state_path}: not found; the current position is unknown (a GSD project keeps it in .planning/STATE.md)"
        )
        parts.append("## Position")
        parts.append(position_line(state))

    view = None
    if roadmap_path in files:
        view = narrow_roadmap(files[roadmap_path], state.milestone)
        label = f"milestone {state.milestone}" if view.matched else "whole roadmap"
        parts.append("")
        parts.append(f"## Roadmap, {label} ({rel(roadmap_path)})")
        parts.append(demote_headings(view.content, 2))
        sources.extend(Source("file", roadmap_path, lines) for lines in view.kept)
        if state.milestone and not view.matched:
            warnings.append(
                f"{roadmap_path}: no block names milestone {state.milestone} (from STATE.md); the roadmap is kept whole"
            )
    else:
        warnings.append(f"{roadmap_path}: not found; the plan shows no roadmap")

    plans: tuple[GsdPlan, ...] = ()
    phase_dir = next((k for k in sorted(files) if k.endswith(sep)), None)
    if phase_dir is not None:
        folder = phase_dir.rstrip(sep)
        names = {k[len(phase_dir):]: v for k, v in files.items() if k.startswith(phase_dir) and k != phase_dir}
        plans = phase_plans(names, state, pending_detail)
        plans = tuple(
            GsdPlan(p.plan_id, p.number, p.status, p.title,
                    phase_dir + p.plan_path if p.plan_path else None, p.plan_lines,
                    phase_dir + p.summary_path if p.summary_path else None, p.summary_line, p.detail)
            for p in plans
        )
        parts.append("")
        parts.append(f"## Phase {state.phase} plans ({rel(folder)}/)")
        if plans:
            shown = render_plans(plans, state, folder)
            parts.append(_relative_paths(shown, plans, rel))
        else:
            parts.append("(no PLAN or SUMMARY files in this phase folder yet)")
        for plan in plans:
            if plan.status == DONE and plan.summary_path:
                sources.append(Source("file", plan.summary_path, (plan.summary_line or 1, plan.summary_line or 1)))
            elif plan.plan_path:
                sources.append(Source("file", plan.plan_path, plan.plan_lines))
    elif state.phase is not None:
        warnings.append(
            f"{planning_dir}: no phase folder for phase {state.phase} (looked in phases/ and milestones/*-phases/)"
        )

    data = {
        "layout": "gsd",
        "milestone": state.milestone,
        "phase": state.phase,
        "plan": state.plan,
        "status": state.status,
        "complete": state.complete,
        "frontmatter": dict(state.frontmatter),
        "tasks": tuple(p.as_dict() for p in plans),
        "folded_milestones": view.folded if view else (),
    }
    content = "\n".join(parts).strip("\n")
    found = state_path in files or roadmap_path in files
    return PlanView("gsd", found, content, tuple(sources), data, tuple(warnings), position_line(state))


def _relative_paths(text: str, plans: Sequence[GsdPlan], rel) -> str:
    for plan in plans:
        for path in (plan.plan_path, plan.summary_path):
            if path:
                text = text.replace(f"({path})", f"({rel(path)})")
    return text
