"""A reference document's text: frontmatter and body, its @ lines (outside fenced code), the
body without the lines that became sections of their own, and its title and priority."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from ..digest import digest16
from ..fences import fenced
from ..markdown import FrontmatterError, first_heading, frontmatter_block, split_frontmatter
from ..memo import NO_MEMO, Memo
from ..quote import quoted
from .targets import is_http_url, is_reference_token

#: The memo kind of a parsed document (:func:`parsed_document`).
PARSED = "document"


@dataclass(frozen=True)
class ParsedDocument:
    """A document's text split into metadata and body, with the line the body starts on."""

    metadata: Mapping[str, Any]
    body: str
    body_start: int
    last_line: int
    warning: str | None = None


def parse_document(text: str, display: str) -> ParsedDocument:
    """Frontmatter as metadata and the body; bad frontmatter is a warning (file:line) and the
    document is used without metadata (its frontmatter block still left out of the body)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    last_line = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    try:
        metadata, body, start = split_frontmatter(text)
        return ParsedDocument(dict(metadata), body, start, max(last_line, start))
    except FrontmatterError as exc:
        where = f"{display}:{exc.line}" if exc.line else display
        _, body, start = frontmatter_block(text)
        warning = f"{where}: {exc}; the document is used without metadata"
        return ParsedDocument({}, body, start, max(last_line, start), warning)


def parsed_document(text: str, display: str, memo: Memo = NO_MEMO) -> ParsedDocument:
    """:func:`parse_document`, kept in ``memo`` by the digest of the text and of the name its
    warning shows, in this process only (parsing again is cheaper than reading a row): a warm
    build does not parse the YAML frontmatter of a document that did not change."""
    key = digest16(text.encode("utf-8", "surrogatepass"), display.encode("utf-8", "surrogatepass"))
    return memo.get(PARSED, key, lambda: parse_document(text, display), persist=False, size=len(text))


def at_references(body: str, first_line: int = 1) -> list[tuple[int, str]]:
    """(file line, target) of each ``@target`` line of a body, outside fenced code blocks.

    The target is the first word after the @; words after it are a note and are ignored.
    ``first_line`` is the file line the body starts on (after frontmatter).
    """
    found = []
    lines = body.split("\n")
    code = fenced(lines, strict=True)
    for offset, line in enumerate(lines):
        if code[offset] or not line.startswith("@"):
            continue
        words = line[1:].split(None, 1)
        token = words[0] if words and not line[1:2].isspace() else ""
        if is_reference_token(token):
            found.append((first_line + offset, token))
    return found


def without_lines(body: str, first_line: int, drop: Iterable[int]) -> str:
    """The body without the given file lines (each removed whole, newline included)."""
    dropped = set(drop)
    if not dropped:
        return body
    lines = body.split("\n")
    return "\n".join(line for offset, line in enumerate(lines) if first_line + offset not in dropped)


def title_for(metadata: Mapping[str, Any], body: str, fallback: str) -> str:
    """Frontmatter ``title``, else the first heading, else the file name."""
    title = metadata.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return first_heading(body) or fallback


def fallback_title(display: str) -> str:
    """The file name of a path or URL (``builtin:x`` -> ``x``)."""
    if display.startswith("builtin:"):
        return display[len("builtin:"):]
    if is_http_url(display):
        parts = urlsplit(display)
        return posixpath.basename(parts.path.rstrip("/")) or parts.netloc
    return posixpath.basename(display.rstrip("/")) or display


def priority_for(metadata: Mapping[str, Any], default: int, display: str) -> tuple[int, str | None]:
    """Frontmatter ``priority`` (an integer 0-100) or the group default, with a warning if bad."""
    if "priority" not in metadata:
        return default, None
    value = metadata["priority"]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100:
        return value, None
    return default, f"{display}: frontmatter priority {quoted(value)} is not an integer 0-100; using {default}"
