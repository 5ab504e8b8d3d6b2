"""How truncation spreads its cut (nodes/lib/truncate.py): the pools pass split between the
pools over their share in proportion to their debt, the summarize step's room split between
sections by size and priority, and the tokens the steps leave unused given back."""

from __future__ import annotations

from ctxengine.nodes.lib import truncate as t
from ctxengine.nodes.lib.summarize import BuiltinSummarizer
from ctxengine.nodes.lib.tokens import token_counter_for
from ctxengine.nodes.types import Section, Source

COUNTER = t.CachedCounter(token_counter_for("cl100k_base"))
STRATEGIES = {"head": t.BuiltinStrategy("head"), "middle": t.BuiltinStrategy("middle", BuiltinSummarizer("extractive")),
              "tail": t.BuiltinStrategy("tail")}


def _doc(title: str, paragraphs: int, tag: str) -> str:
    body = "\n\n".join(
        f"## Part {i}\n\nParagraph {i} of {title} explains how the {tag} layer handles batch {i}. "
        f"The ticket for it is {tag.upper()}-{100 + i}-a{i}f{i}c9 and the code lives in `src/{tag}/part_{i}.py`. "
        f"Nothing else about it is worth noting here." for i in range(paragraphs))
    return f"# {title}\n\n{body}\n"


def _ref(key: str, priority: int, paragraphs: int, pool: str = "references", deprecated: bool = False) -> Section:
    return Section(f"ref:{key}.md", key.title(), "reference", _doc(key.title(), paragraphs, key), priority, pool,
                   (Source("file", f".planning/references/{key}.md"),), deprecated=deprecated)


def _state(sections, target: int, shares: dict) -> t.TruncationState:
    tokens = {s.key: COUNTER.count(s.content) for s in sections}
    strategies = {s.key: "head" if s.deprecated else "middle" for s in sections}
    return t.start_state(sections, tokens, list(tokens), 0, target, target, shares, strategies)


