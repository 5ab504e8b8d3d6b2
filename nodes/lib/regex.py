"""Regular expressions compiled on first use, not at import.

A module with many patterns pays for compiling all of them whenever it is imported, even
when a run uses few. ``_WORD = lazy_regex(r"\\w+")`` behaves like ``re.compile(r"\\w+")``
(``_WORD.match``, ``.finditer``, ``.sub``, ``.pattern`` ...) but compiles on the first
attribute access; the compiled pattern's attributes are then kept on the object, so later
calls cost what they cost on a compiled pattern.
"""

from __future__ import annotations

import re
from typing import Any


class LazyRegex:
    """A ``re.Pattern`` stand-in compiling ``pattern`` with ``flags`` on first use."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._source = (pattern, flags)
        self._compiled: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        """The compiled pattern (compiled now if it was not yet)."""
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        return self._compiled

    def __getattr__(self, name: str) -> Any:  # only for names not yet kept on the object
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)  # the next lookup finds it directly
        return value

    def __repr__(self) -> str:
        return f"lazy_regex({self._source[0]!r}, {self._source[1]!r})"


def lazy_regex(pattern: str | bytes, flags: int = 0) -> LazyRegex:
    """``re.compile(pattern, flags)``, deferred to the first use."""
    return LazyRegex(pattern, flags)
