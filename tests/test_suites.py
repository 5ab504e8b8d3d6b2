"""The shared suites that apply to truncation, run against our own functions:

* langchain_trim_messages -> lib/truncate.trim_units (the unit trimming the tail strategy uses)
* semantic_kernel_reducers -> trim_units with tool-call groups and a pinned system message
* priority_render_scenarios -> cut order, pool arithmetic, the pools-first order of work, errors
* peer_bug_regressions -> trim_units, fit_history and the whole truncation stage

A case (or a part of one) that does not apply is skipped with its reason, never passed silently.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

os.environ["HAMILTON_AUTOLOAD_EXTENSIONS"] = "0"

import pytest  # noqa: E402
from test_truncation import run  # noqa: E402  (the driver of tests/test_truncation.py)
from ctxengine.nodes.lib import sessions as session  # noqa: E402
from ctxengine.nodes.lib import truncate as t  # noqa: E402
from ctxengine.nodes.lib.tokens import token_counter_for  # noqa: E402
from ctxengine.nodes.types import BudgetExceededError, Message, Round, Section, Source  # noqa: E402

SHARED = Path(os.environ.get("CTXENGINE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SUITES = SHARED / "suites"
COUNTER = token_counter_for("cl100k_base")


def _load(relative: str) -> dict:
    path = SUITES / relative
    if not path.is_file():
        pytest.skip(f"suite file {path} is not there")
    return json.loads(path.read_text(encoding="utf-8"))


def _params(relative: str, key: str, name: str = "name") -> list:
    path = SUITES / relative
    if not path.is_file():
        return [pytest.param(None, id="missing", marks=pytest.mark.skip(f"suite file {path} is not there"))]
    cases = json.loads(path.read_text(encoding="utf-8"))[key]
    return [pytest.param(case, id=case[name]) for case in cases]


# ============================================================================ langchain trim_messages


def _blocks(message: dict) -> list:
    content = message["content"]
    return content if isinstance(content, list) else [content]


def _texts(message: dict) -> list[str]:
    return [b if isinstance(b, str) else b.get("text", "") for b in _blocks(message)]


LC_COUNTERS = {
    "dummy_10_per_message": lambda m: 3 + 4 * len(_blocks(m)) + 3,
    "chars": lambda m: sum(len(x) for x in _texts(m)),
    "words": lambda m: len(" ".join(_texts(m)).split(" ")),
}


def _space_keep_sep(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


LC_SPLITTERS = {"chars": list, "space_keep_sep": _space_keep_sep, None: lambda text: text.splitlines(keepends=True)}


def _lc_split(splitter):
    def split(message: dict) -> list:
        if isinstance(message["content"], list):
            return [[block] for block in message["content"]]
        return LC_SPLITTERS[splitter](message["content"])
    return split


def _lc_join(message: dict, pieces: list) -> dict:
    if isinstance(message["content"], list):
        return {**message, "content": [block for piece in pieces for block in piece]}
    return {**message, "content": "".join(pieces)}


def _lc_groups(messages: list[dict]) -> list[int]:
    calls = [tuple(c["id"] for c in m.get("tool_calls", ())) for m in messages]
    results = [m.get("tool_call_id") for m in messages]
    roles = ["tool" if m["type"] == "tool" else m["type"] for m in messages]
    return t.tool_groups(len(messages), t.tool_pairs(calls, results, roles))


def lc_trim(case: dict) -> list[dict]:
    """langchain's trim_messages(case params) done by trim_units."""
    params = case["params"]
    messages = case["messages"]
    strategy = params["strategy"]
    pinned = [0] if (strategy == "last" and params.get("include_system") and messages
                     and messages[0]["type"] == "system") else []
    start_on, end_on = params.get("start_on"), params.get("end_on")
    partial = params.get("allow_partial", False)
    kept = t.trim_units(
        messages, params["max_tokens"], LC_COUNTERS[case["token_counter"]], strategy=strategy, pinned=pinned,
        groups=_lc_groups(messages),
        start_ok=(lambda m: m["type"] == start_on) if start_on else None,
        end_ok=(lambda m: m["type"] == end_on) if end_on else None,
        split=_lc_split(case.get("text_splitter")) if partial else None, join=_lc_join if partial else None,
    )
    return kept.units(messages)


