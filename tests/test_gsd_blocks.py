"""The small functions the GSD parsers are made of, one table each: input -> expected, with
real lines of the conformance corpus (tests/data/gsd/<owner__repo>/.planning/; the project is in
each case's id) and a few made-up ones where no project has the case (id "made-up").

parse_state (STATE.md), read_position (the position) and narrow_roadmap (ROADMAP.md) read as
their list of steps; these tests pin each step, so a change to one shows which reading moved."""

from __future__ import annotations

import os
from functools import partial

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.gsd import plans as PL  # noqa: E402
from ctxengine.nodes.lib.gsd import position as P  # noqa: E402
from ctxengine.nodes.lib.gsd import roadmap as R  # noqa: E402
from ctxengine.nodes.lib.gsd import state as S  # noqa: E402
from ctxengine.nodes.lib.gsd.common import _lines_of, _sections  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


# ---------------------------------------------------------------------------------------------
# STATE.md (gsd/state.py): the values parse_state reads from the fields of the position block

@pytest.mark.parametrize("phase_text, expected", [
    case("helix-staking", "8.1 of 8.2 (Game Theory Hardening)", ("8.1", "8.2")),
    case("wBlock: all complete, the total is the phase", "All complete (12/12)", ("12", "12")),
    case("Project-Phoenix-MP", "36 of 36 (complete)", ("36", "36")),
    case("claude-dev-stack: no total", "51 (Planning Relocation) — EXECUTING", ("51", None)),
    case("post-shit-now: a folder name", "01-fix-instagram-integration-bugs", ("01", None)),
    case("kubectl-fields: none", "None (between milestones)", (None, None)),
    case("nixl: a word", "Complete", (None, None)),
    case("Hackathon-ASW: lettered parts", "2 of 4 (2A Backend, 2B Plugin, 2C Assets all complete)", ("2", "4")),
    case("bgsd-oc: a total below the phase", "212 of 5 (TDD Rationale Visibility)", ("212", "5")),
    case("arios-framework: number and name", "13 - Gap Closure - State & Session", ("13", None)),
    case("made-up: a version is not a phase", "All v1.0 phases complete", (None, None)),
    case("no Phase line", None, (None, None)),
])
def test_the_phase_field_gives_phase_and_total(phase_text, expected):
    assert S._phase_of(phase_text) == expected


@pytest.mark.parametrize("plan_text, expected", [
    case("helix-staking", "5 of 5 in current phase (COMPLETE)", (5, 5)),
    case("Hackathon-ASW: the project's count is no plan", "8 of 12 total plans complete (2C-02 skipped)", (None, None)),
    case("bgsd-oc: zero-padded", "01 of 01 in current phase", (1, 1)),
    case("arios-framework: not started", "Not started (awaiting /gsd:plan-phase)", (None, None)),
    case("flashquery", "3 of 4", (3, 4)),
    case("Project-Phoenix-MP: a dash", "—", (None, None)),
    case("dotfiles: prose", "roadmap created, phase plans pending", (None, None)),
    case("made-up: a number alone", "2", (2, None)),
    case("no Plan line", None, (None, None)),
])
def test_the_plan_field_gives_plan_and_total(plan_text, expected):
    assert S._plan_of(plan_text) == expected


@pytest.mark.parametrize("frontmatter, fields, focus, expected", [
    case("wBlock: the Milestone line", {}, (("Milestone", "v1.2 Distribution & Code Signing (SHIPPED 2026-02-19)"),),
         None, "v1.2"),
    case("Project-Phoenix-MP: frontmatter", {"milestone": "v0.8.0"}, (), None, "v0.8.0"),
    case("post-shit-now: frontmatter over the line", {"milestone": "v1.0"}, (("Milestone", "Post-v1.3 bug fixes"),),
         None, "v1.0"),
    case("post-shit-now: the line alone", {}, (("Milestone", "Post-v1.3 bug fixes"),), None, "v1.3"),
    case("gitsl: not started is still the milestone", {}, (("Milestone", "v1.4 (not started)"),), None, "v1.4"),
    case("made-up: a YAML number", {"milestone": 1.2}, (), None, "v1.2"),
    case("wBlock: focus without a version", {}, (), ("Planning next milestone", 8), None),
    case("kubectl-fields: the focus", {}, (), ("Milestone v1.0 complete. No active phase.", 8), "v1.0"),
    case("jamoeight: the status, not the next one", {}, (("Status", "v1.2 shipped, ready to plan next milestone"),),
         ("Planning next milestone", 8), "v1.2"),
    case("made-up: a version after 'planning' is to come", {}, (("Status", "Planning v2.0"),), None, None),
])
def test_the_milestone_version_frontmatter_then_line_focus_status(frontmatter, fields, focus, expected):
    assert S._milestone_version(frontmatter, fields, focus) == expected


