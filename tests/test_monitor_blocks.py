"""The steps compaction_for (nodes/lib/monitor.py) is made of, one table each: why compaction is
not due, the projection once older rounds are folded, and how many rounds are kept verbatim."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib import monitor as lib  # noqa: E402
from ctxengine.nodes.lib.monitor import RoundUse  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def uses(*tokens: int, summaries: tuple[int, ...] = ()) -> list[RoundUse]:
    """Rounds of ``tokens``; the 1-based indexes in ``summaries`` are rolling-summary rounds."""
    return [RoundUse(i, t, t, 0, i not in summaries) for i, t in enumerate(tokens, 1)]


@pytest.mark.parametrize("rounds, budget, threshold, conversation, expected", [
    case("over budget: the hard cut is due now", uses(600, 600), 1000, 5, 2,
         "already 200 tokens over budget: the truncation engine cuts now, there is nothing to fold ahead of"),
    case("no growth measured", uses(0), 1000, 5, 1, "no growth measured yet: nothing to project"),
    case("projection above the threshold", uses(100, 100), 10000, 5, 2, "projected 98 more rounds > threshold 5"),
    case("one conversation round only", uses(100, 100), 500, 5, 1,
         "projected 3 more rounds <= threshold 5, but no older round to fold"),
    case("due", uses(100, 100), 500, 5, 2, None),
])
def test_idle_compaction(rounds, budget, threshold, conversation, expected):
    monitor = lib.budget_monitor_for(rounds, budget)
    idle = lib._idle_compaction(monitor, len(rounds), threshold, conversation)
    if expected is None:
        assert idle is None
    else:
        assert (idle.active, idle.keep_last, idle.reason) == (False, len(rounds), expected)


@pytest.mark.parametrize("rounds, first_kept, per_round, expected", [
    case("fold two 100-token rounds to 10 each: 880 left", uses(100, 100, 100), 2, 10, 8),
    case("nothing folded", uses(100, 100, 100), 0, 10, 7),
    case("a rolling summary round stays whole: 790 left", uses(100, 100, 100, summaries=(1,)), 2, 10, 7),
])
def test_rounds_after_fold(rounds, first_kept, per_round, expected):
    monitor = lib.budget_monitor_for(rounds, 1000)  # 300 used, 100 a round: 7 more rounds
    assert lib._rounds_after_fold(monitor, rounds, first_kept, per_round) == expected


@pytest.mark.parametrize("threshold, keep_rounds, expected", [
    case("the most rounds kept that lift the projection over the threshold", 10, 3, (3, 2, 12)),
    case("fewer kept when needed", 12, 3, (2, 3, 13)),
    case("none lifts it: one kept", 100, 3, (1, 4, 14)),
    case("keep_rounds capped at all but one", 10, 9, (4, 1, 11)),
    case("keep_rounds 0 counts as 1", 10, 0, (1, 4, 14)),
])
def test_kept_fold(threshold, keep_rounds, expected):
    rounds = uses(100, 100, 100, 100, 100)  # 500 of 1500 used, 100 a round
    monitor = lib.budget_monitor_for(rounds, 1500)
    conversation = [i for i, u in enumerate(rounds) if u.conversation]
    assert lib._kept_fold(monitor, rounds, conversation, threshold, keep_rounds, 0) == expected
