"""Texts that grow: a file read again after something was appended costs only its new part.

An agent's transcript is read at every turn and has only grown since the last one. The process
keeps, per file, the bytes it read, the text it made of them and the SHA-256 state of that
text; when the file's bytes start with the bytes kept (one memory comparison), only the new
bytes are cleaned and decoded, the text is the old one plus theirs, and its digest
(:func:`~.digest.text_digest`) extends the kept state: it is given with the text, so neither
the cache's fingerprint of a 4 MB transcript nor its parser hashes it again. The text stays a
plain ``str`` (a :class:`~.digest.DigestedText` is made by copying its text: a second 16 MB
allocation for a 4 MB transcript holding one emoji, whose page faults cost a warm build about
7 ms). A prefix is re-used only where splitting cannot change the result: it ends with a
newline and no escape sequence runs to its end (``safe``, given by the caller who knows its
cleaning).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Callable

from cachetools import LRUCache

MIN_BYTES = 256 << 10  # smaller files are read whole: the re-use would not pay for the bytes kept
MAX_FILES = 8


@dataclass(frozen=True)
class _Kept:
    raw: bytes
    text: str
    digest: bytes  # the text's text_digest
    removed: int
    state: Any  # the hashlib sha256 object over the text's UTF-8 bytes
    safe: bool  # whether ``raw`` may be re-used as a prefix


class GrownTexts:
    """The last :data:`MAX_FILES` large files read, by key (their real path)."""

    def __init__(self, max_files: int = MAX_FILES, min_bytes: int = MIN_BYTES) -> None:
        self.min_bytes = min_bytes
        self._lock = threading.Lock()
        self._kept: LRUCache = LRUCache(maxsize=max_files)

    def text(self, key: str, data: bytes, make: Callable[[bytes], tuple[str, int, bytes | None]],
             safe: Callable[[bytes], bool]) -> tuple[str, int, bytes, tuple[int, bytes] | None]:
        """(text, removed, the text's :func:`~.digest.text_digest`, the length and digest of the
        text read before that it begins with, or None) of ``data``: ``make(data)``, or, when
        ``data`` grew from the bytes kept under ``key``, the kept text plus ``make`` of the new
        bytes only. ``make`` gives (text, removed, the text's UTF-8 bytes when it has them at
        hand, else None). A file under :attr:`min_bytes` is read whole, its digest not given (None)."""
        if len(data) < self.min_bytes:
            return (*make(data)[:2], None, None)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and len(data) == len(kept.raw) and data == kept.raw:  # unchanged: its digest known
                return kept.text, kept.removed, kept.digest, (len(kept.text), kept.digest)
        if kept is not None and kept.safe and len(data) > len(kept.raw) and data.startswith(kept.raw):
            tail, removed, utf8 = make(data[len(kept.raw):])
            state = kept.state.copy()
            state.update(_utf8(tail, utf8))
            text, removed, grew_from = kept.text + tail, kept.removed + removed, (len(kept.text), kept.digest)
        else:
            text, removed, utf8 = make(data)
            state, grew_from = hashlib.sha256(_utf8(text, utf8)), None
        digest = state.digest()[:16]
        with self._lock:
            self._kept[key] = _Kept(data, text, digest, removed, state, safe(data))
        return text, removed, digest, grew_from


def _utf8(text: str, known: bytes | None) -> bytes:
    """The UTF-8 bytes of ``text`` (lone surrogates kept): ``known`` when given."""
    return known if known is not None else text.encode("utf-8", "surrogatepass")


#: The process's kept texts.
GROWN = GrownTexts()
