"""Small Markdown helpers shared by the stages: YAML frontmatter and headings."""

from __future__ import annotations

import re
from typing import Any

from .yamlio import YAMLError, load_yaml

_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)


class FrontmatterError(ValueError):
    """YAML frontmatter that does not parse; ``line`` is 1-based in the whole file."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, int]:
    """(metadata, body, body_start_line): YAML frontmatter between leading ``---`` lines.

    Text without frontmatter gives ({}, text, 1). Frontmatter that is not a mapping raises
    FrontmatterError with the line where YAML failed.
    """
    match = _FRONTMATTER.match(text)
    if not match:
        return {}, text, 1
    try:
        data = load_yaml(match.group(1))
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        raise FrontmatterError(f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}", line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter must be a YAML mapping (key: value lines)", 2)
    body = text[match.end():]
    return data, body, match.group(0).count("\n") + 1


def headings(text: str) -> list[tuple[int, str, int]]:
    """(level, title, 1-based line) of each ATX heading outside fenced code blocks."""
    out = []
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if not in_fence:
            match = _HEADING.match(line)
            if match:
                out.append((len(match.group(1)), match.group(2).strip(), number))
    return out


def first_heading(text: str) -> str | None:
    """The title of the first heading, or None."""
    found = headings(text)
    return found[0][1] if found else None


def slugify(title: str) -> str:
    """GitHub-style anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return slug.replace(" ", "-")


def nest_under_title(text: str, title: str, level: int = 2) -> str:
    """``text`` shaped to sit under a heading of ``level`` that already shows ``title``.

    A first heading that repeats the title is dropped, and the remaining headings are pushed
    down so the highest of them is one level below ``level`` (capped at 6). Code fences are
    left alone.
    """
    lines = text.splitlines(keepends=True)
    found = headings(text)
    if found and found[0][1].strip().lower() == title.strip().lower() and _only_blank_before(lines, found[0][2]):
        lines = lines[found[0][2]:]
        found = [(lvl, t, n - found[0][2]) for lvl, t, n in found[1:]]
    shift = (level + 1) - min((lvl for lvl, _, _ in found), default=level + 1)
    if shift > 0:
        for lvl, _, number in found:
            line = lines[number - 1]
            lines[number - 1] = "#" * min(6, lvl + shift) + line[lvl:]
    return "".join(lines).lstrip("\n")


def _only_blank_before(lines: list[str], number: int) -> bool:
    return all(not line.strip() for line in lines[: number - 1])
