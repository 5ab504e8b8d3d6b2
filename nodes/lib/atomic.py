"""The one atomic writer: a regular file replaced whole, so a reader sees the old file or the new one.

Every file ctxengine writes whole goes through :func:`replacing` (the cache's small files, the
user cache's markers, tokenizer pickles and program outputs, every output option of the CLI),
except the user's key, which is made once and never replaced (:func:`.usercache.cache_key`
links it into place, so two processes agree on one).
It writes a temporary file beside the target, gives it the target's permission bits (else the
umask's, or the ``mode`` asked), then renames it over the target. Only a regular file (or a new
name) is replaced: a symbolic link, a folder, a device or a FIFO at the path is refused, never
renamed over (the output writer, viz/output.py, resolves links and streams to devices itself).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, binary: bool = True, mode: int | None = None,
              keep_on_interrupt: bool = False) -> Iterator[IO]:
    """A file object whose content replaces the regular file ``path`` (or makes it) when the
    block ends: on any error the temporary file is removed and ``path`` is as it was;
    ``keep_on_interrupt``: Ctrl-C still renames (what was written so far survives), then propagates.
    The new file keeps the old one's permission bits, else gets ``mode`` (default: 0666 less the
    umask). An OSError (EINVAL) for a path that is not a regular file: nothing is written."""
    target = os.fspath(path)
    old_mode = regular_file_mode(target)
    folder, name = os.path.split(target)
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder or ".")
    try:
        with file_object(handle, binary) as fh:
            try:
                yield fh
            except KeyboardInterrupt:
                if keep_on_interrupt:
                    fh.flush()
                    _commit(temp, target, old_mode, mode)
                raise
        _commit(temp, target, old_mode, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)  # gone already when Ctrl-C committed it
        raise


def write_atomically(path: str | os.PathLike, data: bytes | str, mode: int | None = None) -> None:
    """``data`` (text as UTF-8) as the whole content of the regular file ``path`` (see :func:`replacing`)."""
    with replacing(path, binary=isinstance(data, bytes), mode=mode) as fh:
        fh.write(data)


def file_object(handle: int, binary: bool) -> IO:
    """A file object owning the descriptor ``handle``: bytes, or UTF-8 text with no newline translation."""
    return os.fdopen(handle, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8", "newline": ""}))


def regular_file_mode(path: str) -> int | None:
    """The permission bits of the regular file at ``path``, None when nothing is there; an
    OSError naming the path when something else is (a link, a folder, a device, a FIFO)."""
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):  # an OSError of EINVAL: not suppressed
            raise OSError(errno.EINVAL, "not a regular file: only a regular file is replaced atomically", path)
        return stat.S_IMODE(info.st_mode)
    return None


def _commit(temp: str, target: str, old_mode: int | None, mode: int | None) -> None:
    """Give the new file its mode (the old file's, else ``mode``, else 0666 less the umask), then
    rename it into place; a path that became something else than a regular file meanwhile is
    not replaced (an OSError)."""
    regular_file_mode(target)
    if old_mode is None and mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(temp, old_mode if old_mode is not None else mode)
    os.replace(temp, target)
