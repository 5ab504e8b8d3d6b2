"""Plans: the article layout's plan.md and real GSD .planning folders (the corpus ones)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from conftest import corpus_projects, write_project, needs_shared  # noqa: E402
from ctxengine.nodes import state  # noqa: E402
from ctxengine.nodes import settings as settings_nodes  # noqa: E402
from ctxengine.nodes.config import defaults  # noqa: E402
from ctxengine.nodes.lib.settings import StateSettings  # noqa: E402
from ctxengine.nodes.lib import gsd as G  # noqa: E402
from ctxengine.nodes.lib import plan as P  # noqa: E402

PLAN = """\
# Plan: Auth rewrite
## Tasks
- [x] T1 Create the users table
  Done in migration 0003; indexes on email.
- [>] T2 Implement the login endpoint
  Use argon2id; return 401 on a bad password, never 404.
  - [x] T2.1 Hash helper
    argon2 parameters from the OWASP sheet
  - [ ] T2.2 Route
- [ ] T3 Write integration tests

  Cover the lockout after five failures.
- [-] T4 Session cookies
  Dropped: tokens instead.
- [?] T5 Odd box

```markdown
- [ ] not a task, inside a fence
```
"""


def config(**state_keys) -> StateSettings:
    """The state stage's settings: the defaults with ``state_keys`` laid over them."""
    values = defaults()
    values["state"].update(state_keys)
    return settings_nodes.state_settings(values, {}, "/nonexistent-project")


TRUST = settings_nodes.trust_settings(defaults())


# ----------------------------------------------------------------------------- article layout


def test_article_plan_keeps_open_tasks_and_cuts_done_ones():
    plan = P.parse_plan(PLAN, "plan.md")
    assert [(t.task_id, t.status, t.lines) for t in plan.tasks] == [
        ("T1", "done", (3, 4)), ("T2", "in_progress", (5, 9)), ("T2.1", "done", (7, 8)),
        ("T2.2", "pending", (9, 9)), ("T3", "pending", (10, 12)), ("T4", "cancelled", (13, 14)),
        ("T5", "pending", (15, 15)),
    ]
    assert plan.counts == {"done": 2, "in_progress": 1, "pending": 3, "cancelled": 1}
    text = plan.content
    assert "Tasks: 2 done / 1 in progress / 3 pending / 1 cancelled" in text
    assert "- [x] T1 Create the users table" in text and "migration 0003" not in text
    assert "Use argon2id" in text and "Cover the lockout after five failures." in text
    assert "  - [x] T2.1 Hash helper" in text and "OWASP" not in text
    assert "- [-] T4 Session cookies" in text and "Dropped: tokens" not in text
    assert "- [ ] not a task, inside a fence" in text  # fenced lines are kept as they are
    assert plan.warnings == ("plan.md:15: unknown task box [?]; read as pending "
                             "(use [x] done, [>] in progress, [ ] pending, [-] cancelled)",)


def test_article_view_sources_and_demoted_title():
    view = P.article_view(PLAN, "/p/.planning/plans/current/plan.md")
    assert view.content.startswith("## Plan: Auth rewrite")  # nests under the template's "# Current Plan"
    assert view.sources[0].lines == (1, 19)
    assert (5, 9) in [s.lines for s in view.sources] and (3, 4) not in [s.lines for s in view.sources]
    assert [t["status"] for t in view.data["tasks"]][:2] == ["done", "in_progress"]


def test_project_layout_auto_detection(tmp_path: Path):
    article = write_project(tmp_path / "a", {".planning/plans/current/plan.md": PLAN, ".planning/STATE.md": "x"})
    gsd = write_project(tmp_path / "g", {".planning/ROADMAP.md": "# Roadmap\n"})
    none = write_project(tmp_path / "n", {"README.md": "hi"})
    assert state.project_layout(str(article), config()) == "article"
    assert state.project_layout(str(gsd), config()) == "gsd"
    assert state.project_layout(str(none), config()) == "article"
    assert state.project_layout(str(none), config(layout="gsd")) == "gsd"