@pytest.mark.parametrize("frontmatter, fields, expected", [
    case("Project-Phoenix-MP", {"milestone_name": "Beta Readiness"}, (), "Beta Readiness"),
    case("memcp: GSD's placeholder", {"milestone_name": "milestone"}, (), None),
    case("nixl: a leading dash", {"milestone_name": "— NIXLBench and KVBench Documentation"}, (),
         "NIXLBench and KVBench Documentation"),
    case("wBlock: the line without version and parenthesis", {},
         (("Milestone", "v1.2 Distribution & Code Signing (SHIPPED 2026-02-19)"),), "Distribution & Code Signing"),
    case("gitsl: a version alone", {}, (("Milestone", "v1.4 (not started)"),), None),
    case("made-up: a name that is no text", {"milestone_name": 3}, (("Milestone", "v2.0 Launch"),), "Launch"),
    case("none", {}, (), None),
])
def test_the_milestone_name(frontmatter, fields, expected):
    assert S._milestone_name(frontmatter, fields) == expected


@pytest.mark.parametrize("phase_text, plan_text, status, expected", [
    case("helix-staking", "8.1 of 8.2 (Game Theory Hardening)", "5 of 5 in current phase (COMPLETE)",
         "Phase 8.1 COMPLETE", True),
    case("flashquery: executing", "170 (json-validation-and-repair-infrastructure) — EXECUTING", "3 of 4", None, False),
    case("JunbeomL22: the status", "5 of 5 (Fix STOPPED_PHASE Detection)", "1 of 1 in current phase",
         "Plan 01 complete — Phase 5 complete (all 1 plan done)", True),
    case("made-up: the first plan complete is not the phase", "4 (Search)", "1 of 3 (completed)", "executing", False),
    case("made-up: the last plan complete is", "4 (Search)", "3 of 3 (completed)", "executing", True),
    case("made-up: incomplete", "4 (Search)", None, "incomplete", False),
    case("gitsl: shipped is done", "None active", "None", "v1.3 shipped", True),
])
def test_the_body_says_complete(phase_text, plan_text, status, expected):
    plan, total = S._plan_of(plan_text)
    assert S._body_complete(phase_text, plan_text, plan, total, status) is expected


@pytest.mark.parametrize("frontmatter, expected", [
    case("Project-Phoenix-MP: all phases done", {"status": "complete", "progress": {"completed_phases": 5,
                                                                                  "total_phases": 5}}, True),
    case("nixl: completed", {"status": "completed", "progress": {"completed_phases": 6, "total_phases": 6}}, True),
    case("memcp: phases open", {"status": "unknown", "progress": {"completed_phases": 42, "total_phases": 67}}, False),
    case("made-up: completed with a phase open is the phase", {"status": "completed",
                                                              "progress": {"completed_phases": 3, "total_phases": 4}},
         False),
    case("made-up: completed, no progress", {"status": "completed"}, True),
    case("made-up: all counted, status executing", {"status": "executing",
                                                    "progress": {"completed_phases": 4, "total_phases": 4}}, True),
    case("no frontmatter", {}, False),
])
def test_the_frontmatter_says_the_milestone_is_complete(frontmatter, expected):
    assert S._frontmatter_complete(frontmatter, S._progress(frontmatter)) is expected


@pytest.mark.parametrize("title, taken, expected", [
    case("wBlock", "Blockers/Concerns", set(), "blockers"),
    case("wBlock: todos", "Pending Todos", set(), "todos"),
    case("memcp: open todos", "Open Todos", set(), "todos"),
    case("wBlock: session", "Session Continuity", set(), "session"),
    case("claude-dev-stack: next action", "Next Action", set(), "next"),
    case("the position is no block", "Current Position", set(), None),
    case("wBlock: not shown", "Accumulated Context", set(), None),
    case("made-up: the first block of a name wins", "Blockers", {"blockers"}, None),
])
def test_the_block_a_heading_starts(title, taken, expected):
    assert S._block_name(title, taken) == expected


JUNBEOM_STATE = """\
# Project State

## Project Reference

**Current focus:** Phase 5 — Fix STOPPED_PHASE Detection (complete)

## Current Position

Phase: 5 of 5 (Fix STOPPED_PHASE Detection)
Plan: 1 of 1 in current phase
Status: Plan 01 complete — Phase 5 complete (all 1 plan done)

Progress: [██████████] 100%
"""


@pytest.mark.parametrize("text, expected", [
    case("JunbeomL22: the position block", JUNBEOM_STATE,
         [("Phase", "5 of 5 (Fix STOPPED_PHASE Detection)", 9), ("Plan", "1 of 1 in current phase", 10),
          ("Status", "Plan 01 complete — Phase 5 complete (all 1 plan done)", 11), ("Progress", "[██████████] 100%", 13)]),
    case("made-up: no block, the body's first lines", "# State\nPhase: 3 of 5\nStatus: executing\n",
         [("Phase", "3 of 5", 2), ("Status", "executing", 3)]),
])
def test_the_position_fields_with_their_lines(text, expected):
    lines = _lines_of(text)
    position = S._position_block(lines, _sections(lines))
    assert S._position_fields(lines, position, 0) == expected