def _orphans(messages: list[dict]) -> list[dict]:
    call_ids = {c["id"] for m in messages for c in m.get("tool_calls", ())}
    return [m for m in messages if m["type"] == "tool" and m.get("tool_call_id") not in call_ids]


@pytest.mark.parametrize("case", _params("langchain_trim_messages/trim_messages_cases.json", "cases"))
def test_langchain_trim_messages(case):
    got = lc_trim(case)
    assert not _orphans(got)  # a tool result never stays without its call
    expected = case["expected"]
    if case.get("upstream_output_has_orphan_tool_message"):
        # langchain keeps a ToolMessage whose call was trimmed (issues #29637, #33245); we drop it.
        expected = [m for m in expected if m not in _orphans(expected)]
        assert got != case["expected"]
    assert got == expected


def test_langchain_suite_is_complete():
    assert len(_load("langchain_trim_messages/trim_messages_cases.json")["cases"]) == 18


# ============================================================================ semantic kernel reducers


def _sk_groups(messages: list[dict]) -> list[int]:
    calls = [tuple(c["id"] for c in m.get("tool_calls", ())) for m in messages]
    results = [m.get("tool_call_id", m.get("tool_result_id")) for m in messages]
    return t.tool_groups(len(messages), t.tool_pairs(calls, results, [m["role"] for m in messages]))


def sk_reduce(messages: list[dict], target: int, threshold: int = 0) -> list[int] | None:
    """semantic-kernel's ChatHistoryTruncationReducer (message counts) done by trim_units:
    None when no reduction is due (history <= target + threshold)."""
    if len(messages) <= target + threshold:
        return None
    pinned = [0] if messages and messages[0]["role"] in ("system", "developer") else []
    return list(t.trim_units(list(range(len(messages))), target, lambda _: 1, strategy="last", pinned=pinned,
                             groups=_sk_groups(messages)).indices)


def _no_straddle(kept: list[int], pairs) -> bool:
    return all((a in kept) == (b in kept) for a, b in pairs)


@pytest.mark.parametrize("case", _params("semantic_kernel_reducers/truncation_reducer_cases.json", "cases"))
def test_semantic_kernel_truncation_reducer(case):
    messages = case["messages"]
    if "expected_call_result_pairs" in case:
        pairs = t.tool_pairs([tuple(c["id"] for c in m.get("tool_calls", ())) for m in messages],
                             [m.get("tool_call_id", m.get("tool_result_id")) for m in messages],
                             [m["role"] for m in messages])
        assert [list(p) for p in pairs] == case["expected_call_result_pairs"]
        kept = sk_reduce(messages, 4)
        assert _no_straddle(kept, pairs) and kept[0] == 0
        assert kept == [0]  # a hard budget: the pair (5, 8) spans 4 messages, one over target 4 - system
        pytest.skip("invariant '0 < i < 9' needs semantic-kernel's keep-more-than-target behaviour (it moves the "
                    "cut back to keep a pair and exceeds target_count); our budget is hard, so the cut lands at 9 "
                    "and only the system message stays. Pair detection and 'no pair straddles the cut' pass.")
    kept = sk_reduce(messages, case["target_count"], case["threshold_count"])
    if "expected_indices" in case:
        assert kept == case["expected_indices"]
    for invariant in case.get("invariants", ()):
        if invariant.startswith("result[0] is the system message"):
            assert kept[0] == 0 and messages[0]["content"] == "a system message"
        elif invariant == "a reduction happens":
            assert kept is not None and len(kept) < len(messages)
        elif invariant.startswith("if the tool message (index 2) is kept"):
            assert 2 not in kept or 1 in kept
        else:  # pragma: no cover - a new invariant must be handled here
            pytest.fail(f"unhandled invariant {invariant!r}")


# ============================================================================ priority render scenarios


