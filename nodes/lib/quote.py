"""Quoting user input inside error and warning messages, cut to a readable length; a build's
warnings capped per kind."""

from __future__ import annotations

from typing import Any, Iterable

from .regex import lazy_regex

QUOTE_LIMIT = 300  # characters of a quoted value shown in a message


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to about ``limit`` characters with a note of the full length, so a
    message that quotes a huge value stays short."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters in all)"


#: Warnings of one kind shown before the rest are counted (see :func:`capped_warnings`).
WARNINGS_PER_KIND = 5
#: What varies between warnings of one kind: numbers (line numbers, sizes) and quoted values.
_VARIES = lazy_regex(r"[0-9]+|'[^'\n]*'|\"[^\"\n]*\"")


def warning_kind(warning: str) -> str:
    """``warning`` with its numbers and quoted values as ``#``: "log:12: 'x' skipped" and
    "log:13: 'y' skipped" are one kind."""
    return _VARIES.sub("#", warning)


def capped_warnings(warnings: Iterable[str], per_kind: int = WARNINGS_PER_KIND, source: str = "") -> tuple[str, ...]:
    """``warnings`` without repeats, in order, at most ``per_kind`` of each :func:`warning_kind`;
    the rest of a kind are one "... and N more like this" (after ``source: `` when given: the
    file they all came from) right after the last one shown, so
    400,000 bad lines of a session log give a few lines, not 400,000 (on stderr, in the JSON,
    in an MCP reply). Linear in the number of warnings."""
    shown: list[str] = []
    counts: dict[str, int] = {}
    last: dict[str, int] = {}  # kind -> index in shown of its last warning shown
    for warning in dict.fromkeys(warnings):
        kind = warning_kind(warning)
        counts[kind] = counts.get(kind, 0) + 1
        if counts[kind] <= per_kind:
            last[kind] = len(shown)
            shown.append(warning)
    more = {last[kind]: count - per_kind for kind, count in counts.items() if count > per_kind}
    out: list[str] = []
    for index, warning in enumerate(shown):
        out.append(warning)
        if index in more:
            out.append(f"{source}: " * bool(source) + f"... and {more[index]:,} more like this")
    return tuple(out)