def _views(project: Path, **state_keys):
    """(plan view, roadmap view, position) through the state stage's own node functions."""
    cfg = config(**state_keys)
    layout = state.project_layout(str(project), cfg)
    planning = state.gsd_planning(str(project), TRUST)
    position = state.gsd_position(planning, layout, cfg)
    files = state.plan_reads(str(project), layout, cfg, TRUST, planning, position)["plan_files"]
    return (state.plan_state(files, layout, str(project), cfg, position),
            state.roadmap_state(files, layout, str(project), position), position)


def _plan_view(project: Path, **state_keys):
    plan, roadmap, position = _views(project, **state_keys)
    return replace(plan, warnings=plan.warnings + roadmap.warnings + position.warnings)


def test_missing_plan_is_quiet_in_auto_and_a_warning_when_asked_for(tmp_path: Path):
    project = write_project(tmp_path / "p", {"README.md": "x"})
    assert _plan_view(project).found is False and _plan_view(project).warnings == ()
    assert "plan.md: not found" in _plan_view(project, layout="article").warnings[0]
    gsd = _plan_view(project, layout="gsd")
    assert any("STATE.md: not found" in w for w in gsd.warnings)
    assert any("ROADMAP.md: not found" in w for w in gsd.warnings)


# ----------------------------------------------------------------------------- GSD corpus

EXPECTED_POSITION = {  # STATE.md line shown, milestone, phase the position takes
    "0xCUB3__wBlock": ("Phase: All complete (12/12)", "v1.2", "12"),
    "0xLeathery__helix-staking": ("Phase: 8.1 of 8.2 (Game Theory Hardening)", None, "8.2"),  # 8.1 done, 8.2 planned
    "9thLevelSoftware__Project-Phoenix-MP": ("Phase: 36 of 36 (complete)", "v0.8.0", "36"),
    "ahmetb__kubectl-fields": ("Phase: None (between milestones)", "v1.0", "4"),  # the latest folder, complete
    "ai-dynamo__nixl": ("Status: v1.1 milestone shipped", "v1.1", "37"),
}


@pytest.mark.parametrize("project", corpus_projects(), ids=lambda p: p.name)
def test_every_corpus_project_names_its_current_position(project: Path):
    view = _plan_view(project)
    assert view.layout == "gsd" and view.found
    position_text, milestone, phase = EXPECTED_POSITION[project.name]
    assert position_text in view.content
    assert view.position.startswith("Position: ")
    assert view.data["milestone"] == milestone and view.data["phase"] == phase
    state_md = str(project / ".planning" / "STATE.md")
    position_sources = [s for s in view.sources if s.location == state_md]
    lines = (project / ".planning" / "STATE.md").read_text().split("\n")
    first, last = position_sources[0].lines
    assert lines[first - 1].strip() == "## Current Position" and position_text in "\n".join(lines[first - 1:last])
    print(f"{project.name}: {view.position}")


@needs_shared
def test_roadmap_is_narrowed_to_the_current_milestone():
    project = next(p for p in corpus_projects() if p.name == "0xCUB3__wBlock")
    view = _views(project)[1]
    text = view.content
    assert "v1.2 Distribution & Code Signing (In Progress)" in text
    assert "- (other milestone, folded: ROADMAP.md lines 11-23) ✅ v1.0 Filter Compatibility (Phases 1-6)" in text
    assert "Phase 1: Validation Fix and Platform Constants (2/2 plans)" not in text  # inside the folded block
    assert "| 1. Validation Fix and Platform Constants | v1.0 |" not in text  # progress row of v1.0
    assert "| 11. Notarization Pipeline | v1.2 |" in text
    assert "(progress rows of other milestones omitted: 9)" in text
    roadmap = str(project / ".planning" / "ROADMAP.md")
    kept = [s.lines for s in view.sources if s.location == roadmap]
    assert (1, 10) in kept and all(not (a <= 15 <= b) for a, b in kept)


