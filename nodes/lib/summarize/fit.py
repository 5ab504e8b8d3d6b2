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
    universe = _universe(problem)
    best = _best_fit(problem, max_tokens, counter, len(universe))
    if best is None:
        return None
    if problem.fuller is not None and len(best[1]) == len(universe) and best[2] < FULL_SHARE * max_tokens:
        best = _fuller(problem.fuller, best, max_tokens, counter)
    return best[0], best[1]


def _universe(problem: Problem) -> set[int]:
    """Every unit the order names, with the units they require."""
    universe: set[int] = set()
    for uid in problem.order:
        universe.add(uid)
        universe.update(problem.requires[uid])
    return universe


def _best_fit(problem: Problem, max_tokens: int, counter: TokenCounter,
              whole: int) -> tuple[str, set[int], int] | None:
    """(text, selection, exact count) of the fullest greedy selection found to fit in at most 8
    attempts, None when none did: each attempt's budget rescaled by the exact count of the last
    (bisecting between the largest budget known to fit and the smallest known to overflow), done
    when a selection of all ``whole`` units or one within 5% of the limit fits."""
    budget = float(max_tokens)
    lo: float | None = None  # largest estimated budget known to fit
    hi: float | None = None  # smallest estimated budget known to overflow
    best: tuple[str, set[int], int] | None = None
    seen: dict[frozenset, int] = {}
    for _ in range(8):
        selected, text, n = _attempt(problem, budget, counter, seen)
        if n <= max_tokens:
            best = _fuller_of(best, text, selected, n)
            lo = budget if lo is None else max(lo, budget)
            if len(selected) == whole or n >= 0.95 * max_tokens:
                break
        else:
            hi = budget if hi is None else min(hi, budget)
        budget = _next_budget(budget, n, max_tokens, lo, hi)
        if budget is None:
            break
    return best


def _attempt(problem: Problem, budget: float, counter: TokenCounter,
             seen: dict[frozenset, int]) -> tuple[set[int], str | None, int]:
    """(the greedy selection within ``budget``, its rendering, its exact count); a selection met
    before is neither rendered nor counted again (text None, its count from ``seen``)."""
    selected = greedy(problem, budget)
    key = frozenset(selected)
    if key in seen:
        return selected, None, seen[key]
    text = problem.render(selected) if selected else ""
    seen[key] = counter.count(text) if selected else 0
    return selected, text, seen[key]


def _fuller_of(best: tuple[str, set[int], int] | None, text: str | None, selected: set[int],
               n: int) -> tuple[str, set[int], int] | None:
    """The attempt (``text``, ``selected``, ``n``) when it is rendered, not empty and counts more
    than ``best``, else ``best``."""
    if text is not None and selected and (best is None or n > best[2]):
        return text, selected, n
    return best


def _next_budget(budget: float, n: int, max_tokens: int, lo: float | None, hi: float | None) -> float | None:
    """The next attempt's estimated budget: rescaled by max_tokens / n (3% under when over; twice
    when nothing was selected), the middle of (lo, hi) when that leaves them; None when lo and hi
    are within 1% (or 1 token): nothing more to find."""
    if n <= max_tokens:
        new = budget * max_tokens / max(n, 1) if n else budget * 2
    else:
        new = budget * (max_tokens / n) * 0.97
    if lo is None or hi is None:
        return new
    if hi - lo <= max(1.0, lo * 0.01):
        return None
    return new if lo < new < hi else (lo + hi) / 2


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