@pytest.mark.parametrize("text, expected", [
    case("JunbeomL22", JUNBEOM_STATE, ("Phase 5 — Fix STOPPED_PHASE Detection (complete)", 5)),
    case("made-up: none", "# State\nPhase: 3\n", None),
])
def test_the_current_focus(text, expected):
    assert S._focus(_lines_of(text), 0) == expected


@pytest.mark.parametrize("text, expected", [
    case("Project-Phoenix-MP: a frontmatter", "---\nmilestone: v0.8.0\nstatus: complete\n---\n# State\n",
         ({"milestone": "v0.8.0", "status": "complete"}, (1, 4), [])),
    case("wBlock: none", "# Project State\n\nPhase: All complete (12/12)\n", ({}, None, [])),
    case("made-up: not YAML", "---\nmilestone: [v1\n---\n# State\n", "ignored"),
])
def test_the_frontmatter_and_its_lines(text, expected):
    got = S._frontmatter_of(text, ".planning/STATE.md")
    if expected == "ignored":
        assert got[:2] == ({}, None) and got[2][0].startswith(".planning/STATE.md:") and "frontmatter ignored" in got[2][0]
    else:
        assert got == expected


def test_stale_frontmatter_blocks_stacked_after_the_first_are_named():
    text = "---\nmilestone: v2.0\n---\n\n---\nmilestone: v1.0\n---\n# State\n"
    lines = _lines_of(text)
    warnings = S._stacked_warnings(lines, (1, 3), "STATE.md")
    assert warnings == ["STATE.md:5: 1 more frontmatter block(s) follow the first (lines 5-7); only lines 1-3 are "
                        "read (delete the stale blocks)"]
    assert S._stacked_warnings(lines, None, "STATE.md") == []


def test_a_long_block_with_subsections_keeps_its_own_lines_and_names_the_rest():
    text = "## Accumulated Context\n\n### Blockers/Concerns\n\n- one\n- two\n\n#### Quick Tasks Completed\n\n| a |\n"
    lines = _lines_of(text)
    sections = _sections(lines)
    level, _, first, last = next(s for s in sections if s[1] == "Blockers/Concerns")
    assert S._block_body(lines, sections, level, first, last, "STATE.md") == [
        "", "- one", "- two", "(subsections omitted: Quick Tasks Completed (line 8))"]
    long = "## Blockers\n" + "".join(f"- b{n}\n" for n in range(40))
    lines = _lines_of(long)
    body = S._block_body(lines, _sections(lines), 2, 0, len(lines) - 1, "STATE.md")
    assert len(body) == S._BLOCK_MAX_LINES + 1 and body[-1] == "... (10 more lines in STATE.md lines 32-41)"


# ---------------------------------------------------------------------------------------------
# ROADMAP.md (gsd/roadmap.py): the steps of narrow_roadmap

DATA = os.path.join(os.path.dirname(__file__), "data", "gsd")


def roadmap_of(project: str) -> str:
    with open(os.path.join(DATA, project, ".planning", "ROADMAP.md"), encoding="utf-8") as handle:
        return handle.read()


WBLOCK = roadmap_of("0xCUB3__wBlock")  # three milestones: two <details> blocks, one heading; a progress table
PHOENIX = roadmap_of("9thLevelSoftware__Project-Phoenix-MP")  # nine milestones, one table row each


@pytest.mark.parametrize("text, milestone, expected", [
    case("wBlock: the current one", WBLOCK, "v1.2", ((10,), (12,))),
    case("wBlock: a shipped one", WBLOCK, "v1.1", ((7,), (9,))),
    case("Project-Phoenix-MP", PHOENIX, "v0.8.0", ((32,), (36,))),
    case("wBlock: no milestone", WBLOCK, None, None),
    case("wBlock: an unknown one", WBLOCK, "v9.9", None),
])
def test_the_milestone_phase_range(text, milestone, expected):
    assert R._phase_range(_lines_of(text), milestone) == expected


@pytest.mark.parametrize("text, expected", [
    case("wBlock", WBLOCK, ("v1.0", "v1.1", "v1.2")),
    case("made-up: one milestone in two blocks", "## v1.0 Launch\n\n- a\n\n## v1.0.0 Notes\n\n## v2 Next\n", ("v1.0", "v2")),
    case("made-up: none", "# Roadmap\n\n### Phase 1: Setup\n", ()),
])
def test_the_versions_of_the_milestone_blocks_once_each(text, expected):
    assert R._block_versions(R.milestone_blocks(_lines_of(text))) == expected


