"""The steps trim_units keeps a run of units by (nodes/lib/truncate/units.py), one table each:
the acceptable end of the input, the span kept block by block (and a partial unit), and the run
with its view. Costs are lengths plus one."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.truncate import units as U


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def cost(unit: str) -> int:
    return len(unit) + 1


def spans(groups):
    return U._group_spans(groups)


@pytest.mark.parametrize("units, groups, pinned, expected", [
    case("already acceptable", ["a", "b"], [0, 1], set(), 2),
    case("an unacceptable end dropped", ["a", "b", "y"], [0, 1, 2], set(), 2),
    case("with its whole group", ["a", "b", "y"], [0, 1, 1], set(), 1),
    case("a pinned end stays", ["a", "y"], [0, 1], {1}, 2),
    case("nothing acceptable", ["y", "y"], [0, 1], set(), 0),
])
def test_acceptable_end(units, groups, pinned, expected):
    first_of, _ = spans(groups)
    assert U._acceptable_end(units, len(units), pinned, first_of, lambda u: u != "y") == expected


@pytest.mark.parametrize("units, groups, remaining, order_last, split, expected", [
    case("last: from the end while it fits", ["aa", "b", "c"], [0, 1, 2], 4, True, False, (1, 3, None)),
    case("first: from the start", ["a", "b", "ccc"], [0, 1, 2], 4, False, False, (0, 2, None)),
    case("a group kept whole or not at all", ["a", "b", "c"], [0, 1, 1], 3, True, False, (3, 3, None)),
    case("the unit that does not fit, in part", ["abcd", "e"], [0, 1], 5, True, True, (1, 2, (0, "cd"))),
    case("in part from its start for first", ["a", "bcde"], [0, 1], 5, False, True, (0, 1, (1, "bc"))),
    case("never a unit of a larger group", ["abcd", "e", "f"], [0, 0, 1], 5, True, True, (2, 3, None)),
])
def test_kept_span(units, groups, remaining, order_last, split, expected):
    first_of, last_of = spans(groups)
    kw = dict(split=list, join=lambda u, parts: "".join(parts)) if split else dict(split=None, join=None)
    assert U._kept_span(units, len(units), remaining, cost, order_last, first_of, last_of, set(), **kw) == expected


@pytest.mark.parametrize("span, pinned, partial, order_last, expected", [
    case("pinned left out", (0, 3), {1}, None, True, ([0, 2], {0: "a", 2: "c"})),
    case("the partial unit before the run for last", (2, 3), set(), (1, "B"), True, ([1, 2], {1: "B", 2: "c"})),
    case("after it for first", (0, 1), set(), (1, "B"), False, ([0, 1], {0: "a", 1: "B"})),
])
def test_run_and_view(span, pinned, partial, order_last, expected):
    assert U._run_and_view(["a", "b", "c"], *span, pinned, partial, order_last) == expected
