"""Programs ctxengine starts (git, node, dot) come from absolute PATH entries only, never from the
project, and are started by their absolute path.

The project is a REAL repository with a committed executable ``git`` and ``node`` (shell scripts
that touch a marker file OUTSIDE the project and print a fake version). The builds run through
the CLI in a subprocess whose working folder is the project, with PATH=":$PATH", ".:$PATH" and a
relative entry first: the marker must stay absent, the real git's output must be used (the
commit message is in the git section) and the fake version must not reach the context.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxengine.nodes.lib import git as G
from ctxengine.nodes.lib import programs as P
from ctxengine.nodes.lib.memo import Memo
from test_state_git import commit_all, make_repo

HAS_GIT = shutil.which("git") is not None
FAKE = "v99.9.9-from-the-project"


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _fake(path: Path, marker: Path) -> Path:
    """An executable that leaves ``marker`` and prints the fake version."""
    return _script(path, f'touch "{marker}"\necho "{FAKE}"\necho "git version {FAKE}"')


# ----------------------------------------------------------------------------- the lookup


def test_only_absolute_entries_outside_the_project_are_searched(tmp_path: Path, monkeypatch):
    project = tmp_path / "proj"
    marker = tmp_path / "marker"
    for where in (project / "git", project / "bin" / "git", tmp_path / "rel" / "git"):
        _fake(where, marker)
    real = _script(tmp_path / "tools" / "git", "echo real")
    monkeypatch.chdir(project)
    for entries in ("", ".", "bin", "./bin"):  # the working folder is the project
        search = os.pathsep.join([entries, str(real.parent)])
        assert P.executable_path("git", str(project), search) == str(real), entries
        assert P.search_entries(search, str(project)) == [str(real.parent)]
    monkeypatch.chdir(tmp_path)
    # an ABSOLUTE entry into the project (a node_modules/.bin put on PATH) is skipped as well
    inside = os.pathsep.join([str(project / "bin"), str(real.parent)])
    assert P.executable_path("git", str(project), inside) == str(real)
    assert P.executable_path("git", str(project), os.pathsep.join(["rel", str(project)])) is None
    assert not marker.exists()


def test_a_symlink_into_the_project_a_folder_or_a_plain_file_is_not_a_program(tmp_path: Path):
    project = tmp_path / "proj"
    _fake(project / "tool", tmp_path / "marker")
    links = tmp_path / "links"
    links.mkdir()
    (links / "git").symlink_to(project / "tool")  # outside on PATH, inside in truth
    (tmp_path / "dir" / "git").mkdir(parents=True)  # a folder named git
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "git").write_text("echo not executable\n")  # mode 0644
    real = _script(tmp_path / "tools" / "git", "echo real")
    search = os.pathsep.join(str(tmp_path / d) for d in ("links", "dir", "plain", "tools"))
    assert P.executable_path("git", str(project), search) == str(real)
    assert P.executable_path("git", None, search) == str(links / "git")  # no project: the link is fine
    assert P.executable_path("../tools/git", None, search) is None  # names only, never paths


def test_safe_search_path_keeps_absolute_entries_outside_the_project_in_order(tmp_path: Path):
    project = tmp_path / "proj"
    (project / "node_modules" / ".bin").mkdir(parents=True)
    given = os.pathsep.join(["", "/usr/bin", ".", "node_modules/.bin", str(project / "node_modules" / ".bin"),
                             "/bin", "/usr/bin", ""])
    assert P.safe_search_path(given, str(project)) == os.pathsep.join(["/usr/bin", "/bin"])


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_git_is_started_by_its_absolute_path_with_a_clean_path(tmp_path: Path, monkeypatch):
    project = make_repo(tmp_path / "proj")
    (project / "a.txt").write_text("one\n")
    commit_all(project, "Real commit message")
    marker = tmp_path / "marker"
    _fake(project / "git", marker)
    log = tmp_path / "env.log"
    real = shutil.which("git")
    _script(tmp_path / "bin" / "git", f'echo "$0|$PATH" >> "{log}"\nexec "{real}" "$@"')
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "rel", str(tmp_path / "bin"), os.environ["PATH"]]))
    snapshot = G.take_snapshot(str(project), log_count=1)
    assert snapshot.available and "Real commit message" in snapshot.log
    assert not marker.exists()
    calls = log.read_text().splitlines()
    assert calls and all(c.split("|")[0] == str(tmp_path / "bin" / "git") for c in calls)
    for call in calls:  # what git starts in turn is never looked up in the project either
        entries = call.split("|", 1)[1].split(os.pathsep)
        assert entries and all(os.path.isabs(e) for e in entries), call


# ----------------------------------------------------------------------------- the CLI


def _cli(project: Path, path: str, cache: Path) -> subprocess.Popen:
    env = dict(os.environ, PATH=path, HAMILTON_AUTOLOAD_EXTENSIONS="0")
    return subprocess.Popen(
        [sys.executable, "-m", "ctxengine.cli", "build", str(project), "--format", "json", "--request", "Go on.",
         "--cache-dir", str(cache), "--set", "state.includeFileTree=true"],
        cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_a_committed_git_and_node_never_run_from_a_cli_build(tmp_path: Path):
    project = make_repo(tmp_path / "proj")
    marker = tmp_path / "marker"  # outside the project
    for where in ("git", "node", "bin/git", "bin/node"):
        _fake(project / where, marker)
    (project / "app.py").write_text("print('hi')\n")
    commit_all(project, "Add the app and some tools")
    (project / "app.py").write_text("print('hello')\n")
    real_path = os.environ["PATH"]
    paths = {"leading colon": os.pathsep + real_path, "dot": "." + os.pathsep + real_path,
             "relative entry": "bin" + os.pathsep + real_path}
    runs = {name: _cli(project, path, tmp_path / "cache") for name, path in paths.items()}  # side by side
    for name, proc in runs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, (name, stderr)
        result = json.loads(stdout)
        keys = [s["key"] for s in result["sections"]]
        assert "git" in keys and "environment" in keys, (name, keys, result["warnings"])
        assert "Add the app and some tools" in result["context"], name  # the real git's log
        assert "+print('hello')" in result["context"], name  # and its diff
        assert "files (git ls-files)" in result["context"], name  # the tree, by the real git too
        assert FAKE not in result["context"] and FAKE not in stdout + stderr, name
        assert not marker.exists(), name


# ----------------------------------------------------------------------------- version probes


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_the_environment_never_asks_a_program_in_the_project(tmp_path: Path, monkeypatch):
    from ctxengine.nodes.state import environment_facts

    project = tmp_path / "proj"
    marker = tmp_path / "marker"
    for name in ("git", "node"):
        _fake(project / "node_modules" / ".bin" / name, marker)
    monkeypatch.chdir(project)
    for first in ("node_modules/.bin", str(project / "node_modules" / ".bin")):  # relative, or absolute into it
        monkeypatch.setenv("PATH", os.pathsep.join([first, os.environ["PATH"]]))
        facts = environment_facts(str(project))
        assert FAKE not in json.dumps(facts) and not marker.exists(), first
        assert facts["git"] and facts["git"] == G.git_version(P.executable_path("git", str(project)))


# ----------------------------------------------------------------------------- graphviz dot


def _digraph():
    import graphviz

    graph = graphviz.Digraph("g")
    graph.edge("a", "b")
    return graph


def test_dot_comes_from_an_absolute_entry_and_is_started_by_its_path(tmp_path: Path, monkeypatch):
    from ctxengine.viz.output import write_digraph

    project = tmp_path / "proj"
    marker = tmp_path / "marker"
    _fake(project / "dot", marker)
    _fake(project / "bin" / "dot", marker)
    log = tmp_path / "dot.log"
    tools = _script(tmp_path / "tools" / "dot", f'echo "$0 $*|$PATH" >> "{log}"\ncat >/dev/null\necho "<svg>drawn</svg>"')
    monkeypatch.chdir(project)
    for first in ("", ".", "bin"):
        monkeypatch.setenv("PATH", os.pathsep.join([first, str(tools.parent), "/usr/bin", "/bin"]))
        written, note = write_digraph(_digraph(), tmp_path / "out.svg")
        assert note is None and written.read_text() == "<svg>drawn</svg>\n", first
    assert not marker.exists()
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and all(c.startswith(f"{tools} -Tsvg|") for c in calls)
    assert all(os.path.isabs(e) for c in calls for e in c.split("|", 1)[1].split(os.pathsep))


def test_a_dot_only_in_the_working_folder_counts_as_no_dot(tmp_path: Path, monkeypatch):
    from ctxengine.viz.output import write_digraph
    from ctxengine.viz.report import _lineage

    project = tmp_path / "proj"
    marker = tmp_path / "marker"
    _fake(project / "dot", marker)
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", str(tmp_path / "empty")]))
    written, note = write_digraph(_digraph(), tmp_path / "out.svg")
    assert written == tmp_path / "out.dot" and "not installed" in note
    assert "digraph g" in written.read_text()
    import networkx

    assert "not installed" in _lineage(networkx.DiGraph([("a", "b")]))
    assert not marker.exists()


def test_a_dot_reached_through_an_absolute_entry_into_the_project_never_draws_its_build(tmp_path: Path):
    """An absolute PATH entry that is a symlink into the project (``~/bin -> project/tools``)
    is skipped for the project's own drawings: build --lineage, --report and report -o run the
    real dot (later on PATH), never the project's."""
    project = tmp_path / "proj"
    (project / "notes.md").parent.mkdir(parents=True)
    (project / "notes.md").write_text("# Notes\n\nhello\n")
    marker = tmp_path / "marker"
    _fake(project / "tools" / "dot", marker)
    (tmp_path / "link").symlink_to(project / "tools")
    log = tmp_path / "dot.log"
    tools = _script(tmp_path / "tools" / "dot", f'echo "$0" >> "{log}"\ncat >/dev/null\necho "<svg>drawn</svg>"')
    env = {**os.environ, "PATH": os.pathsep.join([str(tmp_path / "link"), str(tools.parent), "/usr/bin", "/bin"]),
           "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    env.pop("CTXENGINE_CACHE_DIR", None)
    cli = [sys.executable, "-m", "ctxengine"]
    for args in (["build", str(project), "--no-cache", "--request", "r", "--lineage", str(tmp_path / "l.svg"),
                  "--report", str(tmp_path / "r.html")],):
        run = subprocess.run(cli + args, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
    assert not marker.exists()
    assert (tmp_path / "l.svg").read_text() == "<svg>drawn</svg>\n"
    assert log.read_text().splitlines() == [str(tools)] * 2  # the lineage file, the report's drawing


# ----------------------------------------------------------------------------- a program's kept answer


def test_a_binary_s_answer_is_kept_in_the_memo_and_follows_the_binary(tmp_path: Path):
    memo = Memo()
    binary = shutil.copy(os.path.realpath(sys.executable), tmp_path / "prog")  # a compiled executable
    answers = iter([None, "prog 1.0", "prog 2.0"])
    runs = []

    def probe() -> str | None:
        runs.append(1)
        return next(answers)

    assert P.program_answer(str(binary), ("--version",), probe, memo) is None  # failed: not kept
    assert P.program_answer(str(binary), ("--version",), probe, memo) == "prog 1.0"  # asked again
    assert P.program_answer(str(binary), ("--version",), probe, memo) == "prog 1.0" and len(runs) == 2
    with open(binary, "ab") as fh:  # another binary at the same path (an upgrade): asked again
        fh.write(b"\0")
    assert P.program_answer(str(binary), ("--version",), probe, memo) == "prog 2.0" and len(runs) == 3


def test_a_script_is_asked_every_time_and_a_bare_name_is_never_a_key(tmp_path: Path, monkeypatch):
    memo = Memo()
    script = tmp_path / "shim"
    script.write_text("#!/bin/sh\necho shim\n")
    runs = []
    for _ in range(2):
        P.program_answer(str(script), ("--version",), lambda: runs.append(1) or "shim", memo)
    assert len(runs) == 2  # a version manager's shim may answer by folder: never kept
    shutil.copy(os.path.realpath(sys.executable), tmp_path / "git")  # a compiled "git" in the working folder
    monkeypatch.chdir(tmp_path)
    assert P.binary_identity("git", ("--version",)) is None
    assert P.binary_identity(str(tmp_path / "git"), ("--version",)) is not None


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
def test_a_warm_process_does_not_start_git_for_its_version_again(tmp_path: Path, monkeypatch):
    from ctxengine.nodes.state import environment_facts

    started = []
    real_run = subprocess.run

    def counting(args, *a, **k):
        started.append(list(args))
        return real_run(args, *a, **k)

    monkeypatch.setattr(subprocess, "run", counting)
    memo = Memo()
    first = environment_facts(str(tmp_path), memo)
    probes = len(started)
    assert probes >= 1 and first["git"]
    assert environment_facts(str(tmp_path), memo) == first and len(started) == probes
