"""The plan summary's reading of a plan into units (summarize/plan.py), one table per small
function: the role of a plain line, the task a line belongs to, and the units each reader of
``_UNIT_READERS`` makes, with lines of real GSD PLAN.md files (the project in each case's id:
../shared/corpus/planning/ai-dynamo__nixl, phases 33 and 34) and of the article layout's plan.md."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

from ctxengine.nodes.lib import plan as article  # noqa: E402
from ctxengine.nodes.lib.summarize import plan as SP  # noqa: E402


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def units(text: str) -> list[tuple[int, int, str, str]]:
    """(first line, last line, role, tag) of each unit of ``text``."""
    lines = text.split("\n")
    return [(u.first, u.last, u.role, u.tag) for u in SP._plan_units(lines, article.task_boxes(lines))]


@pytest.mark.parametrize("line, top, noise, lead, role", [
    case("article plan.md: the count line", "Tasks: 1 done, 1 in progress", True, False, False, "count"),
    case("article plan.md: a count line in a task is prose", "Tasks: 1 done, 1 in progress", False, False, False,
         "prose"),
    case("GSD plan section: the position", "Position: milestone v1.2; phase 12 [from frontmatter]", True, False, False,
         "position"),
    case("nixl 33-01: a task heading", "## Task 1: Update navigation to add build page entry", True, False, False,
         "heading"),
    case("nixl 33-01: a task heading inside a task box", "## Task 1: Update navigation to add build page entry", False,
         False, False, "key"),
    case("nixl 34-01: an @ line", "@.planning/STATE.md", True, False, False, "noise"),
    case("nixl 33-01: a line inside <context>", "- docs/index.yml", True, True, False, "noise"),
    case("made-up: a Files label", "**Files:** docs/index.yml", True, False, False, "key"),
    case("wBlock ROADMAP: a plan box", "- [ ] 10-02-PLAN.md -- Rewrite build-dmg.sh", True, False, False, "key"),
    case("nixl 33-01: the objective's first line", "Author the NIXLBench overview page.", True, False, True, "lead"),
    case("nixl 33-01: other prose", "Author the NIXLBench overview page.", True, False, False, "prose"),
])
def test_the_role_of_a_plain_line(line, top, noise, lead, role):
    assert SP._line_role(line, top, noise, lead) == role


ARTICLE = """\
# Plan: Auth rewrite
Tasks: 1 done, 1 in progress
- [x] T1 Create the users table
  Done in migration 0003; indexes on email.
- [>] T2 Implement the login endpoint
  Use argon2id; return 401 on a bad password, never 404.
  - [x] T2.1 Hash helper"""


def test_each_line_of_a_task_belongs_to_its_top_level_box():
    lines = ARTICLE.split("\n")
    assert SP._task_owners(article.task_boxes(lines)) == ({3: 2, 5: 4, 6: 4}, {2, 4})  # T2.1 is T2's detail


NIXL_33 = """\
<objective>
Author the NIXLBench overview page and build page as Fern-compatible MDX.
Purpose: the second line.
</objective>

<tasks>

## Task 1: Update navigation to add build page entry

<action>
Edit `docs/index.yml`:

```yaml
          - section: NIXLBench
```
</action>

<acceptance_criteria>
- `docs/index.yml` contains the line `- page: Building NIXLBench`
</acceptance_criteria>"""

NIXL_34 = """\
<context>
@.planning/PROJECT.md
@.planning/STATE.md
</context>

<tasks>

<task type="auto">
  <name>Task 1: Author usage.md with all sections</name>
  <files>docs/development/benchmarking/nixlbench/usage.md</files>
  <read_first>
    - docs/development/benchmarking/nixlbench/usage.md (current stub to replace)
  </read_first>
  <action>
Replace the stub `usage.md` with a complete Fern MDX page.
  ```bash
  docker run -d --name etcd-server \\
  </action>
</task>
</tasks>"""


@pytest.mark.parametrize("text, expected", [
    case("nixl 33-01: objective, tasks without <task>, an action with code, criteria", NIXL_33, [
        (0, 0, "open", ""), (1, 1, "lead", ""), (2, 2, "prose", ""), (3, 3, "close", ""),  # the objective
        (5, 5, "open", "tasks"),  # <tasks> never closed: it stays an open line
        (7, 7, "heading", "name"),
        (9, 9, "open", ""), (10, 10, "prose", ""), (12, 14, "fence", ""), (13, 13, "code", ""), (15, 15, "close", ""),
        (17, 19, "key", "acceptance_criteria"),  # a key element whole
    ]),
    case("nixl 34-01: <context> noise, a <task> with its elements, a fence left open in <action>", NIXL_34, [
        (0, 0, "open", ""), (1, 1, "noise", ""), (2, 2, "noise", ""), (3, 3, "close", ""),
        (5, 5, "open", "tasks"), (7, 7, "open", "task"),
        (8, 8, "key", "name"), (9, 9, "key", "files"),
        (10, 10, "open", ""), (11, 11, "prose", ""), (12, 12, "close", ""),  # <read_first>: a prose element
        (13, 13, "open", ""), (14, 14, "prose", ""),
        (15, 16, "fence", ""), (16, 16, "code", ""),  # the open fence ends at </action>
        (17, 17, "close", ""), (18, 18, "close", "/task"), (19, 19, "close", "/tasks"),
    ]),
    case("article plan.md: heading, count, boxes and their detail", ARTICLE, [
        (0, 0, "heading", ""), (1, 1, "count", ""), (2, 2, "box", ""), (3, 3, "prose", ""), (4, 4, "box", ""),
        (5, 5, "prose", ""), (6, 6, "key", ""),
    ]),
    case("made-up: one-line elements", "<objective>Ship it.</objective>\n<output>A page.</output>\n<notes>x", [
        (0, 0, "lead", ""), (1, 1, "prose", ""), (2, 2, "open", ""),  # <notes> never closed: an open line
    ]),
    case("made-up: a </task> with no <task> stays a key line", "Some prose.\n</task>", [
        (0, 0, "prose", ""), (1, 1, "key", "/task"),
    ]),
    case("made-up: a <context> on one line is noise", "<context>@.planning/STATE.md</context>\nText.", [
        (0, 0, "noise", "context"), (1, 1, "prose", ""),
    ]),
])
def test_the_units_of_a_plan(text, expected):
    assert units(text) == expected


def test_open_and_close_lines_are_paired_and_code_knows_its_fence():
    lines = NIXL_34.split("\n")
    got = SP._plan_units(lines, article.task_boxes(lines))
    for uid, unit in enumerate(got):
        if unit.role in ("open", "close") and unit.pair is not None:
            assert got[unit.pair].pair == uid  # both ways
    fence = next(uid for uid, unit in enumerate(got) if unit.role == "fence")
    assert got[fence].closing == "  ```" and [u.fence for u in got if u.role == "code"] == [fence]
    assert [u.task for u in got[5:17]] == [None] + [5] * 10 + [None]  # inside <task> (unit 5) every unit knows it
