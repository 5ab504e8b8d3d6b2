"""The article layout's plan (``.planning/plans/current/plan.md``): tasks with a status box.

LAYOUT.md: tasks are list items with a box, ``[x]`` completed, ``[>]`` in progress, ``[ ]``
pending, ``[-]`` cancelled; indented lines under a task belong to it. ``[~]`` and ``[/]``
(the "partly done" boxes of other task-list conventions) read as in progress too. This is the
one task-box parser: :func:`task_boxes` serves the plan stage and the plan summary alike. In the context an
in-progress or pending task keeps its detail, a completed (or cancelled) one keeps only its
first line, and a count line says how many tasks are in each state. Pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from ..types import Source
from .fences import fenced
from .markdown import demote_headings, frontmatter_block
from .regex import lazy_regex

DONE = "done"
IN_PROGRESS = "in_progress"
PENDING = "pending"
CANCELLED = "cancelled"
STATUSES = (DONE, IN_PROGRESS, PENDING, CANCELLED)

_MARKS = {"x": DONE, "X": DONE, ">": IN_PROGRESS, "~": IN_PROGRESS, "/": IN_PROGRESS, " ": PENDING, "-": CANCELLED}
_TASK = lazy_regex(r"^([ \t]*)(?:[-*+]|\d+[.)])[ \t]+\[(.)\][ \t]*(.*)$")
_TASK_ID = lazy_regex(r"^([A-Za-z]{1,5}-?\d+(?:\.\d+)*)\b[:.)]?")
_H1 = lazy_regex(r"^#[ \t]+(.+?)[ \t#]*$")


@dataclass(frozen=True)
class PlanTask:
    """One task of plan.md: its status, first line and the 1-based line range it spans."""

    status: str
    title: str  # the first line without list marker and box
    task_id: str | None
    lines: tuple[int, int]
    depth: int = 0  # 0 for a top-level task, 1 for a task nested in another, ...

    def as_dict(self) -> dict:
        return {"id": self.task_id, "title": self.title, "status": self.status, "lines": self.lines}


@dataclass(frozen=True)
class ArticlePlan:
    """plan.md parsed and rendered for the context."""

    title: str | None
    tasks: tuple[PlanTask, ...]
    content: str
    counts: Mapping[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def count_line(self) -> str:
        return count_line(self.counts)


def count_line(counts: Mapping[str, int]) -> str:
    """``Tasks: 1 done / 1 in progress / 1 pending / 0 cancelled``."""
    return (
        f"Tasks: {counts.get(DONE, 0)} done / {counts.get(IN_PROGRESS, 0)} in progress / "
        f"{counts.get(PENDING, 0)} pending / {counts.get(CANCELLED, 0)} cancelled"
    )


def _indent_width(text: str) -> int:
    return len(text.expandtabs(4)) - len(text.expandtabs(4).lstrip())


@dataclass(frozen=True)
class TaskBox:
    """A task line of a plan: 0-based index of its line, its indent, box mark, status (None
    for an unknown mark), text after the box, and the 0-based index of its last line (its
    detail: the lines after it indented deeper, blank lines between them included)."""

    index: int
    indent: int
    mark: str
    status: str | None
    text: str
    end: int


def task_boxes(lines: list[str], start: int = 0) -> list[TaskBox]:
    """Every task line of ``lines`` from ``start`` on, outside code fences, with its extent
    (nested tasks included, inside the extent of their parent)."""
    code = fenced(lines[start:], elements=True)
    found: list[tuple[int, int, str, str]] = []
    for i in range(start, len(lines)):
        line = lines[i]
        match = None if code[i - start] else _TASK.match(line)
        if match:
            found.append((i, _indent_width(match.group(1)), match.group(2), match.group(3).strip()))
    boxes = []
    for i, indent, mark, rest in found:
        end = i
        for j in range(i + 1, len(lines)):
            if not lines[j].strip():
                continue
            if _indent_width(lines[j]) <= indent:
                break
            end = j
        boxes.append(TaskBox(i, indent, mark, _MARKS.get(mark), rest, end))
    return boxes


def parse_plan(text: str, path: str = "plan.md") -> ArticlePlan:
    """Tasks of plan.md, and the plan rendered with completed tasks cut to their first line."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    raw, _, body_line = frontmatter_block("\n".join(lines))
    skip_to = body_line - 1 if raw is not None else 0  # YAML frontmatter is not part of the rendered plan
    warnings: list[str] = []
    tasks = _plan_tasks(lines, skip_to, path, warnings)
    counts = _status_counts(tasks)
    title, content = _rendered_plan(lines, skip_to, _dropped_lines(tasks), count_line(counts))
    return ArticlePlan(title, tuple(tasks), content, counts, tuple(warnings))


