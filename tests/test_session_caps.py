"""The caps that keep a build linear in its input (issue 23, item 4): only the newest rounds of a
transcript and the newest lines of a JSON Lines log are read, each cap with one warning; line
warnings are counted past the first few; the memo is bounded by bytes (tests/test_round_store.py).
Timings are in benchmarks/scale.py, not here."""

from __future__ import annotations

import json

import pytest

from ctxengine.api import build_context
from ctxengine.nodes.lib.memo import Memo
from ctxengine.nodes.lib import sessions as S
from ctxengine.nodes.lib.sessions import aider, history, jsonl
from ctxengine.nodes.lib.sessions import claude_code as CC
from ctxengine.nodes.lib.sessions.claude_code import events as cc_events, rounds as cc_rounds


def cap(monkeypatch, name: str, value: int) -> None:
    """Set the cap ``name`` (sessions.history's) in every transcript module that reads it."""
    for module in (history, jsonl, aider, cc_events, cc_rounds):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


def _aider(rounds: int, header_before: int | None = None) -> str:
    """A transcript of ``rounds`` rounds (a request, an answer, tool output), a second session
    header just before round ``header_before``."""
    parts = ["# aider chat started at 2024-01-01 10:00:00\n\n> aider v0.50\n\n"]
    for i in range(1, rounds + 1):
        if i == header_before:
            parts.append("# aider chat started at 2024-01-02 09:00:00\n\n> aider v0.51\n\n")
        parts.append(f"#### request {i}\n#### second line {i}\n\nanswer {i} in src/m{i}.py\n\n> Applied edit to src/m{i}.py\n\n")
    return "".join(parts)


MEMO = Memo()


@pytest.fixture(autouse=True)
def _fresh_memo():
    MEMO.clear()
    yield
    MEMO.clear()


def test_an_aider_transcript_over_the_cap_keeps_its_newest_rounds_as_a_full_parse_has_them(monkeypatch):
    text = _aider(9, header_before=6)
    full = aider.parse_aider(text, "h.md", memo=MEMO)
    assert full.warnings == () and len(full.rounds) == 9 and full.sessions == 2
    cap(monkeypatch, "MAX_ROUNDS", 4)
    capped = aider.parse_aider(text, "h.md", memo=MEMO)  # the last parse is resumed from, then left for a fresh, capped one
    assert capped.rounds == full.rounds[-4:]  # numbers, lines and the second session's header as before
    assert capped.rounds[0].index == 6 and capped.rounds[0].messages[0].role == "system"
    assert (capped.sessions, capped.total_lines) == (full.sessions, full.total_lines)
    assert len(capped.warnings) == 1
    assert "9 rounds; only the newest 4 are read" in capped.warnings[0] and "h.md" in capped.warnings[0]
    MEMO.clear()
    assert aider.parse_aider(text, "h.md", memo=MEMO).rounds == capped.rounds  # the same without a last parse to resume from


def test_a_capped_transcript_that_grows_keeps_the_newest_rounds_and_one_warning(monkeypatch):
    cap(monkeypatch, "MAX_ROUNDS", 3)
    text = _aider(5)
    aider.parse_aider(text, "g.md", memo=MEMO)
    grown = text + "#### request 6\n\nanswer 6\n"
    again = aider.parse_aider(grown, "g.md", memo=MEMO)
    assert [r.index for r in again.rounds] == [4, 5, 6] and len(again.warnings) == 1
    cap(monkeypatch, "MAX_ROUNDS", 100)
    MEMO.clear()
    assert again.rounds == aider.parse_aider(grown, "g.md", memo=MEMO).rounds[-3:]


def test_an_aider_transcript_at_the_cap_has_no_warning(monkeypatch):
    cap(monkeypatch, "MAX_ROUNDS", 5)
    history = aider.parse_aider(_aider(5), "h.md", memo=MEMO)
    assert history.warnings == () and [r.index for r in history.rounds] == [1, 2, 3, 4, 5]


def _log(rounds: int) -> str:
    lines = []
    for i in range(1, rounds + 1):
        lines += [{"role": "user", "content": f"ask {i}"}, {"role": "assistant", "content": f"done {i}"}]
    return "\n".join(map(json.dumps, lines)) + "\n"