def _scenario(name: str) -> dict:
    for scenario in _load("priority_render_scenarios/scenarios.json")["scenarios"]:
        if scenario["name"] == name:
            return scenario
    pytest.skip(f"scenario {name} is not in the suite")


def _prune_order(tree: list[dict]) -> list[str]:
    items, ranks, ids = [], {}, []
    for container in tree:
        if "priority" in container:
            ranks[container["id"]] = container["priority"]
        for leaf in container["children"]:
            items.append((container["id"], leaf["priority"]))
            ids.append(leaf["id"])
    return [ids[i] for i in t.cut_order(items, ranks or None)]


@pytest.mark.parametrize("name", ["prune_order_explicit_priorities", "prune_order_siblings_without_priorities"])
def test_priority_prune_order(name):
    scenario = _scenario(name)
    assert _prune_order(scenario["tree"]) == scenario["expected_prune_order"]


def test_priority_flex_basis_split():
    scenario = _scenario("flex_basis_split")
    weights = {c["id"]: c.get("flexBasis", 1) for c in scenario["children"]}
    assert t.pool_shares(scenario["budget"], weights) == scenario["expected_allocations"]
    equal = {c["id"]: c.get("flexBasis", 1) for c in scenario["also"]["children"]}
    assert t.pool_shares(scenario["budget"], equal) == scenario["also"]["expected_allocations"]


@pytest.mark.parametrize("foo_use", [0, 20, 70])
def test_priority_flex_reserve_then_grow(foo_use):
    scenario = _scenario("flex_reserve_then_grow")
    total = scenario["budget"]
    shares = {"Foo": total - 30, "Bar": 30, "buffer": 0}  # Bar reserves 30; Foo is sized with the rest (70)
    assert shares["Foo"] == 70
    accounts = t.pool_accounts(shares, {"Foo": foo_use, "Bar": 0})
    assert t.pool_limit(accounts, "Bar") == total - foo_use  # Bar grows into what Foo left


def test_priority_flex_reserve_fraction_variant():
    _scenario("flex_reserve_then_grow")
    pytest.skip("flexReserve '/3' (a reserve written as a fraction of the container) has no counterpart: our "
                "reserves are configured shares (budget.pools) of maxTokens, tested above")


def _state(sections, available, target=None, shares=None):
    tokens = {s.key: COUNTER.count(s.content) for s in sections}
    shares = shares or t.pool_shares(available, {"system": 0.2, "references": 0.15, "state": 0.2, "request": 0.08,
                                                 "buffer": 0.17})
    strategies = {s.key: ("tail" if s.kind == "history" else "head" if s.deprecated else "middle") for s in sections}
    return t.start_state(sections, tokens, tokens, 0, target or available, available, shares, strategies)


STRATEGIES = {"tail": t.BuiltinStrategy("tail", render_round=session.render_round, round_summary=session.round_summary),
              "head": t.BuiltinStrategy("head", render_round=session.render_round, round_summary=session.round_summary),
              "middle": t.BuiltinStrategy("middle", render_round=session.render_round, round_summary=session.round_summary)}


def _run_steps(state):
    """The engine's order of work (the functions the step nodes call): over-share pools first."""
    for scope in ("pools", "all"):
        state = t.drop_discardable(state, scope, f"{scope}:drop")
        state = t.head_cut_deprecated(state, scope, f"{scope}:head", STRATEGIES, COUNTER, 48)
        state = t.compact_histories(state, scope, f"{scope}:history", STRATEGIES, COUNTER, 48)
        state = t.summarize_summarizable(state, scope, f"{scope}:summarize", STRATEGIES, COUNTER, 48)
        state = t.cut_summarizable(state, scope, f"{scope}:cut", STRATEGIES, COUNTER, 48)
    return state


def _text(words: int, tag: str) -> str:
    return "\n".join(f"{tag} line {i}: " + "alpha beta gamma delta " * 3 for i in range(words))


