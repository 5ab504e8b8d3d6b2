"""The one output writer (ctxengine.viz.output): a file atomically, a symlink written through and
kept, a FIFO, a character device or this process's own descriptor written in place and never
replaced. Every node is made under tmp_path (os.mknod only as root); the machine's /dev/null and
/dev/full are never touched."""

from __future__ import annotations

import os
import stat
import threading
import tty

import pytest

from ctxengine.nodes.types import CtxEngineError
from ctxengine.viz import output as out
from ctxengine.viz.output import OutputWriteError, output_destination, output_file, write_output

as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="os.mknod of a device needs root")


def _read_fifo(path, into: list) -> threading.Thread:
    """A reader of the FIFO at ``path`` in a thread (what `cat FIFO &` would be); its bytes land in ``into``."""
    def read() -> None:
        with open(path, "rb") as fh:
            into.append(fh.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def test_a_regular_file_is_replaced_atomically(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    before = os.lstat(target).st_ino
    write_output(target, "new")
    assert target.read_text() == "new" and os.lstat(target).st_ino != before  # a new file, renamed in
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_a_symlink_to_a_file_is_written_through_and_stays_a_link(tmp_path):
    (tmp_path / "site").mkdir()
    real = tmp_path / "site" / "report.html"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "report.html"
    link.symlink_to(os.path.join("site", "report.html"))  # relative, as people make them
    write_output(link, "new")
    assert stat.S_ISLNK(os.lstat(link).st_mode) and os.readlink(link) == os.path.join("site", "report.html")
    assert real.read_text() == "new" and real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == ["report.html"]  # no temporary file left


def test_a_dangling_symlink_is_refused_and_nothing_is_created(tmp_path):
    link = tmp_path / "out.txt"
    link.symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(CtxEngineError, match=r"--lineage .*dangling symlink") as caught:
        write_output(link, "x", "--lineage")
    assert caught.value.exit_code == 2
    assert stat.S_ISLNK(os.lstat(link).st_mode) and not (tmp_path / "elsewhere.txt").exists()


def test_a_symlink_loop_and_a_folder_are_refused(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(CtxEngineError, match="symlink loop"):
        write_output(loop, "x")
    with pytest.raises(CtxEngineError, match="is a folder"):
        write_output(tmp_path, "x")


def test_a_fifo_is_written_in_place_for_its_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    data = "line\n" * 40_000  # more than a pipe holds: the writer blocks until the reader reads
    write_output(fifo, data, "-o")
    reader.join(5)
    assert got == [data.encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_a_fifo_without_a_reader_fails_clearly_instead_of_hanging(tmp_path, monkeypatch):
    monkeypatch.setattr(out, "FIFO_READER_WAIT", 0.05)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputWriteError, match=r"-o .*pipe' is a FIFO with no reader .*start the reader first"):
        write_output(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_this_process_s_descriptor_is_written_itself_not_reopened(tmp_path):
    """/dev/stdout-like: a symlink to /proc/self/fd/N appends to a file opened with >> instead of
    truncating or replacing it."""
    log = tmp_path / "log.txt"
    log.write_text("earlier\n")
    inode = os.stat(log).st_ino
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    link = tmp_path / "stdout"
    link.symlink_to(f"/proc/self/fd/{fd}")
    try:
        assert output_destination(link).fd == fd
        write_output(link, "more\n")
    finally:
        os.close(fd)
    assert log.read_text() == "earlier\nmore\n" and os.stat(log).st_ino == inode
    assert stat.S_ISLNK(os.lstat(link).st_mode)


def test_this_process_s_pipe_through_dev_fd(tmp_path):
    read_end, write_end = os.pipe()
    try:
        write_output(f"/dev/fd/{write_end}", "through the pipe")
        os.close(write_end)
        assert os.read(read_end, 100) == b"through the pipe"
    finally:
        os.close(read_end)


@as_root
def test_a_character_device_node_is_written_in_place(tmp_path):
    """`build -o /dev/null` as root replaced the device with a file: here a null node made under
    tmp_path is written and is still the same character device afterwards."""
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = os.lstat(node)
    write_output(node, "discarded\n")
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]


def test_a_symlink_to_a_terminal_writes_to_the_terminal(tmp_path):
    """A pseudo-terminal of this test (its slave named through a symlink under tmp_path): the
    text arrives at the master end, and the link and the terminal stay what they were."""
    master, slave = os.openpty()
    try:
        tty.setraw(slave)  # no \n -> \r\n
        link = tmp_path / "terminal"
        link.symlink_to(os.ttyname(slave))
        assert output_destination(link).how == out.IN_PLACE
        write_output(link, "to the terminal\n")
        assert os.read(master, 100) == b"to the terminal\n"
        assert stat.S_ISLNK(os.lstat(link).st_mode) and stat.S_ISCHR(os.stat(link).st_mode)
    finally:
        os.close(master)
        os.close(slave)


@as_root
def test_a_full_device_node_fails_with_one_error_and_stays_a_device(tmp_path):
    node = tmp_path / "full"
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 7))  # what /dev/full is, made here
    with pytest.raises(OutputWriteError, match=r"--report .*full'.*No space left on device"):
        write_output(node, "x" * 10_000, "--report")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@as_root
def test_a_block_device_is_refused_before_it_is_opened(tmp_path):
    node = tmp_path / "disk"
    os.mknod(node, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    with pytest.raises(CtxEngineError, match="block device"):
        write_output(node, "x")
    assert stat.S_ISBLK(os.lstat(node).st_mode)


def test_a_failure_inside_the_block_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "rows.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with output_file(target) as fh:
            fh.write("half")
            raise RuntimeError("boom")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_a_drawing_without_dot_goes_to_the_fifo_itself(tmp_path, monkeypatch):
    """write_digraph writes the DOT text (dot missing) into the FIFO, never to a new pipe.dot."""
    import graphviz

    monkeypatch.setattr(out, "dot_program", lambda project_dir=None: None)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list = []
    reader = _read_fifo(fifo, got)
    written, note = out.write_digraph(graphviz.Digraph("g", body=["a -> b"]), fifo, "--lineage")
    reader.join(5)
    assert written == fifo and "not installed" in note and b"a -> b" in got[0]
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]
