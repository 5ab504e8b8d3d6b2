"""ONE reading of the GSD position (nodes/lib/gsd/position.py, node ``gsd_position``): real
.planning folders in tmp_path, the corpus, the bundled examples/gsd, and the real driver."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

import ctxengine  # noqa: E402
from conftest import corpus_projects, write_project  # noqa: E402
from ctxengine.nodes import state  # noqa: E402
from ctxengine.nodes.config import defaults  # noqa: E402
from ctxengine.nodes.settings import trust_settings  # noqa: E402
from ctxengine.nodes.lib import gsd as G  # noqa: E402
from ctxengine.nodes.types import ConfigError  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gsd"
QUIET = {"state.includeGit": False, "state.includeEnvironment": False}
CONFIG = trust_settings(defaults())  # what gsd_planning reads of the configuration: the trust rules

PLAN = "---\nwave: 1\n---\n\n<objective>\n{}\n</objective>\n\n<tasks>\n<task><name>Task 1: {}</name></task>\n</tasks>\n"
SUMMARY = "# Phase {} Plan {} Summary\n\n**{}**\n"


def position(project: Path, pin: str = "") -> G.GsdPosition:
    return G.position_of(state.gsd_planning(str(project), CONFIG), pin)


def build(project: Path, request: str = "Continue", **overrides) -> ctxengine.BuildResult:
    return ctxengine.build_context(str(project), request=request, overrides={**QUIET, **overrides})


def done_phase(n: str, name: str, plans: int = 1) -> dict:
    out = {}
    for i in range(1, plans + 1):
        out[f".planning/phases/{n}-{name}/{n}-0{i}-PLAN.md"] = PLAN.format(f"Do {name} {i}.", f"{name} {i}")
        out[f".planning/phases/{n}-{name}/{n}-0{i}-SUMMARY.md"] = SUMMARY.format(n, i, f"Did {name} {i}")
    return out


ROADMAP = "# Roadmap\n\n" + "".join(f"- [ ] **Phase {i}: P{i}**\n" for i in range(1, 6)) + "\n" + "".join(
    f"### Phase {i}: P{i}\n**Goal**: goal {i}\n\n" for i in range(1, 6))


def test_phase_complete_with_the_next_phase_holding_only_a_context_moves_on(tmp_path: Path):
    project = write_project(tmp_path / "p", {
        ".planning/STATE.md": "# State\n\n## Current Position\n\nPhase: 11 of 12 (Api)\nPlan: 2 of 2\n"
                              "Status: Phase 11 COMPLETE\n",
        ".planning/ROADMAP.md": "# Roadmap\n\n### Phase 11: Api\n\n### Phase 12: Cli\n",
        **done_phase("11", "api", 2),
        ".planning/phases/12-cli/12-CONTEXT.md": "# Phase 12 context\n",
    })
    pos = position(project)
    assert (pos.phase, pos.folder, pos.plan, pos.source) == ("12", "phases/12-cli", None, G.FILES)
    assert any("phase 11 complete" in e and "12-CONTEXT.md" in e for e in pos.evidence)
    assert pos.warnings == (".planning/STATE.md:5: names phase 11 (STATE.md says it is complete), but "
                            "phases/12-cli/ already holds 12-CONTEXT.md; phase 12 is taken as current "
                            "(pin another with state.gsdPhase)",)
    # --phase plan loads the CONTEXT of phase 12, not 11's
    result = build(project, **{"disclosure.phase": "plan"})
    loaded = [r["document"] for r in result.disclosure if r["loaded"] and "/phases/" in r["document"]]
    assert ".planning/phases/12-cli/12-CONTEXT.md" in loaded and not [d for d in loaded if "/11-api/" in d]
    assert result.as_json()["position"]["phase"] == "12"


def test_phase_done_by_files_with_the_next_phase_planned_moves_on_to_its_first_plan(tmp_path: Path):
    project = write_project(tmp_path / "p", {
        ".planning/STATE.md": "## Current Position\n\nPhase: 4 of 5\nPlan: 1 of 1\nStatus: Executing\n",
        ".planning/ROADMAP.md": "# Roadmap\n",
        **done_phase("04", "core"),
        ".planning/phases/05-ui/05-01-PLAN.md": PLAN.format("Build the UI.", "ui"),
        ".planning/phases/05-ui/05-02-PLAN.md": PLAN.format("Polish the UI.", "polish"),
    })
    pos = position(project)
    assert (pos.phase, pos.plan, pos.plans_done, pos.plans_total) == ("5", "05-01", 0, 2)
    assert any("all its plans have a SUMMARY" in w for w in pos.warnings)
    # --phase execute (GSD's manifest: STATE + config) loads no PLAN again: the plan section
    # shows 05-01 in full; repair loads the plan under way, 05-01
    result = build(project, **{"disclosure.phase": "execute"})
    assert not [r for r in result.disclosure if r["loaded"] and r["document"].endswith("-PLAN.md")]
    repair = build(project, **{"disclosure.phase": "repair"})
    plans = [r["document"] for r in repair.disclosure if r["loaded"] and r["document"].endswith("-PLAN.md")]
    assert plans == [".planning/phases/05-ui/05-01-PLAN.md"]
    plan = next(s for s in result.sections if s.key == "plan")
    assert "- [>] 05-01 (next): Build the UI." in plan.content and "<task><name>Task 1: ui" in plan.content


def test_a_stale_body_line_loses_to_the_frontmatter_with_a_warning_naming_both(tmp_path: Path):
    fm = ("---\nmilestone: v1.0\nstatus: executing\nprogress:\n  total_phases: 5\n  completed_phases: 4\n---\n\n"
          "# State\n\n## Current Position\n\nPhase: 1 of 3 (Setup)\nStatus: Executing\n")
    files = {".planning/STATE.md": fm, ".planning/ROADMAP.md": ROADMAP,
             ".planning/phases/05-p5/05-CONTEXT.md": "# ctx\n"}
    for n in ("01", "02", "03", "04"):
        files.update(done_phase(n, f"p{int(n)}"))
    pos = position(write_project(tmp_path / "p", files))
    assert (pos.phase, pos.folder, pos.source) == ("5", "phases/05-p5", G.FRONTMATTER)
    assert pos.warnings == (".planning/STATE.md:13: the body says 'Phase: 1 of 3 (Setup)' but .planning/STATE.md:6 "
                            "frontmatter progress.completed_phases: 4 of 5 says phase 5; the frontmatter is used "
                            "(update the stale line)",)
    # an explicit current_phase in the frontmatter wins the same way
    files[".planning/STATE.md"] = "---\ncurrent_phase: 5\n---\n## Current Position\nPhase: 1 of 3\n"
    pos = position(write_project(tmp_path / "q", files))
    assert (pos.phase, pos.source) == ("5", G.FRONTMATTER)
    assert pos.warnings == (".planning/STATE.md:5: the body says 'Phase: 1 of 3' but .planning/STATE.md:2 "
                            "frontmatter current_phase: 5 says phase 5; the frontmatter is used (update the stale line)",)


def test_execute_mid_phase_next_plan_in_full_done_as_one_liners_later_as_outline(tmp_path: Path):
    result = build(EXAMPLE, "Implement the next plan")  # auto: execute
    assert result.as_json()["position"] == {
        "milestone": "v1.0", "milestone_name": "MVP", "phase": "2", "folder": "phases/02-http-api",
        "plan": "02-02", "plans_done": 1, "plans_total": 3, "phase_complete": False, "milestone_complete": False,
        "source": "frontmatter",
        "evidence": ["STATE.md:6 frontmatter current_phase: 2 -> phase 2", "STATE.md names plan 2: 02-02 is in progress"],
        "next_phase": None, "between_milestones": False,
        "work": {"type": "execute", "phase": "2", "folder": "phases/02-http-api", "auto": True,
                 "why": "auto: phase 2 has plans to run, next 02-02 (1 of 3 done)"},
    }
    assert [w for w in result.warnings if not w.startswith("tokenizer:")] == []
    plan = next(s for s in result.sections if s.key == "plan").content
    assert "- [x] 02-01: Regex router with JSON 404/405 errors and a json_response helper" in plan
    assert "(.planning/phases/02-http-api/02-01-PLAN.md)" not in plan  # the done plan: its SUMMARY's one-liner
    nxt = plan[plan.index("- [>] 02-02 (next)"):plan.index("- [ ] 02-03")]
    assert "<action>Parse the JSON body" in nxt and "<success_criteria>" in nxt
    later = plan[plan.index("- [ ] 02-03"):]
    assert "Task 2: Pagination" in later and "<action>" not in later
    roadmap = next(s for s in result.sections if s.key == "roadmap")
    assert (roadmap.kind, roadmap.title, roadmap.priority) == ("roadmap", "Roadmap", 55)
    assert "Phase 1: Storage (done; details cut, ROADMAP.md lines 15-24)" in roadmap.content
    assert "**Goal**: bookmarks persist" not in roadmap.content and "**Goal**: a client can save" in roadmap.content
    assert result.context.index("# Current Plan") < result.context.index("# Roadmap\n") < result.context.index(
        "# User Request")
    # state and disclosure agree: the execute phase files come from the plan section's folder
    disclosed = [r["document"] for r in result.disclosure if r["loaded"] and "/phases/" in r["document"]]
    assert disclosed and all(d.startswith(".planning/phases/02-http-api/") for d in disclosed)


def test_the_roadmap_ranks_below_the_plan_and_its_priority_is_configurable():
    sections = {s.key: s for s in build(EXAMPLE).sections}
    assert sections["roadmap"].priority < sections["reference" if "reference" in sections else "plan"].priority
    assert sections["roadmap"].priority < sections["plan"].priority == 80
    assert {s.key: s for s in build(EXAMPLE, **{"priorities.roadmap": 40}).sections}["roadmap"].priority == 40
    assert "roadmap" not in {s.key for s in build(EXAMPLE, **{"state.includePlan": False}).sections}


def test_a_pinned_phase_wins_and_a_missing_or_bad_pin_is_reported(tmp_path: Path):
    project = tmp_path / "gsd"
    shutil.copytree(EXAMPLE, project)
    pos = position(project, "1")
    assert (pos.phase, pos.folder, pos.source, pos.plan, pos.phase_complete) == ("1", "phases/01-storage", G.PINNED,
                                                                                None, True)
    result = build(project, **{"state.gsdPhase": "1", "disclosure.phase": "verify"})
    assert result.as_json()["position"]["source"] == "pinned"
    assert "## Phase 1 plans (.planning/phases/01-storage/)" in next(s for s in result.sections if s.key == "plan").content
    missing = position(project, "7")
    assert missing.folder is None and missing.warnings == (
        "state.gsdPhase: phase 7 has no folder under .planning/phases/ or .planning/milestones/*-phases/; the plan "
        "section shows no plans (create the folder or pin an existing phase)",)
    with pytest.raises(ConfigError, match=r"key 'state.gsdPhase' is 'two'; give a phase number such as 12 or 8.1"):
        build(project, **{"state.gsdPhase": "two"})


def test_decimal_phases_sort_between_their_neighbours(tmp_path: Path):
    project = write_project(tmp_path / "p", {
        ".planning/STATE.md": "## Current Position\nPhase: 8 of 9\nStatus: Phase 8 complete\n",
        ".planning/ROADMAP.md": "# Roadmap\n",
        **done_phase("08", "launch"),
        ".planning/phases/09-docs/09-01-PLAN.md": PLAN.format("Docs.", "docs"),
        ".planning/phases/08.1-hotfix/08.1-01-PLAN.md": PLAN.format("Hotfix.", "fix"),
        ".planning/phases/08.10-later/08.10-01-PLAN.md": PLAN.format("Later.", "later"),
    })
    folders = G.phase_folders(state.gsd_planning(str(project), CONFIG).folders)
    assert [f.path.split("/")[-1] for f in folders] == ["08-launch", "08.1-hotfix", "08.10-later", "09-docs"]
    pos = position(project)
    assert (pos.phase, pos.plan) == ("8.1", "08.1-01")


def test_between_milestones_and_before_planning_there_is_no_spurious_warning(tmp_path: Path):
    project = write_project(tmp_path / "p", {
        ".planning/STATE.md": "## Current Position\n\nPhase: None (between milestones)\nStatus: v1.0 archived\n",
        ".planning/ROADMAP.md": "# Roadmap\n\n## v1.0 Base (shipped)\n\n- [x] Phase 1\n",
        **done_phase("01", "base"),
    })
    pos = position(project)
    assert (pos.phase, pos.phase_complete, pos.milestone_complete, pos.warnings) == ("1", True, True, ())
    assert [w for w in build(project).warnings if not w.startswith("tokenizer:")] == []
    # a new milestone's first phase with a CONTEXT only: it is current, still no warning
    (project / ".planning" / "phases" / "02-next").mkdir()
    (project / ".planning" / "phases" / "02-next" / "02-CONTEXT.md").write_text("# ctx\n")
    pos = position(project)
    assert (pos.phase, pos.folder, pos.phase_complete, pos.warnings) == ("2", "phases/02-next", False, ())
    # no phase folders at all, before planning
    bare = write_project(tmp_path / "bare", {".planning/STATE.md": "## Current Position\nPhase: 1 of 3\n"
                                             "Plan: Not started\nStatus: Ready to plan\n",
                                             ".planning/ROADMAP.md": "# Roadmap\n- [ ] Phase 1: A\n"})
    assert position(bare).warnings == () and position(bare).folder is None


def test_roadmap_kept_whole_warns_only_with_several_milestones_and_none_matching(tmp_path: Path):
    files = {".planning/STATE.md": "---\nmilestone: v3.0\n---\n## Current Position\nPhase: 1 of 1\n"}
    single = write_project(tmp_path / "one", {**files, ".planning/ROADMAP.md": "# Roadmap\n\n- [ ] Phase 1: A\n"})
    plan_warnings = [w for w in build(single).warnings if "ROADMAP" in w]
    assert plan_warnings == []
    several = write_project(tmp_path / "two", {**files, ".planning/ROADMAP.md":
                                                "# Roadmap\n\n## v1.0 Old\n\n- [x] Phase 1\n\n## v2.0 New\n\n- [ ] Phase 2\n"})
    assert [w for w in build(several).warnings if "ROADMAP" in w] == [
        ".planning/ROADMAP.md: 2 milestones (v1.0, v2.0) and none is v3.0 (from STATE.md); the roadmap is kept whole"
        .replace(".planning/ROADMAP.md", str(several / ".planning" / "ROADMAP.md"))]


EXPECTED = {  # milestone, phase, plan, source
    "0xCUB3__wBlock": ("v1.2", "12", None, "body"),
    "0xLeathery__helix-staking": (None, "8.2", "08.2-01", "files"),
    "9thLevelSoftware__Project-Phoenix-MP": ("v0.8.0", "36", None, "body"),  # STATE.md and ROADMAP.md:59 say complete
    "ahmetb__kubectl-fields": ("v1.0", "4", None, "files"),
    "ai-dynamo__nixl": ("v1.1", "37", None, "files"),
}
REAL_PROBLEMS = {  # the corpus warnings that name a real disagreement between STATE.md and the files
    "0xLeathery__helix-staking": "phase 8.2 is taken as current",
}


@pytest.mark.parametrize("project", corpus_projects(), ids=lambda p: p.name)
def test_every_corpus_project_has_a_position_and_no_spurious_warning(project: Path):
    result = build(project, **{"disclosure.phase": "execute"})
    pos = result.as_json()["position"]
    assert (pos["milestone"], pos["phase"], pos["plan"], pos["source"]) == EXPECTED[project.name]
    warnings = [w for w in result.warnings if not w.startswith(("tokenizer:", "git:"))
                and "required for phase 'execute'" not in w]
    expected = [REAL_PROBLEMS[project.name]] if project.name in REAL_PROBLEMS else []
    assert len(warnings) == len(expected) and all(e in w for e, w in zip(expected, warnings)), warnings
    disclosed = {r["document"].rsplit("/", 1)[0] for r in result.disclosure
                 if r["loaded"] and r["document"].startswith(".planning/phases/")}
    assert disclosed <= {".planning/" + pos["folder"]}
    print(f"{project.name}: {pos['milestone']} / {pos['phase']} / {pos['plan']} [{pos['source']}]")


# ----------------------------------------------------------------------------- found on real GSD projects

STALE_ROADMAP = """# Roadmap

