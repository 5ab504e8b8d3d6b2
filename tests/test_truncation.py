"""The truncation stage through a real Hamilton driver (config, render, budget, summarize,
truncation, quality, report) with fixture sections given as inputs, real tiktoken counts:
triggers, tiers, strategies, the order of work, pools, the ledger, errors, and properties."""

from __future__ import annotations

import os

os.environ["HAMILTON_AUTOLOAD_EXTENSIONS"] = "0"

import re  # noqa: E402
from functools import lru_cache  # noqa: E402

import pytest  # noqa: E402
from hamilton import ad_hoc_utils, driver  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxengine.nodes import budget, config, quality, render, settings as settings_nodes, summarize, truncation  # noqa: E402
from ctxengine.nodes.lib import sessions as session  # noqa: E402
from ctxengine.nodes.lib import truncate as T  # noqa: E402
from ctxengine.nodes.lib.layout import POOL_OF_KIND, POOLS, render_context  # noqa: E402
from ctxengine.nodes.lib.tokens import token_counter_for  # noqa: E402
from ctxengine.nodes.report import BuildResult  # noqa: E402
from ctxengine.nodes.types import BudgetExceededError, Message, Round, Section, Source  # noqa: E402

COUNTER = token_counter_for("cl100k_base")  # the test config uses a cl100k model


def _doc(title: str, paragraphs: int, words: int = 40) -> str:
    body = [f"# {title}"]
    for i in range(paragraphs):
        body.append(f"## {title} part {i}\n" + " ".join(f"{title.lower()}{i}w{j}" for j in range(words)) + ".")
    return "\n\n".join(body)


def _round(index: int, tools: int = 1) -> Round:
    msgs = [Message("user", f"request {index}: make the change number {index}", index, 10 * index)]
    for k in range(tools):
        cid = f"c{index}_{k}"
        msgs.append(Message("assistant", "", index, 10 * index + 1,
                            tool_calls=({"id": cid, "name": "bash", "arguments": "pytest -q"},)))
        msgs.append(Message("tool", f"RESULT-{cid} " + "passed " * 30, index, 10 * index + 2, call_id=cid))
    msgs.append(Message("assistant", f"done {index}. " + "I changed the code as asked. " * 12, index, 10 * index + 3))
    return Round(index, tuple(msgs), (10 * index, 10 * index + 3))


def history_section(n: int, keep: int = 5, tools: int = 1) -> Section:
    rounds = tuple(_round(i + 1, tools) for i in range(n))
    return Section("history", "Session History", "history", session.compact_history(rounds, keep), 70, "history",
                   (Source("file", ".planning/sessions/current/session.log", (10, 10 * n + 3)),),
                   data={"rounds": rounds, "verbatim_from": max(0, n - keep), "format": "jsonl"})


RULES = Section("ref:builtin:gsd-rules", "GSD Rules", "rules", "Always run the tests.\nNever push to main.\n", 95,
                "system", (Source("builtin", "gsd-rules"),))


def arch(paragraphs: int = 30) -> Section:
    return Section("ref:.planning/references/arch.md", "Architecture", "reference", _doc("Architecture", paragraphs), 60,
                   "references", (Source("file", ".planning/references/arch.md", (4, 4 + 4 * paragraphs)),))


def old_guide(paragraphs: int = 30) -> Section:
    return Section("ref:.planning/references/old.md", "Old Guide", "reference", _doc("Legacy", paragraphs), 55,
                   "references", (Source("file", ".planning/references/old.md", (3, 3 + 4 * paragraphs)),),
                   deprecated=True)


PLAN = Section("plan", "Current Plan", "plan", "# Plan\n## Tasks\n- [x] T1 done\n- [>] T2 login endpoint\n"
               "  Use argon2id.\n- [ ] T3 tests\n", 80, "plan", (Source("file", ".planning/plans/current/plan.md"),))