@pytest.mark.parametrize("text, milestone", [
    case("wBlock", WBLOCK, "v1.2"),
    case("Project-Phoenix-MP: after the progress table", PHOENIX, "v0.8.0"),
])
def test_a_narrowed_roadmap_names_every_milestone_block(text, milestone):
    """RoadmapView.milestones is every block's version; it was the versions of the last table row
    left (none for wBlock, the current one alone for Phoenix) when the view matched."""
    view = R.narrow_roadmap(text, milestone)
    assert view.matched and view.milestones == R.narrow_roadmap(text, None).milestones
    assert len(view.milestones) >= 3 and milestone in view.milestones


def test_other_milestones_blocks_fold_to_a_mention_wblock():
    drop, swaps, folded = R._folded_blocks(R.milestone_blocks(_lines_of(WBLOCK)), "v1.2")
    assert (min(drop), max(drop)) == (10, 33) and sorted(swaps) == [10, 24]
    assert swaps[10] == ("- (other milestone, folded: ROADMAP.md lines 11-23) ✅ v1.0 Filter Compatibility (Phases 1-6) "
                         "— SHIPPED 2026-02-18")
    assert folded == ["✅ v1.0 Filter Compatibility (Phases 1-6) — SHIPPED 2026-02-18",
                      "✅ v1.1 Element Zapper Rule Management (Phases 7-9) — SHIPPED 2026-02-19"]


def test_a_block_around_the_current_milestone_is_kept():
    text = "## v2 Program\n\n### v2.1 Current\n\n- [ ] Phase 3: Now\n\n### v2.0 Done\n\n- [x] Phase 1: Then\n"
    drop, swaps, folded = R._folded_blocks(R.milestone_blocks(_lines_of(text)), "v2.1")
    assert folded == ["v2.0 Done"] and sorted(drop) == [6, 7, 8]


@pytest.mark.parametrize("phase_range, done_before, key, expected", [
    case("wBlock: in v1.2's range", ((10,), (12,)), None, (11,), True),
    case("wBlock: before it", ((10,), (12,)), None, (9,), False),
    case("made-up: an inserted phase by its major number", ((10,), (12,)), None, (12, 1), True),
    case("made-up: the current phase, added after the range", ((10,), (12,)), (13,), (13,), True),
    case("no range", None, None, (99,), True),
    case("no number", ((10,), (12,)), None, None, True),
])
def test_a_phase_in_the_milestone_range(phase_range, done_before, key, expected):
    assert R._in_range(phase_range, done_before, key) is expected


@pytest.mark.parametrize("line, milestone, ranged, expected", [
    case("wBlock: another milestone's row", "| 1. Validation Fix and Platform Constants | v1.0 | 2/2 | Complete | "
         "2026-02-17 |", "v1.2", True, True),
    case("wBlock: the milestone's row", "| 10. Build and Entitlements | v1.2 | Complete    | 2026-02-19 | 2026-02-19 |",
         "v1.2", True, False),
    case("wBlock: no version, a phase in range", "| 12. Homebrew Cask | 1/1 | Complete   | 2026-02-19 | - |", "v1.2",
         True, False),
    case("made-up: no version, a phase out of range", "| 3. Include Resolver | 2/2 | Complete | 2026-02-17 | - |",
         "v1.2", True, True),
    case("made-up: out of range, range unknown", "| 3. Include Resolver | 2/2 | Complete | 2026-02-17 | - |", "v1.2",
         False, False),
    case("wBlock: the header", "| Phase | Milestone | Plans Complete | Status | Completed |", "v1.2", True, False),
    case("Project-Phoenix-MP: a shipped milestone", "| v0.7.0 MVP Cloud Sync | 29-31 | 8 | Complete | 2026-03-15 |",
         "v0.8.0", False, True),
    case("Project-Phoenix-MP: the current one", "| v0.8.0 Beta Readiness | 32-36 | 15 | In Progress | — |", "v0.8.0",
         False, False),
])
def test_a_progress_row_of_another_milestone(line, milestone, ranged, expected):
    in_range = partial(R._in_range, ((10,), (12,)), None) if ranged else None
    assert R._other_row(line, milestone, in_range) is expected


def test_the_rows_of_other_milestones_drop_with_a_note_after_the_table_wblock():
    lines = _lines_of(WBLOCK)
    rows, note = R._other_rows(lines, set(), "v1.2", partial(R._in_range, ((10,), (12,)), None))
    assert sorted(rows) == list(range(94, 103))  # phases 1-9, v1.0 and v1.1
    assert note == {105: lines[105] + "\n(progress rows of other milestones omitted: 9)"}
    assert R._other_rows(lines, set(range(94, 103)), "v1.2", None) == (set(), {})  # dropped already: none