<details>
<summary>v0.3 Core (Phases 1-2) -- SHIPPED 2026-03-01</summary>

- [x] Phase 1: Foundation
- [x] Phase 2: Pipeline

</details>

### Phase 7: Hardening

**Plans:** 1 plans

Plans:
- [ ] 07-01-PLAN.md — harden the pipeline

### Phase 8: v7 review polish

Plans:
- [ ] TBD (run /gsd:plan-phase 8 to break down)

### Phase 6: Cost cuts

Plans:
- [x] 06-01-PLAN.md — window the crons

### Phase 9: Realtime fan-out

**Goal:** Cut realtime messages under the cap.

Plans:
- [x] 09-01-PLAN.md — batch broadcasts
"""


def stale_milestone_project(root: Path) -> Path:
    """Like a real project (agent-workforce): STATE.md's milestone is one shipped long ago, the
    current phase sits in the roadmap outside every milestone block, a phase heading names "v7",
    and unfinished phases (a plan without SUMMARY, no plan) come before the current one."""
    return write_project(root, {
        ".planning/STATE.md": "---\nmilestone: v0.3\nstatus: executing\n---\n# State\n\n## Current Position\n\n"
                              "Phase: 9\nPlan: Not started\n",
        ".planning/ROADMAP.md": STALE_ROADMAP,
        **done_phase("09", "realtime"),
        **done_phase("06", "cost"),
        ".planning/phases/07-hardening/07-01-PLAN.md": PLAN.format("Harden.", "harden"),  # no SUMMARY yet
        ".planning/phases/08-review/08-CONTEXT.md": "# Context\n",  # not planned
    })


def test_a_stale_milestone_in_state_md_is_a_warning_and_the_roadmap_keeps_the_current_phase(tmp_path: Path):
    project = stale_milestone_project(tmp_path / "p")
    pos = position(project)
    assert (pos.phase, pos.folder, pos.milestone, pos.phase_complete) == ("9", "phases/09-realtime", None, True)
    assert pos.warnings == (".planning/STATE.md: milestone v0.3 (frontmatter), but ROADMAP.md does not list phase 9 "
                            "under it; the roadmap is read whole (set milestone: in STATE.md to fix it)",)
    result = build(project)
    roadmap = next(s for s in result.sections if s.key == "roadmap").content
    assert "Cut realtime messages under the cap." in roadmap  # the current phase's details are there
    assert "Phase 8: v7 review polish\n" in roadmap + "\n" and "other milestone" not in roadmap.split("</details>")[-1]
    assert "harden the pipeline" in roadmap and "TBD (run /gsd:plan-phase 8" in roadmap  # not done: details kept
    assert "Phase 6: Cost cuts (done; details cut" in roadmap  # done: cut to its heading
    assert pos.warnings[0] in result.warnings


def test_a_phase_heading_naming_a_version_is_not_a_milestone_block():
    view = G.narrow_roadmap(STALE_ROADMAP, None)
    assert view.milestones == ("v0.3",)
    assert G.milestone_phases(STALE_ROADMAP, "v0.3") == ("1", "2")


def test_the_milestone_state_md_names_is_kept_when_the_roadmap_lists_the_phase(tmp_path: Path):
    project = stale_milestone_project(tmp_path / "p")
    (project / ".planning" / "STATE.md").write_text("---\nmilestone: v0.3\n---\n# State\n\n## Current Position\n\n"
                                                    "Phase: 2\nPlan: Not started\n")
    assert position(project).milestone == "v0.3" and position(project).warnings[:1] != (
        ".planning/STATE.md: milestone v0.3",)
    assert not [w for w in position(project).warnings if "does not list phase" in w]


def test_the_plan_phase_does_not_load_the_roadmap_a_second_time(tmp_path: Path):
    project = stale_milestone_project(tmp_path / "p")
    result = build(project, **{"disclosure.phase": "plan"})
    assert [s.key for s in result.sections].count("roadmap") == 1
    assert "ref:.planning/ROADMAP.md" not in [s.key for s in result.sections]
    row = next(r for r in result.disclosure if r["document"] == ".planning/ROADMAP.md")
    assert row["loaded"] is True and row["section"] == "roadmap" and "already loaded by the roadmap section" in row["rule"]
