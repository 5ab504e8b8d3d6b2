"""The state stage through a real Hamilton driver built from ctxengine.nodes.config + state."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from hamilton import driver  # noqa: E402

from conftest import CORPUS_SESSIONS, corpus_projects, write_project, needs_shared  # noqa: E402
from ctxengine.nodes import config, state  # noqa: E402
from ctxengine.nodes import settings as settings_nodes  # noqa: E402
from ctxengine.nodes.types import Section  # noqa: E402

HAS_GIT = shutil.which("git") is not None

PLAN = """\
# Plan: Auth rewrite
## Tasks
- [x] T1 Create the users table
  Done in migration 0003.
- [>] T2 Implement the login endpoint
  Use argon2id; return 401 on a bad password.
- [ ] T3 Write integration tests
"""


def _log(rounds: int) -> str:
    lines = []
    for n in range(1, rounds + 1):
        lines.append(json.dumps({"round": n, "role": "user", "content": f"Request number {n}"}))
        lines.append(json.dumps({"round": n, "role": "assistant", "content": f"Working on step {n}.",
                                 "tool_calls": [{"id": f"c{n}", "name": "bash", "arguments": "pytest -q"}]}))
        lines.append(json.dumps({"round": n, "role": "tool", "call_id": f"c{n}", "content": f"{n} passed"}))
    lines.insert(4, "{not json")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def dr():
    return driver.Builder().with_modules(config, settings_nodes, state).build()


@pytest.fixture
def article(tmp_path: Path) -> Path:
    project = write_project(tmp_path / "article", {
        ".planning/plans/current/plan.md": PLAN,
        ".planning/sessions/current/session.log": _log(8),
        "src/app.py": "print('v1')\n",
        "README.md": "# Demo\n",
    })
    if HAS_GIT:
        run = lambda *a: subprocess.run(["git", *a], cwd=project, check=True, capture_output=True)  # noqa: E731
        run("-c", "init.defaultBranch=main", "init", "-q")
        run("config", "user.name", "T")
        run("config", "user.email", "t@example.com")
        run("add", "-A")
        run("commit", "-q", "-m", "first")
        (project / "src" / "app.py").write_text("print('v2')\n")
        (project / "notes.txt").write_text("untracked\n")
    return project


def run(dr, project: Path, overrides: dict | None = None, outputs=("state_sections", "state_warnings")) -> dict:
    return dr.execute(list(outputs), inputs={"project_dir": str(project), "overrides": overrides or {}})


def test_nodes_are_tagged_and_named(dr):
    variables = {v.name: v for v in dr.list_available_variables()}
    for name in ("project_layout", "plan_files", "plan_state", "plan_section", "session_files", "session_history",
                 "history_section", "git_snapshot", "git_state", "git_section", "file_listing", "file_tree_section",
                 "environment_facts", "environment_section", "state_sections", "state_warnings"):
        assert variables[name].tags.get("stage") == "state", name
    for name in ("plan_files", "session_files", "project_layout"):
        assert variables[name].tags.get("loader") == "file"
    for name in ("git_snapshot", "file_listing"):
        assert variables[name].tags.get("loader") == "git"


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_article_project_gives_every_section_in_order(dr, article: Path):
    result = run(dr, article, {"state.includeFileTree": True, "state.summaryBlock": 1})
    sections = result["state_sections"]
    assert [s.kind for s in sections] == ["plan", "history", "git", "tree", "environment"]
    assert all(isinstance(s, Section) for s in sections)
    assert [s.pool for s in sections] == ["plan", "history", "environment", "environment", "environment"]
    assert [s.priority for s in sections] == [80, 70, 60, 30, 20]
    plan, history, git, tree, env = sections
    assert plan.key == "plan" and plan.title == "Current Plan"
    assert "Tasks: 1 done / 1 in progress / 1 pending / 0 cancelled" in plan.content
    assert "Done in migration 0003." not in plan.content and "Use argon2id" in plan.content

    assert len(history.data["rounds"]) == 8 and history.data["verbatim_from"] == 3
    assert history.data["format"] == "jsonl"
    assert history.content.count("\n- Round ") == 3 and history.content.count("### Round ") == 5
    log = str(article / ".planning/sessions/current/session.log")
    relative_log = ".planning/sessions/current/session.log"  # sources are named relative to the project
    assert [s.as_dict() for s in history.sources] == [
        {"kind": "file", "location": relative_log, "lines": [1, 10]},
        {"kind": "file", "location": relative_log, "lines": [11, 25]},
    ]

    assert git.key == "git" and not git.data["summary_mode"]
    assert ("src/app.py", 1, 1, "modified") in git.data["files"]
    assert ("notes.txt", None, None, "untracked") in git.data["files"]
    assert "+print('v2')" in git.content
    assert {"kind": "file", "location": "src/app.py", "lines": [1, 1]} in [s.as_dict() for s in git.sources]

    assert "src/\n  app.py" in tree.content and ".planning/" in tree.content
    assert f"- Python: {platform.python_version()}" in env.content and "- git: " in env.content

    assert result["state_warnings"] == (f"{log}:5: malformed JSON line skipped (Expecting property name enclosed "
                                        "in double quotes)",)
    # the JSON view of every section with its sources
    as_json = json.dumps([{"key": s.key, "sources": [x.as_dict() for x in s.sources]} for s in sections])
    assert '"lines": [5, 6]' in as_json  # the in-progress task's lines in plan.md


def test_switches_turn_parts_off_without_running_them(dr, tmp_path: Path):
    plain = write_project(tmp_path / "plain", {".planning/plans/current/plan.md": PLAN})
    on = run(dr, plain, outputs=("state_sections", "state_warnings", "state_notes", "git_snapshot"))
    assert any("not inside a git repository" in n for n in on["state_notes"])
    assert not any("not inside a git repository" in w for w in on["state_warnings"])
    off = run(dr, plain, {"state": {"includeGit": False, "includePlan": False, "includeEnvironment": False}},
              outputs=("state_sections", "state_warnings", "git_snapshot", "plan_files"))
    assert off["state_sections"] == [] and off["state_warnings"] == ()
    assert off["git_snapshot"].available is False and off["git_snapshot"].warnings == ()
    assert off["plan_files"] == {}


def test_max_history_rounds_and_layout_override(dr, article: Path):
    result = run(dr, article, {"state.maxHistoryRounds": 2, "state.includeGit": False},
                 outputs=("history_section", "project_layout"))
    # 8 rounds: the last 2 verbatim at least, the older ones summarised 4 at a time (state.summaryBlock)
    assert result["history_section"].data["verbatim_from"] == 4
    assert result["history_section"].content.count("### Round ") == 4
    assert result["history_section"].content.endswith("\n\n(8 rounds: 1-4 summarised, 5-8 verbatim)")
    one = run(dr, article, {"state.maxHistoryRounds": 2, "state.summaryBlock": 1, "state.includeGit": False},
              outputs=("history_section",))
    assert one["history_section"].data["verbatim_from"] == 6 and one["history_section"].content.count("### Round ") == 2
    gsd = run(dr, article, {"state.layout": "gsd"}, outputs=("plan_section", "state_warnings", "project_layout"))
    assert gsd["project_layout"] == "gsd"
    assert gsd["plan_section"] is None
    assert any("STATE.md: not found" in w for w in gsd["state_warnings"])


@pytest.mark.parametrize("project", corpus_projects(), ids=lambda p: p.name)
def test_corpus_projects_through_the_driver(dr, project: Path):
    result = run(dr, project, {"state.includeGit": False}, outputs=("state_sections", "state_warnings", "project_layout"))
    assert result["project_layout"] == "gsd"
    plan = result["state_sections"][0]
    assert plan.kind == "plan" and plan.content.startswith("## Position (.planning/STATE.md)\nPosition: ")
    assert all(s.location.startswith(".planning/") for s in plan.sources if s.kind == "file")


@needs_shared
def test_aider_transcript_at_the_project_root(dr, tmp_path: Path):
    source = CORPUS_SESSIONS / "AbdulAlkawasmeh__metadata-aider.aider.chat.history.md"
    project = tmp_path / "aider"
    project.mkdir()
    shutil.copy(source, project / ".aider.chat.history.md")
    result = run(dr, project, {"state.includeGit": False}, outputs=("history_section", "session_history"))
    section = result["history_section"]
    assert section.data["format"] == "aider" and len(section.data["rounds"]) == 12
    assert section.content.startswith("Session log .aider.chat.history.md (aider).\n\nEarlier rounds, summarised:\n")
    assert section.content.endswith("\n\n(12 rounds in 1 session: 1-4 summarised, 5-12 verbatim)")  # counts last
    assert "done: commit 1b2614a feat: create .aidar.json file" in section.content
    # also accepted under .planning/
    (project / ".planning").mkdir()
    shutil.move(project / ".aider.chat.history.md", project / ".planning" / ".aider.chat.history.md")
    again = run(dr, project, {"state.includeGit": False}, outputs=("session_history",))
    assert len(again["session_history"].rounds) == 12


def test_a_bad_choice_names_the_key(dr, tmp_path: Path):
    from ctxengine.nodes.types import ConfigError

    with pytest.raises(ConfigError, match=r"state\.sessionFormat.*auto, jsonl, aider"):
        run(dr, tmp_path, {"state.sessionFormat": "xml"}, outputs=("session_files",))
