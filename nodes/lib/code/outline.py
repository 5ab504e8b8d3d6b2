"""A file shown whole or as an outline: the lines that define something, numbered, in the file's
order, with ``⋮`` where lines are left out (aider's repo-map style)::

    src/models.py
    ⋮
      12│class Order:
      30│    def total(self) -> int:
    ⋮

Levels of detail, largest first: ``full`` (the text, fenced), ``outline`` (every definition
line), ``top`` (the definitions that start a line at the least indentation: classes and
top-level functions), ``name`` (the path alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .tags import Definition

LEVELS = ("full", "outline", "top", "name")
GAP = "⋮"
MAX_LINE_CHARS = 160


@dataclass(frozen=True)
class Shown:
    """One file as shown: its path, level, rendered text and the 1-based line range it shows
    (None for the name alone)."""

    path: str
    level: str
    text: str
    lines: tuple[int, int] | None


def _fence(text: str) -> str:
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def full_text(path: str, text: str, language: str | None) -> str:
    """``path`` and its whole text in a code fence (longer than any backtick run inside)."""
    fence = _fence(text)
    return f"{path}\n{fence}{language or ''}\n{text.rstrip(chr(10))}\n{fence}"


def definition_lines(definitions: Sequence[Definition], source_lines: Sequence[str], top_only: bool = False) -> list[int]:
    """The 1-based lines to show for ``definitions`` (each once, in order); ``top_only``: only
    those at the smallest indentation among them."""
    lines = sorted({d.line for d in definitions if 1 <= d.line <= len(source_lines)})
    if top_only and lines:
        indents = {n: len(source_lines[n - 1]) - len(source_lines[n - 1].lstrip()) for n in lines}
        least = min(indents.values())
        lines = [n for n in lines if indents[n] == least]
    return lines


def outline_text(path: str, source_lines: Sequence[str], shown: Sequence[int]) -> str:
    """``path`` then the ``shown`` lines numbered (``  12│...``), ``⋮`` for each gap (before the
    first, between, after the last)."""
    out = [path]
    width = len(str(len(source_lines)))
    previous = 0
    for number in shown:
        if number > previous + 1:
            out.append(GAP)
        line = source_lines[number - 1].rstrip()
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " …"
        out.append(f"{number:>{width}}│{line}")
        previous = number
    if previous < len(source_lines):
        out.append(GAP)
    return "\n".join(out)


def shown_file(path: str, text: str, language: str | None, definitions: Sequence[Definition], level: str) -> Shown:
    """``path`` at ``level`` (one of :data:`LEVELS`); an outline with no definition line to show
    is the name alone."""
    source_lines = text.split("\n")
    if source_lines and source_lines[-1] == "":
        source_lines.pop()
    if level == "full":
        return Shown(path, "full", full_text(path, text, language), (1, len(source_lines)) if source_lines else None)
    if level in ("outline", "top"):
        lines = definition_lines(definitions, source_lines, top_only=level == "top")
        if lines:
            return Shown(path, level, outline_text(path, source_lines, lines), (lines[0], lines[-1]))
    return Shown(path, "name", path, None)