def test_priority_subtree_limit_pruned_before_global():
    _scenario("token_limit_subtree_pruned_before_global")
    # Not ours since issue 8 item 4: a pool is no subtree with its own limit. The state pool (a plan
    # of priority 80) is over its share, the references pool (a document of 55) within it: priority
    # still decides the order, so the document gives everything before the plan is touched.
    plan = Section("plan", "Plan", "plan", _text(120, "plan"), 80, "state")
    doc = Section("doc", "Doc", "reference", _text(10, "doc"), 55, "references")
    state = _run_steps(_state([plan, doc], 1200))
    assert state.total <= state.target
    assert [(e.section_key, e.action) for e in state.ledger][0] == ("doc", "dropped")
    assert {e.section_key for e in state.ledger} == {"doc", "plan"}


def test_priority_isolate_guarantee():
    scenario = _scenario("isolate_vs_global_priority")
    assert "budget pools" in scenario["maps_to_our_feature"]
    # Not ours since issue 8 item 4 (priority decides the order across pools): a lower priority in
    # a pool within its share gives before a higher one in a pool over it; no pool is an isolate.
    low = Section("low", "Low", "reference", _text(8, "ONLY_IF_ISOLATED"), 50, "references")
    high = Section("high", "High", "plan", _text(200, "global"), 85, "state")
    state = _run_steps(_state([low, high], 1000))
    assert state.total <= state.target
    assert "low" not in {s.key for s in state.sections} and state.ledger[0].section_key == "low"


def test_priority_isolate_literal_setup():
    _scenario("isolate_vs_global_priority")
    pytest.skip("the literal setup prunes single lines by per-line priorities inside 100-token isolates; our unit "
                "of priority is the section, and a pool may borrow beyond its share from the buffer by design "
                "('cannot exceed' does not hold), so only the guarantee half applies (test above)")


def test_priority_keep_with_tool_call_pair():
    _scenario("keep_with_tool_call_pair")
    msgs = (Message("user", "q", 1), Message("assistant", "", 1, tool_calls=({"id": "k", "name": "grep"},)),
            Message("tool", "RESPONSE " * 40, 1, call_id="k"), Message("assistant", "a", 1))
    groups = t.message_groups(msgs)
    cost = lambda m: COUNTER.count(m.content) + 4  # noqa: E731
    for budget_ in range(0, 120, 7):
        kept = set(t.trim_units(msgs, budget_, cost, groups=groups).indices)
        assert (1 in kept) == (2 in kept)  # the request is shown only while its response survives


def build(tmp_path, refs, state, available, request="Do the task", **overrides):
    """The build result of the real driver (config, render, budget, summarize, truncation, quality)."""
    return run(tmp_path, tuple(refs), tuple(state), request, available=available, **overrides)


RULES = Section("ref:builtin:gsd-rules", "GSD Rules", "rules", "Always run the tests.\n", 95, "system",
                (Source("builtin", "gsd-rules"),))


@pytest.mark.parametrize("name", ["immutable_overflow_is_an_error", "immutable_overflow_cryptic_error"])
def test_immutable_overflow_is_a_typed_error(tmp_path, name):
    if name == "immutable_overflow_is_an_error":
        _scenario(name)
    else:
        _regression(name)
    rules = Section("ref:rules", "House Rules", "rules", "Never guess. " * 2000, 95, "system")
    with pytest.raises(BudgetExceededError) as err:
        build(tmp_path, (rules,), (), 2000)
    message = str(err.value)
    assert f"House Rules (ref:rules): {COUNTER.count(rules.content):,} tokens" in message
    assert "only 2,000 are available" in message and re.search(r"[\d,]+ short", message)


# ============================================================================ peer bug regressions


def _regression(rid: str) -> dict:
    for scenario in _load("peer_bug_regressions/regression_scenarios.json")["scenarios"]:
        if scenario["id"] == rid:
            return scenario
    pytest.skip(f"regression {rid} is not in the suite")


def _peer_messages(spec: list) -> list[Message]:
    out = []
    for kind, text in spec:
        if kind == "assistant_tool_call":
            out.append(Message("assistant", "", 1, tool_calls=({"id": text, "name": "t"},)))
        elif kind == "assistant_tool_calls":
            out.append(Message("assistant", "", 1, tool_calls=tuple({"id": c, "name": "t"} for c in text.split(","))))
        elif kind == "tool_result":
            out.append(Message("tool", f"result {text}", 1, call_id=text))
        else:
            out.append(Message(kind, text, 1))
    return out


