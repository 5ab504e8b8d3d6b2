"""The one writer of every output option (``build -o``, ``--lineage``, ``--report``, ``report -o``,
``dag -o``, ``batch -o``, ``--contexts-dir``, ``experiment -o``, ``--chart``), and graphviz
drawings (rendered with ``dot`` when it is installed, else their DOT text).

What an output path names decides how it is written (:func:`output_destination`):

- **a regular file or a new name**: atomically, a temporary file beside it then one rename, so
  the target is either the old file or the complete new one, never a truncated mix; the new file
  keeps the old one's permission bits;
- **a symlink to a regular file**: written through, atomically: the temporary file goes beside
  the link's final target and is renamed over that target; the symlink itself stays a symlink;
- **a character device or a FIFO** (a terminal, a named pipe ``mkfifo`` made, a device node):
  written in place: opened write-only, never created, truncated or renamed over. A FIFO with no
  reader is not waited on forever: the open is retried for :data:`FIFO_READER_WAIT` seconds,
  then fails with a message saying to start the reader first;
- **one of this process's own descriptors** (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
  ``/proc/self/fd/N``, or a symlink to one): written to that descriptor itself, so a pipe, a
  socket or a file opened for appending (``>>``) receives the output as the shell set it up;
- **refused** with an error naming the option: a missing folder (ctxengine never creates
  folders), a folder, a dangling symlink (its target would be created where the link points),
  a symlink loop, a block device (a disk), a socket.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator

from ..nodes.lib.atomic import file_object, replacing
from ..nodes.types import CtxEngineError
from .dot import dot_program, piped_through_dot

#: Seconds a FIFO with no reader is waited on (the reader may be starting beside ctxengine).
FIFO_READER_WAIT = 2.0
#: A descriptor of this process reached through /proc (what /dev/stdout and /dev/fd/N point to).
_OWN_FD_PATH = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd/(\d+)")
#: Symlinks followed at most (as the kernel's own limit).
_MAX_LINKS = 40

REPLACE, IN_PLACE, DESCRIPTOR = "replace", "in place", "descriptor"


class OutputWriteError(CtxEngineError):
    """The output could not be written (disk full, file size limit, I/O error, a FIFO nobody
    reads): exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Destination:
    """Where and how an output is written: ``how`` is :data:`REPLACE` (atomically at ``path``, the
    real file behind any symlink), :data:`IN_PLACE` (a device or FIFO opened at ``path``) or
    :data:`DESCRIPTOR` (this process's descriptor ``fd``)."""

    path: Path
    how: str
    fd: int | None = None


def output_destination(output: str | os.PathLike, option: str = "-o") -> Destination:
    """How ``output`` is written (see the module docstring); a CtxEngineError (exit 2) naming
    the option for a path that is refused. Call it before long work, so a typo fails at once."""
    shown = repr(os.fspath(output))
    own = own_descriptor(output)
    if own is not None:
        return Destination(Path(output), DESCRIPTOR, own)
    path = Path(output)
    if not os.path.isdir(path.parent):
        raise CtxEngineError(
            f"{option} {shown}: cannot write: the folder {os.fspath(path.parent)!r} does not exist; "
            "create it first (ctxengine does not create folders) or choose another path"
        )
    try:
        link = stat.S_ISLNK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return Destination(path, REPLACE)
    except OSError as exc:
        raise CtxEngineError(f"{option} {shown}: cannot look at it ({exc.strerror}); choose another path") from None
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CtxEngineError(f"{option} {shown} is a symlink loop; give a file name") from None
        raise CtxEngineError(
            f"{option} {shown} is a symlink to {os.readlink(path)!r}, which does not exist; ctxengine does "
            "not create files through a dangling symlink: remove the link or give another path"
        ) from None
    if stat.S_ISDIR(mode):
        raise CtxEngineError(f"{option} {shown} is a folder; give a file name")
    if stat.S_ISREG(mode):
        return Destination(Path(os.path.realpath(path)) if link else path, REPLACE)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return Destination(path, IN_PLACE)
    kind = "a block device (a disk)" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file"
    raise CtxEngineError(f"{option} {shown} is {kind}; ctxengine writes files, FIFOs and terminals: give a file name")


def check_output_path(output: str | os.PathLike, option: str = "-o") -> Path:
    """``output`` as a Path once :func:`output_destination` accepts it (a CtxEngineError, exit 2,
    naming the option otherwise)."""
    output_destination(output, option)
    return Path(output)


def own_descriptor(output: str | os.PathLike) -> int | None:
    """The descriptor of this process that ``output`` names through /proc (``/dev/stdout`` ->
    ``/proc/self/fd/1``, ``/dev/fd/3``, a symlink to either), else None. The links are followed
    one at a time because the last one of /proc names a pipe or a file, not the descriptor."""
    current = os.path.abspath(output)
    for _ in range(_MAX_LINKS):
        folder, name = os.path.split(current)
        folder = os.path.realpath(folder)
        current = os.path.join(folder, name)
        match = _OWN_FD_PATH.fullmatch(current)
        if match and match[1] == _proc_self():
            return int(match[2])
        try:
            target = os.readlink(current)
        except OSError:  # not a symlink, or nothing there
            return None
        current = os.path.join(folder, target)  # a relative link is read from its own folder
    return None


def _proc_self() -> str:
    """This process's number as /proc names it (in a container's PID namespace it may differ from os.getpid())."""
    try:
        return os.readlink("/proc/self")
    except OSError:
        return str(os.getpid())


