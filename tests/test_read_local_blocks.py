"""The steps read_local_text (nodes/lib/textio/files.py) is made of, one table each, on files made
under a temporary folder: the real path checked against the trust rules, the stat before the
open (no regular file, over the cap), the stat after it (another file swapped in), and a tail cut
to its first line start."""

from __future__ import annotations

import os

import pytest

from ctxengine.nodes.lib.textio import files as F
from ctxengine.nodes.lib.textio.trust import Refused, TextUnavailable, Trust


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.fixture
def tree(tmp_path):
    project, allowed, outside = tmp_path / "p", tmp_path / "allowed", tmp_path / "outside"
    for folder in (project, allowed, outside):
        folder.mkdir()
    (project / "a.txt").write_text("0123456789\n")
    (allowed / "b.txt").write_text("b\n")
    (outside / "c.txt").write_text("c\n")
    os.mkfifo(project / "fifo")
    (project / "folder").mkdir()
    return tmp_path.resolve(), Trust(str(project.resolve()), (str(allowed.resolve()),))


@pytest.mark.parametrize("rel, give_real, expected", [
    case("inside, resolved here", "p/a.txt", False, "p/a.txt"),
    case("inside, resolved by the caller", "p/a.txt", True, "p/a.txt"),
    case("an allowed folder", "allowed/b.txt", True, "allowed/b.txt"),
    case("outside, resolved here", "outside/c.txt", False, Refused),
    case("outside, resolved by the caller: checked all the same", "outside/c.txt", True, Refused),
    case("missing, resolved here", "p/none.txt", False, TextUnavailable),
])
def test_trusted_real(tree, rel, give_real, expected):
    base, trust = tree
    path = str(base / rel)
    if isinstance(expected, type):
        with pytest.raises(expected):
            F._trusted_real(path, trust, rel, path if give_real else None)
    else:
        assert F._trusted_real(path, trust, rel, path if give_real else None) == str(base / expected)


@pytest.mark.parametrize("rel, max_bytes, keep_tail, error, message", [
    case("a regular file under the cap", "p/a.txt", 100, False, None, None),
    case("over the cap: not loaded", "p/a.txt", 5, False, TextUnavailable, "a is 11 bytes, over cap (5); not loaded"),
    case("over the cap, its tail wanted", "p/a.txt", 5, True, None, None),
    case("a FIFO", "p/fifo", 100, False, Refused, "a is a FIFO, not a regular file; skipped"),
    case("a folder", "p/folder", 100, True, Refused, "a is a directory, not a regular file; skipped"),
])
def test_regular_stat(tree, rel, max_bytes, keep_tail, error, message):
    base, _ = tree
    if error is None:
        assert F._regular_stat(str(base / rel), "a", max_bytes, "cap", keep_tail).st_size >= 0
    else:
        with pytest.raises(error) as raised:
            F._regular_stat(str(base / rel), "a", max_bytes, "cap", keep_tail)
        assert str(raised.value) == message


def test_same_file_stat_refuses_a_file_swapped_between_stat_and_open(tree):
    base, _ = tree
    first, second = str(base / "p" / "a.txt"), str(base / "allowed" / "b.txt")
    before = os.stat(first)
    fd = os.open(first, os.O_RDONLY)
    try:
        assert F._same_file_stat(fd, before, "a").st_ino == before.st_ino
    finally:
        os.close(fd)
    fd = os.open(second, os.O_RDONLY)
    try:
        with pytest.raises(Refused, match=r"^a changed while it was opened \(now another file\); skipped$"):
            F._same_file_stat(fd, before, "a")
    finally:
        os.close(fd)


@pytest.mark.parametrize("data, expected", [
    case("from the first line start", b"rt of line\nnext\nlast\n", b"next\nlast\n"),
    case("its only newline ends it: whole", b"partial line\n", b"partial line\n"),
    case("no newline: whole", b"partial", b"partial"),
    case("a newline first", b"\nrest", b"rest"),
    case("empty", b"", b""),
])
def test_from_line_start(data, expected):
    assert F._from_line_start(data) == expected