@needs_shared
def test_phoenix_folds_eight_shipped_milestones():
    project = next(p for p in corpus_projects() if p.name == "9thLevelSoftware__Project-Phoenix-MP")
    plan, view, position = _views(project)
    assert len(view.data["folded_milestones"]) == 8
    assert "\n### Phase 36: Integration Validation" not in view.content  # headings demoted under the section
    assert "#### Phase 36: Integration Validation" in view.content
    # STATE.md:18-20 and ROADMAP.md's ticked '- [x] Phase 36 ... (3/3 plans) completed' agree: complete,
    # though the three SUMMARYs were never committed; the plan section says so, not "pending"
    assert position.warnings == () and position.phase_complete
    assert [t["status"] for t in plan.data["tasks"]] == ["done", "done", "done"]
    assert "Plans: 3 done / 0 next / 0 pending" in plan.content


@needs_shared
def test_done_plans_show_their_summary_one_liner():
    project = next(p for p in corpus_projects() if p.name == "0xCUB3__wBlock")
    view = _plan_view(project)
    assert ("- [x] 12-01: Versioned Homebrew cask with livecheck/zap + CI auto-update of version and sha256 "
            "on each tag push (.planning/phases/12-homebrew-cask/12-01-SUMMARY.md)") in view.content
    assert "Plans: 1 done / 0 next / 0 pending" in view.content


@needs_shared
def test_decimal_phase_in_progress_plan_and_pending_outline(tmp_path: Path):
    corpus = next(p for p in corpus_projects() if p.name == "0xLeathery__helix-staking")
    project = tmp_path / "helix"
    shutil.copytree(corpus / ".planning", project / ".planning")
    phase = project / ".planning" / "phases" / "08.1-game-theory-hardening"
    (phase / "08.1-01-SUMMARY.md").write_text("# Phase 08.1 Plan 01: Audit fixes Summary\n\n**abort_bpd fully reset**\n")
    state_md = project / ".planning" / "STATE.md"
    state_md.write_text(state_md.read_text()
                        .replace("Plan: 5 of 5 in current phase (COMPLETE)", "Plan: 2 of 5 in current phase")
                        .replace("Status: Phase 8.1 COMPLETE", "Status: In progress")
                        .replace("Phase 8.1 COMPLETE (all 5 plans", "working (all 5 plans"))
    view = _plan_view(project)
    statuses = [(t["id"], t["status"]) for t in view.data["tasks"]]
    assert statuses == [("08.1-01", "done"), ("08.1-02", "next"), ("08.1-03", "pending"),
                        ("08.1-04", "pending"), ("08.1-05", "pending")]
    text = view.content.split("## Phase 8.1 plans")[1]
    assert "- [x] 08.1-01: abort_bpd fully reset" in text
    assert "Plans: 1 done / 1 next / 3 pending" in text
    in_progress = text[text.index("- [>] 08.1-02 (next)"):text.index("- [ ] 08.1-03")]
    assert "<tasks>" in in_progress and "checked_mul" in in_progress  # the plan in full
    pending = text[text.index("- [ ] 08.1-03"):text.index("- [ ] 08.1-04")]
    assert "Task 2: Implement BPD per-stake whale cap" in pending and "<action>" not in pending
    full = _plan_view(project, gsdPendingPlans="full")
    full_text = full.content.split("## Phase 8.1 plans")[1]
    pending_full = full_text[full_text.index("- [ ] 08.1-03"):full_text.index("- [ ] 08.1-04")]
    assert "<action>" in pending_full


