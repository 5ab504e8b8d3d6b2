"""Regular expressions compiled on first use, not at import.

A module-level pattern in nodes/ is ``_WORD = lazy_regex(r"\\w+")``, not ``re.compile``: it
behaves like the compiled pattern (``_WORD.match``, ``.finditer``, ``.sub``, ``.pattern`` ...)
but compiles on its first use, and the compiled pattern's attributes are then kept on the
object, so later calls cost what they cost on a compiled pattern. Why: nodes/ holds some 130
patterns (GSD files, transcripts, summaries, references, code names); compiling the 110 that
importing the driver loads costs a process 15-30 ms of its start-up, while a build uses a
fraction of them (the demo build 33, 4.4 ms). See docs/CONTRIBUTING-NODES.md, "Imports deferred
on purpose". Pass it to ``re``'s functions as ``pattern.compiled()``; ``tests/test_coldstart.py``
compiles every one, so a typo fails there, and fails a module-level ``re.compile`` in nodes/.
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
        if name.startswith("__") or name in ("_source", "_compiled"):  # (an instance not made by __init__)
            raise AttributeError(name)
        value = getattr(self.compiled(), name)
        setattr(self, name, value)  # the next lookup finds it directly
        return value

    def __repr__(self) -> str:
        return f"lazy_regex({self._source[0]!r}, {self._source[1]!r})"


def lazy_regex(pattern: str | bytes, flags: int = 0) -> LazyRegex:
    """``re.compile(pattern, flags)``, deferred to the first use."""
    return LazyRegex(pattern, flags)
