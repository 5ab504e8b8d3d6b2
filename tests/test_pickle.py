"""Every node value is picklable (Hamilton's cache stores them), counting changes no node's
inputs, and the truncation nodes are built from the one table of steps."""

from __future__ import annotations

import pickle

from ctxengine.nodes.lib.memo import NO_MEMO

import pytest

import ctxengine
from ctxengine import driver
from ctxengine.nodes.lib import truncate as T
from ctxengine.nodes.lib.tokens import token_counter_for
from conftest import CORPUS_PLANNING, corpus_projects

# Driver inputs and config-only values are not nodes of the graph.
INPUTS = {"project_dir", "overrides", "user_request"}


def _all_node_names() -> list[str]:
    variables = driver.default_driver().list_available_variables()
    return sorted(v.name for v in variables if not v.is_external_input and v.name not in INPUTS)


def _every_value(project, **overrides) -> dict:
    return ctxengine.run_nodes(_all_node_names(), project, "Fix the login endpoint: a bad password must return 401",
                               overrides={"budget.maxTokens": 2000, "budget.reserveTokens": 400, **overrides})


def _unpicklable(values: dict) -> dict[str, str]:
    bad = {}
    for name, value in values.items():
        try:
            pickle.loads(pickle.dumps(value))
        except Exception as exc:  # noqa: BLE001 - reported by name below
            bad[name] = f"{type(exc).__name__}: {exc}"
    return bad


def test_every_node_value_of_the_demo_pickles():
    values = _every_value(None)
    assert len(values) > 100 and values["truncation_trigger"].triggered  # the whole graph, truncation ran
    assert _unpicklable(values) == {}


@pytest.mark.skipif(not CORPUS_PLANNING.is_dir(), reason="../shared/corpus is not beside the checkout")
def test_every_node_value_of_a_corpus_project_pickles():
    project = corpus_projects()[0]
    values = _every_value(project, **{"state.includeGit": False})
    assert values["final_budget_report"].total_tokens <= values["available_tokens"]
    assert _unpicklable(values) == {}


def test_strategies_are_frozen_values_without_closures():
    values = ctxengine.run_nodes(["tail_strategy", "head_strategy", "middle_strategy"])
    for strategy in values.values():
        copy = pickle.loads(pickle.dumps(strategy))
        assert copy == strategy
    assert isinstance(values["tail_strategy"].round_summary, T.IdNotedSummary)


# ----------------------------------------------------------------------------- the count cache


def test_a_nodes_inputs_hash_the_same_before_and_after_another_node_counts():
    from hamilton.caching import fingerprinting

    from ctxengine import driver

    counter = ctxengine.run_nodes(["exact_counter"])["exact_counter"]
    state = ctxengine.run_nodes(["truncation_start"], overrides={"budget.maxTokens": 2500})["truncation_start"]
    before = (fingerprinting.hash_value(counter), fingerprinting.hash_value(state), pickle.dumps(counter))
    driver.MEMO.clear()
    ctxengine.run_nodes(["final_context"], overrides={"budget.maxTokens": 2500}, cache=False)  # every stage counts
    assert driver.MEMO.made["count:" + counter.encoding_name] > 0
    after = (fingerprinting.hash_value(counter), fingerprinting.hash_value(state), pickle.dumps(counter))
    assert before == after


def test_the_counts_are_kept_in_the_memo_shared_by_every_counter_of_an_encoding():
    from ctxengine.nodes.lib.memo import Memo

    base = token_counter_for("cl100k_base")
    text = "A paragraph only this test counts.\n\n" * 3 + "x" * 600
    memo = Memo()
    assert T.CachedCounter(base, memo).count(text) == base.count(text)
    made = sum(memo.made.values())
    assert T.CachedCounter(base, memo).count(text) == base.count(text) and sum(memo.made.values()) == made  # a hit
    assert T.CachedCounter(base, memo) == T.CachedCounter(base) and pickle.loads(pickle.dumps(T.CachedCounter(base, memo))).memo is NO_MEMO


# ----------------------------------------------------------------------------- the table of steps


def test_the_step_nodes_are_the_rows_of_the_table_in_order():
    graph = {n.name: n for n in driver.default_driver().list_available_variables()}
    for row in T.STEPS:
        assert row.name in graph, row.name
        assert row.scope in ("pools", "all") and callable(getattr(T, row.action)) and row.does
        if row.after in graph and row.name.endswith(("_dropped", "_cut", "_compacted", "_summarized")):
            assert row.after in graph[row.name].required_dependencies  # each follows the one before it
    names = [row.name for row in T.STEPS]
    assert names.index("summarizable_cut") < names.index("slack_refilled") < names.index("exact_fit")
    assert [r.name for r in T.STEPS if r.scope == "pools"] == ["pool_" + r.name for r in T.STEPS[5:10]]


def test_every_ledger_step_is_a_row_of_the_table(tmp_path):
    result = ctxengine.build_context(None, "Fix the login endpoint", max_tokens=1700, reserve_tokens=400)
    steps = {e.step for e in result.ledger}
    assert steps - {"truncation_start"} <= {row.name for row in T.STEPS} | {"monitor_fold", "preventive_compaction", "crossref_mending"}
    assert {"slack_refilled", "exact_fit"} == {T.step_named("slack_refilled").name, T.step_named("exact_fit").name}
