"""Key-sentence scores: term weight, position, identifiers, paths, numbers, fact-like ids."""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from ..regex import lazy_regex

_STOPWORDS = frozenset(
    """
    the and for are but not you all any can had her was one our out has have been were
    this that with from they will would there their what which when who how its into
    than then them these those also just more most some such very each other only over
    should could about after before being both does doing during here itself may might
    must same shall upon while where your yours we us our ours is it be as at by on or
    of to in an a if so do no use used using get got make made like well still even
    """.split()
)
_WORD = lazy_regex(r"[A-Za-z][A-Za-z0-9_]{2,}|[\u3400-\u4dbf\u4e00-\u9fff]{2,}")
# identifiers: CamelCase / camelCase, snake_case, `code`
_IDENT = lazy_regex(
    r"`[^`\n]+`"
    r"|\b(?:[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*)\b"
    r"|\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+\b"
)
# paths (a/b.py, src/lib/) and file names with a known extension
_PATH = lazy_regex(
    r"(?:[\w.~-]+/)+[\w.-]+"
    r"|\b[\w-]+\.(?:py|md|ts|tsx|js|jsx|json|ya?ml|toml|ini|cfg|txt|sh|rs|go|java|kt|swift|c|h|cpp|hpp"
    r"|rb|php|sql|html|css|lock|log)\b"
)
_NUMBER = lazy_regex(r"\d")
# fact-like tokens: ids that name one thing (ticket and incident ids, versions, hashes, uuids):
# letters and digits joined by hyphens with at least one digit, or a hex run with letters and digits
_FACTLIKE = lazy_regex(
    r"\b(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,}\b"
)


def fact_tokens(sentence: str) -> int:
    """How many fact-like tokens (ids with digits: tickets, versions, hashes) ``sentence`` holds."""
    return len(_FACTLIKE.findall(sentence))


def fact_ids(text: str) -> list[str]:
    """The fact-like tokens of ``text`` in order (see :func:`fact_tokens`)."""
    return _FACTLIKE.findall(text)


def _terms(text: str) -> list[str]:
    out = []
    for word in _WORD.findall(text):
        if word.isascii():
            low = word.lower()
            if low not in _STOPWORDS:
                out.append(low)
        else:  # a CJK run: its character bigrams
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
    return out


def sentence_scores(sentences: Sequence[str], positions: Sequence[float] | None = None) -> list[float]:
    """A key-sentence score for each of ``sentences`` (higher is more worth keeping).

    term weight: sum over the sentence's distinct terms of log(1 + tf) * idf, where tf counts
    the term in all sentences and idf = log(N / df) treats each sentence as a document,
    divided by sqrt(terms) and scaled to [0, 1]; plus position (``positions``: 1.0 for the
    most prominent place down to 0.0), identifiers (CamelCase, snake_case, `code`), paths and
    numbers, and most for fact-like ids (ticket and incident ids, versions, hashes: see
    :func:`fact_tokens`). Sentences of fewer than four words lose half their score.
    """
    bags = [_terms(s) for s in sentences]
    n = len(sentences)
    tf: Counter = Counter()
    df: Counter = Counter()
    for bag in bags:
        tf.update(bag)
        df.update(set(bag))
    weights = {t: math.log1p(tf[t]) * math.log((n + 1) / df[t]) for t in tf}
    raw = []
    for bag in bags:
        distinct = set(bag)
        raw.append(sum(weights[t] for t in distinct) / math.sqrt(len(bag) + 1) if distinct else 0.0)
    top = max(raw, default=0.0) or 1.0
    scores = []
    for i, s in enumerate(sentences):
        score = raw[i] / top
        if positions is not None:
            score += 0.4 * positions[i]
        score += 0.25 * min(len(_IDENT.findall(s)), 3)
        if "/" in s or "." in s:
            score += 0.35 * min(len(_PATH.findall(s)), 2)
        if _NUMBER.search(s):
            score += 0.15
        score += 0.6 * min(fact_tokens(s), 2)
        if len(s.split()) < 4 and s.isascii():
            score *= 0.5
        scores.append(score)
    return scores
