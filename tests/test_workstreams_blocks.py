"""The steps workstream_files (nodes/lib/gsd/workstreams.py) is made of, one table each: the
warning for a pointer naming no workstream, and the choice by position when there is neither a
pointer nor a top-level STATE.md (none placed, one, several)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib.gsd import workstreams as W  # noqa: E402
from ctxengine.nodes.lib.gsd.position import GsdFiles  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def state(phase: int, status: str = "In progress", plans: int = 2) -> str:
    return (f"# Project State\n\n## Current Position\n\nPhase: {phase} of 5 (Work)\nPlan: 1 of {plans}\n"
            f"Status: {status}\n")


def ws(name: str, kind: str) -> GsdFiles:
    path = f".planning/workstreams/{name}/STATE.md"
    return {
        "idle": GsdFiles(state_text="# Project State\n\nCurrent Phase: None\n", state_path=path),
        "working": GsdFiles(state_text=state(2), state_path=path, folders={"phases/02-w": ("02-01-PLAN.md",)}),
        "complete": GsdFiles(state_text=state(4, "Phase complete", plans=1), state_path=path,
                             folders={"phases/04-d": ("04-01-PLAN.md", "04-01-SUMMARY.md")}),
    }[kind]


def test_bad_pointer_warning_names_the_workstreams_there_are():
    files = GsdFiles(workstreams={"b": ws("b", "idle"), "a": ws("a", "idle")})
    assert W._bad_pointer_warning("nope", files) == (
        ".planning/active-workstream names 'nope', which is no workstream under .planning/workstreams/ (a, b); "
        "it is ignored")


@pytest.mark.parametrize("kinds, read, chosen_start, warned", [
    case("none placed: the first by name", {"b": "idle", "a": "idle"}, "a",
         "no .planning/STATE.md; workstreams: .planning/workstreams/a/STATE.md: no phase (not started); ", False),
    case("one placed: that one", {"a": "idle", "b": "working"}, "b",
         "no .planning/STATE.md; workstream b is the one with a position (", False),
    case("several: the first still working", {"a": "complete", "b": "working", "c": "working"}, "b",
         "workstream b read of a, b, c", True),
    case("several, all complete: the first", {"a": "complete", "b": "complete"}, "a", "workstream a read of a, b", True),
])
def test_workstream_by_position(kinds, read, chosen_start, warned):
    files = GsdFiles(workstreams={name: ws(name, kind) for name, kind in kinds.items()}, chosen_warnings=("earlier",))
    got = W._workstream_by_position(files)
    assert got.state_path == f".planning/workstreams/{read}/STATE.md"
    assert got.chosen[0].startswith(chosen_start)
    assert got.chosen_warnings[0] == "earlier" and (len(got.chosen_warnings) == 2) is warned
    if warned:
        assert got.chosen_warnings[1].endswith(
            f"workstream {read} is read (write its name to .planning/active-workstream)")


@pytest.mark.parametrize("pointer, top_state, read, chosen_start, warnings", [
    case("a valid pointer (its line end ignored)", "b\n", False, "b", ".planning/active-workstream names workstream b",
         0),
    case("an unknown pointer warns, then the top STATE.md", "zzz", True, None, ".planning/STATE.md is read", 1),
    case("a malformed pointer warns", "../b", False, "b", "no .planning/STATE.md; workstream b is the one", 1),
    case("a blank pointer is none", "  ", False, "b", "no .planning/STATE.md; workstream b is the one", 0),
])
def test_workstream_files(pointer, top_state, read, chosen_start, warnings):
    files = GsdFiles(state_text=state(7) if top_state else None, active_workstream=pointer,
                     workstreams={"a": ws("a", "idle"), "b": ws("b", "working")})
    got = W.workstream_files(files)
    assert got.state_path == (".planning/STATE.md" if read is None else f".planning/workstreams/{read}/STATE.md")
    assert got.chosen[0].startswith(chosen_start) and len(got.chosen_warnings) == warnings
