"""Where the cache lives and what of it is ctxengine's: the root, one folder per project, the
code version's folder, their markers, sizes, stats and removal.

One folder per project: ``<root>/projects/<sha256 of the project's real path>[:16]``, the root
being ``DIR/ctxengine-cache`` for a folder the user gives (``--cache-dir DIR``, ``cache_dir=``,
``$CTXENGINE_CACHE_DIR``), else ``$XDG_CACHE_HOME/ctxengine`` or ``~/.cache/ctxengine`` (one
resolver: :func:`ctxengine.nodes.lib.usercache.cache_root`). Every folder ctxengine makes there
is marked (``CACHEDIR.TAG``) and only such folders are ever deleted; a cache folder inside the
project being built, or given through a symbolic link, is refused. Inside a project's folder::

    project.txt           the project's real path (for `ctxengine cache stats` and --stale)
    last_run.json         hits and misses of the last build
    <code version>/       metadata_store.db: Hamilton's metadata, the results, the memo's table

The code version hashes ctxengine's version with the source of its node modules and bundled
configs, so a new version (or an edited helper, which Hamilton's per-node key misses) starts a
fresh folder. The root is bounded by ``cache.maxTotalBytes`` (:func:`prune_root`: folders of
projects that no longer exist first, then the least recently used).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import time
from functools import lru_cache
from pathlib import Path

from .. import configs, nodes
from ..nodes.lib import usercache
from ..nodes.lib.usercache import cache_root
from ..version import __version__

#: The cap of one project's cache folder when the config has no ``cache.maxBytes``.
DEFAULT_MAX_BYTES = 256 << 20
#: The cap of every project folder of a cache root together when the config has no ``cache.maxTotalBytes``.
DEFAULT_MAX_TOTAL_BYTES = 1 << 30
#: Seconds a process waits for another one writing the metadata store (then it builds without
#: storing its results, and says so).
SQLITE_TIMEOUT = 3.0
#: Seconds between two walks of the cache root (:func:`prune_root`) when a process's first build
#: of a project made no new folder (its folder is bounded on its own; the root grows by new ones).
ROOT_PRUNE_EVERY = 3600.0
#: The root's file whose time says when it was last bounded.
ROOT_STAMP = "last_pruned"
PROJECT_FILE = "project.txt"
LAST_RUN_FILE = "last_run.json"
PROJECTS = "projects"
DATABASE = "metadata_store.db"
#: The names of the folders ctxengine makes (and may delete, when they carry its marker).
PROJECT_NAME = re.compile(r"[0-9a-f]{16}")
VERSION_NAME = re.compile(r"[0-9A-Za-z.+_-]+-[0-9a-f]{12}")

# ----------------------------------------------------------------------------- where


def project_cache_dir(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder of one project: named by a hash of its real path, in the root of
    ``cache_dir`` (else the user's)."""
    real = os.path.realpath(os.fspath(project_dir))
    return cache_root(cache_dir) / PROJECTS / hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def checked_project_cache_dir(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """:func:`project_cache_dir`, refused (a :class:`usercache.CacheFolderError`, exit 2) when
    the folder given (or the user's root) is inside the project, by its path or its real path:
    the project could have written what would be read there, or point a link of its own at
    another folder. ``cache_dir`` must be absolute (the CLI and the API resolve a relative one
    against the working folder)."""
    target = project_cache_dir(project_dir, cache_dir)  # a relative cache_dir: refused by cache_root
    given = os.path.normpath(os.fspath(cache_dir)) if cache_dir is not None else os.fspath(cache_root())
    project = os.path.abspath(os.fspath(project_dir))
    for folder, inside in ((given, project), (os.path.realpath(given), os.path.realpath(project))):
        if folder == inside or folder.startswith(inside.rstrip(os.sep) + os.sep):
            raise usercache.CacheFolderError(
                f"cache folder {given} is inside the project {project}: a project's files could be read there "
                "as cached results; give a --cache-dir outside the project (or --no-cache)")
    return target


@lru_cache(maxsize=1)
def code_version() -> str:
    """ctxengine's version and a hash of its node sources and bundled configs (found where the
    install put them: beside this module in a wheel, in the source tree in an editable install)."""
    digest = hashlib.sha256(__version__.encode())
    for folder in code_folders():
        found = []
        for root, dirs, files in os.walk(folder):  # not rglob: about half the time (no Path, no stat per file)
            dirs[:] = [name for name in dirs if name != "__pycache__"]
            found += [(*Path(root).relative_to(folder).parts, name) for name in files
                      if name.endswith((".py", ".yaml", ".yml", ".md", ".json"))]
        for parts in sorted(found):  # Path's order (by parts): the same version as before
            digest.update(f"{folder.name}/{'/'.join(parts)}".encode())
            digest.update(folder.joinpath(*parts).read_bytes())
    return f"{__version__}-{digest.hexdigest()[:12]}"


def code_folders() -> list[Path]:
    """The folders of the node sources and the bundled configs."""
    return [Path(nodes.__file__).resolve().parent, Path(configs.__file__).resolve().parent]


def store_dir(cache_dir: str | os.PathLike) -> Path:
    """Hamilton's folder (metadata and results) inside a project cache folder, for this code."""
    return Path(cache_dir) / code_version()


def open_project_folder(folder: Path) -> Path:
    """A project's cache folder (``<root>/projects/<hash>``) and its code version's folder,
    each made and marked or entered only when it is ctxengine's (see
    :func:`usercache.owned_folder`): never a link, never another user's. The store folder."""
    projects = folder.parent
    if projects.name != PROJECTS or not PROJECT_NAME.fullmatch(folder.name):
        raise usercache.CacheFolderError(f"{folder} is not a project folder of a ctxengine cache root")
    usercache.open_root(projects.parent)
    usercache.owned_folder(projects, "project folders")
    usercache.owned_folder(folder, "one project's cache")
    return usercache.owned_folder(store_dir(folder), "one code version's results")


def prune_root(root: Path, max_total_bytes: int, keep: Path | None = None) -> int:
    """Bound the project folders of a cache root together: when they pass ``max_total_bytes``,
    whole folders go, those of projects that no longer exist first (:func:`stale`), then the
    least recently used, down to 80% of the cap; ``keep`` (the folder just built) stays. Only
    folders ctxengine made go (as :func:`clear` removes them). The bytes removed. Each folder is
    walked once: its size and its newest file come from the same stats. Its time is recorded
    (:func:`root_prune_due`)."""
    with contextlib.suppress(OSError):
        usercache.write_private(root / ROOT_STAMP, "")
    folders = all_cache_dirs(root)
    files = {folder: _file_stats(folder) for folder in folders}
    sizes = {folder: sum(info.st_size for info in found) for folder, found in files.items()}
    total = sum(sizes.values())
    if total <= max_total_bytes:
        return 0
    removed = 0
    newest = {folder: max((info.st_mtime for info in found), default=0.0) for folder, found in files.items()}
    for folder in sorted(folders, key=lambda f: (not stale(f), newest[f])):  # gone projects first, then least recently used
        if total - removed <= max_total_bytes * 0.8:
            break
        if folder != keep and usercache.remove_owned(folder, PROJECT_NAME):
            removed += sizes[folder]
    return removed


def root_prune_due(root: Path) -> bool:
    """Whether the cache root was last bounded (:func:`prune_root`) :data:`ROOT_PRUNE_EVERY`
    seconds ago or more, or never."""
    with contextlib.suppress(OSError):
        return time.time() - os.stat(root / ROOT_STAMP).st_mtime >= ROOT_PRUNE_EVERY
    return True


def total_bytes(root: Path) -> int:
    """The bytes of every project folder of a cache root (what ``cache.maxTotalBytes`` bounds)."""
    return sum(_tree_size(folder) for folder in all_cache_dirs(root))


def stale(folder: Path) -> bool:
    """Whether a project's cache folder belongs to a project that no longer exists (the path in
    its project.txt is gone; a folder without one has not finished a build: not stale)."""
    project = recorded_project(folder)
    return bool(project) and not os.path.isdir(project)


def recorded_project(folder: Path) -> str:
    """The project path a project's cache folder records in its project.txt ("" when it has none
    or it cannot be read)."""
    with contextlib.suppress(OSError, ValueError):
        return (folder / PROJECT_FILE).read_text(encoding="utf-8").strip()
    return ""


def stats(cache_dir: Path) -> dict:
    """Size, entries, the last run's hits and whether the project still exists, of one project's cache folder."""
    entries = 0
    with contextlib.suppress(sqlite3.Error):  # read-only: a missing database is not made (an error, 0 entries)
        path = store_dir(cache_dir) / DATABASE
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=SQLITE_TIMEOUT)) as db:
            entries = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    last = {}
    with contextlib.suppress(OSError, ValueError):
        last = json.loads((cache_dir / LAST_RUN_FILE).read_text(encoding="utf-8"))
    return {
        "folder": str(cache_dir),
        "project": recorded_project(cache_dir),
        "stale": stale(cache_dir),
        "bytes": _tree_size(cache_dir),
        "entries": entries,
        "last_run": {k: last.get(k) for k in ("hits", "misses", "recomputed")} if isinstance(last, dict) and last else None,
    }


