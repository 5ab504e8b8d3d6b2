"""The CLI contract: build (text and json), config --explain, dag, batch, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_projects, write_project, needs_shared

BUDGET_FIELDS = {"total_tokens", "available_tokens", "is_over_budget", "over_budget_amount", "utilization_rate"}
SECTION_FIELDS = {"key", "title", "kind", "priority", "tier", "tokens", "sources", "content"}


def run_cli(*args: str, cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, HAMILTON_AUTOLOAD_EXTENSIONS="0")
    return subprocess.run(
        [sys.executable, "-m", "ctxengine.cli", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, timeout=120,
    )


def test_build_bundled_example_from_any_directory(tmp_path):
    done = run_cli("build", "--request", "Fix the login endpoint", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "# User Request" in done.stdout and "Fix the login endpoint" in done.stdout
    assert "# System Reference" in done.stdout
    budget_lines = [line for line in done.stderr.splitlines() if " tokens (" in line]
    assert len(budget_lines) == 1


def test_build_json_contract(tmp_path):
    out = tmp_path / "out.json"
    done = run_cli("build", "--request", "Add refresh tokens", "--format", "json", "-o", str(out))
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert {"context", "budget", "sections", "warnings"} <= set(data)
    assert BUDGET_FIELDS <= set(data["budget"])
    assert data["budget"]["available_tokens"] == 16000 - 3200  # the demo's config.json
    for section in data["sections"]:
        assert SECTION_FIELDS <= set(section)
    request = [s for s in data["sections"] if s["kind"] == "request"]
    assert request and request[0]["content"] == "Add refresh tokens" and request[0]["tier"] == "immutable"


def test_request_file_and_stdin(tmp_path):
    (tmp_path / "req.txt").write_text("Explain the data model")
    by_file = run_cli("build", "--request-file", str(tmp_path / "req.txt"))
    by_stdin = run_cli("build", "--request-file", "-", stdin="Explain the data model")
    assert by_file.returncode == by_stdin.returncode == 0
    assert "Explain the data model" in by_file.stdout
    assert by_file.stdout == by_stdin.stdout


def test_mode_switch_changes_the_wrapper_only():
    dev = run_cli("build", "--request", "x", "--mode", "dev")
    review = run_cli("build", "--request", "x", "--mode", "review")
    assert dev.returncode == review.returncode == 0
    assert dev.stdout != review.stdout
    assert "# User Request" in review.stdout


def test_bad_configuration_exits_2_naming_file_and_key(tmp_path):
    write_project(tmp_path, {".planning/config.json": {"budget": {"maxTokens": "many"}}})
    done = run_cli("build", str(tmp_path))
    assert done.returncode == 2
    assert "config.json" in done.stderr and "budget.maxTokens" in done.stderr
    assert "Traceback" not in done.stderr


def test_bad_usage_exits_2(tmp_path):
    assert run_cli("build", "--mode", "poetry").returncode == 2
    done = run_cli("build", str(tmp_path / "missing"))
    assert done.returncode == 2 and "does not exist" in done.stderr
    done = run_cli("build", "--set", "budget.maxTokens")
    assert done.returncode == 2 and "dotted.key=value" in done.stderr


def test_budget_that_cannot_be_met_exits_3():
    done = run_cli("build", "--request", "x" * 4000, "--max-tokens", "600", "--reserve-tokens", "100")
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr


def test_config_explain_prints_origins():
    done = run_cli("config", "--explain", "--set", "budget.softLimit=0.7")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert "override" in lines["budget.softLimit"] and "0.7" in lines["budget.softLimit"]
    assert "config.json" in lines["budget.maxTokens"]
    assert "defaults" in lines["budget.pools.buffer"]


def test_dag_writes_a_diagram(tmp_path):
    target = tmp_path / "dag.dot"
    done = run_cli("dag", "-o", str(target))
    assert done.returncode == 0, done.stderr
    dot = target.read_text()
    assert dot.startswith("//") or "digraph" in dot
    for node in ("context_config", "reference_sections", "rendered_context", "final_context"):
        assert node in dot


def test_dag_svg_when_dot_is_installed(tmp_path):
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("graphviz 'dot' is not installed; the .dot fallback is tested above")
    done = run_cli("dag", "-o", str(tmp_path / "dag.svg"))
    assert done.returncode == 0, done.stderr
    assert "<svg" in (tmp_path / "dag.svg").read_text()


@needs_shared
def test_batch_reports_a_broken_project_as_a_row(tmp_path):
    broken = write_project(tmp_path / "broken", {".planning/config.json": "{not json"})
    good = corpus_projects()[0]
    done = run_cli("batch", str(good), str(broken), "-o", str(tmp_path / "out.csv"))
    assert done.returncode == 1, done.stderr  # a failed row fails the batch (the row still says why)
    assert "1 of 2 projects failed" in done.stderr
    import pandas as pd

    frame = pd.read_csv(tmp_path / "out.csv")
    assert len(frame) == 2
    by_dir = {Path(p).name: e for p, e in zip(frame["project"], frame["error"])}
    assert pd.isna(by_dir[good.name])
    assert "config.json" in by_dir["broken"]
