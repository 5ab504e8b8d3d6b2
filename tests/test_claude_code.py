"""Claude Code transcripts as a session source: the parser on real public samples and a
synthetic file (tests/data/claude_code/SOURCES.md says where each came from), and finding the
project's transcript through the real Hamilton driver (a fake $CLAUDE_CONFIG_DIR or HOME)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from hamilton import driver  # noqa: E402

from conftest import write_project  # noqa: E402
from ctxengine.nodes import config, settings as settings_nodes, state  # noqa: E402
from ctxengine.nodes.lib.sessions import claude_code as cc  # noqa: E402
from ctxengine.nodes.lib.sessions import render_rounds, round_summaries, tool_units  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

DATA = Path(__file__).parent / "data" / "claude_code"
SYNTHETIC = DATA / "synthetic.jsonl"


def parse(name: str, **options):
    path = DATA / name
    return cc.parse_claude_code(path.read_text(encoding="utf-8"), str(path), cc.Options(**options))


def requests(history) -> list[str]:
    return [next((m.content for m in r.messages if m.role == "user"), "") for r in history.rounds]


def every_call_answered(history) -> None:
    for round_ in history.rounds:
        for call, results in tool_units(round_):
            assert results, f"call {call['id']} of round {round_.index} has no result"


# ----------------------------------------------------------------------------- the synthetic file


def test_synthetic_folds_the_rounds_before_the_compaction():
    history = parse("synthetic.jsonl")
    assert history.format == cc.CLAUDE_CODE and history.sessions == 1
    assert history.warnings == (f"{SYNTHETIC}:11: malformed JSON line skipped (Expecting ',' delimiter)",)
    assert [r.index for r in history.rounds] == [1, 2, 3]
    folded = requests(history)[0]
    assert folded.startswith("[Claude Code compacted 2 earlier rounds (Add a login endpoint to src/routes.py; "
                             "Now add a logout endpoint); its summary:]")
    assert "Summary: login and logout endpoints were added" in folded
    assert "- lines 3-18: Add a login endpoint" in folded and "- lines 21-25: Now add a logout endpoint" in folded
    assert requests(history)[1:] == ["/review src/routes.py", "Write the docs"]
    text = render_rounds(history.rounds)
    for gone in ("SECRET-THINKING", "ABANDONED-ANSWER", "delete the database", "META-CAVEAT"):
        assert gone not in text
    assert "[tool result t5]\n    error: Permission denied: docs/login.md" in text
    assert round_summaries(history.rounds)[0].startswith("- Round 1 (lines 1-27): [Claude Code compacted 2 earlier")


def test_synthetic_keeps_calls_with_results_and_folds_the_subagent_under_its_task():
    history = parse("synthetic.jsonl", compacted="keep")
    assert requests(history) == [
        "Add a login endpoint to src/routes.py", "Now add a logout endpoint",
        "[Claude Code compacted the conversation here; its summary:]\nThis session is being continued from a previous "
        "conversation. Summary: login and logout endpoints were added to src/routes.py; 3 tests pass.",
        "/review src/routes.py", "Write the docs"]
    first = history.rounds[0]
    units = {call["id"]: (call["name"], [r.content for r in results]) for call, results in tool_units(first)}
    assert units["t1"] == ("Read", ["     1→def routes():\n     2→    return []"])  # its result hangs off a1c
    assert units["t2"] == ("Grep", ["src/routes.py:3: # login TODO"])
    # one result a call: the subagent's work is added to the Task's own result; its first message is not
    # the Task's prompt and it names no agentId, so it was matched by time, and says so
    assert units["t3"] == ("Task", ["tests/test_login.py covers login\n\n[subagent work (sidechain, 4 events; tools: "
                                    "Glob): Found tests/test_login.py; it covers the login endpoint. [matched to this call "
                                    "by time: no subagent call's prompt is its first message]]"])
    # one API message streamed as three events is one assistant message; thinking is dropped
    assistant = [m for m in first.messages if m.role == "assistant"]
    assert assistant[0].content == "I'll look at the routes first." and [c["id"] for c in assistant[0].tool_calls] == ["t1", "t2"]
    assert all(m.usage is None for m in first.messages)  # Claude's usage counts the whole call, not the message
    assert first.messages[-1].content == "Claude Code's summary of the conversation so far: Login and logout endpoints"
    assert [m.content for m in history.rounds[1].messages if m.role == "system"] == ["Request interrupted by user"]
    assert first.lines == (1, 18) and history.rounds[1].lines == (21, 25)  # line 1: the summary event
    every_call_answered(history)


def test_sidechains_can_be_left_out():
    history = parse("synthetic.jsonl", compacted="keep", sidechains="drop")
    text = render_rounds(history.rounds)
    assert "subagent work" not in text and "Searching for tests" not in text and "Found tests/test_login.py" not in text


# ----------------------------------------------------------------------------- real samples


def test_real_short_session_pairs_parallel_tool_results():
    history = parse("spotter__short.jsonl")
    assert history.warnings == ()
    assert requests(history) == ["mix phx.server doesnt seem to start"]
    units = tool_units(history.rounds[0])
    assert [call["name"] for call, _ in units] == ["Bash", "Glob"]
    assert all(results[0].content.startswith("error: The user doesn't want to proceed") for _, results in units)
    thinking = [b["thinking"] for line in (DATA / "spotter__short.jsonl").read_text().splitlines()
                for b in (json.loads(line).get("message") or {}).get("content", [])
                if isinstance(b, dict) and b.get("type") == "thinking"]
    assert thinking and thinking[0][:40] not in render_rounds(history.rounds)


def test_real_tool_heavy_session():
    history = parse("spotter__tool_heavy.jsonl")
    assert history.warnings == ()
    assert requests(history)[:2] == ["start phoenix in background", "/mcp"]
    assert requests(history)[2].startswith("scrolling back in xterm.js still does not work")
    assert [m.content for m in history.rounds[1].messages if m.role == "system"] == [
        "local-command-stdout: Reconnected to tidewave."]
    every_call_answered(history)
    long_results = [m for r in history.rounds for m in r.messages if m.role == "tool" and "more lines not shown" in m.content]
    assert all(m.content.count("\n") <= 41 for m in long_results)


def test_real_compaction_excerpt_starts_mid_round():
    history = parse("spotter__compaction_excerpt.jsonl")
    assert history.warnings == ()
    first = requests(history)[0]
    assert first.startswith("[Claude Code compacted 1 earlier round (no user request (the transcript starts mid-round)); its summary:]")
    assert "This session is being continued from a previous conversation that ran out of context." in first
    assert len(history.rounds) == 1 and history.rounds[0].lines[1] == 54
    calls = [c["name"] for _, m in enumerate(history.rounds[0].messages) for c in m.tool_calls]
    assert calls[:2] == ["Edit", "Read"]  # the work after the compaction, with its results
    every_call_answered(history)


def test_real_inline_sidechains_fold_under_the_task_call():
    history = parse("claude-code-log__sidechain_integrated.jsonl")
    (round_,) = history.rounds
    (task, results), = tool_units(round_)
    assert task["name"] == "Task"
    # one result: the Task's own, then the subagent's two chains (the excerpt cut the link between them):
    # the one naming the agentId of the Task's result, and the other, matched by time (and saying so)
    assert [r.content for r in results] == [
        "Perfect! Now I have a complete understanding. Let ...\n\n"
        "[subagent work (sidechain, 2 events; tools: Grep): I'll research how `data-border-color` is used thro... "
        "[matched to this call by time: no subagent call's prompt is its first message]]\n\n"
        "[subagent work (sidechain, 1 event; tools: none)]"]
    assert render_rounds(history.rounds).count("[tool result toolu_01JA2mLseQCAW3MdwPE4qWEk]") == 1
    assert [m.content for m in round_.messages if m.role == "assistant"] == [
        "", "Excellent research! The sub-assistant has identifi..."]


def test_parallel_task_subagents_go_to_the_task_whose_prompt_they_were_given():
    """Two Task calls of one message run at once; the second's subagent starts first, so matching by
    time filed each subagent under the other Task (and showed a second result of the same id)."""
    history = parse("parallel_tasks.jsonl")
    (round_,) = history.rounds
    units = {call["id"]: [r.content for r in results] for call, results in tool_units(round_)}
    assert units == {
        "toolu_A": ["The login route is defined in src/routes.py at line 12.\n\n[subagent work (sidechain, 4 events; "
                    "tools: Grep): The login route is defined in src/routes.py at line 12.]"],
        "toolu_B": ["One test covers logout: tests/test_auth.py::test_logout_clears_session; it passes.\n\n[subagent "
                    "work (sidechain, 4 events; tools: Grep): One test covers logout: "
                    "tests/test_auth.py::test_logout_clears_session; it passes.]"]}
    text = render_rounds(history.rounds)
    assert text.count("[tool result toolu_A]") == 1 and text.count("[tool result toolu_B]") == 1
    assert "by time" not in text and history.warnings == ()


def test_a_subagent_whose_first_message_is_in_blocks_matches_its_prompt_too(tmp_path):
    """Claude Code 2.x writes a subagent's first message as text blocks; the same prompt matches."""
    lines = (DATA / "parallel_tasks.jsonl").read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        if event.get("isSidechain") and event["parentUuid"] is None:
            event["message"]["content"] = [{"type": "text", "text": event["message"]["content"] + "\n"}]
    events.reverse()  # and the Tasks' order no longer follows time
    text = "\n".join(json.dumps(e) for e in events) + "\n"
    history = cc.parse_claude_code(text, "t.jsonl")
    units = {call["id"]: [r.content for r in results] for r in history.rounds for call, results in tool_units(r)}
    assert "subagent work" in units["toolu_A"][0] and units["toolu_A"][0].endswith("at line 12.]")
    assert units["toolu_B"][0].endswith("it passes.]") and len(units["toolu_B"]) == 1