TREE = Section("tree", "File Tree", "tree", "\n".join(f"src/module_{i}.py" for i in range(120)), 30, "environment")
ENV = Section("environment", "Environment", "environment", "python 3.11\nos linux\n" * 10, 20, "environment")


@lru_cache(maxsize=1)
def _driver():
    """The real Hamilton driver over the stages truncation needs (config, render, budget,
    summarize, truncation, quality), with the reference and state sections given as inputs."""
    def reference_sections(fixture_references: list) -> list:
        """Fixture references."""
        return list(fixture_references)

    def state_sections(fixture_state: list) -> list:
        """Fixture state."""
        return list(fixture_state)

    def disclosed_sections() -> list:
        """No disclosed sections."""
        return []

    def preventive_compaction() -> dict:
        """The budget monitor stays out of these tests: no preventive compaction."""
        return {"active": False}

    def preventively_compacted_sections(sections: list) -> list:
        """The sections as assembled."""
        return list(sections)

    def preventive_ledger() -> list:
        """Nothing folded in advance."""
        return []

    fixtures = ad_hoc_utils.create_temporary_module(
        reference_sections, state_sections, disclosed_sections, preventive_compaction,
        preventively_compacted_sections, preventive_ledger,
    )
    return (driver.Builder().with_modules(config, settings_nodes, render, budget, summarize, truncation, quality, fixtures)
            .with_config({"summarizer_method": "extractive"}).build())


RESULT_NODES = ["final_context", "final_budget_report", "final_sections", "final_section_tokens", "truncation_warnings",
                "truncation_ledger", "truncation_summary", "budget_pools", "budget_report"]


def run(tmp_path, refs=(RULES,), state=(), request="Add the login endpoint", outputs=("build_result",),
        available=None, reserve=1000, **overrides):
    """Run the driver; ``build_result`` is assembled from the truncation and quality outputs
    the way nodes/report.py assembles it."""
    settings_ = {"model": "gpt-4-turbo", **overrides}
    if available is not None:
        settings_.update({"budget.maxTokens": available + reserve, "budget.reserveTokens": reserve})
    wanted = RESULT_NODES if outputs == ("build_result",) else list(outputs)
    out = _driver().execute(wanted, inputs={
        "project_dir": str(tmp_path), "overrides": settings_, "user_request": request,
        "fixture_references": list(refs), "fixture_state": list(state)})
    if outputs == ("build_result",):
        return BuildResult(out["final_context"], out["final_budget_report"], tuple(out["final_sections"]),
                           dict(out["final_section_tokens"]), out["truncation_warnings"],
                           tuple(out["truncation_ledger"]), dict(out["truncation_summary"]), dict(out["budget_pools"]),
                           out["budget_report"])
    return out if len(outputs) > 1 else out[outputs[0]]


def _rendered_tokens(tmp_path, refs, state, **kw) -> int:
    text = run(tmp_path, refs, state, outputs=("rendered_context", "context_config"), **kw)["rendered_context"]
    return COUNTER.count(text)


ALL_REFS = (RULES, arch(), old_guide())
ALL_STATE = (PLAN, history_section(40), TREE, ENV)


def _check_invariants(result, originals):
    """What must hold for every build: exact final count within the available tokens,
    immutable sections byte-identical, the ledger adding up."""
    assert result.budget.total_tokens == COUNTER.count(result.context) <= result.budget.available_tokens
    final = {s.key: s for s in result.sections}
    for section in originals:
        if section.tier == "immutable":
            assert final[section.key].content == section.content
            assert section.content.strip("\r\n") in result.context
    last = {}
    for entry in result.ledger:
        last[entry.section_key] = entry
    assert set(last) == {s.key for s in originals}
    for key, entry in last.items():
        assert entry.tokens_after == (result.section_tokens[key] if key in final else 0)
        assert (entry.action == "dropped") == (key not in final)
    assert sum(e.tokens_after for e in last.values()) == sum(result.section_tokens.values())
    for key, tokens in result.section_tokens.items():
        assert tokens == COUNTER.count(final[key].content)


