"""The plans of one phase folder: a PLAN with a SUMMARY is done (its SUMMARY's one-liner is
shown), the next one shows in full, later pending ones as an outline."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..fences import fenced
from ..markdown import demote_headings
from ..regex import lazy_regex
from .common import (_BOLD_LINE, _HEADING, _OBJECTIVE, _PLAN_FILE, _SUMMARY_TITLE, _TASK_FILES, _TASK_HEADING,
                     _TASK_NAME, _fm_value, _lines_of, _split_fm)


DONE = "done"
NEXT = "next"  # the plan to work on: the one STATE.md names in progress, else the first without a SUMMARY
PENDING = "pending"


@dataclass(frozen=True)
class GsdPlan:
    """One plan of the current phase and what the context shows of it."""

    plan_id: str  # "08.1-05"
    number: int
    status: str  # done | next | pending
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


_ONE_LINER = lazy_regex(r"^\*\*One[- ]?liner:?\*\*:?\s*(.+)$", re.I)
_LABEL = lazy_regex(r"^\*\*[^*]{1,40}:\*\*|^\*\*[^*]{1,40}\*\*:|^[A-Z][\w ]{0,30}:\s")
_PLAIN = lazy_regex(r"^[^\s\-*+|>#<\d`!\[]")


def _first_sentence(line: str, width: int = 200) -> str:
    sentence = re.split(r"(?<=[.!?])\s", " ".join(line.split()), maxsplit=1)[0]
    return sentence if len(sentence) <= width else sentence[: width - 1].rstrip() + "…"


def summary_one_liner(text: str) -> tuple[str, int]:
    """A SUMMARY's one-liner and its line: frontmatter ``one_liner``, else (before the first
    ``##`` heading after the title) a ``**One-liner:** ...`` line or a line bold as a whole,
    else the first sentence of the first plain paragraph, else the title without its "Phase N
    Plan M" prefix."""
    frontmatter, _, start = _split_fm(text)
    said = next((value for value in (_fm_value(frontmatter, k) for k in ("one_liner", "one-liner", "oneliner"))
                 if value), None)
    if said:
        return said, 1
    found, title, title_line = _body_one_liner(_lines_of(text), start)
    if found:
        return found
    if title:
        short = _SUMMARY_TITLE.sub("", title).strip()
        return (short or title), title_line
    return "(SUMMARY without a title)", 1


def _body_one_liner(lines: list[str], start: int) -> tuple[tuple[str, int] | None, str | None, int]:
    """(one-liner and its line, or None; the title; its line) from the body from line ``start``
    to the first ``#`` / ``##`` heading after the title: a labelled or bold one-liner, else the
    first sentence of the first plain paragraph after the title."""
    title, title_line = None, start
    code = fenced(lines[start - 1:])
    paragraph = None
    for i in range(start - 1, len(lines)):
        line = lines[i].strip()
        if code[i - start + 1] or not line:
            continue
        heading = _HEADING.match(line)
        if heading and title is None:
            title, title_line = heading.group(2).strip(), i + 1
        elif heading and heading.group(1) in ("#", "##"):
            break
        elif not heading:
            marked = _marked_one_liner(line)
            if marked is not None:
                return (marked, i + 1), title, title_line
            if title is not None and paragraph is None and _PLAIN.match(line) and not _LABEL.match(line):
                paragraph = (_first_sentence(line), i + 1)  # used when no bold or labelled one-liner follows
    return paragraph, title, title_line


def _marked_one_liner(line: str) -> str | None:
    """The one-liner a line marks as such: ``**One-liner:** ...``, or a line bold as a whole (not a
    bold label ending in a colon); None otherwise."""
    labelled = _ONE_LINER.match(line)
    if labelled:
        return labelled.group(1).strip()
    bold = _BOLD_LINE.match(line)
    if bold and ":" not in bold.group(1)[-2:]:
        return bold.group(1).strip()
    return None


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
        lines = body.split("\n")
        for line, code in zip(lines, fenced(lines, elements=True)):
            match = None if code else _TASK_HEADING.match(line.strip())
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
    next_plan: str | None,
    pending_detail: str = "outline",
    phase_complete: bool = False,
) -> tuple[GsdPlan, ...]:
    """The plans of one phase folder (``files``: file name -> text) with their status.

    A PLAN with a SUMMARY is done (its SUMMARY's one-liner is shown); ``next_plan`` (the
    position's plan id) is shown in full; every other PLAN without a SUMMARY is pending, shown
    as ``pending_detail``: ``outline`` (objective and task names) or ``full`` — unless the
    position found the phase complete (``phase_complete``: STATE.md and the roadmap say so,
    their SUMMARYs were not committed), then it is done, under its title.
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
        if phase_complete:
            out.append(GsdPlan(entry["id"], number, DONE, f"{title} (no SUMMARY committed)", plan[0], plan_lines,
                               None, None, ""))
            continue
        if entry["id"] == next_plan:
            out.append(GsdPlan(entry["id"], number, NEXT, title, plan[0], plan_lines, None, None, plan_body(plan[1])))
            continue
        outline = plan_outline(plan[1])
        if outline.startswith("Objective: ") and outline.split("\n", 1)[0][len("Objective: "):] == title:
            outline = outline.split("\n", 1)[1] if "\n" in outline else ""
        detail = plan_body(plan[1]) if pending_detail == "full" else outline
        out.append(GsdPlan(entry["id"], number, PENDING, title, plan[0], plan_lines, None, None, detail))
    return tuple(out)


_BOX = {DONE: "[x]", NEXT: "[>]", PENDING: "[ ]"}


def render_plans(plans: Sequence[GsdPlan]) -> str:
    """The current phase's plans: a count line, then one entry per plan (done ones as their
    SUMMARY's one-liner, the next one in full, later pending ones as ``detail``)."""
    counts = {DONE: 0, NEXT: 0, PENDING: 0}
    for plan in plans:
        counts[plan.status] += 1
    out = [f"Plans: {counts[DONE]} done / {counts[NEXT]} next / {counts[PENDING]} pending"]
    for plan in plans:
        source = plan.summary_path if plan.status == DONE else plan.plan_path
        label = " (next)" if plan.status == NEXT else ""
        out.append(f"- {_BOX[plan.status]} {plan.plan_id}{label}: {plan.title} ({source})")
        if plan.detail:
            detail = demote_headings(plan.detail, 3)
            out.append("\n".join("  " + line if line else "" for line in detail.split("\n")))
    return "\n".join(out)
