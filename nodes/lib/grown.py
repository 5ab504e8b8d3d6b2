"""Texts that grow: a file read again after something was appended costs only its new part.

An agent's transcript is read at every turn and has only grown since the last one. The process
keeps, per file, the bytes it read and the text it made of them; when the file's bytes start with the bytes kept (one memory comparison), only the new
bytes are cleaned and decoded, and the text is the old one plus theirs. A prefix is
re-used only where splitting cannot change the result: it ends with a newline and no escape
sequence runs to its end (``safe``, given by the caller who knows its cleaning).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

MIN_BYTES = 256 << 10  # smaller files are read whole: the re-use would not pay for the bytes kept
MAX_FILES = 8


@dataclass(frozen=True)
class _Kept:
    raw: bytes
    text: str
    removed: int
    safe: bool  # whether ``raw`` may be re-used as a prefix


class GrownTexts:
    """The last :data:`MAX_FILES` large files read, by key (their real path)."""

    def __init__(self, max_files: int = MAX_FILES, min_bytes: int = MIN_BYTES) -> None:
        self.max_files, self.min_bytes = max_files, min_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, _Kept] = OrderedDict()

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def text(self, key: str, data: bytes, make: Callable[[bytes], tuple[str, int, bytes | None]],
             safe: Callable[[bytes], bool]) -> tuple[str, int]:
        """(text, removed) of ``data``: ``make(data)``, or, when ``data`` grew from the bytes
        kept under ``key``, the kept text plus ``make`` of the new bytes only. ``make`` gives
        (text, removed, the text's UTF-8 bytes when it has them at hand, else None)."""
        if len(data) < self.min_bytes:
            return make(data)[:2]
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept.safe and len(data) >= len(kept.raw) and data.startswith(kept.raw):
            tail, removed, _ = make(data[len(kept.raw):])
            text, removed = kept.text + tail, kept.removed + removed
        else:
            text, removed, _ = make(data)
        with self._lock:
            self._kept[key] = _Kept(data, text, removed, safe(data))
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_files:
                self._kept.popitem(last=False)
        return text, removed


#: The process's kept texts.
GROWN = GrownTexts()
