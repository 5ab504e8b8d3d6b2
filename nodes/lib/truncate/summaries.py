"""Round summary lines for truncation: fewer files, and the sentences carrying ids added."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from ...types import Round
from ..memo import NO_MEMO, Memo
from ..regex import lazy_regex
from ..summarize.scoring import fact_ids


SUMMARY_FILES = 2  # files a truncation summary line names (the rest counted)
_FILES_PART = lazy_regex(r"(?<=files: )([^;]*?)(?: \(\+(\d+) more\))?(?=;|$)")
_NOTED_CHARS = 160
_ID_SCAN_CHARS = 4000  # of each message searched for ids
_ID_CHAR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_SENTENCE_END = lazy_regex(r"[.!?](?=\s)|\n")


@dataclass(frozen=True)
class IdNotedSummary:
    """A summary line for truncation built on ``base`` (a module-level round summary): its
    files list shortened to the first :data:`SUMMARY_FILES` (the rest counted), and the
    sentences of the round's messages (the lines of its tool output) that carry ids the line
    lacks (tickets, branches, versions: hyphenated ids with digits, what cannot be looked up
    again) added as ``noted:``, so a round reduced to one line keeps what it decided and found.
    A frozen value (picklable); each round's line is kept in ``memo`` (no part of its value)."""

    base: Callable[[Round], str]
    memo: Memo = field(default=NO_MEMO, compare=False, repr=False)

    def __call__(self, round_: Round) -> str:
        return self.memo.get(NOTED + _name_of(self.base), round_.digest,
                             lambda: _with_ids(_FILES_PART.sub(_fewer_files, self.base(round_), count=1), round_))


#: The memo kind of a round's truncation summary line, before the name of the summary it is built on.
NOTED = "noted-summary:"


@dataclass(frozen=True)
class SummaryInMemo:
    """``base(round_, memo)`` (a round summary taking a memo, such as ``sessions.round_summary``)
    as a one-argument summary: a frozen value, the memo no part of it."""

    base: Callable[..., str]
    memo: Memo = field(default=NO_MEMO, compare=False, repr=False)

    def __call__(self, round_: Round) -> str:
        return self.base(round_, self.memo)


def _name_of(function: Callable) -> str:
    """``module.qualname`` of a summary function (of the one a :class:`SummaryInMemo` calls)."""
    function = getattr(function, "base", function)
    return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', type(function).__name__)}"


def round_summary_with_ids(round_summary: Callable[[Round], str], memo: Memo = NO_MEMO) -> IdNotedSummary:
    """The truncation summary line built on ``round_summary`` (see :class:`IdNotedSummary`)."""
    return IdNotedSummary(round_summary, memo)


def _with_ids(line: str, round_: Round) -> str:
    """``line`` with the sentences of ``round_`` that carry ids it lacks, as ``noted:``."""
    notes: list[str] = []
    present = set(fact_ids(line))
    for message in round_.messages:
        if message.role not in ("user", "assistant", "tool") or not message.content:
            continue
        text = message.content[:_ID_SCAN_CHARS]
        for a, b in _id_spans(text):
            if text[a:b] in present:
                continue
            lo, hi = _around(text, a, b, by_line=message.role == "tool")
            sentence = " ".join(text[lo:hi].split())
            present.update(fact_ids(sentence))
            notes.append(_clip_around(sentence, text[a:b]))
    if notes:
        line += ("; " if " — " in line else " — ") + "noted: " + " | ".join(notes)
    return line


def _clip_around(sentence: str, ident: str) -> str:
    """``sentence`` within :data:`_NOTED_CHARS` characters, clipped around ``ident``."""
    if len(sentence) <= _NOTED_CHARS:
        return sentence
    at = max(0, sentence.find(ident))
    start = max(0, min(at - 60, len(sentence) - _NOTED_CHARS + 2))
    clipped = sentence[start:start + _NOTED_CHARS - 2]
    return ("…" if start else "") + clipped + ("…" if start + len(clipped) < len(sentence) else "")


def _id_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the hyphenated ids with digits in ``text`` (e.g. ``JIRA-204``,
    ``release-2024-06``), found from its hyphens next to a digit (fast on long text)."""
    spans = []
    n = len(text)
    i = text.find("-")
    while i != -1:
        if (i > 0 and text[i - 1].isdigit()) or (i + 1 < n and text[i + 1].isdigit()):
            a, b = i, i + 1
            while a > 0 and text[a - 1] in _ID_CHAR:
                a -= 1
            while b < n and text[b] in _ID_CHAR:
                b += 1
            while a < b and text[a] == "-":
                a += 1
            while b > a and text[b - 1] == "-":
                b -= 1
            token = text[a:b]
            if fact_ids(token) == [token]:
                spans.append((a, b))
            i = text.find("-", max(b, i + 1))
        else:
            i = text.find("-", i + 1)
    return spans


def _around(text: str, a: int, b: int, by_line: bool) -> tuple[int, int]:
    """The sentence (the line, ``by_line``) of ``text`` around [a, b)."""
    if by_line:
        lo = text.rfind("\n", 0, a) + 1
        hi = text.find("\n", b)
        return lo, len(text) if hi < 0 else hi
    lo = 0
    for m in _SENTENCE_END.finditer(text, max(0, a - 400), a):
        lo = m.end()
    m = _SENTENCE_END.search(text, b)
    return lo, len(text) if m is None else m.end()


def _fewer_files(match: re.Match) -> str:
    files = match.group(1).split(", ")
    more = int(match.group(2) or 0) + max(0, len(files) - SUMMARY_FILES)
    return ", ".join(files[:SUMMARY_FILES]) + (f" (+{more} more)" if more else "")
