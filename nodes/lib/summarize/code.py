"""Fenced code in a summary: which lines define something (kept before the body of a block) and
a block rendered from some of its lines, fences closed, a marker where lines were left out."""

from __future__ import annotations

import re
from typing import Sequence

from ..fences import fence_line
from ..regex import lazy_regex

# a line that defines a name: def / class / function / interface / type / struct / fn / func /
# impl / trait / enum ... after modifiers (export, pub, async, public, static ...), an export, or
# SQL's CREATE TABLE / VIEW / FUNCTION
_DEFINITION = lazy_regex(
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


def code_line_order(blocks: Sequence[Sequence[tuple[int, str]]]) -> tuple[list[int], list[int], list[int]]:
    """The order code lines are kept in, for ``blocks`` (per fenced block, its non-blank body
    lines as (id, text)): (the first line of each block, every other definition line
    (:func:`definition_line`) of every block, the other lines from the top of each block with
    the blocks in step, by the share of their lines already taken)."""
    firsts: list[int] = []
    definitions: list[int] = []
    others: list[tuple[float, int]] = []
    for block in blocks:
        if not block:
            continue
        firsts.append(block[0][0])
        rest = []
        for uid, text in block[1:]:
            (definitions if definition_line(text) else rest).append(uid)
        others.extend(((k + 1) / (len(rest) + 1), uid) for k, uid in enumerate(rest))
    return firsts, definitions, [uid for _, uid in sorted(others)]


def gap_marker(count: int, indent: str = "") -> str:
    """The line that stands for ``count`` code lines left out of a block."""
    return f"{indent}⋮ {count} line{'s' if count != 1 else ''} left out"


def _nested_pairs(body: Sequence[str]) -> list[tuple[int, int]]:
    """(opening, closing) line indices of the nested examples in a block's ``body``: a fence
    line with an info string and the next bare fence line of the same character, at least as
    long (see :mod:`~ctxengine.nodes.lib.fences`)."""
    pairs, stack = [], []
    for k, line in enumerate(body):
        found = fence_line(line)
        if found is None:
            continue
        if found[2]:
            stack.append((k, found[1]))
        elif stack and stack[-1][1][0] == found[1][0] and len(found[1]) >= len(stack[-1][1]):
            pairs.append((stack.pop()[0], k))
    return pairs


def render_code(opening: str, closing: str, body: Sequence[str], kept: Sequence[bool]) -> str:
    """A fenced block with only the ``kept`` lines of ``body`` (blank lines stay between kept
    neighbours), a :func:`gap_marker` for each run of left-out lines, and its closing fence.
    A nested example's fence lines come as a pair: one kept brings the other."""
    kept = list(kept)
    for a, b in _nested_pairs(body):
        kept[a] = kept[b] = kept[a] or kept[b]
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
