"""The pieces of the plan summary's selection problem (summarize/plan.py, ``_PlanView``), one table
each: the rank of a unit by role and task status, the count line kept or made, the code lines by
block, the open headings, what a unit requires (its place, its elements), and the pieces of a
render (frontmatter, count line, blank lines, a unit's text and line count, the note)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib import plan as article  # noqa: E402
from ctxengine.nodes.lib.summarize import plan as SP  # noqa: E402

DONE, CANCELLED, PENDING, OPEN = article.DONE, article.CANCELLED, article.PENDING, article.IN_PROGRESS


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def unit(role: str, tag: str = "", first: int = 0, **more) -> SP._PlanUnit:
    return SP._PlanUnit(first, first, role, tag=tag, **more)


@pytest.mark.parametrize("role, tag, state, code_head, expected", [
    case("the count line", "count", "", None, False, SP._R_COUNT),
    case("the GSD position", "position", "", DONE, False, SP._R_COUNT),
    case("the frontmatter", "frontmatter", "", None, False, SP._R_FRONTMATTER),
    case("an open task box", "box", "", OPEN, False, SP._R_NAME),
    case("a pending task box", "box", "", PENDING, False, SP._R_NAME),
    case("a done task box", "box", "", DONE, False, SP._R_DONE_BOX),
    case("a task's name heading", "heading", "name", PENDING, False, SP._R_NAME),
    case("a done task's name heading only comes with others", "heading", "name", DONE, False, None),
    case("a plain heading", "heading", "", None, False, None),
    case("a tag line", "open", "", OPEN, False, None),
    case("a fence", "fence", "", OPEN, False, None),
    case("a cancelled task's detail is only counted", "prose", "", CANCELLED, False, None),
    case("noise", "noise", "", OPEN, False, SP._R_NOISE),
    case("a code line", "code", "", OPEN, False, SP._R_CODE),
    case("a code line kept with its task's details", "code", "", OPEN, True, SP._R_OPEN_DETAIL),
    case("a lead", "lead", "", None, False, SP._R_NAME),
    case("a <name> element", "key", "name", PENDING, False, SP._R_NAME),
    case("a <files> element", "key", "files", PENDING, False, SP._R_KEY),
    case("pending detail", "prose", "", PENDING, False, SP._R_PENDING_DETAIL),
    case("in-progress detail", "prose", "", OPEN, False, SP._R_OPEN_DETAIL),
    case("prose outside any task", "prose", "", None, False, SP._R_PROSE),
])
def test_rank(role, tag, state, code_head, expected):
    assert SP._rank(unit(role, tag), state, code_head) == expected


@pytest.mark.parametrize("units, status, existing, synthesized", [
    case("the plan's own count line", [unit("prose"), unit("count"), unit("box", first=2)], {2: PENDING}, 1, None),
    case("boxes without one: made", [unit("box", first=0), unit("box", first=1)], {0: DONE, 1: PENDING}, None,
         "Tasks: 1 done / 0 in progress / 1 pending / 0 cancelled"),
    case("no boxes: none", [unit("key", "task")], {}, None, None),
])
def test_count_line_uid_and_synthesized_count(units, status, existing, synthesized):
    assert SP._count_line_uid(units) == existing
    assert SP._synthesized_count(units, status, existing) == synthesized


@pytest.mark.parametrize("units, expected", [
    case("two blocks", [unit("fence"), unit("code", fence=0), unit("code", fence=0), unit("prose"), unit("fence"),
                        unit("code", fence=4)], {0: [1, 2], 4: [5]}),
    case("no code", [unit("prose")], {}),
])
def test_code_lines_by_fence(units, expected):
    assert SP._code_lines_by_fence(units) == expected


@pytest.mark.parametrize("units, first_box, first_task", [
    case("a box at line 3 and a <task>", [unit("prose"), unit("box", first=3), unit("open", "task")], 3, 2),
    case("neither", [unit("prose")], 0, None),
    case("a <tasks> wrapper is no task", [unit("open", "tasks"), unit("open", "task")], 0, 1),
])
def test_first_box_line_and_first_task_uid(units, first_box, first_task):
    assert (SP._first_box_line(units), SP._first_task_uid(units)) == (first_box, first_task)


@pytest.mark.parametrize("heads, level, uid, expected", [
    case("a deeper heading stacks", [(1, 0)], 2, 5, [(1, 0), (2, 5)]),
    case("a sibling replaces", [(1, 0), (2, 5)], 2, 7, [(1, 0), (2, 7)]),
    case("a higher one closes the deeper ones", [(1, 0), (2, 5), (3, 6)], 1, 9, [(1, 9)]),
    case("the first", [], 3, 0, [(3, 0)]),
])
def test_open_headings(heads, level, uid, expected):
    assert SP._open_headings(heads, level, uid) == expected
    assert heads != expected  # the list given is left as it was


GSD = """\
# Plan 01
<tasks>
<task type="auto">
<name>Task 1: Build</name>
<action>
Write the page.
```yaml
a: 1
```
</action>
</task>
</tasks>
## Notes
Loose prose."""

ARTICLE = """\
# Plan: Auth
- [x] T1 Create the users table
  Done in migration 0003.

