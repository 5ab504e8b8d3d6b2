"""The steps git_state_from reads a snapshot by (nodes/lib/git/state.py), one table each: the
branch fields, ahead/behind, the staged/unstaged/untracked lists, the changed files and renames."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.git import state as S
from ctxengine.nodes.lib.git.status import StatusEntry as E


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.mark.parametrize("branch, expected", [
    case("a branch with upstream", {"head": "main", "oid": "abc", "upstream": "origin/main", "ab": "+2 -1"},
         {"branch": "main", "head": "abc", "detached": False, "initial": False, "upstream": "origin/main",
          "ahead_behind": (2, 1)}),
    case("detached", {"head": "(detached)", "oid": "abc"},
         {"branch": None, "head": "abc", "detached": True, "initial": False, "upstream": None, "ahead_behind": None}),
    case("before the first commit", {"head": "main", "oid": "(initial)", "ab": "odd"},
         {"branch": "main", "head": None, "detached": False, "initial": True, "upstream": None, "ahead_behind": None}),
])
def test_branch_fields(branch, expected):
    assert S._branch_fields(branch) == expected


@pytest.mark.parametrize("entries, expected", [
    case("index and work tree columns", [E("a", "M", "."), E("b", ".", "M"), E("c", "M", "M")],
         (["a", "c"], ["b", "c"], ())),
    case("renamed and unmerged are tracked", [E("r", "R", ".", "o", "renamed"), E("u", "U", "U", None, "unmerged")],
         (["r", "u"], ["u"], ())),
    case("untracked and ignored", [E("n", "?", "?", None, "untracked"), E("i", "!", "!", None, "ignored")],
         ([], [], ("n",))),
])
def test_status_lists(entries, expected):
    staged, unstaged, untracked = S._status_lists(entries)
    assert ([e.path for e in staged], [e.path for e in unstaged], untracked) == expected


@pytest.mark.parametrize("numstat, entries, expected_files, expected_renames", [
    case("status words from git status", "1\t2\ta.py\x00-\t-\tbin.dat\x00",
         [E("a.py", "A", ".")], [("a.py", 1, 2, "added"), ("bin.dat", None, None, "modified")], {}),
    case("the work tree column when the index has none", "0\t3\td.py\x00", [E("d.py", ".", "D")],
         [("d.py", 0, 3, "deleted")], {}),
    case("a rename the diff paired", "1\t1\t\x00old.py\x00new.py\x00", [], [("new.py", 1, 1, "renamed")],
         {"new.py": "old.py"}),
    case("a rename only git status saw", "", [E("mv.py", "R", "M", "orig.py", "renamed")], [], {"mv.py": "orig.py"}),
    case("the diff's pairing wins", "1\t1\t\x00other.py\x00mv.py\x00", [E("mv.py", "R", ".", "orig.py", "renamed")],
         [("mv.py", 1, 1, "renamed")], {"mv.py": "other.py"}),
])
def test_changed_files(numstat, entries, expected_files, expected_renames):
    assert S._changed_files(numstat, entries) == (expected_files, expected_renames)
