"""Quoting user input inside error and warning messages, cut to a readable length."""

from __future__ import annotations

from typing import Any

QUOTE_LIMIT = 300  # characters of a quoted value shown in a message


def quoted(value: Any, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)``, cut to about ``limit`` characters with a note of the full length, so a
    message that quotes a huge value stays short."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters in all)"
