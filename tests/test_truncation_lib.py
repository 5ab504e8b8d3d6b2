"""The pure truncation algorithms of nodes/lib/truncate.py, with real tiktoken counts:
pools, tool-call groups, unit trimming, cutting at boundaries with markers, the graded tail
of a session history (including property tests with hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxengine.nodes.lib import sessions as session
from ctxengine.nodes.lib import truncate as t
from ctxengine.nodes.lib.tokens import token_counter_for
from ctxengine.nodes.types import Message, Round

COUNTER = token_counter_for("cl100k_base")
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- pools


def test_pool_shares_split_in_proportion_and_buffer_takes_rounding():
    shares = t.pool_shares(102_400, {"system": 0.2, "references": 0.15, "state": 0.2, "request": 0.08, "buffer": 0.17})
    assert shares == {"system": 25600, "references": 19200, "state": 25600, "request": 10240, "buffer": 21760}
    odd = t.pool_shares(1000, {"a": 1, "b": 1, "buffer": 1})
    assert odd["a"] == odd["b"] == 333 and sum(odd.values()) == 1000


def test_pool_accounts_loans_debts_and_buffer():
    accounts = t.pool_accounts({"system": 100, "state": 100, "buffer": 50}, {"system": 40, "state": 180})
    assert accounts["system"] == {"share": 100, "use": 40, "loan": 60, "debt": 0}
    assert accounts["state"] == {"share": 100, "use": 180, "loan": 0, "debt": 80}
    assert accounts["buffer"]["remaining"] == 50 + 60 - 80 == 250 - 220
    assert t.pool_debts({"system": 100, "state": 100, "buffer": 50}, {"system": 40, "state": 180}) == {"state": 80}


def test_pool_limit_is_share_plus_what_the_others_leave_in_the_buffer():
    accounts = t.pool_accounts({"foo": 70, "bar": 30, "buffer": 0}, {"foo": 50, "bar": 10})
    assert t.pool_limit(accounts, "bar") == 100 - 50


def test_cut_order_is_scoped_by_container_rank_then_priority():
    items = [("user", 100), ("user", 0), ("system", 200), ("system", 20)]
    assert t.cut_order(items, {"user": 1, "system": 2}) == [1, 0, 3, 2]
    assert t.cut_order(items) == [1, 3, 0, 2]


# ----------------------------------------------------------------------------- tool groups


def test_tool_pairs_by_id_by_position_and_unknown_ids():
    calls = [(), ("c1",), (), (), ("a", "b")]
    results = [None, None, None, "zz", None]
    roles = ["user", "assistant", "tool", "tool", "assistant"]
    assert t.tool_pairs(calls, results, roles) == [(1, 2)]  # id-less tool pairs with the call before it
    calls = [(), ("a", "b"), (), (), ()]
    results = [None, None, "a", "b", None]
    roles = ["user", "assistant", "tool", "tool", "assistant"]
    assert t.tool_groups(5, t.tool_pairs(calls, results, roles)) == [0, 1, 1, 1, 4]


def test_message_groups_on_session_messages():
    msgs = (Message("user", "q", 1), Message("assistant", "", 1, tool_calls=({"id": "x", "name": "ls"},)),
            Message("tool", "out", 1, call_id="x"), Message("assistant", "done", 1),
            Message("assistant", "", 1, tool_calls=({"id": "y", "name": "cat"},)))
    assert t.message_groups(msgs) == [0, 1, 1, 3, 4]


# ----------------------------------------------------------------------------- trim_units


def _ten(_unit) -> int:
    return 10


def test_trim_last_keeps_a_contiguous_tail_and_never_splits_a_group():
    units = list("sqctah")  # system, q, call, tool, answer, human
    groups = [0, 1, 2, 2, 4, 5]
    assert t.trim_units(units, 30, _ten, groups=groups).indices == (4, 5)
    assert t.trim_units(units, 40, _ten, groups=groups).indices == (2, 3, 4, 5)
    assert t.trim_units(units, 30, _ten, groups=groups, pinned=[0]).indices == (0, 4, 5)


def test_trim_first_and_end_ok():
    units = ["s", "h1", "a1", "h2"]
    got = t.trim_units(units, 30, _ten, strategy="first", end_ok=lambda u: u.startswith("h"))
    assert got.indices == (0, 1)


def test_trim_start_ok_drops_whole_groups():
    units = ["h1", "call", "tool", "a", "h2"]
    got = t.trim_units(units, 40, _ten, groups=[0, 1, 1, 3, 4], start_ok=lambda u: u.startswith("h"))
    assert got.indices == (4,)


def test_trim_partial_keeps_the_pieces_that_fit():
    got = t.trim_units(["abcdef"], 3, len, strategy="last", split=list, join=lambda u, p: "".join(p))
    assert got.units(["abcdef"]) == ["def"]
    got = t.trim_units(["abcdef"], 3, len, strategy="first", split=list, join=lambda u, p: "".join(p))
    assert got.units(["abcdef"]) == ["abc"]


def test_trim_unanswered_call_is_droppable():
    units = ["q", "call-no-result", "a"]
    assert t.trim_units(units, 10, _ten).indices == (2,)


@FAST
@given(st.lists(st.integers(1, 30), min_size=0, max_size=30), st.integers(0, 200), st.data())
def test_trim_property_fits_and_keeps_groups_whole(costs, budget, data):
    n = len(costs)
    pairs = []
    for i in range(n - 1):
        if data.draw(st.booleans()):
            pairs.append((i, data.draw(st.integers(i + 1, n - 1))))
    groups = t.tool_groups(n, pairs)
    kept = set(t.trim_units(list(range(n)), budget, lambda i: costs[i], groups=groups).indices)
    assert sum(costs[i] for i in kept) <= budget
    for a, b in pairs:
        assert (a in kept) == (b in kept)
    if sum(costs) <= budget:
        assert kept == set(range(n))
    if kept:
        assert kept == set(range(min(kept), n))  # a contiguous tail


# ----------------------------------------------------------------------------- cut_text

DOC = "\n\n".join(f"## Part {i}\n" + "\n".join(f"Line {i}.{j}: the quick brown fox jumps." for j in range(6))
                  for i in range(40))


@pytest.mark.parametrize("shape", t.SHAPES)
def test_cut_text_fits_exactly_and_says_what_was_cut(shape):
    total = COUNTER.count(DOC)
    cut = t.cut_text(DOC, 300, COUNTER, shape, t.Origin(".planning/references/arch.md", 40))
    assert cut.tokens == COUNTER.count(cut.text) <= 300
    marker = re.search(r"\[… ([\d,]+) tokens cut; full text: \.planning/references/arch\.md lines (\d+)-(\d+)\]", cut.text)
    assert marker, cut.text
    assert int(marker.group(1).replace(",", "")) == cut.cut_tokens > total - 300
    first, last = int(marker.group(2)), int(marker.group(3))
    assert (first, last) == (cut.cut_lines[0] + 39, cut.cut_lines[1] + 39)
    kept_lines = [line for line in cut.text.split("\n") if not line.startswith("[…")]
    assert all(line in DOC.split("\n") for line in kept_lines)  # whole lines only
    if shape in ("head", "middle"):
        assert cut.text.startswith("## Part 0\n")
    if shape in ("tail", "middle"):
        assert cut.text.endswith("Line 39.5: the quick brown fox jumps.")


def test_cut_text_prefers_paragraph_boundaries():
    cut = t.cut_text(DOC, 200, COUNTER, "head")
    body = cut.text.split("\n[…")[0]
    assert body.endswith("jumps.") and DOC.startswith(body + "\n\n")


def test_cut_text_unchanged_when_it_fits():
    assert t.cut_text("short text", 50, COUNTER).text == "short text"


def test_cut_text_single_long_line_cut_at_token_boundary():
    line = "word " * 2000
    cut = t.cut_text(line, 100, COUNTER, "head")
    assert cut.tokens <= 100 and cut.text.startswith("word word") and "tokens cut" in cut.text


@FAST
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80), max_size=40),
       st.integers(40, 400), st.sampled_from(t.SHAPES))
def test_cut_text_property_never_over_budget(lines, keep, shape):
    text = "\n".join(lines)
    cut = t.cut_text(text, keep, COUNTER, shape, t.Origin("doc.md", 1))
    assert COUNTER.count(cut.text) == cut.tokens
    assert cut.tokens <= keep
    if COUNTER.count(text) <= keep:
        assert cut.text == text


# ----------------------------------------------------------------------------- graded tail


def test_graded_levels_order_of_loss():
    v, f, s = [100] * 6, [40] * 6, [10] * 6
    levels, total = t.graded_levels(6, v.__getitem__, f.__getitem__, s.__getitem__, 600)
    assert levels == [0] * 6 and total == 600
    levels, total = t.graded_levels(6, v.__getitem__, f.__getitem__, s.__getitem__, 480, keep_last=1, recent_share=0.2)
    assert levels == [1, 1, 0, 0, 0, 0] and total == 480  # oldest first, first-last first
    levels, total = t.graded_levels(6, v.__getitem__, f.__getitem__, s.__getitem__, 200, keep_last=1, recent_share=0.2)
    assert levels[-1] == 0 and levels[:5] == [2, 2, 2, 2, 1] and total <= 200
    levels, total = t.graded_levels(6, v.__getitem__, f.__getitem__, s.__getitem__, 125, keep_last=1,
                                    recent_share=0.2, drop_marker=5)
    assert levels == [3, 3, 3, 2, 2, 0] and total == 125


def test_graded_levels_is_lazy_on_dropped_rounds():
    asked: set[int] = set()

    def summary(i):
        asked.add(i)
        return 10

    n = 10_000
    levels, total = t.graded_levels(n, lambda i: 100, lambda i: 50, summary, 1000, keep_last=1, recent_share=0.5)
    assert total <= 1000 and levels.count(t.DROPPED) > 9000
    assert len(asked) < 100  # only the rounds near the kept tail were summarised


def _round(index, n_tools=1, size=30, line=1):
    msgs = [Message("user", f"request {index}: " + "please do the thing " * 3, index, line)]
    for k in range(n_tools):
        cid = f"c{index}_{k}"
        msgs.append(Message("assistant", "", index, line + 1, tool_calls=({"id": cid, "name": "bash",
                                                                          "arguments": "pytest -q"},)))
        msgs.append(Message("tool", f"RESULT-{cid} " + "ok " * size, index, line + 2, call_id=cid))
    msgs.append(Message("assistant", f"done {index}. " + "explained at length " * size, index, line + 3))
    return Round(index, tuple(msgs), (line, line + 3))


def _history(n, **kw):
    return [_round(i + 1, line=10 * i + 1, **kw) for i in range(n)]


def _pairs_intact(text: str) -> bool:
    """Every tool call shown has its result shown under it, and every result its call (a result
    trimmed inside its round keeps its first line, then the cut's marker)."""
    calls = re.findall(r"^\[tool call (\S+)\]", text, re.M)
    results = re.findall(r"^\[tool result (\S+)\]\n    RESULT-(\S+)[ \n]", text, re.M)
    return sorted(calls) == sorted(a for a, _ in results) and all(a == b for a, b in results) and \
        "(no result recorded)" not in text and "[tool output" not in text


@pytest.mark.parametrize("budget", [100_000, 3000, 1200, 400, 150, 60])
def test_fit_history_fits_and_keeps_tool_pairs(budget):
    rounds = _history(30, n_tools=2)
    fit = t.fit_history(rounds, budget, COUNTER, session.render_round, session.round_summary, location="s.log")
    assert fit.tokens == COUNTER.count(fit.text) <= budget
    assert _pairs_intact(fit.text)
    if budget == 100_000:
        assert fit.text == session.render_rounds(rounds)
    else:
        assert "### Round 30" in fit.text  # the newest round is always there, verbatim or trimmed


def test_fit_history_grades_older_rounds_first():
    rounds = _history(20)
    full = COUNTER.count(session.render_rounds(rounds))
    fit = t.fit_history(rounds, int(full * 0.8), COUNTER, session.render_round, session.round_summary,
                        recent_share=0.5, location="s.log", give_back=False)  # whole-round steps only
    levels = list(fit.levels)
    assert levels == sorted(levels, reverse=True)  # older rounds lose more
    assert levels[-1] == t.VERBATIM and t.FIRST_LAST in levels
    k = levels.index(t.FIRST_LAST) + 1
    first_last = fit.text.split(f"### Round {k} ")[1].split(f"### Round {k + 1} ")[0]
    assert "messages cut" in first_last and f"request {k}:" in first_last and f"done {k}." in first_last
    assert f"[tool call c{k}_0]" not in first_last and f"[tool result c{k}_0]" not in first_last
    # what the whole-round steps left goes back to rounds trimmed inside: same order, fuller
    given = t.fit_history(rounds, int(full * 0.8), COUNTER, session.render_round, session.round_summary,
                          recent_share=0.5, location="s.log")
    assert list(given.levels) == sorted(given.levels, reverse=True)
    assert fit.tokens <= given.tokens <= int(full * 0.8) and int(full * 0.8) - given.tokens < 24


def test_fit_history_drops_oldest_with_a_note_naming_the_file():
    fit = t.fit_history(_history(200), 2000, COUNTER, session.render_round, session.round_summary, location="s.log")
    assert re.match(r"\[… [\d,]+ earlier rounds dropped \(rounds 1-\d+\); full text: s\.log lines 1-\d+\]", fit.text)
    assert fit.tokens <= 2000 and fit.levels[0] == t.DROPPED


def test_fit_history_respects_rounds_already_summarised():
    rounds = _history(12)
    fit = t.fit_history(rounds, 100_000, COUNTER, session.render_round, session.round_summary, summarized_before=10)
    assert fit.levels[:10] == (t.SUMMARY,) * 10 and fit.levels[10:] == (t.VERBATIM,) * 2


def test_fit_history_newest_round_alone_over_budget_keeps_request_and_pairs():
    rounds = _history(3, n_tools=6, size=80)
    fit = t.fit_history(rounds, 500, COUNTER, session.render_round, session.round_summary)
    assert fit.trimmed_newest and fit.tokens <= 500
    assert "request 3" in fit.text and _pairs_intact(fit.text) and "messages cut" in fit.text


def test_history_parts_add_up_exactly():
    rounds = _history(15, n_tools=2)
    forms = t._Forms(tuple(rounds), session.render_round, session.round_summary)
    levels = [3, 3, 2, 2, 2, 1, 1, 0, 0, 2, 0, 1, 0, 0, 0]
    parts = t.history_parts(forms, levels, "s.log")
    assert sum(COUNTER.count(text) for _, text in parts) == COUNTER.count("".join(text for _, text in parts))


@FAST
@given(st.integers(1, 25), st.integers(0, 3), st.integers(40, 4000), st.integers(0, 24))
def test_fit_history_property(n, tools, budget, summarized):
    rounds = _history(n, n_tools=tools, size=10)
    fit = t.fit_history(rounds, budget, COUNTER, session.render_round, session.round_summary,
                        summarized_before=summarized)
    assert fit.tokens == COUNTER.count(fit.text)
    assert fit.tokens <= budget
    assert _pairs_intact(fit.text)
    again = t.fit_history(rounds, budget, COUNTER, session.render_round, session.round_summary,
                          summarized_before=summarized)
    assert again == fit  # deterministic


# ----------------------------------------------------------------------------- the count cache

TEXTS = st.lists(st.sampled_from(list("ab .,:;#-*'\"/\t\n\r1") + ["é", "中", "😀", "\u0301", "12", "  ", "\n\n",
                                                                    "'s", "word", " \n"]),
                 max_size=200).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=6))
