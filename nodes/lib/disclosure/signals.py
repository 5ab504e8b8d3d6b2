"""The signals triggers look at (the request, the plan, the diff, the changed files) and how a
keyword or a path glob is found in them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from ..regex import lazy_regex
from .globs import first_match

#: Where a trigger looks by default.
SIGNALS = ("plan", "diff", "request")


@lru_cache(maxsize=1024)
def _keyword_regex(keyword: str) -> re.Pattern:
    words = [re.escape(part) for part in keyword.strip().split()]
    # A keyword matches a word that starts with it: "test" finds "tests" and "testing".
    return re.compile(r"(?<![A-Za-z0-9])" + r"[\s_-]+".join(words), re.I)


def keyword_in(keyword: str, text: str) -> bool:
    """Whether ``keyword`` starts a word of ``text`` (case-insensitive; ``test`` finds ``tests``)."""
    return bool(keyword.strip()) and bool(_keyword_regex(keyword).search(text or ""))


@dataclass(frozen=True)
class Signals:
    """What the triggers look at: the request, the plan text, the diff text, the changed files."""

    request: str = ""
    plan: str = ""
    diff: str = ""
    changed_files: tuple[str, ...] = ()

    def text(self, where: str) -> str:
        if where == "diff":
            return "\n".join((*self.changed_files, self.diff))
        return getattr(self, where, "")


_LEVEL2 = lazy_regex(r"^## ", re.M)


def plan_signal_text(plan: str, contexts: Sequence[str] = ()) -> str:
    """What triggers read as "the plan": the plan section without any roadmap block (a
    ``## `` block whose heading names the roadmap), then the current phase's CONTEXT texts.
    The roadmap lists every phase of the project, so its words say nothing of the current work."""
    starts = [m.start() for m in _LEVEL2.finditer(plan or "")]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    blocks = [(plan or "")[a:b] for a, b in zip(starts, [*starts[1:], len(plan or "")])]
    kept = [b for b in blocks if not (b.startswith("## ") and "roadmap" in b.split("\n", 1)[0].lower())]
    return "\n\n".join(part.strip("\n") for part in ["".join(kept), *contexts] if part and part.strip())


def keyword_hit(keywords: Sequence[str], signals: Signals, where: Sequence[str]) -> tuple[str, str] | None:
    """(keyword, signal) of the first keyword found, looking in ``where`` in order; or None."""
    for place in where:
        text = signals.text(place)
        for keyword in keywords:
            if keyword_in(keyword, text):
                return keyword, place
    return None


def path_hit(globs: Sequence[str], changed_files: Sequence[str]) -> tuple[str, str] | None:
    """(glob, changed file) of the first changed file a glob matches (a glob without "/"
    matches the name at any depth); or None."""
    for path in changed_files:
        pattern = first_match(globs, path, anywhere=True)
        if pattern is not None:
            return pattern, path
    return None