def test_a_summary_of_a_leaf_in_another_file_is_not_this_conversations_summary():
    """The file opens with a summary whose leafUuid is no line of it (another session's title)."""
    for options in ({}, {"cwds": ("/work/demo-project",)}):
        history = parse("parallel_tasks.jsonl", **options)
        notes = [m.content for r in history.rounds for m in r.messages if m.role == "system"]
        assert notes == ["Claude Code's summary of the conversation so far: Login route and logout tests checked"]
        assert history.rounds[0].lines == (2, 17)  # line 1, the other session's title, is in no round


def test_real_rewind_then_compaction():
    history = parse("claude-code-log__dag_compact_after_rewind.jsonl")
    assert "First attempt" not in render_rounds(history.rounds) and "First answer" not in render_rounds(history.rounds)
    assert requests(history)[1] == "After compaction"
    assert "- lines 5-6: Second attempt" in requests(history)[0]
    kept = parse("claude-code-log__dag_compact_after_rewind.jsonl", compacted="keep")
    assert requests(kept)[:3] == ["Start", "Second attempt", "Keep going"]


def test_sample_without_parent_ids_reads_in_file_order():
    history = parse("claude-code-transcripts__sample_session.jsonl")
    assert requests(history) == ["Create a hello world function", "Now add a goodbye function"]
    # its summary's leaf ("test-leaf-uuid") is no line of the file: another session's title, left out
    assert not any("Test session for JSONL parsing" in m.content for r in history.rounds for m in r.messages)
    assert [c["name"] for c, _ in tool_units(history.rounds[0])] == ["Write", "Bash"]
    every_call_answered(history)


