"""Small Markdown helpers shared by the stages: YAML frontmatter and headings (fenced code
blocks are read by :mod:`.fences`)."""

from __future__ import annotations

import re
from typing import Any

from ..types import CtxEngineError
from .fences import fenced
from .regex import lazy_regex
from .yamlio import YAMLError, load_yaml

_FRONTMATTER = lazy_regex(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_HEADING = lazy_regex(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_HEADING_LINE = lazy_regex(r"^( {0,3})(#{1,6})([ \t].*|)$")


class FrontmatterError(CtxEngineError, ValueError):
    """YAML frontmatter that does not parse; ``line`` is 1-based in the whole file."""

    def __init__(self, message: str, line: int | None):
        super().__init__(message)
        self.line = line


def frontmatter_block(text: str) -> tuple[str | None, str, int]:
    """(raw frontmatter or None, body, body_start_line), without parsing the YAML."""
    match = _FRONTMATTER.match(text)
    if not match:
        return None, text, 1
    return match.group(1), text[match.end():], match.group(0).count("\n") + 1


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, int]:
    """(metadata, body, body_start_line): YAML frontmatter between leading ``---`` lines.

    Text without frontmatter gives ({}, text, 1). Frontmatter that is not a mapping raises
    FrontmatterError with the line where YAML failed.
    """
    raw, body, start = frontmatter_block(text)
    if raw is None:
        return {}, text, 1
    try:
        data = load_yaml(raw)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else None
        raise FrontmatterError(f"frontmatter is not valid YAML: {getattr(exc, 'problem', exc)}", line) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # YAML that scans but whose values do not construct (a date like 2021-13-45, !!int 0x_)
        raise FrontmatterError(f"frontmatter has a value YAML cannot read ({exc}); quote it", 2) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter must be a YAML mapping (key: value lines)", 2)
    return data, body, start


def headings(text: str, limit: int | None = None) -> list[tuple[int, str, int]]:
    """(level, title, 1-based line) of each ATX heading outside fenced code blocks (the first
    ``limit`` of them when given)."""
    out = []
    lines = text.splitlines()
    code = fenced(lines)
    for number, line in enumerate(lines, 1):
        if not code[number - 1] and line.startswith("#"):
            match = _HEADING.match(line)
            if match:
                out.append((len(match.group(1)), match.group(2).strip(), number))
                if limit is not None and len(out) >= limit:
                    break
    return out


def first_heading(text: str) -> str | None:
    """The title of the first heading, or None."""
    found = headings(text, limit=1)
    return found[0][1] if found else None


def slugify(title: str) -> str:
    """GitHub-style anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return slug.replace(" ", "-")


def demote_headings(text: str, levels: int) -> str:
    """Markdown headings pushed ``levels`` deeper (at most ``######``), code fences left alone,
    so a file's own ``# Title`` nests under the section heading the template writes."""
    if levels <= 0:
        return text
    out = []
    lines = text.split("\n")
    for line, code in zip(lines, fenced(lines)):
        if not code:
            match = _HEADING_LINE.match(line)
            if match:
                level = min(6, len(match.group(2)) + levels)
                line = match.group(1) + "#" * level + match.group(3)
        out.append(line)
    return "\n".join(out)



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
    return demote_headings("".join(lines), shift).lstrip("\n")


def _only_blank_before(lines: list[str], number: int) -> bool:
    return all(not line.strip() for line in lines[: number - 1])
