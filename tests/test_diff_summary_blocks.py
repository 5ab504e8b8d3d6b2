"""The steps diff_summary (nodes/lib/summarize/diff.py) is made of, one table each: the file rows
from the diff or from ``files``, the total line, and the file list's problem and rendering (context
lines, the files shown, the line for the files left out)."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.summarize import diff as D


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


PATCH = """\
On branch main
diff --git a/a.py b/a.py
--- a/a.py
+++ b/a.py
@@ -1 +1,2 @@
-x
+y
+z
diff --git a/img.png b/img.png
Binary files a/img.png and b/img.png differ"""


@pytest.mark.parametrize("text, files, renames, expected", [
    case("parsed from the diff, a binary change without counts", PATCH, None, None,
         (["On branch main"], [("a.py", 2, 1, "M"), ("img.png", None, None, "B")])),
    case("files given win over the diff; its preamble stays", PATCH, [("b.py", 3, 0, "added")], None,
         (["On branch main"], [("b.py", 3, 0, "A")])),
    case("files given with a rename", "", [{"path": "n.py", "added": 1, "removed": 1}], {"n.py": "o.py"},
         ([], [("o.py -> n.py", 1, 1, "R")])),
    case("no diff, no files", "just text", None, None, (["just text"], [])),
])
def test_preamble_and_stats(text, files, renames, expected):
    assert D._preamble_and_stats(text, files, renames) == expected


@pytest.mark.parametrize("stats, expected", [
    case("one file", [("a", 2, 1, "M")], "1 file changed, +2/-1"),
    case("binary counts nothing, untracked counted apart",
         [("a", 2, 1, "M"), ("b", None, None, "B"), ("c", None, None, "?")], "2 files changed, +2/-1; 1 untracked"),
    case("only untracked", [("c", None, None, "?")], "0 files changed, +0/-0; 1 untracked"),
])
def test_total_line(stats, expected):
    assert D._total_line(stats) == expected


STATS = [("a.py", 2, 1, "M"), ("b.py", 5, 0, "A"), ("c.py", 0, 4, "D")]


def listing(context=("On branch main", "Commits: x")):
    return D._FileList(D._total_line(STATS), STATS, list(context))


@pytest.mark.parametrize("sel, expected", [
    case("everything", {0, 1, 2, 3, 4, 5},
         "On branch main\nCommits: x\n\n3 files changed, +7/-5\nM a.py +2/-1\nA b.py +5/-0\nD c.py +0/-4"),
    case("the total line alone: no 'more files' line", {0}, "3 files changed, +7/-5"),
    case("some files: the rest counted", {0, 2},
         "3 files changed, +7/-5\nA b.py +5/-0\n… 2 more files (+2/-5)"),
    case("one left out: singular", {0, 1, 2, 4}, "On branch main\n\n3 files changed, +7/-5\nM a.py +2/-1\nA b.py +5/-0\n"
         "… 1 more file (+0/-4)"),
])
def test_file_list_render(sel, expected):
    assert listing().render(sel) == expected


def test_file_list_problem_orders_the_total_then_the_first_context_line_then_files():
    problem = listing().problem()
    assert problem.order == [0, 4, 1, 2, 3, 5]
    assert problem.blocking == frozenset({0, 1, 2, 3})
    assert problem.costs[0] == D.estimate_tokens("3 files changed, +7/-5") + 1 + 12
    assert D._FileList("h", [], []).problem().order == [0]