@pytest.mark.parametrize("text, unfinished, expected", [
    case("wBlock: phases 10 and 11 before 12", WBLOCK, (), ["10", "11"]),
    case("wBlock: unfinished, but every box checked", WBLOCK, ("10",), ["10", "11"]),
    case("made-up (wBlock): unfinished with a box open", WBLOCK.replace("- [x] 10-02-PLAN.md", "- [ ] 10-02-PLAN.md"),
         ("10",), ["11"]),
])
def test_the_finished_phases_details_shrink_to_their_heading(text, unfinished, expected):
    lines = _lines_of(text)
    cut, swaps, shortened = R._finished_details(lines, set(), (12,), unfinished)
    assert shortened == expected
    assert all(swaps[first].startswith(lines[first] + " (done; details cut, ROADMAP.md lines ") for first in swaps)
    assert not cut & set(swaps)  # the heading stays
    assert R._finished_details(lines, set(), None, unfinished) == (set(), {}, [])


def test_the_kept_text_puts_replacements_in_place_and_counts_kept_lines():
    lines = ["# Roadmap", "", "", "", "a", "b", "c", "d"]
    content, kept = R._kept_text(lines, {4, 5, 7}, {4: "- (other milestone, folded: x)", 6: "C"})
    assert content == "# Roadmap\n\n- (other milestone, folded: x)\nC"
    assert kept == ((1, 4), (7, 7))


# ---------------------------------------------------------------------------------------------
# The position (gsd/position.py): the steps of read_position

WHERE = ".planning/STATE.md"
HELIX_STATE = ("## Current Position\n\nPhase: 8.1 of 8.2 (Game Theory Hardening)\nPlan: 5 of 5 in current phase (COMPLETE)\n"
               "Status: Phase 8.1 COMPLETE\n")
FLASHQUERY_STATE = ("---\nmilestone: v4.2\nstatus: executing\nprogress:\n  total_phases: 1\n  completed_phases: 0\n---\n"
                    "# State\n\n## Current Position\n\nPhase: 170 (json-validation-and-repair-infrastructure) — EXECUTING\n"
                    "Plan: 3 of 4\n")
KUBECTL_STATE = "## Current Position\n\nPhase: None (between milestones)\nStatus: v1.0 milestone complete, archived\n"
NEXERA_STATE = ("---\nmilestone: v1.0\nstatus: executing\nstopped_at: Completed 04-01-PLAN.md\nprogress:\n  total_phases: 4\n"
                "  completed_phases: 3\n---\n")
FIVE = {f"phases/0{k}-step": (f"0{k}-01-PLAN.md",) for k in range(1, 6)}


def reading(state_text: str | None, folders=None, plans=None, names=None) -> P._Reading:
    state = S.parse_state(state_text, WHERE) if state_text is not None else None
    return P._reading_of(state, folders or {}, WHERE, plans or {}, names or {})


@pytest.mark.parametrize("state_text, folders, claim, warned", [
    case("helix-staking: the body, complete", HELIX_STATE, {}, P._Claim((8, 1), P.BODY, True), None),
    case("flashquery: the body, under way", FLASHQUERY_STATE, {}, P._Claim((170,), P.BODY), None),
    case("kubectl-fields: between milestones", KUBECTL_STATE, {}, P._Claim(between=True), None),
    case("NexeraDigital: no Phase line, stopped_at's plan", NEXERA_STATE, {}, P._Claim((4,), P.FRONTMATTER), None),
    case("made-up: current_phase over a stale body", "---\ncurrent_phase: 7\n---\n## Current Position\n\nPhase: 6 of 9\n",
         {}, P._Claim((7,), P.FRONTMATTER), "the frontmatter is used"),
    case("made-up: the phase after progress.completed_phases",
         "---\nprogress:\n  completed_phases: 2\n  total_phases: 5\n---\n## Current Position\n\nPhase: 2 of 5\n", FIVE,
         P._Claim((3,), P.FRONTMATTER), "the frontmatter is used"),
    case("made-up: progress counts the body's phase, the last known, complete",
         "---\nprogress:\n  completed_phases: 2\n  total_phases: 3\n---\n## Current Position\n\nPhase: 2 of 3\n",
         {"phases/01-a": (), "phases/02-b": ()}, P._Claim((2,), P.BODY, True), "counts phase 2 as complete"),
    case("no position at all", "# State\n", {}, P._Claim(), None),
    case("no STATE.md", None, {}, P._Claim(), None),
])
def test_the_phase_state_md_claims(state_text, folders, claim, warned):
    notes = P._Notes()
    assert P._state_claim(reading(state_text, folders), (), notes) == claim
    assert (warned is None and not notes.warnings) or (len(notes.warnings) == 1 and warned in notes.warnings[0])