def all_cache_dirs(root: Path | None = None) -> list[Path]:
    """Every project cache folder ctxengine made in a cache root (default: the user's)."""
    folder = (cache_root() if root is None else root) / PROJECTS
    return sorted(p for p in _children(folder)
                  if PROJECT_NAME.fullmatch(p.name) and p.is_dir() and not p.is_symlink() and usercache.marked(p))


def clear(cache_dir: Path, name: re.Pattern[str] = PROJECT_NAME) -> int:
    """Remove one project's cache folder (or, with ``name`` :data:`VERSION_NAME`, a code
    version's folder in it) when ctxengine made it (its name and marker); the bytes it held."""
    size = _tree_size(cache_dir)
    return size if usercache.remove_owned(cache_dir, name) else 0


# ----------------------------------------------------------------------------- helpers


def _children(folder: Path) -> list[Path]:
    """The entries of ``folder`` (none when it cannot be read)."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        return [Path(e.path) for e in entries]
    return []


def _file_stats(folder: Path) -> list[os.stat_result]:
    """The lstat of every file under ``folder`` (those that vanish meanwhile left out)."""
    found = []
    for base, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                found.append(os.lstat(os.path.join(base, name)))
    return found


def _tree_size(folder: Path) -> int:
    """The bytes of the files under ``folder``."""
    return sum(info.st_size for info in _file_stats(folder))
