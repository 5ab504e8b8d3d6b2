"""Budget monitor arithmetic against sequences computed by hand."""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import pytest  # noqa: E402

from ctxengine.nodes.lib import monitor as lib  # noqa: E402
from ctxengine.nodes.lib.monitor import RoundUse  # noqa: E402
from ctxengine.nodes.types import Message, Round  # noqa: E402


def words(text: str) -> int:
    """A counter whose counts are easy to do by hand: one token per word."""
    return len(text.split())


def uses(*tokens: int) -> list[RoundUse]:
    return [RoundUse(i, t, t, 0) for i, t in enumerate(tokens, 1)]


@pytest.mark.parametrize(
    "usage, expected",
    [
        ({"total_tokens": 120, "prompt_tokens": 1, "completion_tokens": 1}, 120),  # total wins
        ({"prompt_tokens": 30, "completion_tokens": 12}, 42),
        ({"completion_tokens": 7}, 7),
        ({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}, 115),  # Anthropic
        ({"totalTokens": 9}, 9),
        ({}, None),
        ({"total_tokens": "12"}, None),
        ({"total_tokens": True}, None),
        ({"total_tokens": -3, "prompt_tokens": 4}, 4),
        (None, None),
    ],
)
def test_usage_tokens(usage, expected):
    assert lib.usage_tokens(usage) == expected


def test_a_round_is_its_usage_where_reported_and_its_exact_count_elsewhere():
    round_ = Round(3, (
        Message("user", "run the tests please", 3),  # 4 words, no usage: counted
        Message("assistant", "a long answer nobody counts", 3, usage={"completion_tokens": 40}),
        Message("assistant", "calling", 3, tool_calls=({"id": "c1", "name": "bash", "arguments": "pytest -q"},)),
        Message("tool", "3 passed", 3, call_id="c1"),
    ))
    use = lib.round_use(round_, words)
    # measured: 4 (user) + "calling\nbash: pytest -q" = 4 words + "3 passed" = 2 -> 10; reported 40
    assert (use.index, use.measured, use.reported, use.tokens, use.source) == (3, 10, 40, 50, "mixed")
    only_usage = Round(1, (Message("user", "x", 1, usage={"total_tokens": 5}),))
    assert lib.round_use(only_usage, words).source == "usage"


def test_growth_averages_the_last_three_rounds():
    assert lib.growth_rate([100, 200, 300, 400]) == 300.0  # (200 + 300 + 400) / 3
    assert lib.growth_rate([50, 70]) == 60.0  # fewer rounds: what there is
    assert lib.growth_rate([]) == 0.0


@pytest.mark.parametrize("remaining, growth, expected", [(4000, 300.0, 13), (2300, 700.0, 3), (699, 700.0, 0),
                                                          (-50, 10.0, 0), (500, 0.0, None)])
def test_projected_rounds_is_the_floor_of_remaining_over_growth(remaining, growth, expected):
    assert lib.projected_rounds(remaining, growth) == expected


def test_monitor_figures_for_a_hand_computed_session():
    # base 1000, rounds 100 200 300 400, budget 6000:
    # history 1000, used 2000, remaining 4000, growth 300, projected floor(4000/300) = 13
    m = lib.budget_monitor_for(uses(100, 200, 300, 400), 6000, base_tokens=1000)
    assert (m.initial_budget, m.cumulative_used, m.current_round_used, m.remaining) == (6000, 2000, 400, 4000)
    assert (m.growth_per_round, m.projected_rounds, m.history_tokens, m.rounds) == (300.0, 13, 1000, 4)


def test_a_rolling_summary_round_counts_in_the_total_but_not_in_the_pace():
    summary = RoundUse(0, 200, 200, 0, conversation=False)
    m = lib.budget_monitor_for([summary, *uses(100, 200)], 1000)
    # used 500, remaining 500, growth (100 + 200) / 2 = 150 -> 3 rounds
    assert (m.cumulative_used, m.remaining, m.growth_per_round, m.projected_rounds, m.rounds) == (500, 500, 150.0, 3, 2)
    assert m.current_round_used == 200


def test_over_budget_projects_zero_and_no_rounds_project_nothing():
    assert lib.budget_monitor_for(uses(900), 500).projected_rounds == 0
    empty = lib.budget_monitor_for([], 500, base_tokens=100)
    assert (empty.projected_rounds, empty.remaining, empty.current_round_used) == (None, 400, 0)