def _plan_tasks(lines: list[str], skip_to: int, path: str, warnings: list[str]) -> list[PlanTask]:
    """The tasks of the plan's lines from ``skip_to`` on, with their depth (nesting); an unknown
    box reads as pending, with a warning naming its line."""
    tasks: list[PlanTask] = []
    stack: list[int] = []  # indents of the open tasks, for depth
    for box in task_boxes(lines, skip_to):
        status = box.status
        if status is None:
            warnings.append(
                f"{path}:{box.index + 1}: unknown task box [{box.mark}]; read as pending "
                "(use [x] done, [>] in progress, [ ] pending, [-] cancelled)"
            )
            status = PENDING
        while stack and stack[-1] >= box.indent:
            stack.pop()
        depth = len(stack)
        stack.append(box.indent)
        id_match = _TASK_ID.match(box.text)
        tasks.append(PlanTask(status, box.text, id_match.group(1) if id_match else None,
                              (box.index + 1, box.end + 1), depth))
    return tasks


def _status_counts(tasks: list[PlanTask]) -> dict[str, int]:
    """How many tasks are in each status (every status, zero included)."""
    counts = {status: 0 for status in STATUSES}
    for task in tasks:
        counts[task.status] += 1
    return counts


def _dropped_lines(tasks: list[PlanTask]) -> set[int]:
    """The 0-based indexes of the detail lines of completed and cancelled tasks (all their lines
    but the first)."""
    return {index for task in tasks if task.status in (DONE, CANCELLED) for index in range(*task.lines)}


def _rendered_plan(lines: list[str], skip_to: int, dropped: set[int], counts: str) -> tuple[str | None, str]:
    """(title, content) of the plan: its lines from ``skip_to`` on without the ``dropped`` ones,
    the count line under the first ``# `` title outside code (or on top when there is none)."""
    code = fenced(lines[skip_to:], elements=True)  # lines of code blocks (never a title)
    title = None
    out: list[str] = []
    for i in range(skip_to, len(lines)):
        if i in dropped:
            continue
        out.append(lines[i])
        heading = _H1.match(lines[i]) if title is None and not code[i - skip_to] else None
        if heading:
            title = heading.group(1).strip()
            out.extend(["", counts, ""])
    if title is None:
        out[:0] = [counts, ""]
    return title, re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n")


# ----------------------------------------------------------------------------- the plan view


@dataclass(frozen=True)
class PlanView:
    """What the plan section shows, for either layout: content, sources, structure, warnings."""

    layout: str  # article | gsd
    found: bool  # a plan was there to read
    content: str = ""
    sources: tuple[Source, ...] = ()
    data: Mapping = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    position: str | None = None  # gsd: the current position line


def article_view(text: str, path: str) -> PlanView:
    """The article layout's plan.md as the plan section shows it."""
    plan = parse_plan(text, path)
    total = len(text.replace("\r\n", "\n").rstrip("\n").split("\n")) if text else 0
    sources = [Source("file", path, (1, total) if total else None)]
    sources.extend(Source("file", path, task.lines) for task in plan.tasks if task.status in (IN_PROGRESS, PENDING))
    data = {
        "layout": "article",
        "title": plan.title,
        "tasks": tuple(task.as_dict() for task in plan.tasks),
        "counts": dict(plan.counts),
    }
    content = demote_headings(plan.content, 1)
    return PlanView("article", True, content, tuple(sources), data, plan.warnings, plan.count_line)