# ----------------------------------------------------------------------------- pieces


def test_capped_keeps_head_and_tail():
    text = "\n".join(f"line {i}" for i in range(1, 101))
    out = cc.capped(text, 9, 10_000)
    assert out.split("\n") == [f"line {i}" for i in range(1, 7)] + ["[… 91 more lines not shown]"] + [
        "line 98", "line 99", "line 100"]
    assert cc.capped("x" * 50 + "y" * 50, 100, 30) == "x" * 20 + "\n[… 70 more characters not shown]\n" + "y" * 10
    assert cc.capped("short", 40, 4000) == "short"


def test_is_claude_code_tells_the_formats_apart():
    assert cc.is_claude_code(SYNTHETIC.read_text())
    assert not cc.is_claude_code('{"role": "user", "content": "hi", "type": "x"}\n')
    assert not cc.is_claude_code("# aider chat started at 2024-01-01\n#### hi\n")


def test_project_folder_follows_claude_codes_encoding(tmp_path: Path):
    assert cc.folder_name("/home/me/my proj.v2/a_b") == "-home-me-my-proj-v2-a-b"
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg"), "HOME": str(tmp_path / "home")}
    assert cc.project_folders("/srv/app", env) == [str(tmp_path / "cfg" / "projects" / "-srv-app")]
    assert cc.config_dir({"HOME": str(tmp_path / "home")}) == str(tmp_path / "home" / ".claude")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    found = cc.project_folders(str(tmp_path / "link"), env)
    assert [Path(f).name for f in found] == [cc.folder_name(str(tmp_path / "link")), cc.folder_name(str(real))]


