"""The steps parse_plan (the article layout's plan.md) is made of, one table each: the tasks and
their depth, the detail lines a finished task drops, and the rendered plan with its count line."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib import plan as P  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.mark.parametrize("lines, expected, warnings", [
    case("depth by indent", ["- [ ] A", "  - [x] B", "    - [>] C", "  - [ ] D", "- [-] E"],
         [("pending", 0), ("done", 1), ("in_progress", 2), ("pending", 1), ("cancelled", 0)], []),
    case("an unknown box is pending, with its line", ["text", "- [?] A"], [("pending", 0)],
         ["p.md:2: unknown task box [?]; read as pending (use [x] done, [>] in progress, [ ] pending, "
          "[-] cancelled)"]),
    case("partly-done boxes are in progress", ["1. [~] A", "* [/] B"], [("in_progress", 0), ("in_progress", 0)], []),
    case("a box in code is no task", ["```", "- [ ] A", "```"], [], []),
])
def test_plan_tasks(lines, expected, warnings):
    found: list[str] = []
    tasks = P._plan_tasks(lines, 0, "p.md", found)
    assert ([(task.status, task.depth) for task in tasks], found) == (expected, warnings)


def test_plan_tasks_read_ids_and_line_ranges():
    tasks = P._plan_tasks(["- [x] T-1: first", "  detail", "", "  more", "- [ ] second"], 0, "p.md", [])
    assert [(task.task_id, task.title, task.lines) for task in tasks] == [
        ("T-1", "T-1: first", (1, 4)), (None, "second", (5, 5))]


@pytest.mark.parametrize("statuses_and_lines, expected", [
    case("done and cancelled drop all but their first line", [("done", (1, 3)), ("cancelled", (5, 6))], {1, 2, 5}),
    case("open tasks keep their detail", [("pending", (1, 3)), ("in_progress", (4, 9))], set()),
    case("one line: nothing", [("done", (2, 2))], set()),
])
def test_dropped_lines(statuses_and_lines, expected):
    tasks = [P.PlanTask(status, "t", None, lines) for status, lines in statuses_and_lines]
    assert P._dropped_lines(tasks) == expected


@pytest.mark.parametrize("lines, dropped, expected", [
    case("the count line under the title", ["# Plan", "- [ ] A"], set(), ("Plan", "# Plan\n\nN\n\n- [ ] A")),
    case("no title: on top", ["- [ ] A"], set(), (None, "N\n\n- [ ] A")),
    case("a title in code is none", ["```", "# not", "```", "# Real"], set(),
         ("Real", "```\n# not\n```\n# Real\n\nN")),
    case("only the first title", ["# One", "# Two"], set(), ("One", "# One\n\nN\n\n# Two")),
    case("dropped lines and runs of blank lines", ["# T", "", "", "- [x] A", "  gone", "", "", "end"], {4},
         ("T", "# T\n\nN\n\n- [x] A\n\nend")),
])
def test_rendered_plan(lines, dropped, expected):
    assert P._rendered_plan(lines, 0, dropped, "N") == expected


def test_rendered_plan_leaves_the_frontmatter_out():
    assert P._rendered_plan(["---", "a: 1", "---", "# T"], 3, set(), "N") == ("T", "# T\n\nN")
