"""Fenced code in a summary: which lines define something (kept before the body of a block) and
a block rendered from some of its lines, fences closed, a marker where lines were left out."""

from __future__ import annotations

import re
from typing import Sequence

# a line that defines a name: def / class / function / interface / type / struct / fn / func /
# impl / trait / enum ... after modifiers (export, pub, async, public, static ...), an export, or
# SQL's CREATE TABLE / VIEW / FUNCTION
_DEFINITION = re.compile(
    r"^[ \t]*(?:@?(?:export|default|public|private|protected|internal|static|abstract|final|async|"
    r"pub(?:\([\w:]+\))?|unsafe|extern|override|open|data|sealed|declare|inline|virtual)[ \t]+)*"
    r"(?:(?:def|class|function\*?|interface|struct|enum|trait|impl|fn|func|fun|module|mod|namespace|"
    r"object|protocol|record|union|macro_rules!)\b|type[ \t]+[A-Za-z_]|export\b)"
    r"|^[ \t]*create[ \t]+(?:or[ \t]+replace[ \t]+)?(?:table|view|function|procedure|index|type)\b",
    re.I,
)


def definition_line(line: str) -> bool:
    """Whether ``line`` of code defines a name (``def``, ``class``, ``function``, ``export``,
    ``interface``, ``type``, ``struct``, ``fn``, ``func``, ``impl`` ...)."""
    return bool(_DEFINITION.match(line))


def gap_marker(count: int, indent: str = "") -> str:
    """The line that stands for ``count`` code lines left out of a block."""
    return f"{indent}⋮ {count} line{'s' if count != 1 else ''} left out"


def render_code(opening: str, closing: str, body: Sequence[str], kept: Sequence[bool]) -> str:
    """A fenced block with only the ``kept`` lines of ``body`` (blank lines stay between kept
    neighbours), a :func:`gap_marker` for each run of left-out lines, and its closing fence."""
    out = [opening]
    skipped = 0
    skipped_indent = ""
    pending_blank = 0
    for line, keep in zip(body, kept):
        if not line.strip():
            if skipped:
                continue
            pending_blank += 1
            continue
        if keep:
            if skipped:
                out.append(gap_marker(skipped, skipped_indent))
                skipped = 0
            elif pending_blank and len(out) > 1:
                out.extend([""] * pending_blank)
            pending_blank = 0
            out.append(line)
        else:
            if not skipped:
                skipped_indent = line[: len(line) - len(line.lstrip())]
            skipped += 1
            pending_blank = 0
    if skipped:
        out.append(gap_marker(skipped, skipped_indent))
    out.append(closing)
    return "\n".join(out)
