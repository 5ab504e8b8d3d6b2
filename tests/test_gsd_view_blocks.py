"""The pieces of the GSD plan section (nodes/lib/gsd/view.py, ``gsd_view``), one table each: the
position's lines, STATE.md's part (or the warning without one), the lines of STATE.md shown, the
phase's plans read from the folder's names, their lines and sources."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.gsd import view as V  # noqa: E402
from ctxengine.nodes.lib.gsd.plans import GsdPlan  # noqa: E402
from ctxengine.nodes.lib.gsd.position import GsdPosition  # noqa: E402
from ctxengine.nodes.lib.gsd.state import GsdState, StateBlock  # noqa: E402
from ctxengine.nodes.types import Source  # noqa: E402

STATE = "/p/.planning/STATE.md"


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def block(lines):
    return StateBlock("b", "## B", "text", lines)


@pytest.mark.parametrize("position, has_state, expected", [
    case("with STATE.md and evidence", GsdPosition(phase="3", evidence=("STATE.md says phase 3",)), True,
         ["## Position (.planning/STATE.md)", "phase 3", "Decided by: STATE.md says phase 3"]),
    case("no STATE.md, no evidence", GsdPosition(phase="3"), False, ["## Position", "phase 3"]),
])
def test_position_lines(monkeypatch, position, has_state, expected):
    monkeypatch.setattr(GsdPosition, "line", lambda self: f"phase {self.phase}")
    monkeypatch.setattr(GsdPosition, "note", lambda self: "; ".join(self.evidence))
    assert V._position_lines(position, STATE, "/p", has_state) == expected


def test_state_part_without_state_md_warns_and_shows_nothing():
    state, parts, sources, warnings = V._state_part({}, STATE)
    assert (state, parts, sources) == (GsdState(), [], [])
    assert warnings == [f"{STATE}: not found; the current position is unknown (a GSD project keeps it in "
                        ".planning/STATE.md)"]


def test_state_part_renders_state_md_with_its_sources():
    text = "# Project State\n\n## Current Position\n\nPhase: 2 of 5 (API)\nPlan: 1 of 3\nStatus: In progress\n"
    state, parts, sources, warnings = V._state_part({STATE: text}, STATE)
    assert state.phase == "2" and warnings == [] and len(parts) == 1
    assert sources == [Source("file", STATE, state.position.lines)]


@pytest.mark.parametrize("state, expected", [
    case("nothing to show", GsdState(), []),
    case("the position block first, then the others, the focus line, the frontmatter",
         GsdState(position=block((3, 6)), blocks=(block((8, 9)),), focus=("Ship it", 12), frontmatter_lines=(1, 4)),
         [(3, 6), (8, 9), (12, 12), (1, 4)]),
    case("blocks without a position", GsdState(blocks=(block((2, 2)), block((5, 7)))), [(2, 2), (5, 7)]),
])
def test_state_sources(state, expected):
    assert V._state_sources(state, STATE) == [Source("file", STATE, lines) for lines in expected]


def plan(status, plan_path=None, summary_path=None, summary_line=None):
    return GsdPlan("03-01", 1, status, "t", plan_path, (1, 9) if plan_path else None, summary_path, summary_line)


@pytest.mark.parametrize("plans, expected", [
    case("a done plan: its SUMMARY one-liner", [plan("done", "P.md", "S.md", 4)], [("S.md", (4, 4))]),
    case("a done plan without a line: the first", [plan("done", "P.md", "S.md")], [("S.md", (1, 1))]),
    case("a done plan without a SUMMARY: its PLAN", [plan("done", "P.md")], [("P.md", (1, 9))]),
    case("the next plan: its PLAN", [plan("next", "P.md", "S.md", 4)], [("P.md", (1, 9))]),
    case("a plan with no file: nothing", [plan("pending")], []),
])
def test_plan_sources(plans, expected):
    assert V._plan_sources(plans) == [Source("file", path, lines) for path, lines in expected]


@pytest.mark.parametrize("plans, expected_last", [
    case("no plans yet", [], "(no PLAN or SUMMARY files in this phase folder yet)"),
])
def test_plans_lines_without_plans(plans, expected_last):
    assert V._plans_lines(plans, "/p/.planning/phases/03-api/", GsdPosition(phase="3"), "/p") == [
        "", "## Phase 3 plans (.planning/phases/03-api/)", expected_last]


def test_phase_plans_reads_the_folder_names_and_makes_paths_full():
    folder = "/p/.planning/phases/03-api/"
    files = {folder: ["03-01-PLAN.md", "03-01-SUMMARY.md", "03-02-PLAN.md"],
             folder + "03-01-PLAN.md": "# Plan 1\n", folder + "03-01-SUMMARY.md": "# Summary\n\nBuilt the API.\n",
             folder + "03-02-PLAN.md": "# Plan 2\n", "/p/.planning/STATE.md": "x"}
    plans = V._phase_plans(files, folder, GsdPosition(phase="3", plan="03-02"), "outline")
    assert [(p.plan_id, p.status, p.plan_path, p.summary_path) for p in plans] == [
        ("03-01", "done", folder + "03-01-PLAN.md", folder + "03-01-SUMMARY.md"),
        ("03-02", "next", folder + "03-02-PLAN.md", None)]
    lines = V._plans_lines(plans, folder, GsdPosition(phase="3"), "/p")
    assert lines[:2] == ["", "## Phase 3 plans (.planning/phases/03-api/)"]
    assert "(.planning/phases/03-api/03-02-PLAN.md)" in lines[2] and "(/p/" not in lines[2]
