"""Cutting text only where a reader keeps its sense: whole code lines, @ lines and table rows,
sentence or word ends in prose, fenced blocks closed."""

from __future__ import annotations


from ..fences import fence_line, open_block
from ..regex import lazy_regex
from ..sentences import sentence_spans

_WHOLE_LINE = lazy_regex(r"^[ \t]*(?:@\S|\|)")  # an @ reference line, a markdown table row


def open_fence(text: str) -> str | None:
    """The opening line of the fenced code block that ``text`` ends inside, or None (read by
    :func:`~ctxengine.nodes.lib.fences.fences`: nested examples, tildes, longer fences)."""
    lines = text.split("\n")
    block = open_block(lines)
    return lines[block.start] if block is not None else None


def closing_fence(opening: str) -> str:
    """The line that closes the fenced block ``opening`` opens (same indentation and fence)."""
    indent, run, _ = fence_line(opening)
    return indent + run


def whole_line_only(line: str, in_fence: bool = False) -> bool:
    """Whether ``line`` may only be kept whole or not at all: a line of a fenced code block
    (``in_fence``) or a fence, an ``@`` reference line, a markdown table row."""
    return in_fence or fence_line(line) is not None or bool(_WHOLE_LINE.match(line))


def prose_cut(line: str, limit: int) -> int:
    """Where to cut the prose ``line`` at or before ``limit`` characters: after the last
    sentence that ends there, else after the last whole word; 0 when there is neither."""
    ends = [b for _, b in sentence_spans(line) if b <= limit and b < len(line.rstrip())]
    if ends:
        return ends[-1]
    space = line.rfind(" ", 0, limit + 1)
    return space if space > 0 else 0


def safe_prefix(text: str, end: int) -> str:
    """``text[:end]`` cut back so that it never ends inside a line it may only keep whole
    (code, ``@`` line, table row: back to the line start) nor inside a prose sentence when
    one ends earlier on the line (see :func:`prose_cut`); a fenced block left open is closed."""
    if end < len(text) and text[end:end + 1] != "\n":
        start = text.rfind("\n", 0, end) + 1
        line_end = text.find("\n", start)
        line = text[start: len(text) if line_end < 0 else line_end]
        if whole_line_only(line, open_fence(text[:start]) is not None):
            end = start
        else:
            end = start + prose_cut(line, end - start)
    prefix = text[:end].rstrip()
    fence = open_fence(prefix)
    return prefix + "\n" + closing_fence(fence) if fence is not None else prefix


def safe_suffix(text: str, start: int) -> str:
    """``text[start:]`` moved on to the next line start when ``start`` is inside a line; a
    fenced block it starts inside gets its opening line back."""
    if 0 < start < len(text) and text[start - 1] != "\n":
        newline = text.find("\n", start)
        start = len(text) if newline < 0 else newline + 1
    suffix = text[start:].lstrip("\n")
    fence = open_fence(text[:start])
    return fence + "\n" + suffix if fence is not None and suffix else suffix
