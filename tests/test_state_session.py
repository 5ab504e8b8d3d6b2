"""Session history: JSON Lines session.log and aider transcripts (the real corpus ones)."""

from __future__ import annotations

import dataclasses

import hashlib
import json
import pickle
import re
from pathlib import Path

import pytest

from conftest import CORPUS_SESSIONS
from ctxengine.driver import MEMO
from ctxengine.nodes.lib import sessions as S
from ctxengine.nodes.lib.sessions import aider as S_aider
from ctxengine.nodes.lib.sessions import jsonl as S_jsonl
from ctxengine.nodes.lib.memo import Memo
from ctxengine.nodes.types import Message, Round


def _jsonl(*records) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


LOG = _jsonl(
    {"round": 1, "role": "user", "content": "Add login", "ts": "2026-11-01T10:00:00Z"},
    {"round": 1, "role": "assistant", "content": "I will add it to src/auth.py. Then run the tests.",
     "tool_calls": [{"id": "c1", "name": "bash", "arguments": "pytest -q"}]},
    {"round": 1, "role": "tool", "call_id": "c1", "content": "3 passed in 0.12s"},
    '{"round": 2, "role": "user", "content": "broken',
    {"round": 2, "role": "user", "content": "Now logout\nwith a second line"},
    {"round": 2, "role": "assistant", "content": "Done.", "tool_calls": [
        {"id": "c2", "type": "function", "function": {"name": "edit", "arguments": {"path": "src/logout.py"}}}]},
    {"round": 3, "role": "user", "content": "And the docs"},
    {"round": 3, "role": "tool", "call_id": "c2", "content": "FAILED tests/test_logout.py::test_bye"},
    {"round": 3, "role": "assistant", "content": "Docs updated in docs/auth.md."},
)


# ----------------------------------------------------------------------------- JSON Lines


def test_jsonl_rounds_and_malformed_line_warning():
    history = S.parse_session(LOG, "/p/session.log")
    assert history.format == "jsonl"
    assert [r.index for r in history.rounds] == [1, 2, 3]
    assert history.warnings == ("/p/session.log:4: malformed JSON line skipped (Unterminated string starting at)",) \
        or (len(history.warnings) == 1 and history.warnings[0].startswith("/p/session.log:4: malformed JSON line"))
    first = history.rounds[0]
    assert [m.role for m in first.messages] == ["user", "assistant", "tool"]
    assert first.lines == (1, 3)
    assert first.messages[1].tool_calls[0] == {"id": "c1", "name": "bash", "arguments": "pytest -q"}
    # OpenAI's nested form is normalised, arguments as JSON text
    assert history.rounds[1].messages[1].tool_calls[0]["name"] == "edit"
    assert json.loads(history.rounds[1].messages[1].tool_calls[0]["arguments"]) == {"path": "src/logout.py"}


def test_a_tool_result_joins_the_round_of_its_call():
    history = S.parse_session(LOG, "/p/session.log")
    second, third = history.rounds[1], history.rounds[2]
    assert [m.call_id for m in second.messages if m.role == "tool"] == ["c2"]
    assert all(m.role != "tool" for m in third.messages)
    assert all(m.round == 2 for m in second.messages)


def test_rounds_without_round_field_start_at_each_user_message():
    text = _jsonl(
        {"role": "system", "content": "You are helpful"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "two"},
        {"role": "user", "content": "three"},
        [1, 2],
        {"role": "robot", "content": "?"},
    )
    history = S.parse_session(text, "s.log")
    assert [[m.role for m in r.messages] for r in history.rounds] == [["system", "user", "assistant"], ["user"], ["user"]]
    assert [w.split(":")[1] for w in history.warnings] == ["6", "7"]


def test_render_shows_each_result_under_its_call():
    history = S.parse_session(LOG, "/p/session.log")
    text = S.render_rounds(history.rounds)
    call = text.index("[tool call c2] edit:")
    result = text.index("[tool result c2]")
    assert call < result < text.index("### Round 3")  # the result moved up to its call
    assert text.index("[tool call c1] bash: pytest -q") < text.index("[tool result c1]") < text.index("3 passed")


