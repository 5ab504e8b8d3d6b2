"""The steps the diff summary reads a diff by (nodes/lib/summarize/diff.py ``diff_file_stats``),
one table each: the line that opens a file, a header line."""

from __future__ import annotations

import pytest

from ctxengine.nodes.lib.summarize import diff as D


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


def stat(f: D._FileStat | None) -> tuple | None:
    return None if f is None else (f.shown, f.status)


@pytest.mark.parametrize("lines, git_headers, expected", [
    case("a git header", ["diff --git a/x.py b/y.py"], True, ("y.py", "M")),
    case("quoted paths", ['diff --git "a/s p.py" "b/s p.py"'], True, ("s p.py", "M")),
    case("no a/ b/ prefixes", ["diff --git x y"], True, ("y", "M")),
    case("a header it cannot split", ["diff --git weird"], True, ("weird", "M")),
    case("--- / +++ without git headers", ["--- a/x.py\t2020", "+++ b/x.py\t2020"], False, ("x.py", "M")),
    case("a new file", ["--- /dev/null", "+++ b/n.py"], False, ("n.py", "A")),
    case("a deleted file", ["--- a/d.py", "+++ /dev/null"], False, ("d.py", "D")),
    case("--- / +++ in a git diff opens nothing", ["--- a/x.py", "+++ b/x.py"], True, None),
    case("--- alone opens nothing", ["--- a/x.py", " context"], False, None),
    case("--- on the last line", ["--- a/x.py"], False, None),
])
def test_opened_file(lines, git_headers, expected):
    assert stat(D._opened_file(lines, 0, git_headers)) == expected


@pytest.mark.parametrize("status, line, expected", [
    case("new file", "M", "new file mode 100644", ("x", "A")),
    case("deleted file", "M", "deleted file mode 100644", ("x", "D")),
    case("rename from", "M", "rename from old.py", ("old.py -> x", "R")),
    case("rename to", "M", "rename to new.py", ("x -> new.py", "R")),
    case("binary: a modification becomes B", "M", "Binary files a/x and b/x differ", ("x", "B")),
    case("binary: a new file stays A", "A", "GIT binary patch", ("x", "A")),
    case("other lines change nothing", "M", "index 123..456 100644", ("x", "M")),
])
def test_read_header_line(status, line, expected):
    f = D._FileStat("x", status, "x")
    D._read_header_line(f, line)
    assert stat(f) == expected