def test_no_compaction_above_the_threshold():
    # base 2000, rounds 500 700 900, budget 6400: used 4100, remaining 2300, growth 700 -> 3 rounds > 2
    m = lib.budget_monitor_for(uses(500, 700, 900), 6400, base_tokens=2000)
    assert m.projected_rounds == 3
    c = lib.compaction_for(m, uses(500, 700, 900), threshold=2, keep_rounds=3, summary_tokens_per_round=50)
    assert c.active is False and c.keep_last == 3 and "3 more rounds > threshold 2" in c.reason


def test_compaction_keeps_as_many_rounds_as_still_lift_the_projection():
    # rounds 500 700 900 1100 on base 2000, budget 6400: used 5200, remaining 1200,
    # growth (700 + 900 + 1100) / 3 = 900 -> projected 1 <= 2: compaction.
    # keep 3: 6400 - (2000 + 2700 + 1 x 50) = 1650 -> 1 round, not enough
    # keep 2: 6400 - (2000 + 2000 + 2 x 50) = 2300 -> 2 rounds, not enough
    # keep 1: 6400 - (2000 + 1100 + 3 x 50) = 3150 -> 3 rounds > 2: chosen
    seq = uses(500, 700, 900, 1100)
    m = lib.budget_monitor_for(seq, 6400, base_tokens=2000)
    assert (m.remaining, m.growth_per_round, m.projected_rounds) == (1200, 900.0, 1)
    c = lib.compaction_for(m, seq, threshold=2, keep_rounds=3, summary_tokens_per_round=50)
    assert (c.active, c.keep_last, c.fold, c.projected_after) == (True, 1, 3, 3)
    assert "1200 of 6400 tokens left" in c.reason and "monitor.thresholdRounds 2" in c.reason


def test_compaction_keeps_more_rounds_when_that_is_enough():
    # rounds 300 300 300 300 300 on base 0, budget 2000: used 1500, remaining 500, growth 300 -> 1
    # keep 3: 2000 - (900 + 2 x 10) = 1080 -> 3 rounds > 2: chosen at once
    seq = uses(300, 300, 300, 300, 300)
    c = lib.compaction_for(lib.budget_monitor_for(seq, 2000), seq, 2, 3, 10)
    assert (c.active, c.keep_last, c.fold, c.projected_after) == (True, 3, 2, 3)


def test_an_earlier_summary_stays_in_the_estimate():
    # summary 400 + rounds 300 300 300, budget 1600: used 1300, remaining 300, growth 300 -> 1
    # keep 2: 1600 - (600 + 400 + 1 x 10) = 590 -> 1; keep 1: 1600 - (300 + 400 + 2 x 10) = 880 -> 2 (not > 2)
    seq = [RoundUse(0, 400, 400, 0, conversation=False), *uses(300, 300, 300)]
    c = lib.compaction_for(lib.budget_monitor_for(seq, 1600), seq, 2, 3, 10)
    assert (c.active, c.keep_last, c.fold, c.projected_after) == (True, 1, 3, 2)  # best it can do


def test_nothing_to_fold_with_a_single_round():
    seq = uses(900)
    c = lib.compaction_for(lib.budget_monitor_for(seq, 1000), seq, 2, 3, 10)
    assert c.active is False and "no older round to fold" in c.reason


def test_no_preventive_folding_once_the_context_is_over_budget():
    over = lib.BudgetMonitor(initial_budget=1000, cumulative_used=1300, current_round_used=400, remaining=-300,
                             projected_rounds=0, growth_per_round=400.0, base_tokens=100, history_tokens=1200,
                             rounds=3, round_tokens=(400, 400, 400), sources=("measured",) * 3)
    c = lib.compaction_for(over, uses(400, 400, 400), threshold=2, keep_rounds=3, summary_tokens_per_round=50)
    assert not c.active and "over budget" in c.reason


def test_only_the_recent_rounds_are_counted_exactly():
    rounds = [Round(i, (Message("user", "word " * 40, i),)) for i in range(1, 11)]
    calls = []

    def count(text):
        calls.append(text)
        return 7

    uses_ = lib.round_uses(rounds, count, estimate=lambda text: 1, exact_last=3)
    assert [u.tokens for u in uses_] == [1] * 7 + [7] * 3
    assert len(calls) == 3