def test_a_call_without_result_is_rendered_as_such():
    rnd = Round(1, (Message("user", "go", 1, 1), Message("assistant", "", 1, 2, ({"id": "x", "name": "bash", "arguments": "ls"},))))
    assert "[tool result x] (no result recorded)" in S.render_rounds([rnd])
    assert "bash `ls` → no result recorded" in S.round_summary(rnd)


def test_round_summary_lines_are_informative_and_keep_calls_with_results():
    history = S.parse_session(LOG, "/p/session.log")
    first = S.round_summary(history.rounds[0])
    assert first.startswith("- Round 1 (lines 1-3): Add login")
    assert "done: I will add it to src/auth.py." in first
    assert "files: src/auth.py" in first
    assert "ran: bash `pytest -q` → 3 passed in 0.12s" in first
    second = S.round_summary(history.rounds[1])
    assert "Now logout" in second and "with a second line" not in second  # the request's first line only
    assert "FAILED tests/test_logout.py::test_bye" in second
    assert "src/logout.py" in second
    assert S.round_summary(history.rounds[0]) == first  # deterministic


def test_compact_history_keeps_the_last_rounds_verbatim():
    history = S.parse_session(LOG, "/p/session.log")
    text = S.compact_history(history.rounds, 1)
    summary, verbatim = text.split("Recent rounds, verbatim:")  # no counts in the headings
    assert "- Round 1" in summary and "- Round 2" in summary and "- Round 3" not in summary
    assert "### Round 3" in verbatim and "Docs updated in docs/auth.md." in verbatim
    everything = S.compact_history(history.rounds, 10)
    assert "Earlier rounds" not in everything and everything.count("### Round") == 3
    nothing = S.compact_history(history.rounds, 0)
    assert "Recent rounds" not in nothing and nothing.count("\n- Round") == 3


# ----------------------------------------------------------------------------- aider


AIDER = """\
# aider chat started at 2025-01-01 10:00:00

> aider --model gpt-4o  
> Aider v0.50.0  

#### Fix the failing test in tests/test_app.py  
#### it breaks on CI  

Certainly! The fix is in `app/core.py`. Here is the change:

app/core.py
```python
<<<<<<< SEARCH
x = 1
=======
x = 2
>>>>>>> REPLACE
```

> Tokens: 1k sent, 100 received.  
> Applied edit to app/core.py  
> Commit abc1234 fix: Correct x in core  
> Run shell command? (Y)es/(N)o [Yes]: y  
> Running pytest -q  
> ===== 1 failed, 12 passed in 0.5s =====  

#### /run pytest -q  

> 13 passed in 0.4s  

#### thanks  

# aider chat started at 2025-01-02 09:00:00

> Aider v0.50.0  

#### next task  
Ok.
"""


def test_aider_rounds_roles_and_lines(tmp_path):
    history = S.parse_session(AIDER, str(tmp_path / ".aider.chat.history.md"))
    assert history.format == "aider" and history.sessions == 2
    assert [r.index for r in history.rounds] == [1, 2, 3, 4]
    first = history.rounds[0]
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "tool"]
    assert first.messages[0].content == "aider chat started at 2025-01-01 10:00:00"
    assert first.messages[1].content == "Fix the failing test in tests/test_app.py\nit breaks on CI"
    assert first.messages[1].line == 6 and first.lines == (6, 25)
    assert first.messages[3].content.splitlines()[1] == "Applied edit to app/core.py"  # prefix and trailing blanks gone
    assert history.rounds[1].lines == (27, 29)
    assert [m.role for m in history.rounds[3].messages] == ["system", "user", "assistant"]
    assert history.rounds[3].messages[2].content == "Ok."


def test_aider_round_summary(tmp_path):
    history = S.parse_session(AIDER, "h.md")
    line = S.round_summary(history.rounds[0])
    assert "Fix the failing test in tests/test_app.py" in line and "it breaks on CI" not in line
    assert "done: commit abc1234 fix: Correct x in core" in line
    assert "files: app/core.py, tests/test_app.py" in line  # the applied edit first
    assert "tests: 1 failed, 12 passed in 0.5s" in line
    assert "13 passed in 0.4s" in S.round_summary(history.rounds[1])


