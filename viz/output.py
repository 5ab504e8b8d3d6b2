"""Writing output files: atomically (a temporary file beside the target, then one rename), and
graphviz drawings (rendered with ``dot`` when it is installed, else their DOT text).

One rule for every output path (``build -o``, ``--lineage``, ``dag -o``, ``batch -o``): the
folder must exist (ctxengine never creates folders), and the target is either the old file or
the complete new one, never a truncated mix.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from ..nodes.types import CtxEngineError
from .dot import dot_program, piped_through_dot


class OutputWriteError(CtxEngineError):
    """The output could not be written (disk full, file size limit, I/O error): exit 1."""

    exit_code = 1


def check_output_path(output: str | os.PathLike, option: str = "-o") -> Path:
    """``output`` as a Path once its folder is known to exist; a CtxEngineError (exit 2) naming
    the option and the folder otherwise. Call it before long work, so a typo fails at once."""
    path = Path(output)
    folder = path.parent
    if not folder.is_dir():
        raise CtxEngineError(
            f"{option} {os.fspath(output)!r}: cannot write: the folder {os.fspath(folder)!r} does not exist; "
            "create it first (ctxengine does not create folders) or choose another path"
        )
    if path.is_dir():
        raise CtxEngineError(f"{option} {os.fspath(output)!r} is a folder; give a file name")
    return path


@contextlib.contextmanager
def atomic_output(
    output: str | os.PathLike, option: str = "-o", *, binary: bool = False, keep_on_interrupt: bool = False
) -> Iterator[IO]:
    """A file object over a temporary file in the folder of ``output``, renamed over it
    (``os.replace``) when the block ends; on any failure the temporary file is removed and an
    existing ``output`` stays as it was. ``keep_on_interrupt``: Ctrl-C still renames, so the
    rows written so far survive (batch)."""
    path = check_output_path(output, option)
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise CtxEngineError(
            f"{option} {os.fspath(output)!r}: cannot create a file in {os.fspath(path.parent)!r} "
            f"({exc.strerror}); choose a folder you can write to"
        ) from None
    committed = False
    try:
        with os.fdopen(handle, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""})) as fh:
            try:
                yield fh
            except KeyboardInterrupt:
                if not keep_on_interrupt:
                    raise
                fh.flush()
                _commit(temp, path)
                committed = True
                raise
        _commit(temp, path)
        committed = True
    except OSError as exc:
        raise OutputWriteError(
            f"{option} {os.fspath(output)!r}: cannot write ({exc.strerror or exc}); "
            + ("the old file is unchanged" if path.exists() else "nothing was written")
        ) from None
    finally:
        if not committed:
            with contextlib.suppress(OSError):
                os.unlink(temp)


def write_atomic(output: str | os.PathLike, data: str | bytes, option: str = "-o") -> Path:
    """Write ``data`` (text as UTF-8) to ``output`` atomically; the path written."""
    with atomic_output(output, option, binary=isinstance(data, bytes)) as fh:
        fh.write(data)
    return Path(output)


def write_digraph(digraph, output: str | Path, option: str = "-o") -> tuple[Path, str | None]:
    """Write ``digraph`` to ``output`` (format from its suffix), atomically; (path written, note).

    Without the ``dot`` program, or for a ``.dot``/``.gv`` suffix, the DOT text is written.
    """
    output = Path(output)
    fmt = output.suffix.lstrip(".").lower() or "svg"
    dot = dot_program()  # absolute PATH entries only; started by that path, never as a bare "dot"
    if fmt in ("dot", "gv") or dot is None:
        target = output if fmt in ("dot", "gv") else output.with_suffix(".dot")
        write_atomic(target, digraph.source, option)
        note = None if fmt in ("dot", "gv") else "graphviz 'dot' is not installed; wrote the DOT text instead"
        return target, note
    check_output_path(output, option)  # before running dot
    return write_atomic(output, piped_through_dot(digraph, fmt, dot), option), None


def _commit(temp: str, path: Path) -> None:
    """Give the new file the mode the old one had (else the umask's), then rename it into place."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temp, mode)
    os.replace(temp, path)