@contextlib.contextmanager
def output_file(
    output: str | os.PathLike, option: str = "-o", *, binary: bool = False, keep_on_interrupt: bool = False
) -> Iterator[IO]:
    """A file object writing ``output`` as :func:`output_destination` says. Replaced files: a
    temporary file renamed over the target when the block ends; on any failure it is removed and
    an existing target stays as it was; ``keep_on_interrupt``: Ctrl-C still renames, so the rows
    written so far survive (batch). Devices, FIFOs and descriptors: written as the block goes."""
    where = output_destination(output, option)
    if where.how != REPLACE:
        with _streamed(where, output, option, binary) as fh:
            yield fh
        return
    path, entered = where.path, False
    try:
        with replacing(path, binary=binary, keep_on_interrupt=keep_on_interrupt) as fh:
            entered = True
            yield fh
    except OSError as exc:
        if not entered:
            raise CtxEngineError(
                f"{option} {os.fspath(output)!r}: cannot create a file in {os.fspath(path.parent)!r} "
                f"({exc.strerror}); choose a folder you can write to"
            ) from None
        raise OutputWriteError(
            f"{option} {os.fspath(output)!r}: cannot write ({exc.strerror or exc}); "
            + ("the old file is unchanged" if path.exists() else "nothing was written")
        ) from None


def write_output(output: str | os.PathLike, data: str | bytes, option: str = "-o") -> Path:
    """Write ``data`` (text as UTF-8) to ``output`` with :func:`output_file`; the path given."""
    with output_file(output, option, binary=isinstance(data, bytes)) as fh:
        fh.write(data)
    return Path(output)


def write_digraph(digraph, output: str | Path, option: str = "-o",
                  project_dir: str | os.PathLike | None = None) -> tuple[Path, str | None]:
    """Write ``digraph`` to ``output`` (format from its suffix, svg without one); (path written, note).
    ``project_dir``: the project drawn, when there is one (its own ``dot`` is never run).

    Without the ``dot`` program, or for a ``.dot``/``.gv`` suffix, the DOT text is written: to the
    same name with ``.dot`` for a file, to the device, FIFO or descriptor itself otherwise.
    """
    output = Path(output)
    fmt = output.suffix.lstrip(".").lower() or "svg"
    dot = dot_program(project_dir)  # absolute PATH entries outside the project; started by that path
    if fmt in ("dot", "gv") or dot is None:
        streamed = output_destination(output, option).how != REPLACE
        target = output if fmt in ("dot", "gv") or streamed else output.with_suffix(".dot")
        write_output(target, digraph.source, option)
        note = None if fmt in ("dot", "gv") else "graphviz 'dot' is not installed; wrote the DOT text instead"
        return target, note
    check_output_path(output, option)  # before running dot
    return write_output(output, rendered(digraph, fmt, option, dot, project_dir), option), None


def rendered(digraph, fmt: str, option: str = "-o", dot: str | None = None,
             project_dir: str | os.PathLike | None = None) -> bytes:
    """``digraph`` drawn by graphviz's ``dot`` (``dot``: its absolute path, else looked up outside
    ``project_dir``) in ``fmt``; a failure of ``dot`` is an :class:`OutputWriteError` naming the
    option, dot's exit code and the first line it printed."""
    import graphviz

    try:
        return piped_through_dot(digraph, fmt, dot, project_dir)
    except graphviz.CalledProcessError as exc:
        said = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise OutputWriteError(f"{option}: graphviz 'dot' failed (exit {exc.returncode})"
                               + (f": {said[0][:300]}" if said else "") + "; write a .dot file instead") from None
    except graphviz.ExecutableNotFound:
        raise OutputWriteError(f"{option}: graphviz 'dot' could not be run; write a .dot file instead") from None


@contextlib.contextmanager
def _streamed(where: Destination, output: str | os.PathLike, option: str, binary: bool) -> Iterator[IO]:
    """A file object over a device, a FIFO or one of this process's descriptors, written as it
    goes; an OSError while writing becomes an :class:`OutputWriteError`."""
    shown = repr(os.fspath(output))
    if where.how == DESCRIPTOR:
        for stream in (sys.stdout, sys.stderr):  # what is buffered for the same descriptor goes first
            with contextlib.suppress(OSError, ValueError, AttributeError):
                if stream.fileno() == where.fd:
                    stream.flush()
        try:
            handle = os.dup(where.fd)
        except OSError as exc:
            raise OutputWriteError(f"{option} {shown}: descriptor {where.fd} is not open ({exc.strerror})") from None
    else:
        handle = _open_in_place(where.path, shown, option)
    try:
        with file_object(handle, binary) as fh:
            yield fh
    except OSError as exc:
        problem = "the reader closed it" if isinstance(exc, BrokenPipeError) else exc.strerror or str(exc)
        raise OutputWriteError(f"{option} {shown}: cannot write ({problem}); the output is incomplete") from None


def _open_in_place(path: Path, shown: str, option: str) -> int:
    """A write-only descriptor of the device or FIFO at ``path`` (never created, never truncated),
    in blocking mode. A FIFO with no reader fails to open (ENXIO) without blocking; the open is
    retried for :data:`FIFO_READER_WAIT` seconds, then an OutputWriteError says to start the reader."""
    deadline = time.monotonic() + FIFO_READER_WAIT
    while True:
        try:
            handle = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise OutputWriteError(f"{option} {shown}: cannot open it for writing ({exc.strerror})") from None
            if time.monotonic() >= deadline:
                raise OutputWriteError(
                    f"{option} {shown} is a FIFO with no reader (waited {FIFO_READER_WAIT:g} s); start the reader "
                    f"first, e.g. cat {shown} &"
                ) from None
            time.sleep(0.02)
    fcntl.fcntl(handle, fcntl.F_SETFL, fcntl.fcntl(handle, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return handle