def test_a_bare_blank_line_separates_two_user_messages():
    text = "#### /add a.py  \n\n#### now edit it  \n\nSure, editing a.py.\n"
    history = S.parse_session(text, "x.aider.chat.history.md")
    assert [r.messages[0].content for r in history.rounds] == ["/add a.py", "now edit it"]


@pytest.mark.parametrize("text", ["####\n", "hi\n####", "####\n####\n\n####", "# aider chat started at x\n####\n"])
def test_an_empty_user_line_alone_makes_no_round(text):
    history = S.parse_session(text, "x.aider.chat.history.md")
    assert all(r.messages for r in history.rounds)
    assert [r.index for r in history.rounds] == list(range(1, len(history.rounds) + 1))


def test_an_empty_user_line_keeps_the_reply_that_follows():
    text = "#### first\nok\n####\nreply to nothing\n#### second\ndone\n"
    history = S.parse_session(text, "x.aider.chat.history.md")
    assert [[(m.role, m.content) for m in r.messages] for r in history.rounds] == [
        [("user", "first"), ("assistant", "ok")],
        [("assistant", "reply to nothing")],
        [("user", "second"), ("assistant", "done")],
    ]
    assert history.rounds[1].lines == (4, 4)
    assert "(no user request)" in S.round_summary(history.rounds[1])


def test_deeply_nested_json_line_is_skipped_with_a_warning(tmp_path):
    deep = '{"role": "user", "content": ' + "[" * 1000 + "]" * 1000 + "}"
    log = tmp_path / "session.log"
    log.write_text(_jsonl({"role": "user", "content": "hi"}, deep, "[" * 100000,
                          {"role": "assistant", "content": "hello"}, {"role": ["user"], "content": "x"},
                          {"role": "user", "content": "again", "round": {"n": 1}}))
    history = S.parse_session(log.read_text(), str(log))
    assert [(m.role, m.content) for r in history.rounds for m in r.messages] == [
        ("user", "hi"), ("assistant", "hello"), ("user", "again")]
    assert [w.split(": ", 1)[0] for w in history.warnings] == [f"{log}:{n}" for n in (2, 3, 5, 6)]
    assert "nested too deeply" in history.warnings[0] and "nested too deeply" in history.warnings[1]
    assert "'role' must be one of" in history.warnings[2] and "'round' must be a number" in history.warnings[3]


def _naive_round_count(text: str) -> int:
    """An independent, line-by-line count of aider rounds: runs of '#### ' lines."""
    count, previous, blank = 0, None, False
    for line in text.split("\n"):
        if not line.strip():
            blank = True
            continue
        if re.fullmatch(r"#### .*\(Y\)es/\(N\)o.* \[(?:Yes|No)\]: [a-z]*\s*", line):
            kind = "tool"  # a replayed confirmation answer (aider's, not the user's request)
        elif line.startswith("#### ") or line == "####":
            kind = "user"
        elif line.startswith("# aider chat started at"):
            previous, blank = "header", False
            continue
        elif line.startswith("> ") or line == ">":
            kind = "tool"
        else:
            kind = "assistant"
        if kind == "user" and (previous != "user" or blank):
            count += 1
        previous, blank = kind, False
    return count


CORPUS = sorted(p for p in CORPUS_SESSIONS.glob("*.md") if "LICENSE" not in p.name)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_corpus_transcript_parses(path: Path):
    text = path.read_text(encoding="utf-8")
    history = S.parse_session(text, str(path))
    assert history.warnings == ()
    assert len(history.rounds) == _naive_round_count(text) > 0
    print(f"{path.name}: {len(history.rounds)} rounds in {history.sessions} sessions")
    for rnd in history.rounds:
        assert rnd.messages and any(m.role == "user" for m in rnd.messages)
        assert rnd.lines[0] <= rnd.lines[1]
    lines = text.split("\n")
    for rnd in history.rounds[:50]:
        user = next(m for m in rnd.messages if m.role == "user")
        assert lines[user.line - 1].startswith("####")
    compact = S.compact_history(history.rounds, 5)
    summary_lines = [line for line in compact.split("\n") if line.startswith("- Round ")]
    assert len(summary_lines) >= max(0, len(history.rounds) - 5)
    assert summary_lines[: len(history.rounds) - 5] == [S.round_summary(r) for r in history.rounds[:-5]]
    assert compact.count("\n### Round ") >= min(5, len(history.rounds))