# ----------------------------------------------------------------------------- triggers


def test_a_context_that_fits_is_returned_unchanged(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=100_000)
    rendered = run(tmp_path, ALL_REFS, ALL_STATE, available=100_000, outputs=("rendered_context", "sections"))
    assert result.context == rendered["rendered_context"]
    assert result.truncation["triggered"] is False and result.truncation["reason"] is None
    assert [s.content for s in result.sections] == [s.content for s in rendered["sections"]]
    assert {e.action for e in result.ledger} == {"kept"}
    _check_invariants(result, rendered["sections"])


def test_soft_trigger_above_the_soft_limit_only(tmp_path):
    total = _rendered_tokens(tmp_path, ALL_REFS, ALL_STATE)
    under = run(tmp_path, ALL_REFS, ALL_STATE, available=int(total / 0.84))
    assert under.truncation["triggered"] is False
    over = run(tmp_path, ALL_REFS, ALL_STATE, available=int(total / 0.9))
    assert over.truncation["reason"] == "soft"
    assert over.budget.total_tokens <= over.truncation["soft_limit_tokens"] == int(0.85 * int(total / 0.9))
    assert over.truncation["initial_tokens"] == total and over.truncation["initial_exact"] is True


def test_hard_trigger_cuts_to_the_soft_limit(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=3000)
    assert result.truncation["triggered"] and result.truncation["reason"] == "hard"
    assert result.budget.total_tokens <= int(3000 * 0.85)
    _check_invariants(result, ALL_REFS + ALL_STATE + tuple(
        s for s in run(tmp_path, ALL_REFS, ALL_STATE, available=3000, outputs=("sections", "context_config"))["sections"]
        if s.kind in ("request", "instructions")))


def test_requested_compaction(tmp_path):
    total = _rendered_tokens(tmp_path, ALL_REFS, ALL_STATE)
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=total * 2, **{"truncation.compact": True})
    assert result.truncation["reason"] == "requested"
    assert result.budget.total_tokens <= int(total * 0.85)
    softer = run(tmp_path, ALL_REFS, ALL_STATE, available=total * 2,
                 **{"truncation.compact": True, "budget.softLimit": 0.5})
    assert softer.budget.total_tokens <= total // 2 < result.budget.total_tokens
    assert softer.truncation["soft_limit"] == 0.5  # the configured threshold is echoed


# ----------------------------------------------------------------------------- tiers and order of work


def _actions(result) -> dict:
    return {e.section_key: e.action for e in result.ledger}