def test_cached_counter_counts_exactly(texts):
    cached = t.CachedCounter(COUNTER)
    for text in texts + ["\n\n".join(texts), "\n".join(texts) * 3]:
        assert cached.count(text) == COUNTER.count(text)  # split at newline + non-space, summed, cached


O200K = token_counter_for("o200k_base")


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=6))
def test_cached_counter_counts_o200k_exactly(texts):
    cached = t.CachedCounter(O200K)
    for text in texts + ["\n\n".join(texts), "\n/".join(texts) * 3, ".\n/".join(texts) * 3]:
        assert cached.count(text) == O200K.count(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, min_size=1, max_size=6))
def test_count_cache_pieces_are_the_look_behind_split(texts):
    """The count cache cuts a text where the encodings' pre-tokenizers always do; matching the
    newlines before a cut (fast) gives exactly the pieces of the look-behind split it replaced."""
    from ctxengine.nodes.lib.truncate import measure

    after = {"cl100k": r"\S", "o200k": r"[^\s/]"}  # what may follow a cut, by encoding
    for text in texts + ["\n\n".join(texts), "\n\n\n".join(texts) + "\n", ".\n/".join(texts)]:
        for name, boundaries in measure.SPLITS.items():
            nxt = after[name.split("_")[0]]
            for fast, slow in zip(boundaries, (rf"(?<=\n\n)(?={nxt})", rf"(?<=\n)(?={nxt})")):
                assert measure.pieces(text, fast) == re.split(slow, text), (name, text)


