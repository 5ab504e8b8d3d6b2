"""The blocks of the git section (nodes/lib/git/render.py ``render_git``), one table each: the
line that says where the work is, a status block, and the changes against the base."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.git import render as R
from ctxengine.nodes.lib.git.state import GitState


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.mark.parametrize("fields, expected", [
    case("a branch at a commit, ahead and behind", dict(branch="main", head="abcdef123", upstream="origin/main",
                                                        ahead_behind=(1, 2)),
         "Branch: main at abcdef1; upstream origin/main (ahead 1, behind 2)"),
    case("unborn", dict(initial=True), "Branch: (unborn) (no commits yet)"),
    case("detached", dict(detached=True, head="abcdef123"), "HEAD detached at abcdef1"),
    case("no commit id", dict(branch="dev"), "Branch: dev"),
])
def test_where_line(fields, expected):
    assert R._where_line(GitState(True, **fields)) == expected


@pytest.mark.parametrize("lines, expected", [
    case("empty: nothing", [], []),
    case("a title with the count", ["  a", "  b"], ["Staged (2):", "  a", "  b"]),
    case("past the cap: how many more", [f"  f{i}" for i in range(R._MAX_LISTED + 3)],
         ["Staged (203):", *[f"  f{i}" for i in range(R._MAX_LISTED)], "  ... and 3 more staged"]),
])
def test_status_block(lines, expected):
    assert R._status_block("Staged", lines, "staged") == expected


@pytest.mark.parametrize("fields, expected", [
    case("only untracked: nothing", dict(files=(("u", None, None, "untracked"),)), []),
    case("files, then the patch in a fence longer than its own",
         dict(files=(("x.py", 1, 2, "modified"), ("b", None, None, "modified")), total_lines=3,
              patch="+```\n"),
         ["Changes against HEAD: 2 files, 3 changed lines", "  +1/-2        modified   x.py",
          "  binary       modified   b", "Diff (git diff HEAD):", "````diff", "+```", "````"]),
    case("a rename, summary mode, the empty tree",
         dict(files=(("n.py", 4, 0, "renamed"),), renames={"n.py": "o.py"}, total_lines=4, summary_mode=True,
              base="4b825dc", max_lines=2),
         ["Changes against an empty tree: 1 file, 4 changed lines", "  +4/-0        renamed    o.py -> n.py",
          "Diff summary mode: 4 changed lines exceed state.gitDiffMaxLines (2); hunks are omitted."]),
])
def test_changes_block(fields, expected):
    assert R._changes_block(GitState(True, **fields)) == expected