def test_a_log_over_the_line_cap_reads_its_newest_lines_with_their_line_numbers(monkeypatch):
    cap(monkeypatch, "MAX_LOG_LINES", 6)
    history = jsonl.parse_jsonl(_log(5), "s.log")  # 10 lines: lines 5-10 are read
    assert [m.line for r in history.rounds for m in r.messages] == [5, 6, 7, 8, 9, 10]
    assert [r.messages[0].content for r in history.rounds] == ["ask 3", "ask 4", "ask 5"]
    assert len(history.warnings) == 1 and "s.log: 10 lines; only the newest 6 are read (from line 5)" in history.warnings[0]
    assert jsonl.parse_jsonl(_log(3), "s.log").warnings == ()  # exactly 6 lines: no cap


def test_a_log_over_the_round_cap_keeps_the_newest_rounds_numbered_as_in_the_log(monkeypatch):
    cap(monkeypatch, "MAX_ROUNDS", 2)
    history = jsonl.parse_jsonl(_log(5), "s.log")
    assert [r.index for r in history.rounds] == [4, 5] and history.rounds[0].lines == (7, 8)
    assert len(history.warnings) == 1 and "5 rounds; only the newest 2 are read (from line 7)" in history.warnings[0]


def test_line_warnings_past_the_first_few_of_a_kind_are_counted_in_one():
    from ctxengine.nodes.lib.quote import WARNINGS_PER_KIND

    history = jsonl.parse_jsonl("1\n" * 30 + json.dumps({"role": "user", "content": "hi"}) + "\n", "s.log")
    assert len(history.warnings) == WARNINGS_PER_KIND + 1
    assert history.warnings[0] == "s.log:1: not a JSON object; line skipped"
    assert history.warnings[-1] == f"s.log: ... and {30 - WARNINGS_PER_KIND} more like this"
    assert [r.messages[0].content for r in history.rounds] == ["hi"]


def test_a_build_of_a_transcript_over_the_cap_says_so_once_and_shows_its_newest_rounds(tmp_path, monkeypatch):
    cap(monkeypatch, "MAX_ROUNDS", 3)
    (tmp_path / ".aider.chat.history.md").write_text(_aider(6))
    result = build_context(str(tmp_path), "next step", cache=False)
    capped = [w for w in result.warnings if "only the newest 3 are read" in w]
    assert len(capped) == 1
    assert "request 6" in result.context and "request 4" in result.context and "request 3" not in result.context


def _claude_code(rounds: int, bad_every: int = 0) -> str:
    """A Claude Code transcript of ``rounds`` prompts and answers (a malformed line after every
    ``bad_every``-th answer)."""
    lines, parent = [], None
    for i in range(1, rounds + 1):
        for kind, content in (("user", f"ask {i}"), ("assistant", [{"type": "text", "text": f"done {i}"}])):
            uuid = f"{kind[0]}{i}"
            lines.append(json.dumps({"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False,
                                     "message": {"role": kind, "content": content}}))
            parent = uuid
        if bad_every and i % bad_every == 0:
            lines.append("{broken")
    return "\n".join(lines) + "\n"


def test_a_claude_code_transcript_has_the_same_caps_with_one_warning_each(monkeypatch):
    """Claude Code transcripts had no cap (issue 23 item 4): the same line, round and warning caps."""
    text = _claude_code(6, bad_every=1)  # 18 lines: prompt, answer, a malformed line each round
    full = CC.parse_claude_code(text, "t.jsonl")
    assert [r.index for r in full.rounds] == [1, 2, 3, 4, 5, 6] and len(full.warnings) == 6
    cap(monkeypatch, "MAX_ROUNDS", 2)
    capped = CC.parse_claude_code(text, "t.jsonl")
    assert capped.rounds == full.rounds[-2:] and [r.index for r in capped.rounds] == [5, 6]
    assert capped.warnings[0] == S.rounds_cap_warning("t.jsonl", 6, 13)
    assert capped.warnings[1] == "t.jsonl:3: malformed JSON line skipped (Expecting property name enclosed in double quotes)"
    assert capped.warnings[1:6] == full.warnings[:5] and capped.warnings[6] == "t.jsonl: ... and 1 more like this"
    assert len(capped.warnings) == 7
    cap(monkeypatch, "MAX_LOG_LINES", 7)
    newest = CC.parse_claude_code(text, "t.jsonl")  # lines 12-18: rounds 5 (from its answer's line 14) and 6
    assert newest.warnings[0] == S.lines_cap_warning("t.jsonl", 11)
    assert "18 lines; only the newest 7 are read (from line 12)" in newest.warnings[0]
    assert [m.line for r in newest.rounds for m in r.messages] == [13, 14, 16, 17] and newest.total_lines == 18
    assert CC.parse_claude_code(_claude_code(2), "t.jsonl").warnings == ()  # 4 lines, 2 rounds: under every cap
