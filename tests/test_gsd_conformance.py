"""The GSD conformance corpus: trimmed real ``.planning/`` folders (tests/data/gsd/<owner__repo>/,
collected with tests/data/gsd/trim.py), each with an EXPECTED.yaml written by reading the
project's files as a GSD user would (milestone, phase, next plan or next phase, plans done, the
phase type ``--phase auto`` picks, the warnings that name a real disagreement). One test runs
them all; a project the reading does not get right yet says so in ``xfail:`` (strict)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import ctxengine  # noqa: E402
from ctxengine.nodes import state  # noqa: E402
from ctxengine.nodes.config import defaults  # noqa: E402
from ctxengine.nodes.lib import gsd as G  # noqa: E402
from ctxengine.nodes.lib.yamlio import load_yaml  # noqa: E402
from ctxengine.nodes.settings import trust_settings  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "data" / "gsd"
CONFIG = trust_settings(defaults())
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}
PROJECTS = sorted(p for p in CORPUS.iterdir() if (p / "EXPECTED.yaml").is_file())


def expected(project: Path) -> dict:
    return load_yaml((project / "EXPECTED.yaml").read_text(encoding="utf-8"))


def position(project: Path) -> G.GsdPosition:
    return G.position_of(state.gsd_planning(str(project), CONFIG))


def build(project: Path, **overrides) -> ctxengine.BuildResult:
    return ctxengine.build_context(str(project), request="Continue", overrides={**QUIET, **overrides})


def test_the_corpus_is_there_with_source_commit_and_licence():
    assert len(PROJECTS) >= 30
    for project in PROJECTS:
        data = expected(project)
        assert data["source"] == "https://github.com/" + project.name.replace("__", "/", 1)
        assert len(data["commit"]) == 40 and data["licence"] and data["why"], project.name


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_the_position_is_the_one_read_by_hand(project: Path):
    data = expected(project)
    want = data["expect"]
    pos = position(project)
    got = {
        "milestone": pos.milestone, "phase": pos.phase, "folder": pos.folder, "next_plan": pos.plan,
        "plans_done": pos.plans_done, "plans_total": pos.plans_total, "phase_complete": pos.phase_complete,
        "milestone_complete": pos.milestone_complete, "next_phase": pos.next_phase,
        "work": G.phase_work(pos, G.AUTO).type,
    }
    right = {k: want[k] for k in got} == got and len(pos.warnings) == len(want["warnings"]) and all(
        w in warning for w, warning in zip(want["warnings"], pos.warnings))
    if data.get("xfail"):
        assert not right, f"{project.name} is read right now: drop its xfail"
        pytest.xfail(data["xfail"])
    assert {k: want[k] for k in got} == got, pos.evidence
    assert len(pos.warnings) == len(want["warnings"]), pos.warnings
    assert all(w in warning for w, warning in zip(want["warnings"], pos.warnings)), pos.warnings


# ----------------------------------------------------------------------------- issue 19, from the real files

CIPHER = CORPUS / "FSM1__cipher-box"
VECTORFLOW = CORPUS / "TerrifiedBug__vectorflow"


def _project(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_no_phase_line_the_frontmatter_stopped_at_names_the_phase(tmp_path: Path):
    # The shape of Th3rdai/CodeCompanion@e54fc8e (its licence forbids redistribution, so the real
    # files are not in the corpus): no 'Phase:' line, 'stopped_at: Completed 28-01-PLAN.md', and a
    # deferred phase 9 with an open plan that the earliest-open-folder rule took for current.
    project = _project(tmp_path / "p", {
        ".planning/STATE.md": "---\ngsd_state_version: 1.0\nmilestone: v4.0\nstatus: unknown\n"
                              "stopped_at: Completed 28-01-PLAN.md\n---\n# Project State\n## Current Position\n\n"
                              "Roadmap status: completed through Phase 26, deferred phases 8-14 and 27, planned Phase 28.\n",
        ".planning/phases/09-later/09-01-PLAN.md": "# deferred\n",
        ".planning/phases/28-review/28-01-PLAN.md": "# plan\n",
        ".planning/phases/28-review/28-01-SUMMARY.md": "# done\n",
        ".planning/phases/28-review/28-02-PLAN.md": "# plan\n",
    })
    pos = position(project)
    assert (pos.phase, pos.plan, pos.source) == ("28", "28-02", G.FRONTMATTER)
    assert pos.evidence[0] == ("STATE.md:5 frontmatter stopped_at: Completed 28-01-PLAN.md -> phase 28 "
                               "(no 'Phase:' line)")


def test_plans_named_by_the_roadmap_keep_a_phase_open_when_its_plan_files_were_not_committed():
    pos = position(VECTORFLOW)  # phases/15-.../ holds only 15-01-SUMMARY.md
    assert (pos.phase, pos.plan, pos.plans_done, pos.plans_total, pos.phase_complete) == ("15", "15-02", 1, 2, False)
    assert any("ROADMAP.md:95 '- [ ] 15-02-PLAN.md" in e for e in pos.evidence)
    result = build(VECTORFLOW)
    roadmap = next(s for s in result.sections if s.key == "roadmap").content
    # phase 13 ('1/2 plans executed', its box unchecked) is not labelled done; phase 12 is
    assert "13-02-PLAN.md" in roadmap and "Phase 13: Backup Listing & History (done" not in roadmap
    assert "Phase 12: Backup Registry Foundation (done; details cut" in roadmap


def test_a_milestone_n_roadmap_names_the_milestone_and_folds_the_others():
    pos = position(CIPHER)  # STATE.md has no frontmatter and no milestone line
    assert (pos.milestone, pos.milestone_name) == ("v1.0", "Milestone 2: Production v1.0")
    roadmap = next(s for s in build(CIPHER).sections if s.key == "roadmap").content
    assert "other milestone, folded" in roadmap and "Milestone 1: Staging MVP" in roadmap
    assert "Phase 11: Cross-Platform Desktop (done" not in roadmap  # its box is unchecked and it has no folder


def test_after_a_finished_phase_the_work_is_the_next_phase_not_the_finished_ones_context():
    result = build(CIPHER)  # auto
    work = result.as_json()["position"]["work"]
    assert (work["type"], work["phase"], work["folder"], work["auto"]) == ("discuss", "15", None, True)
    assert "Phase 15: Link Sharing and Search, not planned yet: discuss or plan it" in work["why"]
    for phase in ("plan", "execute"):
        result = build(CIPHER, **{"disclosure.phase": phase})
        loaded = [r["document"] for r in result.disclosure if r["loaded"]]
        assert not any("/14-user-to-user-sharing/" in d for d in loaded), loaded
        assert result.as_json()["position"]["work"]["phase"] == "15"
    assert any("not planned yet: discuss or plan it" in w for w in result.warnings) is False  # execute needs no CONTEXT
    result = build(CIPHER, **{"disclosure.phase": "plan"})
    assert any("required for phase 'plan'" in w and "not planned yet: discuss or plan it" in w for w in result.warnings)


def test_verify_loads_the_summaries_the_plan_section_only_quotes():
    result = build(VECTORFLOW, **{"disclosure.phase": "verify"})
    row = next(r for r in result.disclosure if r["document"].endswith("15-01-SUMMARY.md"))
    assert row["loaded"] and row["layer"] == 2 and row["section"] == "ref:.planning/phases/15-restore-ux-cleanup/15-01-SUMMARY.md"
    execute = build(VECTORFLOW)  # auto: execute, the SUMMARY stays a one-liner in the plan section
    assert execute.as_json()["position"]["work"]["type"] == "execute"
    assert not any(r["document"].endswith("15-01-SUMMARY.md") and r["loaded"] and r["layer"] == 2
                   for r in execute.disclosure)


def test_an_explicit_phase_wins_over_auto():
    result = build(VECTORFLOW, **{"disclosure.phase": "research"})
    assert result.as_json()["position"]["work"] == {
        "type": "research", "phase": "15", "folder": "phases/15-restore-ux-cleanup", "auto": False,
        "why": position(VECTORFLOW).note()}


@pytest.mark.parametrize("text, liner", [
    ("# Phase 3 Plan 1: Cache Summary\n\n**One-liner:** Added the widget cache\n\n## Performance\n",
     ("Added the widget cache", 3)),
    ("# Phase 3 Plan 1: Cache Summary\n\n**Phase:** 3\n\nAdded the widget cache. It evicts by LRU.\n\n## Done\n",
     ("Added the widget cache.", 5)),
    ("# Phase 3 Plan 1: Cache Summary\n\nA plain paragraph.\n\n**The bold one-liner wins**\n",
     ("The bold one-liner wins", 5)),
])
def test_summary_one_liner_labels_and_plain_paragraphs(text, liner):
    assert G.summary_one_liner(text) == liner


def test_the_default_build_loads_the_context_of_a_phase_with_no_plan_yet(tmp_path: Path):
    project = tmp_path / "p"
    for rel, text in {
        ".planning/STATE.md": "# State\n\n## Current Position\n\nPhase: 2 of 3 (Api)\nStatus: Ready to plan\n",
        ".planning/ROADMAP.md": "# Roadmap\n\n### Phase 1: Core\n\n### Phase 2: Api\n\n### Phase 3: Cli\n",
        ".planning/phases/01-core/01-01-PLAN.md": "# Plan\n",
        ".planning/phases/01-core/01-01-SUMMARY.md": "# Phase 1 Plan 1: Core Summary\n\n**Did the core**\n",
        ".planning/phases/02-api/02-CONTEXT.md": "# Phase 2 context\n\nDecision: JSON errors everywhere.\n",
    }.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text, encoding="utf-8")
    result = build(project)  # no --phase
    assert result.as_json()["position"]["work"]["type"] == "plan"
    row = next(r for r in result.disclosure if r["document"] == ".planning/phases/02-api/02-CONTEXT.md")
    assert row["loaded"] and row["rule"].startswith("phase plan: {phase}/*-CONTEXT.md (required")
    assert "JSON errors everywhere" in result.context


# ----------------------------------------------------------------------------- workstreams, stacked frontmatter

def test_stacked_frontmatter_blocks_are_named_in_a_warning():
    text = (CORPUS / "NexeraDigital__get-shit-done" / ".planning" / "STATE.md").read_text(encoding="utf-8")
    parsed = G.parse_state(text, ".planning/STATE.md")
    assert parsed.frontmatter["stopped_at"] == "Completed 04-01-PLAN.md"  # the first block is read
    assert parsed.warnings == (".planning/STATE.md:16: 4 more frontmatter block(s) follow the first (lines 16-29, "
                               "31-44, 46-59 ...); only lines 1-14 are read (delete the stale blocks)",)


def _workstream(root: Path, name: str, phase: str, done: bool) -> dict[str, str]:
    files = {f".planning/workstreams/{name}/STATE.md": f"# State\n\n## Current Position\n\nPhase: {phase} of 3\n"
                                                       "Status: Executing\n",
             f".planning/workstreams/{name}/phases/0{phase}-{name}/0{phase}-01-PLAN.md": "# plan\n"}
    if done:
        files[f".planning/workstreams/{name}/phases/0{phase}-{name}/0{phase}-01-SUMMARY.md"] = "# done\n"
    return files


def test_workstreams_the_active_one_else_a_warning_naming_each(tmp_path: Path):
    files = {**_workstream(tmp_path, "api", "2", True), **_workstream(tmp_path, "ui", "3", False)}
    project = _project(tmp_path / "p", files)
    pos = position(project)  # no pointer, two workstreams with a position: the one at work, with a warning
    assert (pos.phase, pos.folder, pos.plan) == ("3", "workstreams/ui/phases/03-ui", "03-01")
    assert len(pos.warnings) == 1 and ".planning/workstreams/api/STATE.md: phase 2 (complete)" in pos.warnings[0]
    assert ".planning/workstreams/ui/STATE.md: phase 3 (0 of 1 plans done)" in pos.warnings[0]
    assert "write its name to .planning/active-workstream" in pos.warnings[0]
    (project / ".planning" / "active-workstream").write_text("api\n", encoding="utf-8")
    pos = position(project)
    assert (pos.phase, pos.folder, pos.phase_complete, pos.warnings) == ("2", "workstreams/api/phases/02-api", True, ())
    assert pos.evidence[0] == ".planning/active-workstream names workstream api: .planning/workstreams/api/STATE.md is read"
    plan = next(s for s in build(project).sections if s.key == "plan").content
    assert "workstreams/api/phases/02-api" in plan
