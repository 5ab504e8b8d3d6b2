"""git runs nothing a repository configures, and reads no repository outside the project.

Each vector is a REAL repository in tmp_path whose .git/config (and .gitattributes) makes git
run a command that touches a marker file. A positive control shows that plain git on this
machine does run it; the build (API and CLI) must leave the marker absent AND still produce the
git section, so these tests fail both when a vector fires and when git simply did not run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

import ctxengine
from ctxengine import driver
from ctxengine.nodes.lib import git as G
from conftest import DEMO, REPO
from test_cli import run_cli
from test_state_git import commit_all, git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

QUIET = {"state.includeEnvironment": False, "state.includeFileTree": True}  # the tree's ls-files runs too


def _script(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _signed_looking_head(repo: Path) -> None:
    """A commit with a gpgsig header on top of HEAD, so ``log.showSignature`` has something to verify."""
    tree = git(repo, "write-tree").strip()
    parent = git(repo, "rev-parse", "HEAD").strip()
    body = (f"tree {tree}\nparent {parent}\nauthor T <t@e> 1767322800 +0000\ncommitter T <t@e> 1767322800 +0000\n"
            "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\n"
            "Signed-looking commit\n")
    (repo.parent / "commit.txt").write_text(body)
    oid = git(repo, "hash-object", "-t", "commit", "-w", str(repo.parent / "commit.txt")).strip()
    git(repo, "update-ref", "refs/heads/main", oid)


def _submodule(repo: Path, marker: Path, tools: Path) -> None:
    source = make_repo(tools / "subsrc")
    (source / "lib.txt").write_text("one\n")
    commit_all(source, "sub init")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "sub")
    commit_all(repo, "Add the submodule")
    git(repo / "sub", "config", "core.fsmonitor", f"touch {marker}; true")
    (repo / "sub" / "lib.txt").write_text("one\ntwo\n")  # a dirty submodule: status asks it


def _hooks(repo: Path, marker: Path, tools: Path) -> None:
    hooks = tools / "hooks"
    for name in ("fsmonitor-watchman", "post-index-change"):
        _script(hooks / name, f"touch {marker}")
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "core.fsmonitor", str(hooks / "fsmonitor-watchman"))


@dataclass(frozen=True)
class Vector:
    name: str
    attributes: str  # .gitattributes lines, committed before the config is armed
    arm: Callable[[Path, Path, Path], None]  # (repo, marker, tools folder outside the repo)
    control: tuple[str, ...]  # the plain git command that fires it
    shows: str  # text the git section must contain (proof that the command ran)


VECTORS = [
    Vector("core.fsmonitor", "", lambda r, m, t: git(r, "config", "core.fsmonitor", f"touch {m}; true"),
           ("status",), "f.txt"),
    Vector("core.hooksPath + fsmonitor", "", _hooks, ("status",), "f.txt"),
    Vector("filter clean", "f.txt filter=evil\nh.txt filter=evil\n",
           lambda r, m, t: (git(r, "config", "filter.evil.clean", f"touch {m}; cat"),
                            git(r, "config", "filter.evil.required", "true")),
           ("status",), "+change"),
    Vector("filter process", "f.txt filter=evil\n",
           lambda r, m, t: (git(r, "config", "filter.evil.process", f"sh -c 'touch {m}; exit 1'"),
                            git(r, "config", "filter.evil.required", "true")),
           ("diff",), "+change"),
    Vector("diff textconv", "f.txt diff=evil\n",
           lambda r, m, t: git(r, "config", "diff.evil.textconv", f"touch {m}; cat"), ("diff",), "+change"),
    Vector("diff.external", "", lambda r, m, t: git(r, "config", "diff.external", f"touch {m}; true"),
           ("diff",), "+change"),
    Vector("diff.<driver>.command", "f.txt diff=evil\n",
           lambda r, m, t: git(r, "config", "diff.evil.command", f"touch {m}; true"), ("diff",), "+change"),
    Vector("gpg.program + log.showSignature", "",
           lambda r, m, t: (_signed_looking_head(r),
                            git(r, "config", "gpg.program", _script(t / "gpg", f"touch {m}; exit 1")),
                            git(r, "config", "log.showSignature", "true")),
           ("log", "-n", "3", "--format=%h %s"), "Signed-looking commit"),
    Vector("submodule core.fsmonitor", "", _submodule, ("status",), "f.txt"),
]


def armed_repo(tmp_path: Path, vectors: list[Vector]) -> tuple[Path, dict[str, Path]]:
    """A repository with ``vectors`` armed, a modified tracked file, an untracked one and a
    tracked file whose timestamp changed (so status must read it again)."""
    repo = make_repo(tmp_path / "proj")
    tools = tmp_path / "tools"
    markers = {v.name: tmp_path / "markers" / f"{i}.touched" for i, v in enumerate(vectors)}
    (tmp_path / "markers").mkdir()
    (repo / "f.txt").write_text("a\nb\n")
    (repo / "h.txt").write_text("keep\n")
    attributes = "".join(v.attributes for v in vectors)
    if attributes:
        (repo / ".gitattributes").write_text(attributes)
    commit_all(repo, "Initial commit")
    for vector in vectors:
        vector.arm(repo, markers[vector.name], tools)
    with (repo / "f.txt").open("a") as fh:
        fh.write("change\n")
    (repo / "new.txt").write_text("untracked\n")
    os.utime(repo / "h.txt", (946684800, 946684800))  # same content, new stat: status hashes it again
    for path in markers.values():  # arming one vector may have fired another (a commit runs filters)
        path.unlink(missing_ok=True)
    return repo, markers


def fired(markers: dict[str, Path]) -> list[str]:
    return [name for name, path in markers.items() if path.exists()]


def git_section(result) -> str:
    found = [s for s in result.sections if s.key == "git"]
    assert found, f"no git section; warnings: {result.warnings}"
    return found[0].content


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name for v in VECTORS])
def test_the_vector_fires_with_plain_git(tmp_path: Path, vector: Vector):
    repo, markers = armed_repo(tmp_path, [vector])
    subprocess.run(["git", *vector.control], cwd=repo, capture_output=True)
    assert fired(markers) == [vector.name], "positive control: plain git on this machine runs the vector"


@pytest.mark.parametrize("vector", VECTORS, ids=[v.name for v in VECTORS])
def test_the_build_never_runs_it_and_still_shows_git(tmp_path: Path, vector: Vector):
    repo, markers = armed_repo(tmp_path, [vector])
    result = ctxengine.build_context(str(repo), "Fix the bug", overrides=QUIET)
    assert fired(markers) == []
    content = git_section(result)
    assert vector.shows in content and "new.txt" in content
    assert "# File Tree" in result.context and "h.txt" in result.context
    plain = G.run_git(list(vector.control), str(repo))  # the very command of the control, through run_git
    assert plain.returncode == 0 and plain.stdout, plain.stderr
    assert fired(markers) == []


def test_the_cli_runs_none_of_them(tmp_path: Path):
    combinable = [v for v in VECTORS if v.name not in ("core.hooksPath + fsmonitor", "filter process",
                                                      "diff.<driver>.command")]
    repo, markers = armed_repo(tmp_path, combinable)
    done = run_cli("build", str(repo), "--request", "Fix the bug", "--format", "json",
                   "--set", "state.includeFileTree=true")
    assert done.returncode == 0, done.stderr
    assert fired(markers) == []
    out = json.loads(done.stdout)
    (section,) = [s for s in out["sections"] if s["key"] == "git"]
    assert "+change" in section["content"] and "Signed-looking commit" in section["content"]


# ----------------------------------------------------------------------------- scope


def test_an_enclosing_repository_is_not_read(tmp_path: Path):
    outer = make_repo(tmp_path / "outer")
    (outer / "project").mkdir()
    (outer / "project" / "notes.md").write_text("# Notes\n")
    (outer / "secret.txt").write_text("outer\n")
    commit_all(outer, "Outer repository commit")
    (outer / "secret.txt").write_text("changed\n")
    result = ctxengine.build_context(str(outer / "project"), "Fix the bug", overrides=QUIET)
    assert not [s for s in result.sections if s.key == "git"]
    assert "Outer repository commit" not in result.context and "secret.txt" not in result.context
    assert "notes.md" in result.context  # the tree walked the folder instead of listing the outer index
    assert [w for w in result.warnings if f"repository at {outer.resolve()}" in w and "trust.allowedPaths" in w]
    allowed = ctxengine.build_context(str(outer / "project"), "Fix the bug",
                                      overrides={**QUIET, "trust.allowedPaths": [str(outer)]})
    assert "Outer repository commit" in git_section(allowed)


def test_a_git_file_pointing_outside_is_refused_unless_allowed(tmp_path: Path):
    project = tmp_path / "project"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(["git", "-c", "init.defaultBranch=main", "init", "-q",
                    f"--separate-git-dir={elsewhere / 'repo.git'}", str(project)], check=True)
    assert (project / ".git").read_text().startswith("gitdir:")
    for key, value in (("user.name", "T"), ("user.email", "t@e"), ("commit.gpgsign", "false")):
        git(project, "config", key, value)
    (project / "app.py").write_text("print(1)\n")
    commit_all(project, "Commit kept elsewhere")
    (project / "app.py").write_text("print(2)\n")

    result = ctxengine.build_context(str(project), "Fix the bug", overrides=QUIET)
    assert not [s for s in result.sections if s.key == "git"]
    assert "Commit kept elsewhere" not in result.context
    (warning,) = [w for w in result.warnings if w.startswith("git:")]
    assert str((elsewhere / "repo.git").resolve()) in warning and "trust.allowedPaths" in warning
    assert G.run_git(["log", "--oneline"], str(project)).returncode != 0  # no git call follows it either

    allowed = ctxengine.build_context(str(project), "Fix the bug",
                                      overrides={**QUIET, "trust.allowedPaths": [str(elsewhere)]})
    content = git_section(allowed)
    assert "Commit kept elsewhere" in content and "app.py" in content


def test_a_git_dir_whose_alternates_lead_outside_is_refused(tmp_path: Path):
    project = make_repo(tmp_path / "project")
    (project / "a.txt").write_text("a\n")
    commit_all(project, "init")
    (project / ".git" / "objects" / "info" / "alternates").write_text(str(tmp_path / "other" / "objects") + "\n")
    scope = G.repository_scope(str(project))
    assert scope.git_dir is None and "trust.allowedPaths" in scope.refusal
    assert G.repository_scope(str(project), [str(tmp_path / "other")]).git_dir == str((project / ".git").resolve())


def test_the_bundled_demo_shows_none_of_ctxengines_own_git_state():
    result = ctxengine.build_context(str(DEMO), "Fix the login endpoint")
    assert not [s for s in result.sections if s.key == "git"]
    assert "# Git Status" not in result.context
    if (REPO / ".git").exists():  # a checkout: the enclosing repository is named, not read
        latest = git(REPO, "log", "-n", "1", "--format=%s").strip()
        assert latest not in result.context
        # ctxengine's own clone around its bundled example is no news: a note, not a warning
        assert [n for n in result.notes if "trust.allowedPaths" in n and "git section skipped" in n]
        assert not [w for w in result.warnings if w.startswith("git:")]


def _logging_git(tmp_path: Path, monkeypatch) -> Path:
    """A ``git`` first on PATH that logs its arguments, then runs the real git."""
    real = shutil.which("git")
    log = tmp_path / "git-calls.log"
    _script(tmp_path / "bin" / "git", f'printf "%s\\n" "$*" >> {log}\nexec {real} "$@"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return log


def test_the_filter_drivers_are_listed_once_per_snapshot_and_still_switched_off(tmp_path: Path, monkeypatch):
    vector = next(v for v in VECTORS if v.name == "filter clean")
    repo, markers = armed_repo(tmp_path, [vector])
    log = _logging_git(tmp_path, monkeypatch)
    snapshot = G.take_snapshot(str(repo), log_count=2)
    calls = log.read_text().splitlines()
    assert fired(markers) == [] and "+change" in (snapshot.patch or "")
    assert len([c for c in calls if "--get-regexp" in c]) == 1, calls
    assert len(calls) >= 5  # status, diff --numstat, log, diff: all after the one listing


def test_a_build_lists_the_filter_drivers_once_for_the_snapshot_and_the_file_listings(tmp_path: Path, monkeypatch):
    """The code stage reuses the file tree's ``git ls-files`` (one a build, was one each), which
    reuses the filters the snapshot switched off in the same repository: one ``git config
    --get-regexp`` a build (was one each), no filter ever runs."""
    vector = next(v for v in VECTORS if v.name == "filter clean")
    repo, markers = armed_repo(tmp_path, [vector])
    log = _logging_git(tmp_path, monkeypatch)
    out = driver.execute(["git_snapshot", "code_listing", "file_listing"], str(repo), QUIET, "Fix f.txt", cache=False)
    calls = log.read_text().splitlines()
    assert fired(markers) == [] and out["git_snapshot"].filter_overrides
    for listing in (out["code_listing"], out["file_listing"]):
        assert listing.method == "git" and {"f.txt", "new.txt"} <= set(listing.paths)
    assert len([c for c in calls if "--get-regexp" in c]) == 1, calls
    assert len([c for c in calls if "ls-files" in c]) == 1, calls


def test_the_environment_asks_git_its_version_through_the_safe_runner(tmp_path: Path, monkeypatch):
    real = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]
    log = _logging_git(tmp_path, monkeypatch)
    assert G.git_version() == real
    assert log.read_text().splitlines() == ["--no-pager --version"]  # no repository looked at, no config read


def test_git_and_files_share_one_list_of_allowed_paths(tmp_path: Path):
    from ctxengine.nodes.lib.textio import allowed_paths, trust_from

    link = tmp_path / "link"
    (tmp_path / "shared").mkdir()
    link.symlink_to(tmp_path / "shared")
    config = {"trust": {"allowedPaths": [str(link)]}}
    assert allowed_paths(config) == (str((tmp_path / "shared").resolve()),)
    assert trust_from(config, str(tmp_path)).allowed_paths[:1] == allowed_paths(config)
