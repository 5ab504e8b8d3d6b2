"""The steps solve (nodes/lib/summarize/fit.py) is made of, one table each: the units in play, one
attempt (rendered and counted once per selection), the fuller of two attempts, the next estimated
budget (rescaled, bisected, or done), and the search as a whole on a small problem."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.summarize import fit as F  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


class WordCounter:
    """Counts words, and how many times it was asked."""

    def __init__(self):
        self.asked = 0

    def count(self, text: str) -> int:
        self.asked += 1
        return len(text.split())


def words_problem(n: int, cost: int = 1, **more) -> F.Problem:
    """n units, each the word ``w<i>`` with an estimated ``cost``, kept in order."""
    return F.Problem([cost] * n, [()] * n, list(range(n)), lambda sel: " ".join(f"w{u}" for u in sorted(sel)), **more)


@pytest.mark.parametrize("order, requires, expected", [
    case("the ordered units and what they require", [2, 0], [(), (), (1, 3), ()], {0, 1, 2, 3}),
    case("a unit out of the order is not in play", [0], [(), ()], {0}),
    case("nothing ordered", [], [()], set()),
])
def test_universe(order, requires, expected):
    assert F._universe(F.Problem([1] * len(requires), requires, order, str)) == expected


def test_attempt_renders_and_counts_a_selection_once():
    counter, seen = WordCounter(), {}
    problem = words_problem(5)
    assert F._attempt(problem, 3, counter, seen) == ({0, 1, 2}, "w0 w1 w2", 3)
    assert F._attempt(problem, 3.5, counter, seen) == ({0, 1, 2}, None, 3)  # met before: not rendered again
    assert counter.asked == 1 and seen == {frozenset({0, 1, 2}): 3}
    assert F._attempt(problem, 0, counter, seen) == (set(), "", 0) and counter.asked == 1  # nothing: not counted


@pytest.mark.parametrize("best, attempt, expected", [
    case("the first rendered attempt", None, ("a b", {0, 1}, 2), ("a b", {0, 1}, 2)),
    case("a larger count wins", ("a", {0}, 1), ("a b", {0, 1}, 2), ("a b", {0, 1}, 2)),
    case("an equal count does not", ("a b", {0, 1}, 2), ("c d", {2, 3}, 2), ("a b", {0, 1}, 2)),
    case("an attempt met before (no text) does not", None, (None, {0}, 1), None),
    case("an empty selection does not", None, ("", set(), 0), None),
])
def test_fuller_of(best, attempt, expected):
    text, selected, n = attempt
    assert F._fuller_of(best, text, selected, n) == expected


@pytest.mark.parametrize("budget, n, lo, hi, expected", [
    case("under: scaled up by limit / count", 100.0, 50, 100.0, None, 200.0),
    case("nothing selected: doubled", 100.0, 0, 100.0, None, 200.0),
    case("over: scaled down, 3% under", 100.0, 200, None, 100.0, 100.0 * (100 / 200) * 0.97),
    case("within (lo, hi): kept", 100.0, 90, 100.0, 120.0, 100.0 * 100 / 90),
    case("outside (lo, hi): their middle", 100.0, 50, 100.0, 150.0, 125.0),
    case("lo and hi within 1%: done", 1000.0, 50, 1000.0, 1009.0, None),
    case("lo and hi within one token: done", 10.0, 5, 10.0, 11.0, None),
])
def test_next_budget(budget, n, lo, hi, expected):
    assert F._next_budget(budget, n, 100, lo, hi) == expected


@pytest.mark.parametrize("problem, max_tokens, expected", [
    case("everything fits at once", words_problem(4), 10, ("w0 w1 w2 w3", {0, 1, 2, 3}, 4)),
    case("estimates twice the count: the budget grows until all fit", words_problem(6, cost=2), 6,
         ("w0 w1 w2 w3 w4 w5", set(range(6)), 6)),
    case("estimates half the count: the budget shrinks", F.Problem(
        [1] * 4, [()] * 4, [0, 1, 2, 3], lambda sel: " ".join("x y" for _ in sel)), 5, ("x y x y", {0, 1}, 4)),
    case("nothing fits", F.Problem([1], [()], [0], lambda sel: "a b c"), 2, None),
])
def test_best_fit(problem, max_tokens, expected):
    assert F._best_fit(problem, max_tokens, WordCounter(), len(F._universe(problem))) == expected


def test_solve_spends_spare_room_on_the_fuller_form():
    problem = words_problem(2, fuller=lambda sel, room: " ".join(["w"] * (2 + room)))
    assert F.solve(problem, 10, WordCounter()) == (" ".join(["w"] * 10), {0, 1})
    assert F.solve(words_problem(2), 10, WordCounter()) == ("w0 w1", {0, 1})