def test_regression_orphan_tool_result_after_last_trim():
    scenario = _regression("orphan_tool_result_after_last_trim")
    msgs = _peer_messages(scenario["input"])
    kept = t.trim_units(msgs, 30, lambda m: 10, groups=t.message_groups(msgs)).indices  # fits exactly 3
    assert msgs[kept[0]].role != "tool" and kept == (4, 5)


def test_regression_parallel_tool_calls_split():
    scenario = _regression("parallel_tool_calls_split")
    msgs = _peer_messages(scenario["input"])
    groups = t.message_groups(msgs)
    assert groups[1] == groups[2] == groups[3]
    for budget_ in range(0, 60, 5):
        kept = set(t.trim_units(msgs, budget_, lambda m: 10, groups=groups).indices)
        assert len(kept & {1, 2, 3}) in (0, 3)  # the call and both results, or none of them


def test_regression_trailing_tool_results_kept_when_under_budget(tmp_path):
    _regression("trailing_tool_results_removed_when_under_budget")
    msgs = _peer_messages([["user", "q"], ["assistant_tool_call", "c1"], ["tool_result", "c1"]])
    assert t.trim_units(msgs, 1000, lambda m: 10, groups=t.message_groups(msgs)).indices == (0, 1, 2)
    rounds = (Round(1, tuple(msgs), (1, 3)),)
    fit = t.fit_history(rounds, 1000, COUNTER, session.render_round, session.round_summary)
    assert fit.text == session.render_rounds(rounds)
    history = Section("history", "Session History", "history", session.render_rounds(rounds), 70, "state",
                      data={"rounds": rounds, "verbatim_from": 0})
    result = build(tmp_path, (RULES,), (history,), 20_000)
    assert not result.truncation["triggered"] and session.render_rounds(rounds) in result.context


def test_regression_system_message_never_evicted(tmp_path):
    _regression("system_message_evicted")
    history = _history_section(60)
    result = build(tmp_path, (RULES,), (history,), 1500)
    assert RULES.content.strip() in result.context
    assert next(s for s in result.sections if s.key == RULES.key).content == RULES.content
    assert result.budget.total_tokens <= 1500


def test_regression_orphan_call_does_not_block_compaction():
    _regression("orphan_call_blocks_compaction_forever")
    msgs = _peer_messages([["user", "q"], ["assistant_tool_call", "never-answered"], ["assistant", "a"],
                           ["user", "q2"]])
    kept = t.trim_units(msgs, 20, lambda m: 10, groups=t.message_groups(msgs)).indices
    assert kept == (2, 3)
    rounds = tuple(Round(i, tuple(replace_round(m, i) for m in msgs), (i, i)) for i in range(1, 30))
    fit = t.fit_history(rounds, 300, COUNTER, session.render_round, session.round_summary)
    assert fit.tokens <= 300 and "### Round 29" in fit.text


def replace_round(message: Message, index: int) -> Message:
    return Message(message.role, message.content, index, index, message.tool_calls, message.call_id)


class _WordySummarizer:
    """A summarizer that ignores its cap (what unbounded summaries do), though its summary is
    still smaller than the source (one that saves nothing is no summary: see
    tests/test_tight_budget.py)."""

    def summarize(self, section, max_tokens, counter):
        return "Summary line that goes on. " * (2 * max_tokens)


def test_regression_summary_has_its_own_cap():
    _regression("summary_grows_unbounded")
    section = Section("doc", "Doc", "reference", _text(400, "doc"), 60, "references",
                      (Source("file", "docs/doc.md", (1, 400)),))
    reduced = t.BuiltinStrategy("middle", _WordySummarizer()).summarize(section, 200, COUNTER)
    assert reduced.tokens == COUNTER.count(reduced.content) <= 200 and "tokens cut" in reduced.content