@pytest.mark.parametrize("folder_files, named_plan, expected", [
    case("NexeraDigital: 04-03 has no SUMMARY", ("04-01-PLAN.md", "04-01-SUMMARY.md", "04-02-PLAN.md",
                                                 "04-02-SUMMARY.md", "04-03-PLAN.md"), None, "04-03"),
    case("made-up: STATE.md names plan 3 of three open", ("04-01-PLAN.md", "04-02-PLAN.md", "04-03-PLAN.md"), 3, "04-03"),
    case("made-up: the named plan is done: the first open", ("04-01-PLAN.md", "04-02-PLAN.md", "04-02-SUMMARY.md"), 2,
         "04-01"),
    case("NexeraDigital 03: every plan done", ("03-01-PLAN.md", "03-01-SUMMARY.md"), None, None),
])
def test_the_next_plan_of_a_folder(folder_files, named_plan, expected):
    folder, = P.phase_folders({"phases/04-dashboard": folder_files})
    notes = P._Notes()
    assert P._next_plan(folder, named_plan, notes) == expected
    assert len(notes.evidence) == (expected is not None)


@pytest.mark.parametrize("folders, named, expected", [
    case("Hackathon-ASW: a phase in lettered folders", {"phases/2A-backend": ("2A-01-PLAN.md",),
                                                        "phases/2B-plugin": ("2B-01-PLAN.md",)}, None,
         ["phase 2 is in 2 lettered folders (2A-backend/, 2B-plugin/): their plans are its plans"]),
    case("made-up: a plan the roadmap names", {"phases/15-sharing": ("15-01-PLAN.md",)},
         "ROADMAP.md:95 '- [ ] 15-02-PLAN.md'",
         ["15-02 without a PLAN or SUMMARY file in phases/15-sharing/, named by ROADMAP.md:95 '- [ ] 15-02-PLAN.md' "
          "(a checked box: done)"]),
    case("a plain folder", {"phases/15-sharing": ("15-01-PLAN.md",)}, None, []),
])
def test_what_a_folder_adds_to_the_evidence(folders, named, expected):
    folder, = P.phase_folders(folders)
    assert P._folder_evidence(folder.with_named([2], named) if named else folder) == expected


@pytest.mark.parametrize("state_text, claim, over, expects, named", [
    case("helix-staking: phase 8.1 of 8.2 complete", HELIX_STATE, P._Claim((8, 1), P.BODY, True), False, False, None),
    case("Project-Phoenix-MP: the last phase complete", "## Current Position\n\nPhase: 36 of 36 (complete)\n",
         P._Claim((36,), P.BODY, True), True, False, None),
    case("flashquery: plan 3 under way", FLASHQUERY_STATE, P._Claim((170,), P.BODY), False, True, 3),
    case("made-up: executing without a plan", "## Current Position\n\nPhase: 4\nStatus: Executing\n",
         P._Claim((4,), P.BODY), False, True, None),
    case("made-up: a pinned phase names no plan", FLASHQUERY_STATE, P._Claim((170,), P.PINNED), False, True, None),
])
def test_milestone_over_folder_expected_and_plan_named(state_text, claim, over, expects, named):
    state = S.parse_state(state_text, WHERE)
    assert P._milestone_over(state, claim) is over
    assert P._expects_folder(state, claim) is expects
    assert P._named_plan(state, claim) == named


def test_state_md_plan_of_counts_plans_without_files():
    """flashquery: "Plan: 3 of 4" with plans 1-3 on disk: plan 4 is a plan of the phase."""
    folder, = P.phase_folders({"phases/170-json": ("170-01-PLAN.md", "170-02-PLAN.md", "170-03-PLAN.md")})
    state = S.parse_state(FLASHQUERY_STATE, WHERE)
    counted = P._with_state_total(folder, state, P._Claim((170,), P.BODY))
    assert counted.all_plans == ("170-01", "170-02", "170-03", "170-04") and counted.named == ("170-04",)
    assert P._with_state_total(folder, state, P._Claim((170,), P.PINNED)) is folder
    assert P._with_state_total(folder, state, P._Claim((171,), P.BODY)) is folder


def test_a_phase_state_md_and_the_roadmap_call_done_has_its_plans_done():
    folder, = P.phase_folders({"phases/08.1-hardening": ("08.1-01-PLAN.md", "08.1-01-SUMMARY.md", "08.1-02-PLAN.md")})
    checked = R.RoadmapPlans(done=(95, "- [x] Phase 8.1: Game Theory Hardening"))
    notes = P._Notes()
    done = P._with_roadmap_done(folder, checked, P._Claim((8, 1), P.BODY, True), notes)
    assert done.complete and "08.1-02 without a SUMMARY in phases/08.1-hardening/" in notes.evidence[0]
    assert P._with_roadmap_done(folder, checked, P._Claim((8, 1), P.BODY, False), P._Notes()) is folder
    assert P._with_roadmap_done(folder, R.RoadmapPlans(), P._Claim((8, 1), P.BODY, True), P._Notes()) is folder


