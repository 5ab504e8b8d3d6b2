"""The steps of reading a CSV job list (pipeline/batch_io.py ``_csv_entries``), one table each: the
header, where each cell goes, one row's job fields, and the rows read (blank ones skipped, a wrong
cell count refused)."""

from __future__ import annotations

import pytest

from ctxengine import batch_io as B


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


NEEDS_PROJECT = ("l.csv:1: a CSV job list needs a header line naming a 'project' column (and optionally request, "
                 "mode, phase, overrides, dotted.config.keys, labels)")


@pytest.mark.parametrize("header, expected", [
    case("names stripped", ["project", " request "], ["project", "request"]),
    case("a padded project column counts", [" project"], ["project"]),
    case("no project column", ["request"], NEEDS_PROJECT),
    case("an empty header line", [], NEEDS_PROJECT),
    case("no header at all", None, NEEDS_PROJECT),
])
def test_csv_header(header, expected):
    if isinstance(expected, str):
        with pytest.raises(B.JobListError, match=r"^" + expected.replace("(", r"\(").replace(")", r"\)") + "$"):
            B._csv_header("l.csv", header)
    else:
        assert B._csv_header("l.csv", header) == expected


@pytest.mark.parametrize("name, cell, expected", [
    case("the overrides column: its JSON object", "overrides", '{"a.b": 1}', ("overrides", None, {"a.b": 1})),
    case("an empty overrides cell: nothing", "overrides", "  ", None),
    case("a job field as written", "request", " Fix it ", (None, "request", " Fix it ")),
    case("an empty job field: nothing", "mode", "", None),
    case("a dotted key: a --set value", "budget.maxTokens", "32000", ("overrides", "budget.maxTokens", 32000)),
    case("a dotted key, true", "code.enabled", "true", ("overrides", "code.enabled", True)),
    case("an empty dotted key: nothing", "budget.maxTokens", "", None),
    case("any other column: a label, even empty", "team", "", ("labels", "team", "")),
])
def test_placed_cell(name, cell, expected):
    assert B._placed_cell("l.csv:2", name, cell) == expected


def test_placed_cell_refuses_overrides_that_are_no_object():
    with pytest.raises(B.JobListError, match=r"^l\.csv:2: overrides must be a JSON object, not list$"):
        B._placed_cell("l.csv:2", "overrides", "[1]")


@pytest.mark.parametrize("header, cells, expected", [
    case("every kind of column", ["project", "overrides", "budget.maxTokens", "team"],
         ["p", '{"model": "x", "budget.maxTokens": 1}', "2", "a"],
         {"project": "p", "overrides": {"model": "x", "budget.maxTokens": 2}, "labels": {"team": "a"}}),
    case("a dotted column after overrides wins, empty cells left out",
         ["overrides", "budget.maxTokens", "project", "mode"],
         ['{"budget.maxTokens": 1}', "", "p", ""], {"project": "p", "overrides": {"budget.maxTokens": 1}, "labels": {}}),
])
def test_csv_fields(header, cells, expected):
    assert B._csv_fields("l.csv:2", header, cells) == expected


@pytest.mark.parametrize("lines, expected", [
    case("blank rows skipped, line numbers kept", ["project,team", "", "p,a", ",", "q,b"],
         [(3, {"project": "p", "overrides": {}, "labels": {"team": "a"}}),
          (5, {"project": "q", "overrides": {}, "labels": {"team": "b"}})]),
    case("a wrong cell count", ["project,team", "p,a,extra"],
         "l.csv:2: 3 cells for 2 columns; quote a cell that holds a comma"),
])
def test_csv_entries(lines, expected):
    if isinstance(expected, str):
        with pytest.raises(B.JobListError) as raised:
            list(B._csv_entries("l.csv", lines))
        assert str(raised.value) == expected
    else:
        assert list(B._csv_entries("l.csv", lines)) == expected