def test_round_summary_tells_the_outcome_and_the_failure_first():
    from ctxengine.nodes.lib.sessions import round_summary
    from ctxengine.nodes.types import Message, Round

    messages = (
        Message("user", "Run the tests", 7),
        Message("assistant", "Running the relevant tests.", 7, tool_calls=({"id": "c1", "name": "bash", "arguments": "pytest"},)),
        Message("tool", "tests/test_a.py::test_ok PASSED\ntests/test_a.py::test_login FAILED - assert 404 == 401\n1 failed, 1 passed", 7, call_id="c1"),
        Message("assistant", "The login handler returns 404 for a bad password. I will fix it next.", 7),
    )
    summary = round_summary(Round(7, messages))
    assert "done: The login handler returns 404 for a bad password." in summary
    assert "test_login FAILED" in summary


# ----------------------------------------------------------------------------- growing transcripts


def _aider_transcript(tag: str, rounds: int) -> str:
    out = [f"# aider chat started at 2026-11-0{len(tag) % 9 + 1} 10:00:00\n\n> Aider v0.50.0 ({tag})\n"]
    for i in range(1, rounds + 1):
        out.append(f"\n#### Step {i} of {tag}: change src/mod_{i}.py\n\nI'll edit `src/mod_{i}.py` for {tag}.\n\n"
                   f"> Applied edit to src/mod_{i}.py\n> Commit {i:07x} step {i} ({tag})\n")
    return "".join(out)


def _history_run(project: Path) -> dict:
    import ctxengine
    return ctxengine.run_nodes(["session_history", "round_summaries", "history_section", "budget_monitor"],
                               str(project), "Next step", overrides={"state.maxHistoryRounds": 2, "state.summaryBlock": 1})


def test_a_grown_transcript_parses_and_summarizes_only_its_new_round(tmp_path):
    text = _aider_transcript(tmp_path.name, 12)
    (tmp_path / ".aider.chat.history.md").write_text(text, encoding="utf-8")
    first = _history_run(tmp_path)
    assert len(first["session_history"].rounds) == 12
    parsed, summarized = MEMO.made["aider-stretch"], MEMO.made["summary"]
    grown = text + f"\n#### Step 13 of {tmp_path.name}: add docs\n\nDone: docs/x.md written.\n"
    (tmp_path / ".aider.chat.history.md").write_text(grown, encoding="utf-8")
    second = _history_run(tmp_path)
    assert MEMO.made["aider-stretch"] - parsed == 1  # the new round's stretch, nothing else
    assert MEMO.made["summary"] - summarized == 1
    rounds = second["session_history"].rounds
    assert len(rounds) == 13 and rounds[-1].messages[-1].content == "Done: docs/x.md written."
    assert rounds[:12] == first["session_history"].rounds  # the re-used rounds are the same rounds
    assert second["round_summaries"][:12] == first["round_summaries"]
    MEMO.clear()  # and a parse from nothing gives the same history
    fresh = S.parse_session(grown, str(tmp_path / ".aider.chat.history.md"), memo=MEMO)
    assert fresh == second["session_history"]
    assert MEMO.made["aider-stretch"] == 13


def test_each_round_is_summarized_once_per_build_and_both_consumers_share_the_lines(tmp_path):
    (tmp_path / ".aider.chat.history.md").write_text(_aider_transcript(tmp_path.name, 9), encoding="utf-8")
    summarized = MEMO.made["summary"]
    out = _history_run(tmp_path)
    assert MEMO.made["summary"] - summarized == 9  # not twice for the 7 summarised rounds
    lines = out["round_summaries"]
    assert isinstance(lines, tuple) and all(isinstance(x, str) for x in lines)
    assert pickle.loads(pickle.dumps(lines)) == lines  # a value Hamilton's cache can store
    content = out["history_section"].content
    assert all(line in content for line in lines[:7]) and lines[8] not in content
    assert lines[0].startswith("- Round 1 (lines")


