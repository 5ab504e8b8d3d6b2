"""Small files in the user's cache folder ($CTXENGINE_CACHE_DIR, else $XDG_CACHE_HOME/ctxengine,
else ~/.cache/ctxengine), read only when this user wrote them, written atomically; and the
output of a program that depends on its binary alone (``git --version``), kept there so a
fresh process does not start the program again.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from typing import Callable

_PROGRAMS = "programs.json"
_PROGRAMS_MAX = 64
#: Executable formats whose output depends on the file alone (a script, such as a version
#: manager's shim, may answer differently by folder or environment: it always runs).
_BINARY_MAGIC = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
                 b"\xca\xfe\xba\xbe")
_LOCK = threading.Lock()
_OUTPUTS: dict[str, str | None] | None = None  # the programs file as this process read it


def user_cache_dir() -> str:
    """The user's ctxengine cache folder (created)."""
    base = os.environ.get("CTXENGINE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ctxengine")
    os.makedirs(base, exist_ok=True)
    return base


def trusted_file(path: str) -> bool:
    """A cache file only this user could have written: owned by them, writable by no one else."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def write_atomically(path: str, data: bytes) -> None:
    """``data`` as the content of ``path`` (a reader sees the old file or the new one, whole)."""
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def program_output(program: str, args: tuple[str, ...], run: Callable[[], str | None]) -> str | None:
    """``run()`` (what ``program`` with ``args`` prints), remembered in the user cache by the
    program's binary (real path, inode, size, modification time) when it is a compiled
    executable; a script runs every time, as does anything when the cache cannot be used.

    Only an answer is remembered: a failed probe (``run()`` gives None: the program could not
    start, timed out or exited non-zero) is asked again next time, and a None an older version
    stored counts as nothing stored."""
    key = _binary_key(program, args)
    if key is None:
        return run()
    with _LOCK:
        remembered = _outputs().get(key)
    if remembered is not None:
        return remembered
    value = run()
    if value is None:
        return None
    with _LOCK:
        outputs = _outputs()
        outputs[key] = value
        while len(outputs) > _PROGRAMS_MAX:
            outputs.pop(next(iter(outputs)))
        try:
            write_atomically(os.path.join(user_cache_dir(), _PROGRAMS), json.dumps(outputs).encode("utf-8"))
        except OSError:
            pass  # a read-only home: the program runs again next time
    return value


def _binary_key(program: str, args: tuple[str, ...]) -> str | None:
    """What identifies ``program``'s answer to ``args``: its real path, inode, size and
    modification time, when ``program`` is an absolute path to a compiled executable; else None
    (a bare name would be looked up in the working folder)."""
    if not os.path.isabs(program):
        return None
    try:
        real = os.path.realpath(program)
        info = os.stat(real)
        with open(real, "rb") as fh:
            magic = fh.read(4)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or magic not in _BINARY_MAGIC:
        return None
    return json.dumps([real, info.st_ino, info.st_size, info.st_mtime_ns, list(args)])


def _outputs() -> dict[str, str | None]:
    global _OUTPUTS
    if _OUTPUTS is None:
        _OUTPUTS = {}
        try:
            path = os.path.join(user_cache_dir(), _PROGRAMS)
            if trusted_file(path):
                with open(path, encoding="utf-8") as fh:
                    loaded = json.load(fh)
                if isinstance(loaded, dict):
                    _OUTPUTS = {k: v for k, v in loaded.items() if isinstance(v, (str, type(None)))}
        except (OSError, ValueError):
            pass
    return _OUTPUTS