@pytest.mark.parametrize("folders, claim, expected", [
    case("made-up: phase 3 complete, 4 started", {"phases/03-a": ("03-01-PLAN.md", "03-01-SUMMARY.md"),
                                                  "phases/04-b": ("04-CONTEXT.md",)},
         P._Claim((3,), P.BODY), "phases/04-b"),
    case("made-up: phase 3 under way", {"phases/03-a": ("03-01-PLAN.md",), "phases/04-b": ("04-CONTEXT.md",)},
         P._Claim((3,), P.BODY), None),
    case("made-up: said complete, nothing later", {"phases/03-a": ("03-01-PLAN.md",)}, P._Claim((3,), P.BODY, True), None),
])
def test_a_later_started_folder_after_a_complete_phase(folders, claim, expected):
    read = reading("## Current Position\n\nPhase: 3\n", folders)
    folder = P._by_key(read.folders).get(claim.key)
    notes = P._Notes()
    later = P._later_started_folder(read, claim, folder, notes)
    assert (later.path if later else None) == expected
    assert len(notes.warnings) == (expected is not None)


def test_a_left_over_folder_is_not_the_next_phase():
    """A folder the roadmap names under another number is left from a renumbered milestone."""
    folders = {"phases/03-a": ("03-01-PLAN.md", "03-01-SUMMARY.md"), "phases/04-database-stability": ("04-CONTEXT.md",)}
    names = {(15,): ((95, "Database Stability & Recovery"),)}
    read = reading("## Current Position\n\nPhase: 3\n", folders, names=names)
    notes = P._Notes()
    assert P._open_folders(read.active, read.names, notes, "not current") == []
    assert notes.evidence[0].endswith("names it phase 15 ('Database Stability & Recovery'), not current")


@pytest.mark.parametrize("active, archived, expected", [
    case("the last active one", ["phases/01-a", "phases/02-b"], [], "phases/02-b"),
    case("kubectl-fields: a higher archived one", ["phases/01-a"], ["milestones/v1.0-phases/04-d"],
         "milestones/v1.0-phases/04-d"),
    case("a lower archived one", ["phases/05-e"], ["milestones/v1.0-phases/04-d"], "phases/05-e"),
    case("only archived", [], ["milestones/v1.0-phases/04-d"], "milestones/v1.0-phases/04-d"),
])
def test_the_latest_folder(active, archived, expected):
    every = P.phase_folders({path: () for path in active + archived})
    assert P._latest_folder([f for f in every if not f.archived], [f for f in every if f.archived]).path == expected


@pytest.mark.parametrize("state_text, folder_files, warned", [
    case("made-up: said complete, a plan without a SUMMARY", "## Current Position\n\nPhase: 3\nStatus: Phase complete\n",
         ("03-01-PLAN.md",), "says phase 3 is complete, but 03-01-PLAN.md"),
    case("made-up: every SUMMARY there, Plan: says one is under way",
         "## Current Position\n\nPhase: 3\nPlan: 1 of 1\nStatus: executing\n", ("03-01-PLAN.md", "03-01-SUMMARY.md"),
         "'Plan: 1 of 1' is under way"),
    case("made-up: they agree", "## Current Position\n\nPhase: 3\nStatus: executing\n", ("03-01-PLAN.md",), None),
])
def test_state_md_and_the_files_disagree_on_complete(state_text, folder_files, warned):
    read = reading(state_text, {"phases/03-a": folder_files})
    claim = P._state_claim(read, (), P._Notes())
    notes = P._Notes()
    P._completion_notes(read, claim, read.active[0], notes)
    assert (warned is None and not notes.warnings) or (len(notes.warnings) == 1 and warned in notes.warnings[0])


def test_a_pin_that_is_no_phase_number_is_a_config_error_naming_the_key():
    with pytest.raises(P.ConfigError, match="state.gsdPhase"):
        P._pinned_position(reading(None), "8.x", "8.x", P._Notes())
    position = P._pinned_position(reading(None, FIVE), "9", "9", P._Notes())
    assert position.phase == "9" and position.folder is None and "has no folder" in position.warnings[0]


# ---------------------------------------------------------------------------------------------
# The milestone checks of position_of, the plans ROADMAP.md names, a SUMMARY's one-liner

WBLOCK_V10 = "- ✅ **v1.0 Filter Compatibility** — Phases 1-6 (shipped 2026-02-18)"


@pytest.mark.parametrize("text, milestone, expected", [
    case("wBlock: shipped with its range", WBLOCK, "v1.0", (5, WBLOCK_V10, (1,), (6,))),
    case("wBlock: in progress", WBLOCK, "v1.2", None),
    case("Project-Phoenix-MP: in progress", PHOENIX, "v0.8.0", None),
])
def test_the_range_of_a_shipped_milestone(text, milestone, expected):
    assert P._shipped_range(text, milestone) == expected


