"""Estimates and fitting: a greedy selection of units by estimated cost, corrected by a few
exact counts of the rendering (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..tokens import TokenCounter, estimate_tokens
from .lines import safe_prefix

def fits_quickly(text: str, max_tokens: int, counter: TokenCounter) -> bool:
    """Whether ``text`` fits as it is; counts exactly only when the estimate is near the limit."""
    if len(text.encode("utf-8")) <= max_tokens:  # every token covers at least one byte
        return True
    if estimate_tokens(text) > max_tokens * 1.5:
        return False
    return counter.count(text) <= max_tokens


def fit_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` unchanged when it fits, else its longest token prefix that fits, cut back to
    a line end (a sentence or word end in prose; never inside a code line, an ``@`` line or a
    table row, and a fenced block is closed: :func:`safe_prefix`), never more than
    ``max_tokens`` by exact count."""
    if max_tokens <= 0 or not text:
        return ""
    if fits_quickly(text, max_tokens, counter):
        return text
    # a token rarely spans more than a dozen characters: no need to encode all of a huge text
    tokens = counter.encode(text[: max_tokens * 12 + 64])[:max_tokens]
    while tokens:
        cut = safe_prefix(text, len(counter.decode(tokens).rstrip("\ufffd")))
        if cut and counter.count(cut) <= max_tokens:
            return cut
        tokens = tokens[: max(0, len(tokens) - max(1, len(tokens) // 50))]
    return ""


@dataclass
class Problem:
    """A selection problem: units with estimated costs, dependencies, a priority order and a
    renderer from a set of unit ids to text."""

    costs: list[int]
    requires: list[tuple[int, ...]]
    order: list[int]
    render: Callable[[set[int]], str]
    prefix: bool = False  # stop at the first unit that does not fit (head / tail of lines)
    blocking: frozenset = frozenset()  # units that stop the pass when they do not fit
    # the rendering of a selection with ``room`` more tokens spent on what the units shorten
    # (the frontmatter as written), or None: asked when every unit fits well under the limit
    fuller: Callable[[set[int], int], str | None] | None = None


FULL_SHARE = 0.85  # a summary of a larger source uses at least this share of its limit when it can


def greedy(problem: Problem, budget: float) -> set[int]:
    costs, requires = problem.costs, problem.requires
    selected: set[int] = set()
    used = 0
    cheapest = min((costs[u] for u in problem.order), default=0)
    for uid in problem.order:
        if uid in selected:
            continue
        cost = costs[uid]
        need = [r for r in requires[uid] if r not in selected]
        for r in need:
            cost += costs[r]
        if used + cost <= budget:
            selected.add(uid)
            selected.update(need)
            used += cost
            if budget - used < cheapest:
                break
        elif problem.prefix or uid in problem.blocking:
            break
    return selected


def solve(problem: Problem, max_tokens: int, counter: TokenCounter) -> tuple[str, set[int]] | None:
    """The fullest rendering whose exact count fits ``max_tokens``, or None when no non-empty
    selection fits. The estimated budget is rescaled by the exact/estimated ratio of each
    attempt; at most 8 exact counts of budget-sized strings."""
    universe: set[int] = set()
    for uid in problem.order:
        universe.add(uid)
        universe.update(problem.requires[uid])
    budget = float(max_tokens)
    lo: float | None = None  # largest estimated budget known to fit
    hi: float | None = None  # smallest estimated budget known to overflow
    best: tuple[str, set[int], int] | None = None
    seen: dict[frozenset, int] = {}
    for _ in range(8):
        selected = greedy(problem, budget)
        key = frozenset(selected)
        if key in seen:
            n = seen[key]
            text = None
        else:
            if not selected:
                n, text = 0, ""
            else:
                text = problem.render(selected)
                n = counter.count(text)
            seen[key] = n
        if n <= max_tokens:
            if text is not None and selected and (best is None or n > best[2]):
                best = (text, selected, n)
            lo = budget if lo is None else max(lo, budget)
            if len(selected) == len(universe) or n >= 0.95 * max_tokens:
                break
            new = budget * max_tokens / max(n, 1) if n else budget * 2
        else:
            hi = budget if hi is None else min(hi, budget)
            new = budget * (max_tokens / n) * 0.97
        if lo is not None and hi is not None:
            if hi - lo <= max(1.0, lo * 0.01):
                break
            if not lo < new < hi:
                new = (lo + hi) / 2
        budget = new
    if best is None:
        return None
    if problem.fuller is not None and len(best[1]) == len(universe) and best[2] < FULL_SHARE * max_tokens:
        best = _fuller(problem.fuller, best, max_tokens, counter)
    return best[0], best[1]


def _fuller(fuller: Callable[[set[int], int], str | None], best: tuple[str, set[int], int], max_tokens: int,
            counter: TokenCounter) -> tuple[str, set[int], int]:
    """Every unit kept and still under :data:`FULL_SHARE` of the limit: the room left spent on
    a fuller form of what the units shorten (the limit by exact count; two corrections)."""
    room = max_tokens - best[2]
    for _ in range(3):
        text = fuller(best[1], room)
        if text is None:
            break
        n = counter.count(text)
        if n <= max_tokens:
            return (text, best[1], n) if n > best[2] else best
        room -= n - max_tokens
    return best
