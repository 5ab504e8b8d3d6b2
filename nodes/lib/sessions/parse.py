"""A session file of any format read into a :class:`~.history.SessionHistory`: the format
detected from its name and content (:func:`detect_format`), then its parser."""

from __future__ import annotations

import os

from ..memo import NO_MEMO, Memo
from .history import AIDER, JSONL, SessionHistory


def detect_format(path: str, text: str) -> str:
    """``aider`` for an aider chat history (by name or content), else ``jsonl``."""
    name = os.path.basename(path)
    if name.endswith(".md") or "aider" in name:
        return AIDER
    head = text.lstrip()[:1]
    if head == "{":
        return JSONL
    if "# aider chat started at" in text[:65536] or "\n#### " in text[:65536]:
        return AIDER
    return JSONL


def parse_session(text: str, path: str, fmt: str | None = None, memo: Memo = NO_MEMO, digest: bytes | None = None,
                  grew_from: tuple[int, bytes] | None = None) -> SessionHistory:
    """Parse a session file of either format (``fmt`` None: detect it); what ``memo`` keeps
    (the reading of a line, the parse of a round's stretch) is not made again. ``digest`` and
    ``grew_from``: what the caller knows of the text (a :class:`.history.SessionText`'s)."""
    fmt = fmt or detect_format(path, text)
    # The parser of the format read is imported here: a project without a transcript loads none.
    if fmt == AIDER:
        from .aider import parse_aider
        return parse_aider(text, path, memo, digest, grew_from)
    from .jsonl import parse_jsonl
    return parse_jsonl(text, path, memo)
