"""Newcomer friction (issue 19 item 12): what a first user met on the README's own commands.

(a) the bundled demo warns about no git repository; (b) an experiment over ``corpus/*`` picks
up MANIFEST.tsv; (c) an empty "facts kept" panel without facts; (d) "milestone v4.0 milestone";
(e) no repository and a detached HEAD are notes, not warnings; (f) exit 3 suggests other
models for a budget the caller fixed; (g) ``build -h`` names the defaults.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from ctxengine import build_context  # noqa: E402
from ctxengine import cli  # noqa: E402
from ctxengine import experiment as ex  # noqa: E402
from ctxengine.batch_io import JobListError, project_folders  # noqa: E402
from ctxengine.nodes.lib.gsd.state import parse_state, position_line  # noqa: E402
from ctxengine.nodes.types import BudgetExceededError  # noqa: E402

QUIET = {"state.includeEnvironment": False, "trust.claudeProjects": False}
CONFIGS = Path(cli.__file__).resolve().parent.parent / "configs"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_the_bundled_demo_builds_without_a_git_warning():
    result = build_context(request="Fix the login endpoint: a bad password must return 401", cache=False)
    assert not [w for w in result.warnings if w.startswith("git:")], result.warnings
    as_json = result.as_json()
    assert "notes" in as_json and all(n.startswith("git:") for n in as_json["notes"])


def test_b_a_file_among_the_project_arguments_is_skipped_with_a_note(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    for name in ("one", "two"):
        write(corpus / name, {".planning/plans/current/plan.md": f"# Plan {name}\n\n- [ ] Task\n"})
    write(corpus, {"MANIFEST.tsv": "name\tcommit\n"})
    given = sorted(str(p) for p in corpus.iterdir())  # what corpus/* expands to
    kept, notes = project_folders(given + [str(corpus / "missing")])
    assert kept == [str(corpus / "one"), str(corpus / "two"), str(corpus / "missing")]  # missing: a row error
    assert notes == [f"{corpus / 'MANIFEST.tsv'} is a file, not a project folder; skipped"]
    with pytest.raises(JobListError, match="no project folders given"):
        project_folders([str(corpus / "MANIFEST.tsv")])
    out = tmp_path / "results.csv"
    code = cli.main(["experiment", *given, "--vary", "truncation.summarizer=extractive,headings",
                     "--set", "state.includeGit=false", "--set", "trust.claudeProjects=false", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "MANIFEST.tsv is a file, not a project folder; skipped" in capsys.readouterr().err


def test_c_no_facts_no_facts_panel(tmp_path):
    project = write(tmp_path / "p", {".planning/plans/current/plan.md": "# Plan\n\n- [ ] Task one\n"})
    overrides = {"state.includeGit": False, **QUIET}
    plain = ex.run_experiment([project], {"truncation.summarizer": ["extractive", "headings"]}, overrides=overrides)
    table = ex.experiment_summary(plain)
    assert "facts_kept_pct" not in table
    assert [title for _, title in ex.chart_panels(table)][-1] == "build time (s)"
    counted = ex.run_experiment([project], {"truncation.summarizer": ["extractive"]}, overrides=overrides,
                                facts=["Task one"])
    with_facts = ex.experiment_summary(counted)
    assert with_facts["facts_kept_pct"].tolist() == [100.0]
    assert [title for _, title in ex.chart_panels(with_facts)][-1] == "facts kept (%)"


def test_d_gsd_placeholder_milestone_name_is_not_repeated():
    state = parse_state("---\nmilestone: v4.0\nmilestone_name: milestone\n---\n# State\n\nPhase: 3 of 5\n")
    assert state.milestone == "v4.0" and state.milestone_name is None
    assert position_line(state) == "Current position: milestone v4.0; phase 3 of 5"
    named = parse_state("---\nmilestone: v4.0\nmilestone_name: Launch\n---\n# State\n")
    assert named.milestone_name == "Launch"


def test_e_no_git_repository_is_a_note_not_a_warning(tmp_path):
    project = write(tmp_path / "plain", {"README.md": "# x\n"})
    result = build_context(str(project), "x", overrides=QUIET, cache=False)
    assert result.warnings == ()
    assert result.as_json()["notes"] == [f"git: {project} is not inside a git repository; git section skipped"]


def test_f_exit_3_suggests_other_models_only_when_the_budget_was_not_given(tmp_path):
    project = write(tmp_path / "p", {"CLAUDE.md": "# Rules\n" + "Keep every line short. " * 60 + "\n"})
    with pytest.raises(BudgetExceededError) as given:
        build_context(str(project), "x", overrides={**QUIET, "state.includeGit": False}, max_tokens=400, cache=False)
    assert "Models whose window" not in str(given.value) and "Raise budget.maxTokens" in str(given.value)
    write(project, {".planning/config.json": json.dumps({"budget": {"maxTokens": 400}})})
    with pytest.raises(BudgetExceededError) as configured:
        build_context(str(project), "x", overrides={**QUIET, "state.includeGit": False}, cache=False)
    assert "Models whose window minus the reserve would fit: " in str(configured.value)


def test_g_build_help_names_the_defaults(capsys):
    assert cli.main(["build", "-h"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    defaults = yaml.safe_load((CONFIGS / "defaults.yaml").read_text(encoding="utf-8"))
    for key, shown in (("template", defaults["template"]),
                       ("budget.maxTokens", defaults["budget"]["maxTokens"]),
                       ("budget.reserveTokens", defaults["budget"]["reserveTokens"]),
                       ("truncation.strategy", defaults["truncation"]["strategy"]),
                       ("state.layout", defaults["state"]["layout"]),
                       ("disclosure.phase", defaults["disclosure"]["phase"])):
        assert f"default: {shown}" in text or f"default {shown}" in text, key
    assert "config PROJECT_DIR --explain" in text