def test_newest_transcript_skips_subagents_folders_and_symlinks(tmp_path: Path):
    for name, age in (("old.jsonl", 300), ("new.jsonl", 200), ("agent-a1.jsonl", 0), ("notes.txt", 0)):
        (tmp_path / name).write_text("{}\n")
        os.utime(tmp_path / name, (time.time() - age, time.time() - age))
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "zz.jsonl").symlink_to(tmp_path / "old.jsonl")
    assert cc.newest_transcript(str(tmp_path)) == str(tmp_path / "new.jsonl")
    assert cc.newest_transcript(str(tmp_path / "absent")) is None


def test_a_large_transcript_parses_quickly():
    lines = []
    parent = None
    for n in range(1500):
        for kind, uuid, body in (
            ("user", f"u{n}", f"request {n}"),
            ("assistant", f"a{n}", [{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": "pytest"}}]),
            ("progress", f"p{n}", None),
            ("user", f"r{n}", [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok\n" * 200}]),
        ):
            event = {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False}
            if body is not None:
                event["message"] = {"role": "assistant" if kind == "assistant" else "user", "content": body}
            lines.append(json.dumps(event))
            parent = uuid
    text = "\n".join(lines) + "\n"
    started = time.perf_counter()
    history = cc.parse_claude_code(text, "big.jsonl")
    elapsed = time.perf_counter() - started
    assert len(history.rounds) == 1500 and history.warnings == ()
    assert "[… 161 more lines not shown]" in history.rounds[-1].messages[-1].content
    assert elapsed < 5, f"{len(text) / 1e6:.1f} MB parsed in {elapsed:.2f} s"


# ----------------------------------------------------------------------------- through the driver


@pytest.fixture(scope="module")
def dr():
    return driver.Builder().with_modules(config, settings_nodes, state).build()


def run(dr, project: Path, overrides: dict | None = None) -> dict:
    return dr.execute(["history_section", "session_history", "state_warnings", "config_warnings"],
                      inputs={"project_dir": str(project), "overrides": overrides or {}})


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch) -> Path:
    home = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


def recorded_in(project: Path | str, text: str | None = None) -> str:
    """The synthetic transcript (or ``text``) as Claude Code would have recorded it in ``project``
    (every ``cwd`` is the project's path)."""
    text = SYNTHETIC.read_text(encoding="utf-8") if text is None else text
    return text.replace('"cwd":"/work/demo-project"', '"cwd":' + json.dumps(str(project)))


def _planted(home: Path, project: Path) -> Path:
    folder = home / "projects" / cc.folder_name(str(project))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "0ld.jsonl").write_text(json.dumps({"type": "user", "uuid": "x", "cwd": str(project), "message": {
        "role": "user", "content": "AN OLDER SESSION"}}) + "\n")
    os.utime(folder / "0ld.jsonl", (time.time() - 600, time.time() - 600))
    (folder / "5e551011-0000-4000-8000-000000000001.jsonl").write_text(recorded_in(project), encoding="utf-8")
    return folder


def test_driver_reads_the_newest_transcript_of_the_project(dr, tmp_path: Path, claude_home: Path):
    project = write_project(tmp_path / "my project.v2", {"src/app.py": "print(1)\n"})
    folder = _planted(claude_home, project)
    out = run(dr, project, {"state.maxHistoryRounds": 2})
    newest = str(folder / "5e551011-0000-4000-8000-000000000001.jsonl")
    assert out["session_history"].source == newest and len(out["session_history"].rounds) == 3
    section = out["history_section"]
    assert "Write the docs" in section.content and "AN OLDER SESSION" not in section.content
    assert section.sources[-1].location == newest
    assert f"{newest}:11: malformed JSON line skipped (Expecting ',' delimiter)" in out["state_warnings"]


def test_driver_finds_it_under_home_without_claude_config_dir(dr, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = write_project(tmp_path / "proj", {"a.txt": "a\n"})
    _planted(tmp_path / "home" / ".claude", project)
    assert len(run(dr, project)["session_history"].rounds) == 3


def test_only_the_user_turns_discovery_off_and_a_project_cannot_turn_it_on(dr, tmp_path: Path, claude_home: Path):
    project = write_project(tmp_path / "proj", {".planning/config.json": {"trust": {"claudeProjects": True}}})
    _planted(claude_home, project)
    off = run(dr, project, {"trust.claudeProjects": False})
    assert off["history_section"] is None and off["session_history"].rounds == ()
    assert any("trust.claudeProjects in" in w and "is ignored" in w for w in off["config_warnings"])
    project_off = write_project(tmp_path / "proj2", {".planning/config.json": {"trust": {"claudeProjects": False}}})
    _planted(claude_home, project_off)
    assert len(run(dr, project_off)["session_history"].rounds) == 3


def test_the_projects_own_session_log_comes_first(dr, tmp_path: Path, claude_home: Path):
    log = json.dumps({"role": "user", "content": "FROM THE SESSION LOG"}) + "\n"
    project = write_project(tmp_path / "proj", {".planning/sessions/current/session.log": log})
    _planted(claude_home, project)
    assert "FROM THE SESSION LOG" in run(dr, project)["history_section"].content
    only_claude = run(dr, project, {"state.sessionFormat": "claude"})
    assert "Write the docs" in only_claude["history_section"].content
    assert run(dr, project, {"state.sessionFormat": "jsonl", "trust.claudeProjects": True})[
        "session_history"].format == "jsonl"


def test_a_transcript_named_in_the_project_config_must_be_inside(dr, tmp_path: Path, claude_home: Path):
    inside = write_project(tmp_path / "in", {
        ".planning/config.json": {"state": {"claudeCode": {"transcript": "logs"}}},
        "logs/s.jsonl": SYNTHETIC.read_text()})
    out = run(dr, inside)
    assert out["session_history"].source == str(inside / "logs" / "s.jsonl")
    (tmp_path / "secret.jsonl").write_text(SYNTHETIC.read_text())
    outside = write_project(tmp_path / "out", {
        ".planning/config.json": {"state": {"claudeCode": {"transcript": "../secret.jsonl"}}}})
    (outside / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    refused = run(dr, outside)
    assert refused["history_section"] is None
    assert any(w.startswith(f"{outside / '.planning' / 'config.json'}: state.claudeCode.transcript '../secret.jsonl' "
                            "resolves outside the project") for w in refused["state_warnings"])
    (outside / ".planning" / "config.json").write_text(json.dumps({"state": {"claudeCode": {"transcript": "link.jsonl"}}}))
    linked = run(dr, outside, {"state.sessionFormat": "claude"})
    assert linked["history_section"] is None
    assert any("resolves outside the project" in w for w in linked["state_warnings"])


def test_the_user_may_name_a_transcript_anywhere(dr, tmp_path: Path, claude_home: Path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "s.jsonl").write_text(SYNTHETIC.read_text())
    project = write_project(tmp_path / "proj", {"a.txt": "a\n"})
    out = run(dr, project, {"state.claudeCode.transcript": str(tmp_path / "elsewhere"),
                            "state.claudeCode.sidechains": "drop", "state.claudeCode.compacted": "keep"})
    assert len(out["session_history"].rounds) == 5 and "subagent work" not in out["history_section"].content


@pytest.mark.parametrize("key, value, message", [
    ("state.claudeCode.sidechains", "hide", r"state\.claudeCode\.sidechains.*use one of fold, drop"),
    ("state.claudeCode.compacted", "drop", r"state\.claudeCode\.compacted.*use one of fold, keep"),
    ("state.claudeCode.toolResultMaxLines", 0, r"state\.claudeCode\.toolResultMaxLines.*whole number from 1"),
    ("state.sessionFormat", "claude-code", r"state\.sessionFormat.*aider, claude"),
    ("trust.claudeProjects", "yes", r"trust\.claudeProjects.*must be a boolean"),
])
def test_bad_settings_are_config_errors(dr, tmp_path: Path, key, value, message):
    with pytest.raises(ConfigError, match=message):
        run(dr, write_project(tmp_path / "p", {"a.txt": "a\n"}), {key: value})


def test_the_whole_build_shows_the_transcript(tmp_path: Path, claude_home: Path):
    import ctxengine

    project = write_project(tmp_path / "proj", {"a.txt": "a\n"})
    folder = _planted(claude_home, project)
    result = ctxengine.build_context(str(project), request="Continue with the docs", cache=False,
                                     overrides={"state.maxHistoryRounds": 1, "state.summaryBlock": 1, "state.includeGit": False})
    assert "Session log 5e551011-0000-4000-8000-000000000001.jsonl (claude-code)." in result.context
    assert "(3 rounds: 1-2 summarised, 3 verbatim)" in result.context
    assert "[tool result t5]\n    error: Permission denied: docs/login.md" in result.context
    assert "- Round 2 (lines 28-29): /review src/routes.py — done: The routes look fine." in result.context
    assert "SECRET-THINKING" not in result.context and "ABANDONED-ANSWER" not in result.context
    assert any(w.startswith(str(folder)) and w.endswith(":11: malformed JSON line skipped (Expecting ',' delimiter)")
               for w in result.warnings)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.jsonl")))
def test_a_grown_transcript_decodes_only_its_new_lines_and_reads_as_a_fresh_parse(name):
    from ctxengine.nodes.lib.memo import Memo

    text = (DATA / name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    head = "".join(lines[: len(lines) // 2])
    path = f"/p/{name}"
    memo = Memo()
    cc.parse_claude_code(head, path, memo=memo)
    before = memo.made["line"]
    grown = cc.parse_claude_code(text, path, memo=memo)
    assert memo.made["line"] - before == sum(1 for line in lines[len(lines) // 2:] if line.strip())
    assert grown == cc.parse_claude_code(text, path)


def test_an_edited_line_is_read_again_not_served_from_the_memo():
    text = (DATA / "claude-code-transcripts__sample_session.jsonl").read_text(encoding="utf-8")
    path = "/p/sample.jsonl"
    assert "Create a hello world function" in render_rounds(cc.parse_claude_code(text, path).rounds)
    edited = cc.parse_claude_code(text.replace("Create a hello world function", "Create a goodbye function"), path)
    assert "Create a goodbye function" in render_rounds(edited.rounds)
    assert "Create a hello world function" not in render_rounds(edited.rounds)


# ----------------------------------------------------------------------------- one folder, several projects


def session_text(cwd: Path | str, prompt: str, answer: str, session: str, summary_of: str | None = None) -> str:
    """A short Claude Code transcript in its real format (the fields Claude Code 2.x writes on
    each line), recorded in ``cwd``: a hook progress event, a prompt and its answer; with
    ``summary_of`` a ``summary`` line for that leaf first (Claude Code writes those at a file's head)."""
    common = {"isSidechain": False, "userType": "external", "cwd": str(cwd), "sessionId": session,
              "version": "2.1.38", "gitBranch": "main"}
    lines = [{"type": "summary", "summary": f"Title of {summary_of}", "leafUuid": summary_of}] if summary_of else []
    lines += [
        {"parentUuid": None, **common, "type": "progress", "data": {"type": "hook_progress", "hookEvent": "SessionStart"},
         "timestamp": "2026-02-10T21:11:52.438Z", "uuid": f"{session}-p"},
        {"parentUuid": f"{session}-p", **common, "type": "user", "message": {"role": "user", "content": prompt},
         "timestamp": "2026-02-10T21:11:56.906Z", "uuid": f"{session}-u", "permissionMode": "default"},
        {"parentUuid": f"{session}-u", **common, "type": "assistant", "message": {
            "id": f"msg_{session}", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": [{"type": "text", "text": answer}], "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 9}}, "requestId": "req_1",
         "timestamp": "2026-02-10T21:12:00.000Z", "uuid": f"{session}-a"},
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def _colliding(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """(the private project t/a/b, a project whose name collides with it, their shared Claude Code
    folder under a fake HOME) with t/a/b's private session the newest file there."""
    victim = write_project(tmp_path / "t" / "a" / "b", {"a.txt": "a\n"})
    clone = write_project(tmp_path / "t" / name, {"a.txt": "a\n"})
    folder = tmp_path / "home" / ".claude" / "projects" / cc.folder_name(str(victim))
    assert cc.project_folders(str(clone), {"HOME": str(tmp_path / "home")}) == [str(folder)]  # they collide
    folder.mkdir(parents=True)
    (folder / "private.jsonl").write_text(session_text(
        victim, "Rotate the key AKIA-PRIVATE-OF-A-B", "Rotated AKIA-PRIVATE-OF-A-B.", "private"))
    return victim, clone, folder


def _everything(out: dict) -> str:
    return json.dumps([repr(out["session_history"]), repr(out["history_section"]), out["state_warnings"]])


@pytest.mark.parametrize("name", ["a-b", "a.b", "a_b", "a b"])
def test_a_project_never_reads_the_session_of_another_whose_name_collides(dr, tmp_path: Path, monkeypatch, name):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    victim, clone, folder = _colliding(tmp_path, name)
    out = run(dr, clone)
    assert out["history_section"] is None and out["session_history"].rounds == ()
    assert "AKIA-PRIVATE" not in _everything(out) and str(victim) not in _everything(out)
    assert f"{folder}: 1 Claude Code transcript skipped: recorded in another folder whose name Claude Code stores " \
           "in the same place (not this project)" in out["state_warnings"]
    assert "AKIA-PRIVATE-OF-A-B" in run(dr, victim)["history_section"].content  # its owner still reads it

    # the clone's own, older session is found past the other project's newer one
    (folder / "own.jsonl").write_text(session_text(clone, "Add the CLONE-OWN feature", "Done.", "own"))
    os.utime(folder / "own.jsonl", (time.time() - 600, time.time() - 600))
    out = run(dr, clone)
    assert "CLONE-OWN" in out["history_section"].content and "AKIA-PRIVATE" not in _everything(out)
    assert out["session_history"].source == str(folder / "own.jsonl")
    assert "CLONE-OWN" not in _everything(run(dr, victim))


def test_lines_and_summaries_of_another_folder_are_skipped_within_a_transcript(dr, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    victim, clone, folder = _colliding(tmp_path, "a-b")
    mixed = (session_text(clone, "CLONE-FIRST request", "ok", "one", summary_of="private-a")
             + session_text(victim, "Rotate AKIA-PRIVATE-OF-A-B", "AKIA-PRIVATE answer", "two")
             + session_text(clone / "src", "CLONE-SECOND request from a subfolder", "ok", "three"))
    (folder / "mixed.jsonl").write_text(mixed)
    out = run(dr, clone)
    content = out["history_section"].content
    assert "CLONE-FIRST" in content and "CLONE-SECOND" in content
    assert "AKIA-PRIVATE" not in _everything(out) and "Title of private-a" not in _everything(out)
    assert f"{folder / 'mixed.jsonl'}: 3 lines recorded in another folder (not this project) skipped" \
        in out["state_warnings"]


def test_a_symlinked_project_reads_the_transcript_recorded_at_its_real_path(dr, tmp_path: Path, monkeypatch):
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    real = write_project(tmp_path / "real", {"a.txt": "a\n"})
    (tmp_path / "link").symlink_to(real)
    folder = tmp_path / "home" / ".claude" / "projects" / cc.folder_name(str(real))
    folder.mkdir(parents=True)
    (folder / "s.jsonl").write_text(session_text(real, "REAL-PATH request", "ok", "s"))
    assert "REAL-PATH" in run(dr, tmp_path / "link")["history_section"].content


def test_the_line_filter_is_part_of_the_memo_key():
    text = session_text("/t/a/b", "PRIVATE prompt", "answer", "s")
    assert "PRIVATE" in render_rounds(cc.parse_claude_code(text, "/p/s.jsonl").rounds)
    filtered = cc.parse_claude_code(text, "/p/s.jsonl", cc.Options(cwds=("/t/a-b",)))
    assert filtered.rounds == () and filtered.warnings == ("/p/s.jsonl: 3 lines recorded in another folder (not "
                                                           "this project) skipped",)
