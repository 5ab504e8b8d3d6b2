"""Where the programs ctxengine starts (git, node, dot) are: absolute paths found on the
absolute entries of PATH, never inside the project.

Projects are untrusted. A PATH with an empty entry (a leading, trailing or doubled ``:``, which
``PATH=$X:$PATH`` gives when X is unset), ``.`` or a relative entry such as
``node_modules/.bin`` names the working folder, which is often the project: ``shutil.which``
would then return the project's own committed ``git`` or ``node``, and a bare ``git`` given to
``subprocess`` is looked up the same way. :func:`executable_path` skips every such entry, and
any candidate whose real path (or whose folder's real path) lies inside the project, and
returns only a regular file this user may execute. Callers start the program by the path it
returns (``argv[0]`` absolute), never by its bare name, and give the programs they start the
PATH of :func:`safe_search_path`.

A lookup is a ``stat`` per entry (real paths are resolved for the program found only), so it
is done per call (a snapshot resolves git once and passes the path to each of its commands).
What a compiled program answers (``git --version``) is kept in the memo by the identity of its
binary (:func:`program_answer`): a warm process does not start it again each build.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

from .digest import digest16
from .memo import Memo

#: Executable formats whose answer depends on the file alone (ELF, Mach-O, fat Mach-O); a script,
#: such as a version manager's shim, may answer differently by folder or environment.
_BINARY_MAGIC = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe", b"\xcf\xfa\xed\xfe",
                 b"\xca\xfe\xba\xbe")


def _inside(path: str, folder: str) -> bool:
    """Whether the real path ``path`` is ``folder`` or lies under it (both already real)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _absolute_entries(path: str | None) -> list[str]:
    """The absolute entries of ``path`` (``$PATH`` when None; ``os.defpath`` when unset), normalised,
    in order, duplicates dropped: empty, ``.`` and relative entries are skipped, since they name
    whatever the working folder is."""
    search = os.environ.get("PATH", os.defpath) if path is None else path
    entries = (os.path.normpath(entry) for entry in search.split(os.pathsep) if entry and os.path.isabs(entry))
    return list(dict.fromkeys(entries))


def search_entries(path: str | None = None, project_dir: str | None = None) -> list[str]:
    """The absolute entries of ``path`` (``$PATH`` when None; ``os.defpath`` when unset) that do not
    lie inside ``project_dir``, in order, duplicates dropped: empty, ``.`` and relative entries
    are skipped, since they name whatever the working folder is."""
    project = os.path.realpath(project_dir) if project_dir else None
    return [entry for entry in _absolute_entries(path) if not (project and _inside(os.path.realpath(entry), project))]


def safe_search_path(path: str | None = None, project_dir: str | None = None) -> str:
    """``path`` (``$PATH`` when None) with only the entries of :func:`search_entries`: the PATH to
    hand a program ctxengine starts, so what it starts in turn is not found in the project."""
    return os.pathsep.join(search_entries(path, project_dir))


def _runnable(candidate: str) -> bool:
    try:
        info = os.stat(candidate)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and os.access(candidate, os.X_OK)


def executable_path(name: str, project_dir: str | None = None, path: str | None = None) -> str | None:
    """The absolute path of the program ``name`` (``git``, ``node``, ``dot``): the first absolute
    entry of ``path`` (``$PATH`` when None) holding a regular file of that name this user may
    execute, whose real path is not inside ``project_dir``; None when there is none. Empty,
    ``.`` and relative entries are never searched."""
    if not name or os.sep in name or (os.altsep and os.altsep in name):
        return None
    project = os.path.realpath(project_dir) if project_dir else None
    for entry in _absolute_entries(path):
        candidate = os.path.join(entry, name)
        if not _runnable(candidate):  # one stat: the real paths are resolved for a hit only
            continue
        if project and (_inside(os.path.realpath(entry), project) or _inside(os.path.realpath(candidate), project)):
            continue  # an entry inside the project, or a symlink on PATH leading into it
        return candidate
    return None


def program_answer(program: str, args: tuple[str, ...], run: Callable[[], str | None], memo: Memo) -> str | None:
    """``run()`` (what the absolute ``program`` prints for ``args``), kept in ``memo`` (and its
    table) by :func:`binary_identity` when ``program`` is a compiled executable; a script runs
    every time. A failed probe (``run()`` gives None) is never kept: it is asked again next time."""
    key = binary_identity(program, args)
    if key is None:
        return run()
    answer = memo.peek("program-answer", key)
    if answer is None:
        answer = run()
        if answer is not None:
            memo.put("program-answer", key, answer, size=len(answer), persist=True)
    return answer


def binary_identity(program: str, args: tuple[str, ...]) -> bytes | None:
    """A digest of what identifies ``program``'s answer to ``args``: its real path, inode, size
    and modification time (a binary replaced or upgraded in place gets another) and ``args``,
    when it is an absolute path to a compiled executable (:data:`_BINARY_MAGIC`); else None (a
    bare name would be looked up in the working folder)."""
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
    return digest16(b"binary", real.encode("utf-8", "surrogateescape"),
                    b"%d:%d:%d" % (info.st_ino, info.st_size, info.st_mtime_ns), *(a.encode() for a in args))
