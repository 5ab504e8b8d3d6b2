"""Sentence splitting for English and Chinese text, without a model.

English sentences end at ``.``, ``!`` or ``?`` (possibly followed by closing quotes or
brackets) when whitespace or the end of the text follows. A period does not end a sentence
after a known abbreviation (``e.g.``, ``i.e.``, ``etc.`` before a lower-case word, ``Mr.``,
``vs.``, ...) or after a single letter (``J. Smith``, ``U.S.``); periods with no space after
them (``1.2.3``, ``foo.py``, ``3.14``, ``example.com``) never end one. Chinese sentences end at
``。！？；`` and their full-width / half-width variants (``．｡！？；``) whatever follows, and
after an ellipsis ``……`` when a new sentence starts.
"""

from __future__ import annotations

import re

from .regex import lazy_regex


__all__ = ["sentence_spans", "split_sentences", "ABBREVIATIONS"]

#: Lower-case words that a period does not end a sentence after.
ABBREVIATIONS = frozenset(
    """
    e.g i.e etc vs v cf al approx ca resp esp incl excl viz seq fig figs eq eqs no nos
    vol vols pp ch sect para ref refs eds rev dept univ inc ltd co corp jr sr
    mr mrs ms dr prof gen col lt sgt capt gov sen mt ft jan feb apr jun jul aug sept oct nov
    sec min max misc
    """.split()
)

# Abbreviations that also often end a sentence: they end one when a capital letter follows.
_AMBIGUOUS = frozenset({"etc", "al", "inc", "ltd", "co", "corp", "jr", "sr", "misc", "seq", "no", "sec", "min", "max"})

_CLOSERS = re.escape("\"'\u201d\u2019\u00bb)]}\u300d\u300f\uff09\u3011\u300b")
# Sentence-final marks of Chinese text: 。．｡！？； and the small forms ﹒﹗﹖﹔.
_ZH_MARKS = "\u3002\uff0e\uff61\uff01\uff1f\uff1b\ufe52\ufe57\ufe56\ufe54"
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_BOUNDARY = lazy_regex(
    # English: ., !, ?, ... or an ellipsis, then closers, then whitespace or the end
    r"(?P<en>[.!?]+|\u2026+)[" + _CLOSERS + r"]*(?=\s|\Z)"
    # Chinese: a full-width mark run (wherever it is), an ASCII !/? right after a CJK
    # character, or a CJK ellipsis ……
    r"|(?P<zh>[" + _ZH_MARKS + r"]+|(?<=[" + _CJK + r"])[!?]+|\u2026\u2026)[" + _CLOSERS + r"]*"
)
_WORD_BEFORE = lazy_regex(r"([A-Za-z][A-Za-z.]*)\Z")
_DOTTED = lazy_regex(r"(?:[A-Za-z]{1,2}\.)+[A-Za-z]{1,2}")  # e.g, i.e, U.S, Ph.D
_NEXT_START = lazy_regex(r"\s*(\S)")


def _ends_sentence(text: str, start: int, end: int, match: re.Match) -> bool:
    """Whether the English terminator at text[start:end] really ends a sentence."""
    if match.group("en") != ".":
        return True  # !, ?, ?!, ..., an ellipsis: a boundary when whitespace follows
    before = _WORD_BEFORE.search(text, max(0, start - 40), start)
    if before is None:
        return True  # after a digit, a closing bracket, `code`, ...
    word = before.group(1)
    nxt = _NEXT_START.match(text, end)
    next_char = nxt.group(1) if nxt else ""
    if next_char == "":
        return True
    if _DOTTED.fullmatch(word):
        lower = word.lower()
        if lower in _AMBIGUOUS:
            return next_char.isupper()
        return False
    lower = word.rsplit(".", 1)[-1].lower()  # foo.py -> py, so "see foo.py. Then" splits
    if "." not in word and len(word) == 1 and word.isupper():
        if start < 2 or not (text[start - 2].isalnum() or text[start - 2] in "-_/"):
            return not next_char.isalpha()  # an initial: "J. Smith"
    if lower in ABBREVIATIONS:
        if lower in _AMBIGUOUS:
            return next_char.isupper()
        return False
    return True


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``, leading and trailing whitespace excluded.

    The spans are in order, do not overlap and cover every non-space character.
    """
    spans: list[tuple[int, int]] = []
    length = len(text)
    pos = 0
    for match in _BOUNDARY.finditer(text):
        start, end = match.start(), match.end()
        if match.group("en") is not None and not _ends_sentence(text, start, end, match):
            continue
        _add(text, pos, end, spans)
        pos = end
    if pos < length:
        _add(text, pos, length, spans)
    return spans


def _add(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if start < end:
        spans.append((start, end))


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`), stripped."""
    return [text[a:b] for a, b in sentence_spans(text)]
