"""Git state through real git repositories made in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxengine.nodes.lib import git as G

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_DATE="2026-01-02T03:04:05Z", GIT_COMMITTER_DATE="2026-01-02T03:04:05Z")
    result = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return result.stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "-c", "init.defaultBranch=main", "init", "-q")
    git(path, "config", "user.name", "Test User")
    git(path, "config", "user.email", "test@example.com")
    git(path, "config", "commit.gpgsign", "false")
    return path


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits, then staged, unstaged, untracked, renamed and binary changes."""
    repo = make_repo(tmp_path / "proj")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    (repo / "README.md").write_text("# Demo\n")
    (repo / "old_name.txt").write_text("rename me\nplease\n")
    (repo / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (repo / ".gitignore").write_text("*.log\n")
    commit_all(repo, "Initial commit")
    (repo / "README.md").write_text("# Demo\n\nMore words.\n")
    commit_all(repo, "Describe the demo")
    # staged edit
    (repo / "src" / "app.py").write_text("".join(f"line {i}\n" for i in range(1, 21)).replace("line 5\n", "line five\n"))
    git(repo, "add", "src/app.py")
    # unstaged edit
    (repo / "README.md").write_text("# Demo\n\nMore words.\nAnd a new line.\n")
    # staged rename
    git(repo, "mv", "old_name.txt", "new_name.txt")
    # binary change
    (repo / "logo.bin").write_bytes(bytes(reversed(range(256))) * 4)
    # untracked and ignored
    (repo / "notes.txt").write_text("todo\n")
    (repo / "debug.log").write_text("ignored\n")
    return repo


def test_status_staged_unstaged_untracked_renamed_binary(repo: Path):
    snapshot = G.take_snapshot(str(repo), max_lines=200)
    assert snapshot.available and snapshot.warnings == ()
    assert snapshot.root == str(repo.resolve())
    state = G.git_state_from(snapshot)
    assert state.branch == "main" and not state.detached and not state.initial
    assert {(e.path, e.x) for e in state.staged} == {("src/app.py", "M"), ("new_name.txt", "R")}
    assert {(e.path, e.y) for e in state.unstaged} == {("README.md", "M"), ("logo.bin", "M")}
    assert state.untracked == ("notes.txt",)  # debug.log is ignored
    assert state.renames == {"new_name.txt": "old_name.txt"}
    files = {f[0]: f for f in state.files}
    assert files["src/app.py"] == ("src/app.py", 1, 1, "modified")
    assert files["README.md"] == ("README.md", 1, 0, "modified")
    assert files["logo.bin"] == ("logo.bin", None, None, "modified")  # binary: no line counts
    assert files["new_name.txt"][3] == "renamed"
    assert files["notes.txt"] == ("notes.txt", None, None, "untracked")
    assert not state.summary_mode and state.patch is not None
    assert state.hunks["src/app.py"] == (2, 8)  # 3 context lines around line 5
    assert [c.split(" ", 2)[2] for c in state.commits] == ["Describe the demo", "Initial commit"]

    text = G.render_git(state)
    assert "Branch: main at" in text
    assert "renamed    old_name.txt -> new_name.txt" in text
    assert "Untracked (1):\n  notes.txt" in text
    assert "binary" in text and "Binary files a/logo.bin and b/logo.bin differ" in text
    assert "+line five" in text and "-line 5" in text
    assert "debug.log" not in text


def test_a_big_diff_switches_to_summary_mode(repo: Path):
    (repo / "big.py").write_text("".join(f"x{i} = {i}\n" for i in range(300)))
    git(repo, "add", "big.py")
    snapshot = G.take_snapshot(str(repo), max_lines=200)
    assert snapshot.patch is None
    state = G.git_state_from(snapshot)
    assert state.summary_mode and state.total_lines > 200
    text = G.render_git(state)
    assert "+300/-0" in text and "big.py" in text
    assert "@@" not in text and "+x1 = 1" not in text
    assert "Diff summary mode: 303 changed lines exceed state.gitDiffMaxLines (200)" in text
    assert "Untracked (1):\n  notes.txt" in text
    # the same change under a higher threshold shows the hunks
    full = G.git_state_from(G.take_snapshot(str(repo), max_lines=1000))
    assert not full.summary_mode and "+x299 = 299" in G.render_git(full)


def test_context_lines_count_toward_the_threshold(tmp_path: Path):
    repo = make_repo(tmp_path / "ctx")
    (repo / "a.txt").write_text("".join(f"{i}\n" for i in range(100)))
    commit_all(repo, "base")
    (repo / "a.txt").write_text("".join(f"{i}\n" if i % 10 else f"changed {i}\n" for i in range(100)))
    # 20 changed lines, but the patch with context and headers is longer than 30 lines
    state = G.git_state_from(G.take_snapshot(str(repo), max_lines=30))
    assert state.total_lines == 20 and state.summary_mode


def test_clean_tree(tmp_path: Path):
    repo = make_repo(tmp_path / "clean")
    (repo / "a.txt").write_text("a\n")
    commit_all(repo, "only commit")
    state = G.git_state_from(G.take_snapshot(str(repo)))
    assert state.files == () and not state.summary_mode
    assert "Working tree clean." in G.render_git(state)


def test_not_a_repository_is_a_note_not_a_warning(tmp_path: Path):
    folder = tmp_path / "plain"
    folder.mkdir()
    snapshot = G.take_snapshot(str(folder))
    assert not snapshot.available and snapshot.warnings == ()
    assert snapshot.notes == (f"git: {folder} is not inside a git repository; git section skipped",)
    assert G.git_state_from(snapshot).available is False
    assert G.git_state_from(snapshot).notes == snapshot.notes


def test_git_missing_is_a_warning(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git here
    snapshot = G.take_snapshot(str(tmp_path))
    assert not snapshot.available
    assert "git program is not on PATH" in snapshot.warnings[0]


def test_empty_repository_shows_staged_files_against_an_empty_tree(tmp_path: Path):
    repo = make_repo(tmp_path / "empty")
    assert G.take_snapshot(str(repo)).warnings[0].endswith("has no commits yet; changes are shown against an empty tree")
    (repo / "first.py").write_text("print('hi')\n")
    git(repo, "add", "first.py")
    (repo / "loose.txt").write_text("x\n")
    snapshot = G.take_snapshot(str(repo))
    state = G.git_state_from(snapshot)
    assert state.initial and state.head is None and state.commits == ()
    assert ("first.py", 1, 0, "added") in state.files
    assert state.untracked == ("loose.txt",)
    text = G.render_git(state)
    assert "(no commits yet)" in text and "+print('hi')" in text


def test_detached_head_is_a_note_not_a_warning(repo: Path):
    git(repo, "stash", "-u", "-q")
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    (repo / "README.md").write_text("# Detached edit\n")
    snapshot = G.take_snapshot(str(repo))
    head = git(repo, "rev-parse", "--short=7", "HEAD").strip()
    assert snapshot.warnings == ()
    assert snapshot.notes == (f"git: HEAD is detached at {head} in {repo.resolve()}; changes are shown against that commit",)
    state = G.git_state_from(snapshot)
    assert state.notes == snapshot.notes
    assert state.detached and state.branch is None
    assert state.files == (("README.md", 1, 1, "modified"),)
    assert G.render_git(state).startswith(f"HEAD detached at {head}")


def test_only_the_last_commits_are_read(tmp_path: Path):
    repo = make_repo(tmp_path / "history")
    for i in range(12):
        (repo / "f.txt").write_text(f"{i}\n")
        commit_all(repo, f"commit {i}")
    state = G.git_state_from(G.take_snapshot(str(repo), log_count=3))
    assert [c.split(" ", 2)[2] for c in state.commits] == ["commit 11", "commit 10", "commit 9"]


def test_a_subfolder_project_reads_the_enclosing_repository_only_when_allowed(repo: Path):
    refused = G.take_snapshot(str(repo / "src"))
    assert not refused.available and refused.status == ""
    assert refused.warnings == (
        f"git: {repo / 'src'} is inside the repository at {repo.resolve()}, which is outside the project; "
        f"it is not read (add {repo.resolve()} to trust.allowedPaths to allow it); git section skipped",)
    as_note = G.take_snapshot(str(repo / "src"), enclosing_is_note=True)  # a bundled example: no news
    assert as_note.warnings == () and as_note.notes == refused.warnings
    state = G.git_state_from(G.take_snapshot(str(repo / "src"), allowed_paths=[str(repo)]))
    assert [f[0] for f in state.files] == ["src/app.py"]  # only its own changes
    assert state.root == str(repo.resolve())


def test_output_cap_and_parsers():
    result = G.run_git(["--version"], os.getcwd(), timeout=10, max_bytes=5)
    assert result.truncated and len(result.stdout) == 5
    branch, entries = G.parse_status(
        "# branch.oid abc\0# branch.head main\0" "1 .M N... 100644 100644 100644 a a x y.py\0"
        "2 R. N... 100644 100644 100644 a a R100 new name.txt\0old name.txt\0? u.txt\0"
    )
    assert branch == {"oid": "abc", "head": "main"}
    assert [(e.path, e.kind, e.orig) for e in entries] == [
        ("x y.py", "changed", None), ("new name.txt", "renamed", "old name.txt"), ("u.txt", "untracked", None)]
    assert G.parse_numstat("1\t2\ta.py\0-\t-\tb.bin\0" "0\t0\t\0old.txt\0new.txt\0") == [
        ("a.py", 1, 2, None), ("b.bin", None, None, None), ("new.txt", 0, 0, "old.txt")]


def test_timeout_kills_git_and_what_it_started(tmp_path: Path):
    start = time.perf_counter()
    result = G.run_git(["-c", "alias.slow=!sleep 5; echo late", "slow"], str(tmp_path), timeout=0.5)
    assert result.timed_out and result.returncode != 0 and "late" not in result.stdout
    assert time.perf_counter() - start < 3
    endless = G.run_git(["-c", "alias.endless=!yes", "endless"], str(tmp_path), timeout=5, max_bytes=1000)
    assert endless.truncated and len(endless.stdout) == 1000


def test_a_broken_repository_is_a_warning_naming_git_s_exit_code_and_first_stderr_line(tmp_path: Path):
    head = make_repo(tmp_path / "head")
    (head / "a.txt").write_text("one\n")
    commit_all(head, "First")
    (head / ".git" / "HEAD").write_text("garbage\n")  # a corrupt HEAD: git status exits 128
    snapshot = G.take_snapshot(str(head))
    assert not snapshot.available and len(snapshot.warnings) == 1
    warning = snapshot.warnings[0]
    assert "git status failed" in warning and "git section skipped" in warning
    assert "exit code 128: fatal: not a git repository" in warning, warning

    config = make_repo(tmp_path / "config")
    with open(config / ".git" / "config", "a") as fh:
        fh.write("[core\n")  # an unterminated section: even reading the config fails
    snapshot = G.take_snapshot(str(config))
    assert not snapshot.available and len(snapshot.warnings) == 1
    warning = snapshot.warnings[0]
    assert "listing the filter drivers" in warning and "git section skipped" in warning
    assert "exit code 128: fatal: bad config line" in warning and str(config / ".git" / "config") in warning, warning


def test_failure_reasons_name_the_exit_code_the_signal_or_the_timeout():
    assert G.failure_reason(G.GitResult(128, "", "\nfatal: bad object HEAD\nmore\n")) == "exit code 128: fatal: bad object HEAD"
    assert G.failure_reason(G.GitResult(3, "", "")) == "exit code 3"
    assert G.failure_reason(G.GitResult(-9, "", ""), 10) == "killed by signal 9"
    assert G.failure_reason(G.GitResult(-9, "", "", timed_out=True), 2.5) == "timed out after 2.5 s"
    assert G.failure_reason(G.GitResult(127, "", "[Errno 2] No such file")) == "could not start: [Errno 2] No such file"


_REPLACED_DEVNULL = r"""
import os, sys, json
os.devnull = sys.argv[1]  # /dev/null as a regular file holding what other programs wrote into it
from ctxengine.nodes.lib import git as G
snapshot = G.take_snapshot(sys.argv[2], log_count=1)
print(json.dumps({"available": snapshot.available, "warnings": snapshot.warnings, "patch": snapshot.patch}))
"""


@pytest.mark.parametrize("content", [
    "ctxengine: warning: no request given\n[core\nsome other output\n",  # not config: git failed to parse it
    "[diff]\n\tnoprefix = true\n",  # config: git would have taken it
])
def test_git_never_reads_dev_null_so_a_replaced_one_changes_nothing(tmp_path: Path, content: str):
    """The git section was skipped at random on a busy machine (issue 23): a program had replaced
    /dev/null with a regular file (``-o /dev/null`` as root) that other programs kept writing
    into, and git read it as its global config. Here ``os.devnull`` names such a file (the real
    /dev/null is never touched): the snapshot is whole and that text has no effect."""
    repo = make_repo(tmp_path / "proj")
    (repo / "a.txt").write_text("one\n")
    commit_all(repo, "First")
    (repo / "a.txt").write_text("two\n")
    fake = tmp_path / "devnull"
    fake.write_text(content)
    done = subprocess.run([sys.executable, "-c", _REPLACED_DEVNULL, str(fake), str(repo)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(done.stdout)
    assert snapshot["available"] and snapshot["warnings"] == [], snapshot["warnings"]
    assert "diff --git a/a.txt b/a.txt" in snapshot["patch"]
    assert fake.read_text() == content
