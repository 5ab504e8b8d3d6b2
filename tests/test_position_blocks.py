"""The pieces of a GSD position (nodes/lib/gsd/position.py ``_position``), one table each: the next
plan of the phase's folder with its evidence, whether the phase is complete, the warning for a
current phase without a folder, the unfinished phases."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.gsd import position as P  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def folder(path: str, *files: str) -> P.PhaseFolder:
    found, = P.phase_folders({path: files})
    return found


HALF = folder("phases/03-api", "03-01-PLAN.md", "03-01-SUMMARY.md", "03-02-PLAN.md", "03-03-PLAN.md")
DONE = folder("phases/02-db", "02-01-PLAN.md", "02-01-SUMMARY.md")
EMPTY = folder("phases/04-ui", "04-CONTEXT.md")


@pytest.mark.parametrize("phase_folder, named_plan, expected, evidence", [
    case("no folder: no plan, no evidence", None, None, None, []),
    case("the first plan without a SUMMARY", HALF, None, "03-02", ["next plan 03-02: the first plan without a SUMMARY"]),
    case("the plan STATE.md names, when pending", HALF, 3, "03-03", ["STATE.md names plan 3: 03-03 is in progress"]),
    case("a named plan already done: the first pending", HALF, 1, "03-02",
         ["next plan 03-02: the first plan without a SUMMARY"]),
    case("every plan done", DONE, None, None, []),
])
def test_folder_plan(phase_folder, named_plan, expected, evidence):
    notes = P._Notes()
    assert P._folder_plan(phase_folder, named_plan, notes) == expected
    assert notes.evidence == evidence and notes.warnings == []


@pytest.mark.parametrize("phase_folder, said_complete, expected", [
    case("plans all done", DONE, False, True),
    case("plans pending, whatever STATE.md says", HALF, True, False),
    case("no plans: as STATE.md says (complete)", EMPTY, True, True),
    case("no plans: as STATE.md says (not)", EMPTY, False, False),
    case("no folder: as STATE.md says", None, True, True),
])
def test_phase_complete(phase_folder, said_complete, expected):
    assert P._phase_complete(phase_folder, said_complete) is expected


@pytest.mark.parametrize("where, key, expected", [
    case("the top-level STATE.md", ".planning/STATE.md", (8, 1),
         ".planning: no phase folder for phase 8.1 (looked in phases/ and milestones/*-phases/); create it or pin "
         "another phase with state.gsdPhase"),
    case("a workstream's", ".planning/workstreams/a/STATE.md", (3,),
         ".planning/workstreams/a: no phase folder for phase 3 (looked in phases/ and milestones/*-phases/); create "
         "it or pin another phase with state.gsdPhase"),
])
def test_no_folder_warning(where, key, expected):
    assert P._no_folder_warning(where, key) == expected


@pytest.mark.parametrize("active, expected", [
    case("the folders not complete, in order", (DONE, HALF, EMPTY), ("3", "4")),
    case("all complete", (DONE,), ()),
])
def test_unfinished(active, expected):
    reading = P._Reading(None, ".planning/STATE.md", active, active, {}, {})
    assert P._unfinished(reading) == expected
