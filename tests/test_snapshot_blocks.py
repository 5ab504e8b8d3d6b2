"""The steps take_snapshot (nodes/lib/git/snapshot.py) is made of, one table each: the projects git
cannot look at, the projects with no repository to read, the warnings of status, numstat and the
patch, whether the patch is read at all, the base of a repository without commits or with a
detached HEAD, and the log kept."""

from __future__ import annotations

import os
import subprocess

import pytest

from ctxengine.nodes.lib.git import snapshot as S
from ctxengine.nodes.lib.git.run import GitResult
from ctxengine.nodes.lib.git.scope import RepoScope


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def look(root: str = "/r", **fields) -> S._Look:
    return S._Look("/p", root, 5.0, 100, "/usr/bin/git", RepoScope("/p"), **fields)


def ok(stdout: str = "") -> GitResult:
    return GitResult(0, stdout, "")


NUMSTAT_3 = "1\t2\ta.txt\0"  # 3 changed lines


@pytest.mark.parametrize("program, make, expected", [
    case("no git program", None, "file", ((), ("git: not found on PATH; git section skipped",))),
    case("not a folder", "/usr/bin/git", "missing", ((), ("git: {p} is not a folder; git section skipped",))),
    case("a file is not a folder either", "/usr/bin/git", "file",
         ((), ("git: {p} is not a folder; git section skipped",))),
    case("a folder: git may look", "/usr/bin/git", "folder", None),
])
def test_unreadable_snapshot(tmp_path, monkeypatch, program, make, expected):
    monkeypatch.setattr(S, "NO_GIT", "git: not found on PATH")
    path = tmp_path / make
    if make == "file":
        path.write_text("x")
    elif make == "folder":
        path.mkdir()
    snapshot = S._unreadable_snapshot(str(path), program)
    if expected is None:
        assert snapshot is None
    else:
        assert (snapshot.notes, snapshot.warnings) == (expected[0], tuple(w.format(p=path) for w in expected[1]))
        assert not snapshot.available


@pytest.mark.parametrize("scope, enclosing_is_note, expected", [
    case("a repository to read", RepoScope("/p", git_dir="/p/.git"), False, None),
    case("no repository: a note", RepoScope("/p"), False,
         ("notes", "git: /p is not inside a git repository; git section skipped")),
    case("a refused outside repository: a warning", RepoScope("/p", "/x/.git", refusal="git: outside"), False,
         ("warnings", "git: outside; git section skipped")),
    case("a refused outside repository stays a warning for a bundled example",
         RepoScope("/p", "/x/.git", refusal="git: outside"), True, ("warnings", "git: outside; git section skipped")),
    case("a refused enclosing repository: a warning", RepoScope("/p", "/x/.git", refusal="git: encl", enclosing=True),
         False, ("warnings", "git: encl; git section skipped")),
    case("a refused enclosing repository of a bundled example: a note",
         RepoScope("/p", "/x/.git", refusal="git: encl", enclosing=True), True,
         ("notes", "git: encl; git section skipped")),
])
def test_out_of_scope_snapshot(scope, enclosing_is_note, expected):
    snapshot = S._out_of_scope_snapshot("/p", scope, enclosing_is_note)
    if expected is None:
        assert snapshot is None
    else:
        kind, said = expected
        other = "warnings" if kind == "notes" else "notes"
        assert (getattr(snapshot, kind), getattr(snapshot, other)) == ((said,), ())


@pytest.mark.parametrize("log_count, expected", [
    case("three", 3, "3"), case("none asked: git still runs for one", 0, "1"), case("negative", -2, "1"),
    case("a float is cut", 2.7, "2"),
])
def test_log_args(log_count, expected):
    assert S._log_args(log_count)[:3] == ["log", "-n", expected]


@pytest.mark.parametrize("status, expected", [
    case("whole", ok("# branch.oid abc\0"), []),
    case("cut at the cap", GitResult(0, "x", "", truncated=True),
         ["git: git status output over 100 bytes in /r; the file list is cut"]),
])
def test_status_warnings(status, expected):
    assert S._status_warnings(look(), status) == expected


