"""Inventory of the bad inputs of issue 9 ("untrusted projects"): each one not tested elsewhere
is a case here, run through the real CLI in a subprocess (the exit code, one line on stderr when
it fails, never a traceback; a warning naming the file when the build goes on).

Where the others are tested:

- git config vectors (core.fsmonitor, filter clean/process, diff textconv, diff.external,
  diff.<driver>.command, gpg.program + log.showSignature, core.hooksPath, a submodule's
  fsmonitor): tests/test_git_safety.py (VECTORS, API and CLI); the filter listing once per
  snapshot and ``git --version`` through the safe runner: the same file.
- @/etc/shadow, @~/.ssh/id_rsa, @../../../etc/passwd, a committed symlink to ~/.ssh/id_rsa,
  contextTemplate: /etc/shadow, /dev/zero, a symlinked folder, a symlink loop, URL refs to
  127.0.0.1 / 10.x / 169.254.169.254 / metadata.google.internal, a redirect to another host or
  ftp://, slow headers, 15 stalling URLs under one deadline, huge maxFileBytes on a tiny file,
  NUL and ANSI escapes, FIFO *.md under .planning/ (referenced and unreferenced), a session log
  over 64 MiB, a FIFO / folder / device at plan.md, session.log, STATE.md or the aider
  transcript: tests/test_trust.py.
- YAML alias bomb in disclosure.rules, NaN / Infinity in numeric keys, truncation.maxFitPasses=0,
  negative or NaN pool shares, 1000-level nesting in config.json, unbounded error messages from
  config values: tests/test_config_hardening.py; disclosure.rules outside the project, a folder,
  over its cap or a FIFO: tests/test_disclosure.py.
- 1000-level nesting in a session.log line, an aider empty ``####`` line:
  tests/test_state_session.py; a template with 5,000 nested sections: tests/test_template.py.
- stdout to /dev/full, a closed pipe, Ctrl-C (build and batch keeping its rows), -o atomic,
  --lineage / dag -o into missing folders, batch exit code and no tracebacks,
  build_context(p, None): tests/test_cli_hardening.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from conftest import write_project

CLI = [sys.executable, "-m", "ctxengine"]
QUIET = ["--set", "state.includeGit=false", "--set", "state.includeEnvironment=false"]
HUGE = "x" * 100_000  # one argument stays under the kernel's 128 KiB limit
GIB = 1 << 30


@dataclass(frozen=True)
class Case:
    name: str
    setup: Callable[[Path], list[str]]  # writes the project under the folder, returns the CLI arguments
    code: int  # the exit code
    needles: tuple[str, ...]  # in the one stderr line (code != 0), or in one warning of the JSON output (code 0)


def _project(root: Path, files: dict | None = None) -> Path:
    return write_project(root / "proj", {"README.md": "x\n", **(files or {})})


def _build(project: Path, *extra: str) -> list[str]:
    return ["build", str(project), "--format", "json", "--request", "Fix the bug", *QUIET, *extra]


def _sparse(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        fh.truncate(size)  # a hole: nothing is written, reading it would still be 1 GB


def _gigabyte_template(root: Path) -> list[str]:
    project = _project(root)
    _sparse(project / ".planning" / "huge.md", GIB)
    return _build(project, "--set", "contextTemplate=huge.md")


def _gigabyte_config(root: Path) -> list[str]:
    project = _project(root)
    _sparse(project / ".planning" / "config.json", GIB)
    return _build(project)


def _gigabyte_rules(root: Path) -> list[str]:
    project = _project(root, {".planning/notes.md": "# Notes\n"})
    _sparse(project / ".planning" / "rules.yaml", GIB)
    return _build(project, "--set", "disclosure.rules=rules.yaml")


def _nul_after_8k(root: Path) -> list[str]:
    project = _project(root, {".planning/config.json": {"references": {"core": ["main.md"]}}})
    text = "# Rules\n" + "word " * 2000 + "\n\x00hidden \x1b[31mred\x1b[0m \x1b]0;title\x07end\n"
    (project / ".planning" / "main.md").write_text(text, encoding="utf-8")
    return _build(project)


def _plan_symlink_loop(root: Path) -> list[str]:
    project = _project(root)
    plan = project / ".planning" / "plans" / "current" / "plan.md"
    plan.parent.mkdir(parents=True)
    plan.symlink_to(plan)
    return _build(project)


def _dangling_state(root: Path) -> list[str]:
    project = _project(root, {".planning/ROADMAP.md": "# Roadmap\n\n## Phase 1: Core\n"})
    (project / ".planning" / "STATE.md").symlink_to(project / "gone.md")  # inside (outside: refused unlooked)
    return _build(project)


def _rules_outside(root: Path) -> list[str]:
    return _build(_project(root, {".planning/notes.md": "# N\n"}), "--set", "disclosure.rules=/etc/passwd")


def _named_outside(root: Path) -> list[str]:
    secret = write_project(root / "home", {".ssh/notes.md": "SECRET\n"})
    project = _project(root)
    (project / "docs").mkdir()
    (project / "docs" / "KEYS.md").symlink_to(secret / ".ssh" / "notes.md")
    return ["build", str(project), "--format", "json", "--request", "Read docs/KEYS.md", *QUIET]


def _args(*args: str) -> Callable[[Path], list[str]]:
    return lambda root: _build(_project(root), *args)


CASES = [
    Case("1 GB template", _gigabyte_template, 2, ("huge.md", "over references.maxFileBytes")),
    Case("1 GB .planning/config.json", _gigabyte_config, 2, ("config.json", f"{GIB} bytes", "cap")),
    Case("1 GB disclosure.rules", _gigabyte_rules, 2, ("disclosure.rules", "rules.yaml", "cap")),
    Case("disclosure.rules: /etc/passwd", _rules_outside, 2,
         ("disclosure.rules", "/etc/passwd", "outside the project", "trust.allowedPaths")),
    Case("NUL after 8 KB and ANSI escapes", _nul_after_8k, 0, (".planning/main.md", "removed 4 control characters")),
    Case("symlink loop at plan.md", _plan_symlink_loop, 0, (".planning/plans/current/plan.md", "symlink loop")),
    Case("dangling symlink at STATE.md", _dangling_state, 0, (".planning/STATE.md", "file not found",
                                                              "left out of the plan")),
    Case("named document linked outside", _named_outside, 0, ("docs/KEYS.md", "not a regular file inside the project")),
    Case("--reserve-tokens lots", _args("--reserve-tokens", "lots"), 2, ("--reserve-tokens", "whole number", "auto")),
    Case("unbounded --phase-number", _args("--phase-number", HUGE), 2, ("100,002 characters", "phase number")),
    Case("unbounded --set state.layout", _args("--set", f"state.layout={HUGE}"), 2, ("state.layout", "100,002")),
    Case("unbounded --set disclosure.phase", _args("--set", f"disclosure.phase={HUGE}"), 2,
         ("disclosure.phase", "100,002")),
    Case("unbounded --set state.gsdPhase", _args("--set", f"state.gsdPhase={HUGE}"), 2, ("state.gsdPhase", "100,002")),
    Case("unbounded project folder", lambda root: ["build", f"{root}/{HUGE[:200]}/{HUGE[:50_000]}", "--request", "x"],
         2, ("project folder", "characters in all", "does not exist")),
    Case("unbounded --set model", _args("--set", f"model={HUGE}"), 2, ("'model'", "100,002")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_bad_input_through_the_cli(tmp_path: Path, case: Case):
    args = case.setup(tmp_path)
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HAMILTON_AUTOLOAD_EXTENSIONS="0", HOME=str(tmp_path)))
    assert "Traceback" not in done.stderr
    assert done.returncode == case.code, done.stderr[-2000:]
    if case.code:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        problem = lines[-1]
        if lines[0].startswith("usage:"):  # argparse: its usage, then the one error line
            assert problem.startswith("ctxengine build: error:")
        else:
            assert len(lines) == 1, done.stderr
        assert len(problem) < 1000 and all(n in problem for n in case.needles), problem
    else:
        warnings = json.loads(done.stdout)["warnings"]
        assert [w for w in warnings if all(n in w for n in case.needles)], warnings


def test_reserve_tokens_auto_and_a_number_through_the_cli(tmp_path: Path):
    project = _project(tmp_path)

    def budget(*extra: str) -> dict:
        done = subprocess.run([*CLI, *_build(project, "--max-tokens", "8000", *extra)], capture_output=True,
                              text=True, timeout=120, env=dict(os.environ, HOME=str(tmp_path)))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["budget"]

    auto, fixed, default = budget("--reserve-tokens", "auto"), budget("--reserve-tokens", "1000"), budget()
    assert auto == default and auto["available_tokens"] == 8000 - 1600  # budget.reserveShare 0.2 of 8000
    assert fixed["available_tokens"] == 7000