def test_a_changed_round_is_parsed_again():
    memo = Memo()
    text = "#### one\n\nreply one\n\n#### two\n\nreply two\n"
    S_aider.parse_aider(text, "h.md", memo)
    before = memo.made["aider-stretch"]
    changed = S_aider.parse_aider(text.replace("reply one", "reply ONE"), "h.md", memo)
    assert memo.made["aider-stretch"] - before == 1  # the edited round only
    assert changed.rounds[0].messages[1].content == "reply ONE"


def test_round_stretches_parse_like_the_whole_corpus_transcript():
    path = CORPUS_SESSIONS / "AFI-Protocol__afi-core.aider.chat.history.md"
    if not path.exists():
        pytest.skip("corpus transcript missing")
    text = path.read_text(encoding="utf-8", errors="replace")
    whole = S_aider.parse_aider(text, str(path))
    cut = text.index("\n#### ", len(text) // 2)  # the first half alone, then the whole: re-used
    memo = Memo()
    half = S_aider.parse_aider(text[:cut + 1], str(path), memo)
    again = S_aider.parse_aider(text, str(path), memo)
    assert again == whole and again.rounds[:len(half.rounds) - 1] == half.rounds[:-1]
    assert whole.sessions == 9 and len(whole.rounds) == 40  # 49 runs of "#### " lines, 9 of them confirmation answers


def test_a_grown_session_log_reads_only_its_new_lines():
    lines = [json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}) for i in range(40)]
    head, whole = "\n".join(lines[:30]) + "\n", "\n".join(lines) + "\n"
    memo = Memo()
    S_jsonl.parse_jsonl(head, "/p/session.log", memo)
    before = memo.made["line"]
    grown = S_jsonl.parse_jsonl(whole, "/p/session.log", memo)
    assert memo.made["line"] - before == 10
    assert grown == S_jsonl.parse_jsonl(whole, "/p/session.log") and len(grown.rounds) == 20
    moved = S_jsonl.parse_jsonl("\n" + whole, "/p/session.log")  # every line one further down: read again, numbered right
    assert [m.line for m in moved.rounds[0].messages] == [2, 3]


# The digest of everything parse, summaries, render and compact make of a small real transcript,
# as the code before the cold-path work (91c5d8b) made it: a faster path must give the same bytes.
_BEFORE_FAST_PATHS = {
    "AbdulAlkawasmeh__metadata-aider.aider.chat.history.md":
        "a2f449a007673e5d9f9899d04bb5a33fecb485a4295c8bfdb6624546afa6a363",
}


@pytest.mark.parametrize("name", sorted(_BEFORE_FAST_PATHS))
def test_a_real_transcript_parses_summarizes_and_renders_as_before_the_fast_paths(name):
    path = CORPUS_SESSIONS / name
    if not path.is_file():
        pytest.skip(f"{path} is not there (../shared/corpus)")
    history = S_aider.parse_aider(path.read_text(encoding="utf-8"), "/p/.aider.chat.history.md")
    parts = [repr((history.sessions, history.total_lines, history.warnings))]
    parts += [repr((r.index, r.lines, [(m.role, m.content, m.round, m.line) for m in r.messages])) for r in history.rounds]
    parts += list(S.round_summaries(history.rounds))
    parts += [S.render_rounds(history.rounds), S.compact_history(history.rounds, 3)]
    assert len(history.rounds) == 12
    assert hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest() == _BEFORE_FAST_PATHS[name]
    assert [S_aider._message(m.role, m.content, m.round, m.line) for r in history.rounds for m in r.messages] == \
        [Message(m.role, m.content, m.round, m.line) for r in history.rounds for m in r.messages]


# ----------------------------------------------------------------------------- aider: confirmations, reasoning

AIDER_DATA = Path(__file__).parent / "data" / "aider"


