"""The first or the last lines that fit, with a note of how many were left out."""

from __future__ import annotations

from ..tokens import TokenCounter, estimate_tokens
from .fit import Problem, fit_tokens, fits_quickly, solve
from .lines import safe_suffix

def head_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The first lines of ``text`` that fit, and a last line saying how many were left out."""
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    total = len(lines)
    limit = _reach(lines, max_tokens)

    def render(sel: set[int]) -> str:
        k = 0
        while k in sel:
            k += 1
        return "\n".join(lines[:k] + [f"[… {total - k} more lines not shown]"])

    costs = [estimate_tokens(line) + 1 for line in lines[:limit]]
    costs[0] += 10  # the note line
    solved = solve(Problem(costs, [()] * limit, list(range(limit)), render, prefix=True), max_tokens, counter)
    if solved is None:
        return fit_tokens(text, max_tokens, counter)
    return solved[0]


def tail_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The last lines of ``text`` that fit, after a first line saying how many were left out
    (the fallback for session history; the truncation engine compacts sessions by round)."""
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    lines = text.replace("\r\n", "\n").split("\n")
    total = len(lines)
    limit = _reach(lines[::-1], max_tokens)
    order = [total - 1 - i for i in range(limit)]

    def render(sel: set[int]) -> str:
        k = total
        while k - 1 in sel:
            k -= 1
        return "\n".join([f"[… {k} earlier lines not shown]"] + lines[k:])

    costs = [0] * total
    for uid in order:
        costs[uid] = estimate_tokens(lines[uid]) + 1
    costs[order[0]] += 10  # the note line
    solved = solve(Problem(costs, [()] * total, order, render, prefix=True), max_tokens, counter)
    if solved is None:
        return _fit_tail(text, max_tokens, counter)
    return solved[0]


def _reach(lines: list[str], max_tokens: int) -> int:
    """How many of ``lines``, from the first, a budget of ``max_tokens`` could possibly hold
    (12 characters a token at most): only those are estimated and chosen from."""
    limit, chars = 0, 0
    while limit < len(lines) and chars <= max_tokens * 12:
        chars += len(lines[limit]) + 1
        limit += 1
    return limit


def _fit_tail(text: str, max_tokens: int, counter: TokenCounter) -> str:
    tokens = counter.encode(text[-(max_tokens * 12 + 64):])
    tokens = tokens[-max_tokens:] if max_tokens else []
    while tokens:
        cut = safe_suffix(text, len(text) - len(counter.decode(tokens).lstrip("\ufffd")))
        if cut and counter.count(cut) <= max_tokens:
            return cut
        tokens = tokens[max(1, len(tokens) // 50):]
    return ""