@pytest.mark.parametrize("text, milestone, expected", [
    case("wBlock: the milestone list", WBLOCK, "v1.1",
         (6, "- ✅ **v1.1 Element Zapper Rule Management** — Phases 7-9 (shipped 2026-02-19)")),
    case("wBlock: a progress row that says Complete counts", WBLOCK, "v1.2",
         (104, "| 10. Build and Entitlements | v1.2 | Complete    | 2026-02-19 | 2026-02-19 |")),
    case("Project-Phoenix-MP: not shipped", PHOENIX, "v0.8.0", None),
])
def test_the_line_marking_a_milestone_shipped(text, milestone, expected):
    assert P._shipped_line(text, milestone) == expected


@pytest.mark.parametrize("start, expected", [
    case("wBlock: v1.0's <details>", 10, 22),
    case("wBlock: v1.1's <details>", 24, 33),
])
def test_where_a_details_block_ends(start, expected):
    assert R._details_end(_lines_of(WBLOCK), start) == expected


def test_a_details_block_never_closed_runs_to_the_end():
    assert R._details_end(["<details>", "<summary>v1.0</summary>", "- [x] Phase 1"], 0) == 2


@pytest.mark.parametrize("key, listed, ticked, done_line", [
    case("wBlock: phase 10, two plans checked", (10,), (1, 2), (1, 2), 40),
    case("wBlock: phase 12, its plan open, its item checked", (12,), (1,), (), 42),
])
def test_the_plans_the_roadmap_names_per_phase(key, listed, ticked, done_line):
    plans = R.roadmap_plans(WBLOCK, "v1.2")[key]
    assert tuple(n for n, _, _ in plans.listed) == listed and plans.ticked == ticked and plans.done[0] == done_line


def test_a_section_names_plans_or_counts_them():
    lines = ["### Phase 15: Link Sharing", "**Plans:** 1/2 plans executed", "- [x] 15-01-PLAN.md", "- [ ] 16-01-PLAN.md"]
    kept = {1, 2, 3, 4}
    assert R._section_plans(lines, range(1, 4), (15,), kept) == R.RoadmapPlans(
        ((1, 3, "- [x] 15-01-PLAN.md"),), (1,), (2, 2, "**Plans:** 1/2 plans executed"))
    assert R._section_plans(lines, range(1, 4), (15,), {1}) is None  # folded away: nothing


@pytest.mark.parametrize("key, titles, ticked, folders, expected", [
    case("made-up: the next one has no folder", (3,), {(4,): "Phase 4: Search"}, set(), {}, (4,)),
    case("made-up: its box checked, no folder: done", (3,), {(4,): "Phase 4", (5,): "Phase 5"}, {(4,)}, {}, (5,)),
    case("made-up: its folder complete: done", (3,), {(4,): "Phase 4", (5,): "Phase 5"}, set(),
         {"phases/04-a": ("04-01-PLAN.md", "04-01-SUMMARY.md")}, (5,)),
    case("made-up: none after", (5,), {(4,): "Phase 4", (5,): "Phase 5"}, set(), {}, None),
])
def test_the_next_open_phase_after_a_complete_one(key, titles, ticked, folders, expected):
    assert P._next_open_phase(key, titles, ticked, P._by_key(P.phase_folders(folders))) == expected


@pytest.mark.parametrize("text, expected", [
    case("same two folders: the Phase line names the folder", "13 (13-gap-closure)", "phases/13-gap-closure"),
    case("arios-framework: the words of its name", "13 - Gap Closure - State & Session", "phases/13-gap-closure"),
    case("made-up: it names neither", "13", None),
])
def test_the_folder_state_md_names_of_several_with_one_number(text, expected):
    same = P.phase_folders({"phases/13-gap-closure": (), "phases/13-plugin-system": ()})
    picked = P._folder_state_names(same, text)
    assert (picked[0].path if picked else None) == expected


def test_of_several_folders_the_roadmap_names_last_wins():
    same = P.phase_folders({"phases/02-database-stability": (), "phases/02-plugin-system": ()})
    names = {(2,): ((10, "Plugin System"),)}
    folder, why = P._folder_roadmap_names(same, names)
    assert folder.path == "phases/02-plugin-system" and why.endswith("the one ROADMAP.md:10 names last")
    assert P._folder_roadmap_names(same, {}) == (same[0], "")


@pytest.mark.parametrize("line, expected", [
    case("vectorflow 15-01: labelled", "**One-liner:** Backup service layer extended with previewBackup",
         "Backup service layer extended with previewBackup"),
    case("NexeraDigital 03-02: bold as a whole", "**Orchestrator wired with --continue/fail-fast failure modes**",
         "Orchestrator wired with --continue/fail-fast failure modes"),
    case("made-up: a bold label is none", "**Decisions:**", None),
    case("made-up: labelled but empty is none", "**One-liner:**", None),
    case("made-up: plain", "Backup service layer extended.", None),
])
def test_a_line_marked_as_the_one_liner(line, expected):
    assert PL._marked_one_liner(line) == expected