def test_o200k_is_not_split_where_a_newline_joins_a_slash():
    text = "".join(f"return {i};  // end.\n//comment {i}\n" for i in range(60))  # ".\n//" is one o200k pre-token
    assert len(text) > 512 and t.CachedCounter(O200K).count(text) == O200K.count(text)
    naive = sum(O200K.count(piece) for piece in re.split(r"(?<=\n)(?=\S)", text))
    assert naive != O200K.count(text)  # what splitting before every non-space would have got wrong


def test_count_cache_on_real_text_and_reuse():
    from ctxengine.nodes.lib.memo import Memo

    text = session.render_rounds(_history(40, n_tools=2)) * 2
    memo = Memo()
    cached = t.CachedCounter(COUNTER, memo)
    assert cached.count(text) == COUNTER.count(text)
    before = len(memo)
    assert t.CachedCounter(COUNTER, memo).count("intro\n\n" + text) == COUNTER.count("intro\n\n" + text)
    assert len(memo) <= before + 2  # another counter value: the known paragraphs were not counted again


def test_cached_counter_is_a_frozen_picklable_value_unchanged_by_counting():
    import pickle

    cached = t.CachedCounter(COUNTER)
    before = pickle.dumps(cached)
    cached.count("a paragraph never counted before " * 40 + "\n\nand another one")
    assert pickle.dumps(cached) == before and pickle.loads(before) == cached and hash(cached) == hash(t.CachedCounter(COUNTER))