def test_regression_compression_rate_reported_and_fallback(tmp_path):
    _regression("compression_rate_not_honoured")
    section = Section("doc", "Doc", "reference", _text(400, "doc"), 60, "references",
                      (Source("file", "docs/doc.md", (1, 400)),))
    state = t.start_state([section], {"doc": COUNTER.count(section.content)}, {"doc"}, 0, 500, 500,
                          {"references": 500}, {"doc": "middle"})
    strategies = {**STRATEGIES, "middle": t.BuiltinStrategy("middle", _WordySummarizer())}
    state = t.summarize_summarizable(state, "all", "summarize", strategies, COUNTER, 48)
    entry = state.ledger[-1]
    assert entry.action == "summarized" and entry.tokens_after <= 500 < entry.tokens_before
    assert "capped at 500 tokens" in entry.reason  # requested size reported; the cut fell back in


@pytest.mark.parametrize("soft", [0.6, 0.85])
def test_regression_soft_limit_applied_as_given_and_echoed(tmp_path, soft):
    for rid in ("soft_limit_overshoot", "compaction_threshold_override_ignored"):
        _regression(rid)
    history = _history_section(80)
    result = build(tmp_path, (RULES,), (history,), 3000, **{"budget.softLimit": soft})
    assert result.truncation["soft_limit"] == soft and result.truncation["target"] == int(3000 * soft)
    assert result.budget.total_tokens == COUNTER.count(result.context) <= int(3000 * soft)


def test_regression_every_rendered_block_is_counted(tmp_path):
    _regression("uncounted_block_types")
    calls = ({"id": "big", "name": "write_file", "arguments": "ARG " * 3000},)
    rounds = (Round(1, (Message("user", "write it", 1, 1), Message("assistant", "", 1, 2, tool_calls=calls),
                        Message("tool", "ok", 1, 3, call_id="big")), (1, 3)),)
    history = Section("history", "Session History", "history", session.render_rounds(rounds), 70, "state",
                      data={"rounds": rounds, "verbatim_from": 0})
    result = build(tmp_path, (RULES,), (history,), 2000)
    assert result.budget.total_tokens == COUNTER.count(result.context) <= 2000  # the arguments were counted
    small = build(tmp_path, (RULES,), (history,), 20_000)
    assert small.budget.total_tokens > 3000 and "ARG ARG" in small.context


class _CountingCounter:
    """A TokenCounter stand-in that records how much text it counted exactly."""

    def __init__(self):
        self.chars = 0

    def count(self, text):
        self.chars += len(text)
        return COUNTER.count(text)

    def encode(self, text):
        return COUNTER.encode(text)

    def decode(self, tokens):
        return COUNTER.decode(tokens)

    @staticmethod
    def estimate(text):
        return COUNTER.estimate(text)


def test_regression_trim_cost_is_linear():
    _regression("quadratic_trim_latency")
    counted = {}
    for n in (300, 1200):
        rounds = _history_section(n).data["rounds"]
        counter = _CountingCounter()
        fit = t.fit_history(rounds, 3000, counter, session.render_round, session.round_summary)
        assert fit.tokens <= 3000
        counted[n] = counter.chars
    assert counted[1200] <= counted[300] * 1.2  # only what is kept (and its edge) is counted exactly
    calls = []
    t.trim_units(list(range(5000)), 100, lambda u: calls.append(u) or 1)
    assert len(calls) <= 102  # each unit costed once, the walk stops at the budget


def _history_section(n: int) -> Section:
    rounds = []
    for i in range(1, n + 1):
        cid = f"c{i}"
        rounds.append(Round(i, (
            Message("user", f"request {i}", i, 4 * i), Message("assistant", "", i, 4 * i + 1,
                                                               tool_calls=({"id": cid, "name": "bash"},)),
            Message("tool", f"output {i} " + "x " * 20, i, 4 * i + 2, call_id=cid),
            Message("assistant", f"answer {i} " + "words " * 30, i, 4 * i + 3)), (4 * i, 4 * i + 3)))
    rounds = tuple(rounds)
    return Section("history", "Session History", "history", session.render_rounds(rounds), 70, "state",
                   (Source("file", "session.log", (4, 4 * n + 3)),), data={"rounds": rounds, "verbatim_from": 0})