@pytest.mark.parametrize("numstat, base, expected", [
    case("ran whole", ok(NUMSTAT_3), "HEAD", []),
    case("failed, naming its base and why", GitResult(128, "", "fatal: bad revision\nmore"), "4b825dc",
         ["git: git diff 4b825dc --numstat failed in /p (exit code 128: fatal: bad revision)"]),
    case("timed out", GitResult(-9, "", "", timed_out=True), "HEAD",
         ["git: git diff HEAD --numstat failed in /p (timed out after 5 s)"]),
    case("cut at the cap", GitResult(0, NUMSTAT_3, "", truncated=True), "HEAD",
         ["git: git diff --numstat output over 100 bytes in /r; the file list is cut"]),
])
def test_numstat_warnings(numstat, base, expected):
    assert S._numstat_warnings(look(), numstat, base) == expected


@pytest.mark.parametrize("numstat, max_lines, expected", [
    case("3 lines under 200", ok(NUMSTAT_3), 200, True),
    case("3 lines at the threshold", ok(NUMSTAT_3), 3, True),
    case("3 lines over 2", ok(NUMSTAT_3), 2, False),
    case("no changes: nothing to show", ok(""), 200, False),
    case("a binary file counts no lines", ok("-\t-\tb.bin\0"), 0, True),
    case("failed numstat", GitResult(1, NUMSTAT_3, "boom"), 200, False),
    case("cut numstat", GitResult(0, NUMSTAT_3, "", truncated=True), 200, False),
])
def test_wants_patch(numstat, max_lines, expected):
    assert S._wants_patch(numstat, max_lines) is expected


@pytest.mark.parametrize("log_result, base, log_count, expected", [
    case("commits, asked, ran", ok("abc 2024-01-01 x\n"), "HEAD", 3, "abc 2024-01-01 x\n"),
    case("none asked", ok("abc 2024-01-01 x\n"), "HEAD", 0, ""),
    case("no commits yet (empty tree base)", ok("abc\n"), "4b825dc", 3, ""),
    case("git log failed", GitResult(128, "partial", "fatal"), "HEAD", 3, ""),
])
def test_recent_log(log_result, base, log_count, expected):
    assert S._recent_log(log_result, base, log_count) == expected


@pytest.mark.parametrize("branch, expected", [
    case("on a branch", {"oid": "0123456789ab", "head": "main"}, ("HEAD", [], [])),
    case("detached: a note with the short oid", {"oid": "0123456789ab", "head": "(detached)"},
         ("HEAD", [], ["git: HEAD is detached at 0123456 in /r; changes are shown against that commit"])),
    case("detached without an oid", {"head": "(detached)"},
         ("HEAD", [], ["git: HEAD is detached at  in /r; changes are shown against that commit"])),
])
def test_base_numstat_and_said_with_commits(branch, expected):
    numstat = ok(NUMSTAT_3)
    base, kept, warnings, notes = S._base_numstat_and_said(look(), branch, numstat)
    assert (base, warnings, notes) == expected and kept is numstat


def test_base_numstat_and_said_without_commits_diffs_against_the_empty_tree(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\nb\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
    scope = RepoScope(str(repo), str(repo / ".git"), str(repo))
    real = S._Look(str(repo), str(repo), 10.0, 100_000, S.executable_path("git", str(repo)), scope)
    base, numstat, warnings, notes = S._base_numstat_and_said(real, {"oid": "(initial)"}, ok("stale"))
    assert base == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    assert numstat.stdout == "2\t0\ta.txt\0"
    unborn = f"git: the repository at {repo} has no commits yet; changes are shown against an empty tree"
    assert (warnings, notes) == ([unborn], [])


def test_patch_and_warnings_on_a_real_repository(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b"}
    (repo / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "a.txt"], ["commit", "-q", "-m", "one"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    (repo / "a.txt").write_text("b\n")
    scope = RepoScope(str(repo), str(repo / ".git"), str(repo))
    make = lambda cap: S._Look(str(repo), str(repo), 10.0, cap, S.executable_path("git", str(repo)), scope)  # noqa: E731
    patch, warnings = S._patch_and_warnings(make(100_000), "HEAD", 200)
    assert "-a\n+b\n" in patch and warnings == []
    assert S._patch_and_warnings(make(100_000), "HEAD", 3) == (None, [])  # the patch with headers is over 3 lines
    assert S._patch_and_warnings(make(20), "HEAD", 200) == (
        None, [f"git: the diff is over 20 bytes in {repo}; showing the summary instead"])
    patch, warnings = S._patch_and_warnings(make(100_000), "nosuchrev", 200)
    assert patch is None and warnings[0].startswith(f"git: git diff nosuchrev failed in {repo} (exit code 128: fatal:")