@dataclass(frozen=True)
class _LengthCounter:
    encoding_name: str = "p50k_base"

    def count(self, text):
        return len(text)


@dataclass(frozen=True)
class _SpyCounter:
    """cl100k's counts, recording every text it is asked to count."""

    asked: list
    encoding_name: str = "cl100k_base"

    def count(self, text):
        self.asked.append(text)
        return COUNTER.count(text)


def test_a_long_paragraph_that_gains_lines_counts_only_its_new_lines():
    from ctxengine.nodes.lib.memo import Memo

    asked = []
    cached = t.CachedCounter(_SpyCounter(asked), Memo())
    summaries = "\n".join(f"- Round {i} (lines {3 * i}-{3 * i + 2}): did thing {i}" for i in range(300))
    assert cached.count(summaries) == COUNTER.count(summaries)
    asked.clear()
    grown = summaries + "\n- Round 300 (lines 900-902): one more"
    assert cached.count(grown) == COUNTER.count(grown)
    assert asked == ["- Round 299 (lines 897-899): did thing 299\n", "- Round 300 (lines 900-902): one more"]


def test_a_long_paragraph_that_gains_a_line_is_looked_up_by_runs_of_lines():
    from ctxengine.nodes.lib.memo import Memo

    class Asked(Memo):
        def get(self, kind, digest, make, **options):
            self.asked += 1
            return super().get(kind, digest, make, **options)

    memo = Asked()
    memo.asked = 0
    cached = t.CachedCounter(_SpyCounter([]), memo)
    summaries = "\n".join(f"- Round {i} (lines {3 * i}-{3 * i + 2}): did thing {i}" for i in range(2000))
    assert cached.count(summaries) == COUNTER.count(summaries)
    memo.asked = 0
    grown = summaries + "\n- Round 2000 (lines 6000-6002): one more"
    assert cached.count(grown) == COUNTER.count(grown)
    # the paragraph, its 32 runs of 64 lines (31 known), the 17 lines of the last run: not 2,001 lines
    assert t.LINES_RUN == 64 and memo.asked == 1 + 32 + 17
    from ctxengine.nodes.lib.digest import long_text

    carried = long_text("intro\n\n" + grown + "\n" + grown)  # over 64K characters: it carries its digest
    whole = cached.count(carried)
    memo.asked = 0
    # looked up whole by the digest it carries; the same text as a plain str: by its two paragraphs
    assert cached.count(carried) == whole == cached.count(str(carried)) and memo.asked == 1 + 2


def test_cached_counter_other_encodings_count_whole():
    cached = t.CachedCounter(_LengthCounter())
    assert not cached.splits and cached.count("a\n\nb" * 300) == len("a\n\nb" * 300)