def test_a_small_overflow_only_drops_the_lowest_discardable(tmp_path):
    total = _rendered_tokens(tmp_path, (RULES,), ALL_STATE)  # the state pool is over its share
    env_tokens = COUNTER.count(ENV.content)
    result = run(tmp_path, (RULES,), ALL_STATE, available=int((total - env_tokens // 2) / 0.85) + 1)
    actions = _actions(result)
    assert actions["environment"] == "dropped"
    assert all(action == "kept" for key, action in actions.items() if key != "environment")
    assert "# Environment" not in result.context and "python 3.11" not in result.context


def _over(entry) -> int:
    return int(re.search(r"([\d,]+) tokens over the target", entry.reason).group(1).replace(",", ""))


STEP_ORDER = [row.name for row in T.STEPS if row.scope == "all"]  # the table of steps, in order
PRIORITY = {"environment": 20, "tree": 30, "ref:.planning/references/old.md": 55, "ref:.planning/references/arch.md": 60,
            "history": 70, "plan": 80}


EARLY = "older rounds summarized before lower priorities are cut"


def _early(entry) -> bool:
    """A history's older rounds folded ahead of the priority frontier (no round dropped)."""
    return EARLY in entry.reason


def test_order_of_work_follows_priority_then_the_least_loss(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    acted = [e for e in result.ledger if e.action != "kept" and "refilled" not in e.reason]
    steps = {(e.section_key, e.step.removeprefix("pool_")) for e in acted}
    assert {("environment", "discardable_dropped"), ("tree", "discardable_dropped"),
            ("ref:.planning/references/old.md", "deprecated_head_cut")} <= steps
    assert ("history", "compacted") in {(e.section_key, e.action) for e in acted}
    early = [e for e in acted if _early(e)]
    assert early and all(e.section_key == "history" and "dropped" not in e.reason for e in early)
    chronological = sorted((e for e in acted if not _early(e)), key=lambda e: -_over(e))  # each step acts on what is left
    priorities = [PRIORITY[e.section_key] for e in chronological]
    assert priorities == sorted(priorities)  # no cut while a lower priority had tokens left
    by_step = {}
    for e in chronological:  # within one priority, the least loss first
        by_step.setdefault(PRIORITY[e.section_key], []).append(STEP_ORDER.index(e.step.removeprefix("pool_")))
    assert all(order == sorted(order) for order in by_step.values())
    assert [e.section_key for e in chronological[:2]] == ["environment", "tree"]  # lowest first


def test_discardable_sections_go_without_a_summary(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    assert "tree" not in {s.key for s in result.sections}
    assert "src/module_1.py" not in result.context and "# File Tree" not in result.context


def test_deprecated_document_keeps_its_beginning_with_a_marker(tmp_path):
    refs = (RULES, arch(4), old_guide(30))
    total = _rendered_tokens(tmp_path, refs, (PLAN,))
    result = run(tmp_path, refs, (PLAN,), available=int((total - 1500) / 0.85))
    assert {e.section_key: e.action for e in result.ledger if e.action != "kept"} == {
        "ref:.planning/references/old.md": "cut"}
    old = next(s for s in result.sections if s.key.endswith("old.md"))
    assert old.content.startswith("# Legacy\n\n## Legacy part 0")
    marker = re.search(r"\[… ([\d,]+) tokens cut; full text: \.planning/references/old\.md lines (\d+)-(\d+)\]",
                       old.content)
    assert marker and int(marker.group(3)) == 3 + old_guide().content.count("\n")


def test_history_keeps_recent_rounds_and_tool_pairs(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    history = next(s for s in result.sections if s.key == "history")
    assert "### Round 40" in history.content and "request 40" in history.content
    calls = re.findall(r"^\[tool call (\S+)\]", history.content, re.M)
    results = re.findall(r"^\[tool result (\S+)\]", history.content, re.M)
    assert calls and sorted(calls) == sorted(results)
    kept = history.data["rounds"]
    assert kept[-1].index == 40 and len(kept) < 40


def test_summarizable_reference_is_summarized_lowest_priority_first(tmp_path):
    refs = (RULES, arch(40))
    total = _rendered_tokens(tmp_path, refs, (PLAN,))
    result = run(tmp_path, refs, (PLAN,), available=int(total * 0.8 / 0.85))
    actions = _actions(result)
    assert actions["ref:.planning/references/arch.md"] == "summarized" and actions["plan"] == "kept"
    entry = next(e for e in result.ledger if e.action == "summarized")
    assert entry.step in ("pool_summarizable_summarized", "summarizable_summarized")
    assert entry.tokens_after < entry.tokens_before and "priority 60" in entry.reason


def test_immutable_overflow_names_sections_shortfall_and_models(tmp_path):
    huge = Section("ref:builtin:rules", "Big Rules", "rules", "Rule: always be exact. " * 3000, 95, "system")
    planning = tmp_path / ".planning"  # the budget from the project's config: other models are worth naming
    planning.mkdir()
    (planning / "config.json").write_text('{"budget": {"maxTokens": 6000, "reserveTokens": 1000}}', encoding="utf-8")
    with pytest.raises(BudgetExceededError) as err:
        run(tmp_path, (huge,), ALL_STATE)
    message = str(err.value)
    tokens = COUNTER.count(huge.content)
    assert f"Big Rules (ref:builtin:rules): {tokens:,} tokens" in message
    assert "User Request (request)" in message and "short" in message
    assert "gpt-4.1" in message and "claude-sonnet-4" in message and "gpt-4," not in message
    assert err.value.exit_code == 3
    with pytest.raises(BudgetExceededError) as given:  # a budget the caller fixed: no other models
        run(tmp_path, (huge,), ALL_STATE, available=5000)
    assert "Models whose window" not in str(given.value) and " short. Raise budget.maxTokens" in str(given.value)


# ----------------------------------------------------------------------------- strategies


def test_forced_head_strategy_keeps_the_oldest_rounds(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600, **{"truncation.strategy": "head"})
    history = next((s for s in result.sections if s.key == "history"), None)
    assert result.truncation["strategy"] == "head"
    if history is not None:
        assert history.data["rounds"][0].index == 1
        assert "later rounds dropped" in history.content


def test_forced_tail_strategy_keeps_the_end_of_documents(tmp_path):
    refs = (RULES, arch(40))
    total = _rendered_tokens(tmp_path, refs, ())
    result = run(tmp_path, refs, (), available=int(total * 0.6), **{"truncation.strategy": "tail"})
    doc = next(s for s in result.sections if s.key.endswith("arch.md"))
    assert doc.content.endswith(arch(40).content.rsplit("\n", 1)[-1]) and doc.content.startswith("[…")


# ----------------------------------------------------------------------------- pools


def test_budget_pools_report_shares_use_loans_debts_and_buffer(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    pools = result.pools
    assert set(pools) == set(POOLS) | {"buffer", "reserve"}
    assert sum(p["share"] for name, p in pools.items() if name != "reserve") == 2600
    for name in POOLS:
        row = pools[name]
        assert row["loan"] == max(0, row["share"] - row["use"]) and row["debt"] == max(0, row["use"] - row["share"])
    assert pools["buffer"]["remaining"] == 2600 - sum(pools[n]["use"] for n in POOLS)
    assert pools["buffer"]["final_remaining"] == 2600 - result.budget.total_tokens


def test_pools_do_not_decide_the_order_across_priorities(tmp_path):
    # The history pool (priority 70) is far over its share; the references pool (priority 55
    # and 60, lower) is within its share. The history's older rounds fold into summary lines
    # first (every round kept: the least loss); when that is not enough, the lower priorities
    # give before the history loses a round, whatever the pools.
    refs = (RULES, arch(4), old_guide(4))
    state = (history_section(60, keep=60),)
    total = _rendered_tokens(tmp_path, refs, state)
    floor = run(tmp_path, refs, state, available=int(total * 0.8 / 0.85))
    first = [e for e in floor.ledger if e.section_key == "history" and e.action != "kept"][0]
    assert _early(first) and "dropped" not in first.reason and "summary" in first.reason
    result = run(tmp_path, refs, state, available=int(total * 0.3 / 0.85))
    assert _actions(result)["ref:.planning/references/old.md"] != "kept"
    assert _actions(result)["ref:.planning/references/arch.md"] != "kept"
    late = [e for e in result.ledger if e.section_key == "history" and e.action != "kept" and not _early(e)
            and "refilled" not in e.reason]
    assert late, "the history had to lose rounds too"
    for key in ("ref:.planning/references/old.md", "ref:.planning/references/arch.md"):
        entries = [e for e in result.ledger if e.section_key == key and "refilled" not in e.reason]
        assert all(_over(e) > _over(h) for e in entries for h in late)


# ----------------------------------------------------------------------------- ledger, determinism, budget report


def test_ledger_adds_up_and_is_a_dataframe(tmp_path):
    result = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    frame = result.ledger_frame()
    assert list(frame.columns) == ["section_key", "step", "action", "tokens_before", "tokens_after", "reason"]
    last = frame.groupby("section_key").tail(1)
    assert int(last["tokens_after"].sum()) == sum(result.section_tokens.values())
    assert result.as_json()["truncation"]["triggered"] is True and result.as_json()["ledger"]


def test_same_input_same_output(tmp_path):
    a = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    b = run(tmp_path, ALL_REFS, ALL_STATE, available=2600)
    assert a.as_json() == b.as_json()


def test_initial_budget_report_estimates_far_from_the_budget(tmp_path):
    big = history_section(400, keep=400)
    report_ = run(tmp_path, (RULES,), (big,), available=4000, outputs=("budget_report", "rendered_context"))
    assert report_["budget_report"].exact is False
    assert report_["budget_report"].total_tokens == COUNTER.estimate(report_["rendered_context"])
    near = run(tmp_path, (RULES,), (PLAN,), available=600, outputs=("budget_report", "rendered_context"))
    assert near["budget_report"].exact is True
    assert near["budget_report"].total_tokens == COUNTER.count(near["rendered_context"])


def test_a_huge_history_fits_and_only_the_kept_part_is_exact(tmp_path):
    big = history_section(400, keep=400, tools=2)
    result = run(tmp_path, (RULES,), (big, PLAN), available=4000)
    assert result.truncation["initial_exact"] is False and result.budget.total_tokens <= 4000
    history = next(s for s in result.sections if s.key == "history")
    assert "rounds dropped" in history.content and "### Round 400" in history.content
    _check_invariants(result, [RULES, big, PLAN] + [s for s in run(tmp_path, (RULES,), (big, PLAN), available=4000,
                      outputs=("sections", "context_config"))["sections"] if s.tier == "immutable"])


# ----------------------------------------------------------------------------- properties

SECTION_KINDS = [(kind, POOL_OF_KIND[kind]) for kind in ("reference", "plan", "git", "tree", "environment", "rules")]


@st.composite
def contexts(draw):
    refs, state = [RULES], []
    for i in range(draw(st.integers(0, 5))):
        kind, pool = draw(st.sampled_from(SECTION_KINDS))
        priority = draw(st.integers(10, 89))
        section = Section(f"s{i}", f"Section {i}", kind, _doc(f"S{i}", draw(st.integers(1, 12)), draw(st.integers(5, 60))),
                          priority, pool, (Source("file", f"docs/s{i}.md", (1, 200)),),
                          deprecated=draw(st.booleans()))
        (refs if pool in ("references", "system") else state).append(section)
    if draw(st.booleans()):
        state.append(history_section(draw(st.integers(1, 30)), keep=draw(st.integers(0, 8)), tools=draw(st.integers(0, 2))))
    return tuple(refs), tuple(state), draw(st.integers(300, 6000)), draw(st.sampled_from(["auto", "tail", "head", "middle"]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(contexts())
def test_property_fits_immutable_identical_ledger_adds_up(tmp_path, ctx):
    refs, state, available, strategy = ctx
    sections = run(tmp_path, refs, state, available=available, outputs=("sections", "context_config"),
                   **{"truncation.strategy": strategy})["sections"]
    try:
        result = run(tmp_path, refs, state, available=available, **{"truncation.strategy": strategy})
    except BudgetExceededError:
        upstream = run(tmp_path, refs, state, available=available, outputs=("context_template", "mode_template"))
        alone = render_context([s for s in sections if s.tier == "immutable"], upstream["context_template"],
                               upstream["mode_template"])
        assert COUNTER.count(alone) > available  # only when the immutable part cannot fit
        return
    _check_invariants(result, sections)
    for s in result.sections:
        if s.kind == "history":
            calls = re.findall(r"^\[tool call (\S+)\]", s.content, re.M)
            assert sorted(calls) == sorted(re.findall(r"^\[tool result (\S+)\]", s.content, re.M))
    if not result.truncation["triggered"]:
        assert result.budget.total_tokens <= 0.85 * available
    again = run(tmp_path, refs, state, available=available, **{"truncation.strategy": strategy})
    assert again.as_json() == result.as_json()