def test_replayed_confirmation_answers_are_tool_output_not_requests():
    """afi-core (tests/data/aider/SOURCES.md): after "(S)kip all" / "(A)ll", aider writes each later
    answer of the group as a "#### …? (Y)es/(N)o/… [Yes]: skip" line; those were 6 of 10 rounds here."""
    path = AIDER_DATA / "afi-core__confirmations.aider.chat.history.md"
    history = S_aider.parse_aider(path.read_text(encoding="utf-8"), str(path))
    requests = [next(m.content for m in r.messages if m.role == "user").split("\n")[0].strip() for r in history.rounds]
    assert requests == ["sync-afi", "for dir in ~/AFI_Modular_Repos/afi-*; do", "for dir in ~/AFI_Modular_Repos/afi-*; do",
                        'Scan the repo using the current config and identify all files or patterns related to "modal" or '
                        '"construct" logic. Tell me what exists, where it\'s located, and what might still be missing for '
                        'the Modal-based signal lifecycle flow.']
    first, last = history.rounds[0], history.rounds[-1]
    # the answers stay in the round they answer, as tool output, with the files they were about
    tool = "\n".join(m.content for m in first.messages if m.role == "tool")
    assert tool.count("Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: skip") == 2
    assert "validators/PoIValidator.ts" in tool and first.lines == (2, 22)
    assert [m.role for m in last.messages] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert last.messages[-2].content.startswith("Based on the files you've added")
    assert not any("(Y)es/(N)o" in line for line in S.round_summaries(history.rounds))


@pytest.mark.parametrize("line, confirms", [
    ("#### Add file to the chat? (Y)es/(N)o/(A)ll/(S)kip all/(D)on't ask again [Yes]: all  ", True),
    ("#### Create new file? (Y)es/(N)o [Yes]: y", True),
    ("#### Run shell command? (Y)es/(N)o/(D)on't ask again [Yes]: ", True),
    ("#### Edit the files? (Y)es/(N)o [Yes]: skip\n#### Add file to the chat? (Y)es/(N)o [No]: n", True),
    ("#### What does (Y)es/(N)o [Yes]: all mean? Explain it", False),
    ("#### Add file to the chat? (Y)es/(N)o [Yes]: all\n#### and then fix the bug", False),
    ("#### fix the parser", False),
])
def test_a_confirmation_run_is_only_answers(line, confirms):
    assert S_aider.is_confirmation_run(line) is confirms
    history = S_aider.parse_aider(f"#### first request\n\nok\n\n{line}\n\n> Added src/a.py\n", "h.md")
    assert len(history.rounds) == (1 if confirms else 2)


def test_reasoning_blocks_are_not_the_assistants_words():
    """agent_aider_worktree (tests/data/aider/SOURCES.md): deepseek-r1 through aider writes its reasoning
    as <thinking-content-<hash>> … </thinking-content-<hash>> at the head of each reply."""
    path = AIDER_DATA / "agent_aider_worktree__reasoning.aider.chat.history.md"
    text = path.read_text(encoding="utf-8")
    history = S_aider.parse_aider(text, str(path))
    (only,) = history.rounds
    said = [m for m in only.messages if m.role == "assistant"]
    assert said[0].content.startswith("I'll help add more comprehensive tests to validate the README.md file.")
    assert said[0].line == 25 and text.split("\n")[24].startswith("I'll help add")  # where the answer starts
    assert not any("thinking-content" in m.content or "Okay, let" in m.content for m in only.messages)
    assert only.lines == (12, 72)  # the round still spans the reasoning the reply ended with
    # the file as aider had written it when the first reply was done: the summary tells that reply
    so_far = S_aider.parse_aider(text[:text.index("> README.md")], str(path))
    assert S.round_summary(so_far.rounds[0]).split(" — ")[1].startswith(
        "done: I'll help add more comprehensive tests to validate the README.md file.")


@pytest.mark.parametrize("reply, kept", [
    ("<think>\nthe user wants x\n</think>\n\nDone: x works.", "Done: x works."),
    ("<reasoning>why</reasoning>Done.", "Done."),
    ("<thinking-content-0a1b>\ncut off while reasoning", ""),
    ("The tag `<think>` is how the model marks it.", "The tag `<think>` is how the model marks it."),
    ("Plan:\n<think>\nscratch\n</think>\nStep 2.", "Plan:\n\nStep 2."),
])
def test_reasoning_tags_aider_may_write(reply, kept):
    history = S_aider.parse_aider(f"#### ask\n\n{reply}\n\n> Tokens: 1k sent\n", "h.md")
    assert [m.content for m in history.rounds[0].messages if m.role == "assistant"] == ([kept] if kept else [])