def test_archived_milestone_phase_folder_is_found(tmp_path: Path):
    project = write_project(tmp_path / "arch", {
        ".planning/STATE.md": "# Project State\n\n## Current Position\n\nPhase: 2.1 of 3 (Fixes)\nPlan: 1 of 2\nStatus: Executing\n",
        ".planning/ROADMAP.md": "# Roadmap\n\n- [ ] Phase 2.1: Fixes\n",
        ".planning/milestones/v1.0-phases/02.1-fixes/02.1-01-PLAN.md":
            "---\nphase: 02.1-fixes\nplan: 01\nwave: 1\n---\n\n<objective>\nFix the rounding.\n</objective>\n",
        ".planning/milestones/v1.0-phases/02.1-fixes/02.1-02-PLAN.md": "<objective>\nAdd tests.\n</objective>\n",
        ".planning/milestones/v1.0-phases/02-core/02-01-PLAN.md": "<objective>\nOther phase.\n</objective>\n",
    })
    view = _plan_view(project)
    assert view.warnings == ()
    assert "## Phase 2.1 plans (.planning/milestones/v1.0-phases/02.1-fixes/)" in view.content
    assert "- [>] 02.1-01 (next): Fix the rounding." in view.content and "wave: 1" in view.content
    assert "- [ ] 02.1-02: Add tests." in view.content and "Other phase" not in view.content


def test_missing_phase_folder_is_a_warning_only_when_the_phase_is_being_executed(tmp_path: Path):
    project = write_project(tmp_path / "nophase", {
        ".planning/STATE.md": "## Current Position\nPhase: 4 of 5\nPlan: 2 of 3\nStatus: Executing\n",
        ".planning/ROADMAP.md": "# Roadmap\n",
    })
    view = _plan_view(project)
    assert [w for w in view.warnings if "no phase folder" in w] == [
        ".planning: no phase folder for phase 4 (looked in phases/ and milestones/*-phases/); create it or pin "
        "another phase with state.gsdPhase"]
    assert "Phase: 4 of 5" in view.content
    (project / ".planning" / "STATE.md").write_text("## Current Position\nPhase: 4 of 5\nPlan: Not started\n"
                                                    "Status: Ready to plan\n")
    assert _plan_view(project).warnings == ()  # before planning no folder is expected


@needs_shared
def test_state_frontmatter_is_shown():
    project = next(p for p in corpus_projects() if p.name == "ai-dynamo__nixl")
    view = _plan_view(project)
    assert "STATE.md frontmatter: gsd_state_version: 1.0; milestone: v1.1;" in view.content
    assert "completed_plans=9" in view.content
    assert any(s.lines == (1, 15) for s in view.sources)  # the frontmatter, "---" to "---"


def test_summary_one_liner_fallbacks():
    assert G.summary_one_liner("---\none_liner: From frontmatter\n---\n# T\n") == ("From frontmatter", 1)
    assert G.summary_one_liner("# Phase 08 Plan 01 Summary: Test Runner Migration\n\n**Status**: done\n") == (
        "Test Runner Migration", 1)
    assert G.summary_one_liner("---\na: 1\n---\n\n# Phase 1 Plan 2: X Summary\n\n**Did the thing**\n") == (
        "Did the thing", 7)


def test_roadmap_phase_details_outside_the_milestone_range_are_dropped():
    roadmap = """\
# Roadmap: X

## Milestones

- ✅ **v1.0 Base** — Phases 1-3 (shipped 2026-01-01)
- 🚧 **v2.0 Growth** — Phases 4-5 (in progress)

## Phases

- [x] **Phase 2: Old work** — done
- [ ] **Phase 4: New work** — next
- [ ] **Phase 4.1: Urgent insert** — (INSERTED)

## Phase Details

### Phase 2: Old work
**Goal**: the past

### Phase 4: New work
**Goal**: the future

## Progress

| Phase | Plans | Status |
|-------|-------|--------|
| 2. Old work | 1/1 | Complete |
| 4. New work | 0/2 | Not started |
"""
    view = G.narrow_roadmap(roadmap, "v2.0")
    assert view.matched
    assert "v1.0 Base" in view.content  # the one-line mention in the list stays
    assert "Old work" not in view.content and "the past" not in view.content
    assert "### Phase 4: New work" in view.content and "Urgent insert" in view.content
    assert "| 4. New work | 0/2 | Not started |" in view.content
    assert "(progress rows of other milestones omitted: 1)" in view.content
    assert G.narrow_roadmap(roadmap, "v9.9").content == roadmap.strip("\n")  # unknown milestone: kept whole
    assert G.narrow_roadmap(roadmap, None).matched is False