- [>] T2 Implement login
  Use argon2id."""


def view(text: str, fm: str | None = None) -> SP._PlanView:
    lines = text.split("\n")
    boxes = article.task_boxes(lines)
    return SP._PlanView(lines, SP._plan_units(lines, boxes), {b.index: b.status or PENDING for b in boxes}, fm)


def uid_of(plan: SP._PlanView, line: str) -> int:
    return next(u for u, unit in enumerate(plan.units) if plan.lines[unit.first] == line)


@pytest.mark.parametrize("line, expected", [
    case("a <name> comes with <tasks>, <task> and their closing lines", "<name>Task 1: Build</name>",
         ["<tasks>", "</tasks>", "<task type=\"auto\">", "</task>"]),
    case("a line of <action> comes with its open and close lines too",
         "Write the page.", ["<tasks>", "</tasks>", "<task type=\"auto\">", "</task>", "<action>", "</action>"]),
    case("a close tag line comes with its open line", "</action>",
         ["<tasks>", "</tasks>", "<task type=\"auto\">", "</task>", "<action>", "</action>"]),
    case("prose under a heading has no tag lines", "Loose prose.", []),
])
def test_tag_needs(line, expected):
    plan = view(GSD)
    assert [plan.lines[plan.units[k].first] for k in plan._tag_needs(uid_of(plan, line))] == expected


@pytest.mark.parametrize("text, line, expected", [
    case("a code line: its fence, its headings, then its elements' tag lines", GSD, "a: 1",
         ["```yaml", "# Plan 01", "<tasks>", "</tasks>", "<task type=\"auto\">", "</task>", "<action>", "</action>"]),
    case("prose under two headings", GSD, "Loose prose.", ["# Plan 01", "## Notes"]),
    case("a task box stands on its own", ARTICLE, "- [>] T2 Implement login", []),
    case("a task's detail: its heading and its box", ARTICLE, "  Use argon2id.",
         ["# Plan: Auth", "- [>] T2 Implement login"]),
])
def test_requirements(text, line, expected):
    plan = view(text)
    uid = uid_of(plan, line)
    assert [plan.lines[plan.units[k - plan.extra].first] for k in plan.requirements()[uid + plan.extra]] == expected


def test_render_pieces_of_an_article_plan():
    plan = view(ARTICLE, fm="phase: 1")
    assert plan.extra == 1 and plan.synthesized == "Tasks: 1 done / 1 in progress / 0 pending / 0 cancelled"
    everything = set(range(len(plan.units) + plan.extra))
    assert plan._frontmatter_shown(everything) == ["phase: 1"]
    assert plan._frontmatter_shown(everything - {len(plan.units)}) == []
    box = plan.units[uid_of(plan, "- [x] T1 Create the users table")]
    assert plan._count_line_due(box, everything, ["# Plan: Auth"]) is True
    assert plan._count_line_due(box, everything - {0}, []) is False  # not selected
    assert plan._count_line_due(box, everything, [plan.synthesized]) is False  # already out
    assert plan._count_line_due(plan.units[0], everything, []) is False  # before the first box
    second = plan.units[uid_of(plan, "- [>] T2 Implement login")]
    assert plan._blank_before(2, second) is True and plan._blank_before(None, second) is False
    assert plan._blank_before(0, plan.units[uid_of(plan, "- [x] T1 Create the users table")]) is False
    assert plan._left_out_note(2) == ["[… 3 of 5 plan lines not shown]"] and plan._left_out_note(5) == []


def test_shown_counts_a_fence_with_its_kept_lines():
    plan = view(GSD)
    fence = uid_of(plan, "```yaml")
    code = uid_of(plan, "a: 1")
    assert plan._shown(fence, {fence, code}) == ("```yaml\na: 1\n```", 3)
    assert plan._shown(fence, {fence})[1] == 2
    name = uid_of(plan, "<name>Task 1: Build</name>")
    assert plan._shown(name, {name}) == ("<name>Task 1: Build</name>", 1)