def test_pool_quotas_split_the_need_in_proportion_to_the_debts():
    a = _ref("alpha", 60, 30, pool="references")
    b = _ref("beta", 60, 10, pool="state")
    state = _state([a, b], 0, {"references": 100, "state": 100, "buffer": 0})
    ta, tb = state.tokens[a.key], state.tokens[b.key]
    state = t.replace(state, target=(ta + tb) // 2)
    quotas = t.pool_quotas(state)
    need = ta + tb - state.target
    da, db = ta - 100, tb - 100
    assert abs(quotas["references"] - need * da / (da + db)) <= 1
    assert abs(quotas["state"] - need * db / (da + db)) <= 1
    # the pools pass leaves each pool the rest of its part: the larger pool is not cut to the bone
    after = t.summarize_summarizable(state, "pools", "pool_summarizable_summarized", STRATEGIES, COUNTER, 48)
    assert after.tokens[b.key] < tb  # the smaller pool over its share gives its part too
    assert after.tokens[a.key] >= 0.9 * (ta - quotas["references"])  # a summary lands at or a little under its cap


def test_a_pool_over_its_share_waits_for_lower_priorities_elsewhere():
    low = _ref("alpha", 55, 30, pool="references")  # its pool is within its share
    high = _ref("beta", 70, 30, pool="state")  # its pool is far over
    state = _state([low, high], 0, {"references": 10 ** 6, "state": 100, "buffer": 0})
    state = t.replace(state, target=state.total - 300)
    for scope in ("pools", "all"):
        after = t.summarize_summarizable(state, scope, f"summarizable_summarized", STRATEGIES, COUNTER, 48)
        assert after.tokens[high.key] == state.tokens[high.key]  # untouched while the lower one has tokens
    after = t.cut_summarizable(t.replace(state, target=state.tokens[high.key] - 200), "all", "summarizable_cut",
                               STRATEGIES, COUNTER, 48)
    assert low.key not in after.tokens and after.tokens[high.key] < state.tokens[high.key]  # the lower one went first
    assert [e.section_key for e in after.ledger] == [low.key, high.key]


def test_summary_parts_spread_the_room_by_size_within_a_priority():
    low, high = _ref("low", 60, 20), _ref("high", 70, 20)
    state = _state([low, high], 0, {"references": 10, "buffer": 0})
    state = t.replace(state, target=state.total - 1000)
    parts = t.summary_parts(state, [low, high], "all")
    assert sum(parts.values()) >= 1000
    # same size: the lower priority gives (100 - 60) / (100 - 70) times as much
    assert abs(parts[low.key] / parts[high.key] - 40 / 30) < 0.05
    after = t.summarize_summarizable(state, "all", "summarizable_summarized", STRATEGIES, COUNTER, 48)
    assert after.tokens[low.key] < state.tokens[low.key] and after.tokens[high.key] == state.tokens[high.key]
    one, two = _ref("one", 60, 20), _ref("two", 60, 10)  # one priority: both give, by size
    state = _state([one, two], 0, {"references": 10, "buffer": 0})
    state = t.replace(state, target=state.total - 800)
    after = t.summarize_summarizable(state, "all", "summarizable_summarized", STRATEGIES, COUNTER, 48)
    given = {k: state.tokens[k] - after.tokens[k] for k in (one.key, two.key)}
    assert given[one.key] > given[two.key] > 0 and after.total <= after.target + 20


def test_refill_gives_unused_tokens_back_to_a_dropped_deprecated_document():
    old = _ref("old", 55, 20, deprecated=True)
    notes = Section("ref:notes.md", "Notes", "reference", _doc("Notes", 10, "notes"), 40, "references",
                    (Source("file", ".planning/references/notes.md"),))
    state = _state([old, notes], 0, {"references": 10, "buffer": 0})
    state = t.replace(state, target=state.tokens[old.key] // 2)
    state = t.drop_discardable(state, "all", "discardable_dropped")
    state = t._with_change(state, old, None, "deprecated_head_cut", "dropped for the test")
    assert state.need < 0
    refilled = t.refill_slack(state, "slack_refilled", STRATEGIES, COUNTER, 48)
    assert old.key in refilled.tokens and notes.key not in refilled.tokens  # discardable stays dropped
    assert 0 < refilled.tokens[old.key] <= state.target - t.REFILL_MARGIN
    kept = next(s for s in refilled.sections if s.key == old.key)
    assert kept.content.startswith("# Old") and "tokens cut" in kept.content  # head kept, with a marker
    assert refilled.tokens[old.key] == COUNTER.count(kept.content)
    entry = refilled.ledger[-1]
    assert entry.step == "slack_refilled" and entry.tokens_before == 0 and "refilled" in entry.reason
    assert refilled.total <= refilled.target


def test_refill_does_nothing_without_room_or_without_a_change():
    old = _ref("old", 55, 20, deprecated=True)
    state = _state([old], 0, {"references": 10, "buffer": 0})
    state = t.replace(state, target=state.total + 500)
    assert t.refill_slack(state, "slack_refilled", STRATEGIES, COUNTER, 48) is state  # nothing was reduced
    cut = t.head_cut_deprecated(t.replace(state, target=state.total - 300), "all", "deprecated_head_cut", STRATEGIES,
                                COUNTER, 48)
    tight = t.replace(cut, target=cut.total + 20)
    assert t.refill_slack(tight, "slack_refilled", STRATEGIES, COUNTER, 48) is tight  # under min_keep left


def _ids_round() -> "t.Round":
    from ctxengine.nodes.types import Message, Round
    files = ", ".join(f"src/app/module_{i}.py" for i in range(6))
    return Round(4, (
        Message("user", f"Fix the login bug in {files}. The branch is fix/LOGIN-2041-b7 as agreed.", 4),
        Message("assistant", "", 4, tool_calls=({"id": "c1", "name": "bash", "arguments": "pytest -q"},)),
        Message("tool", "collected 3 items\nE AssertionError: expected tag REC-77-9f1c, got None\n3 failed", 4,
                call_id="c1"),
        Message("assistant", "Done: the login works again. I noted the decision as DEC-5-a1b2 in the plan.", 4),
    ))


def test_round_summary_with_ids_keeps_ids_and_names_fewer_files():
    from ctxengine.nodes.lib import sessions as session

    rnd = _ids_round()
    base = session.round_summary(rnd)
    line = t.round_summary_with_ids(session.round_summary)(rnd)
    assert line.startswith(base.split("; files: ")[0].split(" — ")[0])
    for ident in ("LOGIN-2041-b7", "REC-77-9f1c", "DEC-5-a1b2"):
        assert line.count(ident) == 1  # each id once, whether the base line had it or not
    assert "noted: " in line and "\n" not in line
    assert "files: src/app/module_0.py, src/app/module_1.py, src/app/module_2.py" in base
    assert "files: src/app/module_0.py, src/app/module_1.py (+4 more);" in line
    summary = t.round_summary_with_ids(session.round_summary)
    assert summary(rnd) == summary(rnd) == line  # deterministic, remembered


def test_id_spans_find_hyphenated_ids_with_digits_only():
    text = "see JIRA-204, the -5 offset, release-2024-06, a well-known x-y pair and sha 3f9a2c1d"
    assert [text[a:b] for a, b in t._id_spans(text)] == ["JIRA-204", "release-2024-06"]
