"""Hamilton's cache between runs: where it lives, how it stays safe, bounded and fast.

One folder per project: ``<root>/projects/<sha256 of the project's real path>[:16]``, the root
being ``DIR/ctxengine-cache`` for a folder the user gives (``--cache-dir DIR``, ``cache_dir=``,
``$CTXENGINE_CACHE_DIR``), else ``$XDG_CACHE_HOME/ctxengine`` or ``~/.cache/ctxengine`` (see
:mod:`ctxengine.nodes.lib.usercache`). Every folder ctxengine makes there is marked
(``CACHEDIR.TAG``) and only such folders are ever deleted; a cache folder inside the project
being built, or given through a symbolic link, is refused. Inside a project's folder::

    project.txt           the project's real path (for `ctxengine cache stats` and --stale)
    last_run.json         hits and misses of the last build
    <code version>/       metadata_store.db: Hamilton's metadata and the results (pickles)

The code version hashes ctxengine's version with the source of its node modules and bundled
configs, so a new version (or an edited helper, which Hamilton's per-node key misses) starts a
fresh folder; the old ones are removed by :func:`prune`. A project's folder is bounded by its
``cache.maxBytes``, the root by ``cache.maxTotalBytes`` (:func:`prune_root`: folders of
projects that no longer exist first, then the least recently used). A build's results and
metadata are written in one SQLite transaction after it (WAL; a concurrent writer is waited for
a few seconds, then the build's results are not stored, with a warning); a result is
unpickled only when its HMAC under the user's key checks, else it is discarded and rebuilt
(one warning); a database that is not one is rebuilt (one warning). Hits come from a memory
layer in a warm process and are unpickled only when needed. The folders are private to the user.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import io
import json
import logging
import os
import pickle
import re
import sqlite3
import tempfile
import threading
import types
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from hamilton.caching.adapter import CachingBehavior, CachingEventType, HamiltonCacheAdapter
from hamilton.caching.stores.base import ResultRetrievalError, ResultStore
from hamilton.caching.stores.sqlite import SQLiteMetadataStore

from ..version import __version__
from hamilton.caching import fingerprinting as _hamilton_fingerprints

from ..nodes.lib.digest import DigestedText, digest16, round_digest, text_digest
from ..nodes.lib.monitor import RoundUse
from ..nodes.lib import usercache
from ..nodes.lib.memo import Memo, MemoTable
from ..nodes.lib.code.files import CodeFiles
from ..nodes.lib.code.tags import CodeTags
from ..nodes.types import Round

#: The cap of one project's cache folder when the config has no ``cache.maxBytes``.
DEFAULT_MAX_BYTES = 256 << 20
#: The cap of every project folder of a cache root together when the config has no ``cache.maxTotalBytes``.
DEFAULT_MAX_TOTAL_BYTES = 1 << 30
#: Runs whose history rows stay in the metadata store.
KEEP_RUNS = 20
#: Builds of one process between two prunings of a folder it has not written much to.
PRUNE_EVERY = 50
#: Seconds a process waits for another one writing the metadata store (then it builds without
#: storing its results, and says so).
SQLITE_TIMEOUT = 3.0
PROJECT_FILE = "project.txt"
LAST_RUN_FILE = "last_run.json"
#: The data version of a recomputed value no cached node reads (never part of a cache key).
NOT_VERSIONED = "<not versioned>"
PROJECTS = "projects"
DATABASE = "metadata_store.db"
#: The names of the folders ctxengine makes (and may delete, when they carry its marker).
PROJECT_NAME = re.compile(r"[0-9a-f]{16}")
VERSION_NAME = re.compile(r"[0-9A-Za-z.+_-]+-[0-9a-f]{12}")

# ----------------------------------------------------------------------------- where


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root: ``cache_dir/ctxengine-cache`` for a folder given (absolute), else the
    user's (:func:`usercache.user_cache_root`)."""
    if cache_dir is None:
        return usercache.user_cache_root()
    return usercache.cache_root_in(cache_dir, "--cache-dir")


def graph_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder holding one cache folder per project."""
    return cache_root(cache_dir) / PROJECTS


def project_cache_dir(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache folder of one project: named by a hash of its real path, in the root of
    ``cache_dir`` (else the user's)."""
    real = os.path.realpath(os.fspath(project_dir))
    return graph_root(cache_dir) / hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def checked_project_cache_dir(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """:func:`project_cache_dir`, refused (a :class:`usercache.CacheFolderError`, exit 2) when
    the folder given (or the user's root) is inside the project, by its path or its real path:
    the project could have written what would be read there, or point a link of its own at
    another folder. ``cache_dir`` must be absolute (the CLI and the API resolve a relative one
    against the working folder)."""
    if cache_dir is not None and not os.path.isabs(os.fspath(cache_dir)):
        raise usercache.CacheFolderError(f"--cache-dir {os.fspath(cache_dir)!r}: not an absolute path")
    given = os.path.normpath(os.fspath(cache_dir)) if cache_dir is not None else os.fspath(cache_root())
    project = os.path.abspath(os.fspath(project_dir))
    for folder, inside in ((given, project), (os.path.realpath(given), os.path.realpath(project))):
        if folder == inside or folder.startswith(inside.rstrip(os.sep) + os.sep):
            raise usercache.CacheFolderError(
                f"cache folder {given} is inside the project {project}: a project's files could be read there "
                "as cached results; give a --cache-dir outside the project (or --no-cache)")
    return project_cache_dir(project_dir, cache_dir)


@lru_cache(maxsize=1)
def code_version() -> str:
    """ctxengine's version and a hash of its node sources and bundled configs (found where the
    install put them: beside this module in a wheel, in the source tree in an editable install)."""
    digest = hashlib.sha256(__version__.encode())
    for folder in code_folders():
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".md", ".json") and "__pycache__" not in path.parts:
                digest.update(f"{folder.name}/{path.relative_to(folder).as_posix()}".encode())
                digest.update(path.read_bytes())
    return f"{__version__}-{digest.hexdigest()[:12]}"


def code_folders() -> list[Path]:
    """The folders of the node sources and the bundled configs."""
    from .. import configs, nodes

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


# ----------------------------------------------------------------------------- stores


#: The first bytes of a stored result: the format, then a digest of the pickle that follows.
_MAGIC = b"ctxengine-result-1\n"
#: Pickled bytes of results the memory layer of one process keeps (least recently used out).
MEMORY_MAX_BYTES = 64 << 20
_UNSET = object()


class StaleResult(Exception):
    """A stored result whose pickle no longer loads (found only when a node needed its value)."""

    def __init__(self, data_version: str, reason: str) -> None:
        super().__init__(f"cached result {data_version} does not load: {reason}")
        self.data_version = data_version


class Lazy:
    """A stored result read from disk but not unpickled yet. A hit whose dependents are all hits
    too is never unpickled (the 4 MB parsed transcript of an unchanged rebuild); a node that
    runs gets the value (:func:`materialize`), as does the caller of the driver."""

    __slots__ = ("data_version", "_payload", "_value", "_store")

    def __init__(self, data_version: str, payload: bytes, store: "SQLiteResultStore") -> None:
        self.data_version, self._payload, self._value, self._store = data_version, payload, _UNSET, store

    def load(self) -> Any:
        if self._value is _UNSET:
            try:
                self._value = self._store.loads(self._payload)
            except Exception as exc:  # noqa: BLE001 - a shared part pruned, a class changed outside the nodes
                raise StaleResult(self.data_version, f"{type(exc).__name__}: {exc}") from None
            MEMORY.put(self.data_version, self._value, len(self._payload))
            self._payload = b""
        return self._value


#: A tuple this long inside a stored value is stored once, in chunks of this many items, each
#: by its fingerprint, and referred to by every value holding it (the transcript's rounds sit
#: in some twenty values): a transcript that grew by one round stores one new chunk.
SHARED_MIN_ITEMS = 128
#: A text this long (characters) is stored once by its digest and referred to by every value
#: holding it (the fitted context sits in half a dozen values of a build).
SHARED_MIN_CHARS = 1 << 16
_SHARED = "shared-"


class _SharingPickler(pickle.Pickler):
    """Pickles a value with each long tuple in it replaced by the keys of its chunks."""

    def __init__(self, file, store: "SQLiteResultStore") -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.store = store

    def persistent_id(self, obj: Any) -> tuple | str | None:
        kind = type(obj)
        if kind is tuple and len(obj) >= SHARED_MIN_ITEMS:
            return self.store.chunk_keys(obj)
        if kind is str and len(obj) >= SHARED_MIN_CHARS:
            return self.store.text_key(obj)
        return None


class _SharingUnpickler(pickle.Unpickler):
    def __init__(self, file, store: "SQLiteResultStore") -> None:
        super().__init__(file)
        self.store = store

    def persistent_load(self, pid: tuple | str) -> Any:
        return self.store.shared(pid) if isinstance(pid, str) else self.store.joined(pid)


def materialize(value: Any) -> Any:
    """``value``, unpickled first when it is a :class:`Lazy` stored result."""
    return value.load() if type(value) is Lazy else value


class MemoryLayer:
    """Results by data version in this process, in front of the folders (a data version is a
    fingerprint of the value, so it names the same value in any folder): a warm process (the
    API, a Session, a server) serves a hit without reading or unpickling a file. Bounded by the
    pickled size of what it holds; nodes never mutate their inputs, so values are shared."""

    def __init__(self, max_bytes: int = MEMORY_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, data_version: str) -> bool:
        return data_version in self._items

    def get(self, data_version: str) -> Any:
        """The value, or :data:`_UNSET`."""
        with self._lock:
            item = self._items.get(data_version)
            if item is None:
                return _UNSET
            self._items.move_to_end(data_version)
            return item[0]

    def put(self, data_version: str, value: Any, size: int) -> None:
        if size > self.max_bytes // 4:
            return  # one value never pushes out everything else
        with self._lock:
            old = self._items.pop(data_version, None)
            self.bytes += size - (old[1] if old else 0)
            self._items[data_version] = (value, size)
            while self.bytes > self.max_bytes and self._items:
                _, (_, gone) = self._items.popitem(last=False)
                self.bytes -= gone

    def discard(self, data_version: str) -> None:
        with self._lock:
            item = self._items.pop(data_version, None)
            if item is not None:
                self.bytes -= item[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0


#: The memory layer of this process (``MEMORY.clear()`` empties it).
MEMORY = MemoryLayer()


class SQLiteResultStore(ResultStore):
    """Results as rows of the folder's SQLite file, beside Hamilton's metadata: a build's new
    results and their metadata are written in one transaction after it (one file per result
    and a commit per node cost more than the build), so two processes sharing the folder see
    either all of a build's results or none. Each row keeps a digest of its pickle: a torn or
    foreign row is a retrieval error, so the node recomputes. A hit comes from :data:`MEMORY`,
    else its row is read and checked but unpickled only when a value is needed
    (:class:`Lazy`); its time of last use (for pruning, least recently used first) is
    refreshed at most once an hour, so an unchanged rebuild writes almost nothing."""

    TOUCH_AFTER = 3600.0

    def __init__(self, metadata: "_MetadataStore", key: bytes) -> None:
        self.metadata = metadata
        self.key = key  # the user's MAC key (usercache.cache_key): a row whose MAC fails is never unpickled
        self.warned = False  # a forged row was reported in this build
        self.written = 0  # bytes stored by this process since the last prune
        self._pending: dict[str, bytes] = {}
        self._touched: set[str] = set()
        self._memo: dict = {}
        self._chunked: dict[int, tuple] = {}  # long tuple (by identity) -> its chunk keys, this run
        self._shared_here: set[str] = set()  # chunk keys known to be in this folder (this build)
        #: the memo's table (nodes/lib/memo.py), written with the results
        self.memo_table = MemoTable(lambda: metadata.connection, key, str(metadata._directory / DATABASE))
        with _suppress(sqlite3.Error):
            metadata.connection.execute(
                "CREATE TABLE IF NOT EXISTS results (data_version TEXT PRIMARY KEY, digest BLOB NOT NULL, "
                "payload BLOB NOT NULL, size INTEGER NOT NULL, used REAL NOT NULL)")
            metadata.connection.commit()

    @property
    def memo(self) -> dict:
        """The run's fingerprints by identity (set by the adapter before it stores a value)."""
        return self._memo

    @memo.setter
    def memo(self, memo: dict) -> None:
        if memo is not self._memo:
            self._memo, self._chunked = memo, {}

    def sign(self, data_version: str, payload: bytes) -> bytes:
        """The MAC of a row: its data version and pickle, under the user's key."""
        return usercache.mac(self.key, data_version.encode("utf-8", "surrogatepass"), payload)

    def _authentic(self, data_version: str, tag: bytes, payload: bytes) -> bool:
        """Whether a row's MAC checks; a row that fails is reported (once a build), then
        discarded by the caller and rebuilt: it was not written by this user's ctxengine."""
        if usercache.mac_ok(self.key, tag, data_version.encode("utf-8", "surrogatepass"), payload):
            return True
        if not self.warned:
            self.warned = True
            _WARN.warning("warning: cache: a stored result in %s does not carry this user's MAC (written by "
                          "someone else, or torn); it is discarded and rebuilt", self.metadata._directory)
        return False

    def _row(self, data_version: str, columns: str):
        try:
            return self.metadata.connection.execute(
                f"SELECT {columns} FROM results WHERE data_version = ?", (data_version,)).fetchone()
        except sqlite3.Error:
            return None

    def exists(self, data_version: str) -> bool:
        """Whether a hit can be served (from memory, which holds values by content, or this folder)."""
        return data_version in MEMORY or self.stored(data_version)

    def stored(self, data_version: str) -> bool:
        """Whether this folder holds the result (or will, after the flush)."""
        return data_version in self._pending or self._row(data_version, "1") is not None

    def set(self, data_version: str, result: Any, saver_cls=None, loader_cls=None, **kwargs) -> None:
        """Keep a result for the flush after the build; one that does not pickle is not cached."""
        if saver_cls is not None:
            return  # @cache(format=...) materializers: not used by ctxengine's nodes
        try:
            result = materialize(result)
            buffer = io.BytesIO()
            _SharingPickler(buffer, self).dump(result)
            payload = buffer.getvalue()
        except Exception as exc:  # noqa: BLE001 - an unpicklable value never fails a build
            _LOGGER.debug("result %s not cached: %s", data_version, exc)
            return
        MEMORY.put(data_version, result, len(payload))
        self._pending[data_version] = payload

    def chunk_keys(self, items: tuple) -> tuple[str, ...] | None:
        """The keys of the chunks of a long tuple, each stored once in this folder (and kept as
        recent as the values that refer to it); None when part of it cannot be fingerprinted."""
        known = self._chunked.get(id(items))
        if known is not None and known[0] is items:
            return known[1]
        keys = []
        for part in chunks_of(items):
            try:
                fp = chunk_fingerprint(part, self.memo)
            except _Unhashable:
                return None
            keys.append(_SHARED + fp)
            self._keep_shared(keys[-1], part)
        self._chunked[id(items)] = (items, tuple(keys))
        return tuple(keys)

    def _keep_shared(self, key: str, part: tuple | str) -> None:
        if key in self._pending or key in self._shared_here:
            return
        row = self._row(key, "used")
        if row is None:
            data = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
            self._pending[key] = data
            MEMORY.put(key, part, len(data))
        else:  # as recent as the value now stored that refers to it: pruning never takes it first
            self._touched.add(key)
        self._shared_here.add(key)

    def text_key(self, text: str) -> str:
        """The key of a long text stored once in this folder (kept as recent as what refers to it)."""
        key = _SHARED + "t" + _long_text_digest(text, self.memo).hex()
        self._keep_shared(key, text)
        return key

    def joined(self, keys: tuple[str, ...]) -> tuple:
        """A long tuple from its chunks (from memory, else each unpickled from its row once)."""
        return tuple(item for key in keys for item in self.shared(key))

    def shared(self, key: str) -> Any:
        """A shared part: from memory, else unpickled from its row (checked) once."""
        value = MEMORY.get(key)
        if value is _UNSET:
            payload = self._pending.get(key)
            if payload is None:
                row = self._row(key, "digest, payload")
                if row is None or not self._authentic(key, row[0], row[1]):
                    raise ResultRetrievalError(f"shared part {key} is gone, torn or not ours")
                payload = row[1]
            value = pickle.loads(payload)
            MEMORY.put(key, value, len(payload))
        return value

    def loads(self, payload: bytes) -> Any:
        return _SharingUnpickler(io.BytesIO(payload), self).load()

    def get(self, data_version: str, **kwargs) -> Any:
        value = MEMORY.get(data_version)
        if value is not _UNSET:
            return value
        payload = self._pending.get(data_version)
        if payload is None:
            row = self._row(data_version, "digest, payload, used")
            if row is None:
                raise ResultRetrievalError(f"result {data_version} is gone")
            tag, payload, used = row
            if not self._authentic(data_version, tag, payload):
                raise ResultRetrievalError(f"result {data_version} is torn or not ours")
            if used < _now() - self.TOUCH_AFTER:
                self._touched.add(data_version)
        return Lazy(data_version, payload, self)

    def delete(self, data_version: str) -> None:
        MEMORY.discard(data_version)
        self._pending.pop(data_version, None)
        with _suppress(sqlite3.Error):
            self.metadata.connection.execute("DELETE FROM results WHERE data_version = ?", (data_version,))
            self.metadata.connection.commit()

    def delete_all(self) -> None:
        self._pending.clear()
        with _suppress(sqlite3.Error):
            self.metadata.connection.execute("DELETE FROM results")
            self.metadata.connection.commit()

    def flush(self, memo_entries: dict | None = None, memo_max_bytes: int = DEFAULT_MAX_BYTES // 4) -> None:
        """Write the results kept since the last flush, with their metadata and the memo's new
        entries (``memo_entries``, the table kept within ``memo_max_bytes``), in one transaction
        (a failure, such as a full disk or a lock held past the timeout, forgets them)."""
        pending, touched = self._pending, self._touched
        self._pending, self._touched, self.warned = {}, set(), False
        self._shared_here = set()  # within one build only: another process may prune the folder
        rows = self.metadata.take_pending()
        if not (pending or touched or rows or memo_entries):
            return
        if self.metadata.busy:  # another process held the write lock past the timeout at the start
            _WARN.warning("warning: cache: %s is being written by another process; this build waited %.0f s, "
                          "then built without storing its results", self.metadata._directory, SQLITE_TIMEOUT)
            return
        now = _now()
        try:
            cur = self.metadata.connection.cursor()
            cur.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)",
                            [(dv, self.sign(dv, data), data, len(data), now) for dv, data in pending.items()])
            cur.executemany("UPDATE results SET used = ? WHERE data_version = ?", [(now, dv) for dv in touched])
            self.metadata.write_rows(cur, rows)
            if memo_entries:
                self.memo_table.write(cur, memo_entries, memo_max_bytes)
            self.metadata.connection.commit()
            self.written += sum(map(len, pending.values()))
        except sqlite3.Error as exc:  # a full disk, a file size limit: the next build tries again
            log = _WARN.warning if "locked" in str(exc) else _LOGGER.debug
            log("warning: cache: this build's results were not stored in %s: %s", self.metadata._directory, exc)
            with _suppress(sqlite3.Error):
                self.metadata.connection.rollback()


def _now() -> float:
    import time

    return time.time()


class _MetadataStore(SQLiteMetadataStore):
    """SQLite with a long busy timeout and WAL: concurrent builds wait, readers never block."""

    def __init__(self, path: str) -> None:
        super().__init__(path, connection_kwargs={"timeout": SQLITE_TIMEOUT})
        self._known: OrderedDict[str, str] = OrderedDict()  # cache key -> data version, seen by this process

    # A metadata store that cannot be read or written (disk full, file size limit, a lock held
    # past the timeout) makes the run uncached, never failed: a failed read is a miss, a failed
    # write is forgotten. A key this process has read or written is answered from memory (a
    # result pruned meanwhile by another process is then missing, and recomputed).
    def get(self, cache_key: str) -> str | None:
        known = self._known.get(cache_key)
        if known is not None:
            return known
        try:
            found = super().get(cache_key)
        except sqlite3.Error:
            return None
        if found is not None:
            self._remember(cache_key, found)
        return found

    def _remember(self, cache_key: str, data_version: str) -> None:
        self._known[cache_key] = data_version
        if len(self._known) > 20_000:
            self._known.popitem(last=False)

    def set(self, *, cache_key: str, data_version: str, run_id: str, node_name: str | None = None,
            code_version: str | None = None, **kwargs: Any) -> None:
        """Remembered now, written by :meth:`flush` after the run: one transaction a build, not a
        commit per node (a result is always written before the metadata pointing at it)."""
        self._remember(cache_key, data_version)
        self.__dict__.setdefault("_pending", []).append((cache_key, run_id, node_name, code_version, data_version))

    def take_pending(self) -> list[tuple]:
        """The metadata rows set since the last call (written by :meth:`SQLiteResultStore.flush`)."""
        pending, self._pending = self.__dict__.get("_pending") or [], []
        return pending

    @staticmethod
    def write_rows(cur: sqlite3.Cursor, rows: list[tuple]) -> None:
        cur.executemany("INSERT INTO history (cache_key, run_id) VALUES (?, ?)", [row[:2] for row in rows])
        cur.executemany("INSERT OR IGNORE INTO cache_metadata (cache_key, node_name, code_version, data_version) "
                        "VALUES (?, ?, ?, ?)", [(k, n, c, d) for k, _, n, c, d in rows])

    busy = False  # the write lock was held by another process past the timeout at the start of this run

    def initialize(self, run_id) -> None:
        """A run's row; when another process holds the write lock past :data:`SQLITE_TIMEOUT`,
        the run goes on (hits are read: WAL readers never wait) and stores nothing."""
        self.busy = False
        try:
            super().initialize(run_id)
        except sqlite3.Error as exc:
            self.busy = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
            with _suppress(sqlite3.Error):
                self.connection.rollback()

    def delete(self, cache_key: str) -> None:
        self._known.pop(cache_key, None)
        with _suppress(sqlite3.Error):
            super().delete(cache_key)

    def _get_connection(self) -> sqlite3.Connection:
        fresh = not hasattr(self._thread_local, "connection")
        connection = super()._get_connection()
        if fresh:
            with _suppress(sqlite3.Error):
                if connection.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new file (else it needs the write lock)
                    connection.execute("PRAGMA auto_vacuum=INCREMENTAL")  # pruning can give pages back
                connection.execute("PRAGMA journal_size_limit=4194304")
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
        return connection


#: Containers longer than this are hashed through their pickle (C speed). The choice never
#: depends on where a value sits, so a value hashes the same inside any other.
_WIDE = 64
_SCALARS = (str, bytes, int, float, bool, type(None))


def fingerprint(value: Any, memo: dict | None = None) -> str | None:
    """A content hash of ``value``, or None when part of it neither pickles nor is a function.

    Lists, tuples and dicts (up to 64 items), sets and dataclasses are walked, and each one's
    hash is remembered by identity in ``memo`` (one run: a node's value shares its sections with its
    inputs, so the 4 MB history section is hashed once a run, not once a node); a tuple of more
    than :data:`SHARED_MIN_ITEMS` items is hashed by its chunks of that many, as the result store
    keeps it (:func:`chunk_fingerprint`: a chunk of values that cannot change is remembered for
    the process); wider containers and other objects are hashed through their pickle; sets are
    walked in sorted order. Equal hashes mean equal values (types
    and field names included), so a fingerprint never serves a stale result; two equal values
    may hash apart (shared references, or a set deep inside a pickle, whose order follows the
    process's string hashing), which only costs a recomputation.
    """
    try:
        return _fp(value, {} if memo is None else memo)
    except _Unhashable:
        return None


class _Unhashable(Exception):
    pass


def _digest(*parts: bytes) -> str:
    return digest16(*parts).hex()


def _fp(value: Any, memo: dict) -> str:
    kind = type(value)
    if kind in _SCALARS:
        return _digest(_part(value, memo))
    by_content = _BY_CONTENT.get(kind)
    if by_content is not None:  # a digest computed when the value was made
        return by_content(value)
    known = memo.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    if isinstance(value, types.FunctionType):
        cells = tuple(cell.cell_contents for cell in (value.__closure__ or ()))
        result = _digest(b"fn", value.__module__.encode(), value.__qualname__.encode(),
                         _fp(cells, memo).encode(), _fp(value.__defaults__, memo).encode())
    elif kind is tuple and len(value) > SHARED_MIN_ITEMS:  # by its chunks, as the result store keeps it
        result = _digest(b"chunks", *[chunk_fingerprint(part, memo).encode() for part in chunks_of(value)])
    elif kind is tuple and value and all(type(item) is Round for item in value):  # rounds: by their digests
        result = _digest(b"rounds", *map(round_digest, value))
    elif kind is tuple and len(value) > _WIDE and all(type(item) in _PLAIN for item in value):
        result = _pickled(value)  # a long tuple of plain values (a round's token uses): one pickle, C speed
    elif kind is tuple or (kind is list and len(value) <= _WIDE):  # a tuple never changes: walked at any length
        result = _digest(kind.__name__.encode(), *[_part(item, memo) for item in value])
    elif kind in (set, frozenset):  # the pickle of a set follows the per-process string hash order
        result = _digest(kind.__name__.encode(), *sorted(_part(item, memo) for item in value))
    elif kind is dict and len(value) <= _WIDE:
        result = _digest(b"dict", *[b"%d:%s=%s" % (len(key), key, _part(v, memo))
                                    for key, v in ((_part(k, memo), v) for k, v in value.items())])
    elif (fields := _FIELDS.get(kind)) is not None or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        if fields is None:
            fields = _FIELDS[kind] = (f"{kind.__module__}.{kind.__qualname__}".encode(),
                                      tuple(f.name for f in dataclasses.fields(value)))
        result = _digest(fields[0], *[b"%s=%s" % (name.encode(), _part(getattr(value, name), memo))
                                      for name in fields[1]])
    else:
        result = _pickled(value)
    memo[id(value)] = (value, result)
    return result


def _round_fingerprint(value: Round, *args: Any, **kwargs: Any) -> str:
    """A round's fingerprint: its content digest, set when it was made (``Round.digest``)."""
    return "r" + round_digest(value).hex()


def _text_fingerprint(value: DigestedText, *args: Any, **kwargs: Any) -> str:
    """A long text's fingerprint: its content digest, computed when it was read."""
    return "t" + value.digest.hex()


def _memo_fingerprint(value: Memo, *args: Any, **kwargs: Any) -> str:
    """The memo's fingerprint: always the same (what it holds never changes a node's value)."""
    return "memo"


def _code_fingerprint(value: CodeFiles | CodeTags, *args: Any, **kwargs: Any) -> str:
    """The code stage's files or tags: the digest of the files' contents, computed as they were read."""
    return ("cf" if isinstance(value, CodeFiles) else "ct") + value.digest.hex()


#: Types fingerprinted by a digest of their content computed when the value was made, here and
#: through Hamilton's public hook (``fingerprinting.hash_value``) for Hamilton's own hashing.
_BY_CONTENT = {Round: _round_fingerprint, DigestedText: _text_fingerprint, Memo: _memo_fingerprint,
               CodeFiles: _code_fingerprint, CodeTags: _code_fingerprint}
for _type, _function in _BY_CONTENT.items():
    _hamilton_fingerprints.hash_value.register(_type)(_function)


def chunks_of(items: tuple) -> list[tuple]:
    """``items`` in chunks of :data:`SHARED_MIN_ITEMS` (the last one shorter): how a long tuple
    is fingerprinted and stored."""
    return [items[start:start + SHARED_MIN_ITEMS] for start in range(0, len(items), SHARED_MIN_ITEMS)]


def chunk_fingerprint(part: tuple, memo: dict) -> str:
    """The fingerprint of one chunk of a long tuple (:data:`SHARED_MIN_ITEMS` items) (raises
    _Unhashable as :func:`_fp` does)."""
    return _fp(part, memo)


#: Texts longer than this (characters) enter a hash by their own digest (nodes/lib/digest.py).
_LONG_TEXT = 1 << 16

#: Values whose pickle is their content: a long tuple of these is hashed through one pickle.
_PLAIN = frozenset({*_SCALARS, RoundUse})

#: Dataclass types met -> (qualified name, field names).
_FIELDS: dict[type, tuple[bytes, tuple[str, ...]]] = {}


def _part(value: Any, memo: dict) -> bytes:
    """How ``value`` enters the hash of what holds it: a scalar by its bytes (tagged with its
    type, so "1" and 1 differ), anything else by its own fingerprint."""
    kind = type(value)
    if kind is str:
        if len(value) > _LONG_TEXT:  # by its digest, computed once a run
            return b"S" + _long_text_digest(value, memo)
        return b"s" + value.encode("utf-8", "surrogatepass")
    if kind in _SCALARS:
        return kind.__name__.encode() + b":" + repr(value).encode()
    return b"#" + _fp(value, memo).encode()


def _long_text_digest(text: str, memo: dict) -> bytes:
    """The digest of a long text, computed once a run (``memo``: the run's fingerprints; the
    fitted context and the transcript sit in several values of a build)."""
    known = memo.get(id(text))
    if known is not None and known[0] is text:
        return known[1]
    digest = text_digest(text)
    memo[id(text)] = (text, digest)
    return digest


def _pickled(value: Any) -> str:
    buffer = io.BytesIO()
    try:
        pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:  # noqa: BLE001 - closures, locks: not ours to hash
        raise _Unhashable(str(exc)) from None
    return "p" + _digest(buffer.getvalue())[1:]


_LOGGER = logging.getLogger("hamilton.caching")
#: Warnings the user sees (on stderr in the CLI): a forged entry, a busy or corrupt database.
_WARN = logging.getLogger("ctxengine.cache")
_KEPT_EVENTS = frozenset({
    CachingEventType.GET_RESULT, CachingEventType.EXECUTE_NODE, CachingEventType.SET_RESULT,
    CachingEventType.MISSING_RESULT, CachingEventType.FAILED_RETRIEVAL, CachingEventType.FAILED_EXECUTION,
    CachingEventType.UNHASHABLE_DATA_VERSION, CachingEventType.IS_OVERRIDE,
})


#: The same set by identity (an enum's hash is computed in Python: 5,000 events a build).
_KEPT_IDS = frozenset(map(id, _KEPT_EVENTS))
_DEFAULT, _RECOMPUTE = CachingBehavior.DEFAULT, CachingBehavior.RECOMPUTE


_NO_STORE = object()
#: Driver inputs no cache key depends on: the memo (nodes/lib/memo.py) keeps values by the
#: digest of their content, so what it holds never changes what a node returns.
IGNORED_INPUTS = ("memo",)
_IGNORE = CachingBehavior.IGNORE


class CacheAdapter(HamiltonCacheAdapter):
    """Hamilton's cache adapter with a fast path for the plain case (no task-based execution,
    every node DEFAULT or RECOMPUTE), where Hamilton's own bookkeeping costs more than a hit:
    the cache key is a digest of the node's code version and its inputs' data versions, a hit
    is served without re-reading the metadata, and a recomputed node is fingerprinted only when
    a cached node reads it. What Hamilton logs for a node (its cache logs) stays the same for
    what the tests and ``run_summary`` read: ``get_result: hit`` and ``execute_node``."""

    home: str | os.PathLike | None = None

    def _stores(self) -> Stores:
        current = _CURRENT.get()
        if current is None:
            if self.home is None:
                raise RuntimeError("a cached driver ran outside ctxengine.caching.using(folder) and has no folder")
            current = stores_for(self.home)
        return current

    # Hamilton's adapter reads these two attributes; they follow the folder of the run.
    metadata_store = property(lambda self: self._stores().metadata, lambda self, value: None)
    result_store = property(lambda self: self._stores().results, lambda self, value: None)

    def pre_node_execute(self, *, run_id, node_, kwargs, task_id=None, **future_kwargs):
        behaviors, name = self.behaviors[run_id], node_.name
        behavior = behaviors[name]
        if behavior is _RECOMPUTE:
            return  # no cache key: a recomputed node is never looked up
        if task_id is not None or behavior is not _DEFAULT:
            return super().pre_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id, **future_kwargs)
        kwargs = self._resolve_default_parameter_values(node_, kwargs) if node_.default_parameter_values else kwargs
        versions = self.data_versions[run_id]
        parts = [name.encode(), self.code_versions[run_id][name].encode()]
        for dep in sorted(kwargs):
            if behaviors.get(dep) is _IGNORE:
                parts.append(f"{dep}=<ignore>".encode())
                continue
            if behaviors.get(dep, _DEFAULT) not in (_DEFAULT, _RECOMPUTE):
                return super().pre_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id,
                                                **future_kwargs)
            version = versions.get(dep)
            if version is None or isinstance(version, dict):
                version = versions[dep] = self._version_data(dep, run_id, kwargs[dep])
            if version.startswith("<unhashable>"):
                version = f"<unhashable>_{os.urandom(8).hex()}"  # never a hit
            parts.append(f"{dep}={version}".encode())
        self.cache_keys[run_id][name] = f"{name}-{_digest(*parts)}"

    def do_node_execute(self, *, run_id, node_, kwargs, task_id=None, **future_kwargs):
        """A recomputed node runs, and its value is fingerprinted only when a cached node reads
        it; a cached node whose key the metadata knows and whose result is there is a hit."""
        behavior, name = self.behaviors[run_id][node_.name], node_.name
        if task_id is not None or behavior not in (_DEFAULT, _RECOMPUTE):
            return super().do_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id, **future_kwargs)
        if behavior is _DEFAULT:
            key = self.cache_keys[run_id].get(name)
            data_version = self.metadata_store.get(cache_key=key) if key else None
            if data_version is not None and self.result_store.exists(data_version):
                try:
                    result = self.result_store.get(data_version=data_version)
                except ResultRetrievalError:
                    self.metadata_store.delete(cache_key=key)
                    self.result_store.delete(data_version)
                else:
                    self.data_versions[run_id][name] = data_version
                    self.__dict__.setdefault("_hits", {}).setdefault(run_id, set()).add(name)
                    self._log_event(run_id, name, "result_store", CachingEventType.GET_RESULT, "hit", data_version)
                    return result
            return super().do_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id, **future_kwargs)
        result = self._execute_node(run_id=run_id, node_name=name, node_callable=node_.callable,
                                    node_kwargs=self._resolve_default_parameter_values(node_, kwargs))
        if name in self._versioned(run_id):
            self.data_versions[run_id][name] = self._version_data(name, run_id, result)
        return result

    def _execute_node(self, run_id, node_name, node_callable, node_kwargs, task_id=None):
        """A node that runs gets its inputs' values (a hit read from disk is unpickled now)."""
        kwargs = {name: materialize(value) for name, value in node_kwargs.items()}
        return super()._execute_node(run_id=run_id, node_name=node_name, node_callable=node_callable,
                                     node_kwargs=kwargs, task_id=task_id)

    def resolve_behaviors(self, run_id: str) -> dict:
        """Hamilton's behaviors, resolved once per graph (about 1 ms a run otherwise)."""
        graph = self._fn_graphs[run_id]
        known = self.__dict__.get("_behavior_memo")
        if known is None or known[0] is not graph:
            self._behavior_memo = known = (graph, super().resolve_behaviors(run_id))
        return dict(known[1])

    def resolve_code_versions(self, run_id: str, final_vars=None, inputs=None, overrides=None) -> dict:
        """Hamilton's code versions of the nodes a run needs, resolved once per graph, outputs and overrides."""
        graph = self._fn_graphs[run_id]
        key = (id(graph), tuple(final_vars or ()), tuple(sorted(inputs or ())), tuple(sorted(overrides or ())))
        memo = self.__dict__.setdefault("_code_versions_memo", {})
        if memo.get(key, (None,))[0] is not graph:
            if len(memo) > 64:
                memo.clear()
            memo[key] = (graph, super().resolve_code_versions(run_id=run_id, final_vars=final_vars, inputs=inputs,
                                                              overrides=overrides))
        return dict(memo[key][1])

    def post_node_execute(self, *, run_id, node_, result, success=True, error=None, task_id=None, **kwargs):
        if success and (self.behaviors[run_id][node_.name] is not _DEFAULT
                        or node_.name in self.__dict__.get("_hits", {}).get(run_id, ())):
            return  # recomputed (never stored) or a hit (stored already)
        store = self.result_store
        store.memo = self.__dict__.setdefault("_fp_memo", {}).setdefault(run_id, {})
        data_version = self.data_versions[run_id].get(node_.name)
        if success and task_id is None and isinstance(data_version, str):
            if not store.stored(data_version):  # in this folder (memory may hold it from another)
                store.set(data_version, result)
                self._log_event(run_id, node_.name, "result_store", CachingEventType.SET_RESULT, None, data_version)
            return
        super().post_node_execute(run_id=run_id, node_=node_, result=result, success=success, error=error,
                                  task_id=task_id, **kwargs)

    def _log_event(self, run_id, node_name, actor, event_type, msg=None, value=None, task_id=None) -> None:
        """Hamilton logs about ten events a node (a dataclass with a timestamp each); only those
        that say what happened to a node are kept (all of them at logging.DEBUG)."""
        if id(event_type) in _KEPT_IDS or _LOGGER.isEnabledFor(logging.DEBUG):
            super()._log_event(run_id=run_id, node_name=node_name, actor=actor, event_type=event_type,
                               msg=msg, value=value, task_id=task_id)

    def _version_data(self, node_name: str, run_id: str, result: Any, task_id: str | None = None) -> str:
        """The fingerprint of a value (:func:`fingerprint`, 10-50x faster than Hamilton's
        recursive hash; Hamilton's for what neither pickles nor is a function). A recomputed
        value that no cached node reads is not fingerprinted: no cache key ever uses it."""
        if node_name is not None and run_id in self.behaviors and node_name not in self._versioned(run_id):
            return NOT_VERSIONED
        memo = self.__dict__.setdefault("_fp_memo", {}).setdefault(run_id, {})
        result = materialize(result)
        quick = fingerprint(result, memo)
        if quick is not None:
            return quick
        return super()._version_data(node_name=node_name, run_id=run_id, result=result, task_id=task_id)  # UNHASHABLE: always a miss

    def _versioned(self, run_id: str) -> frozenset[str]:
        """The nodes whose value enters a cache key or is stored: the cached nodes and their inputs."""
        graph, behaviors = self._fn_graphs[run_id], self.behaviors[run_id]
        known = self.__dict__.get("_versioned_memo")
        if known is None or known[0] is not graph:
            cached = [n for n in graph.nodes.values() if behaviors.get(n.name) == CachingBehavior.DEFAULT]
            names = {n.name for n in cached} | {d.name for n in cached for d in n.dependencies
                                                 if behaviors.get(d.name) is not _IGNORE}
            self._versioned_memo = known = (graph, frozenset(names))
        return known[1]

    def _set_stored_metadata(self, run_id, node_name, cache_key, data_version, task_id=None):
        """Only cached nodes are looked up later: a recomputed node's metadata is not written
        (a SQLite commit each, the largest part of a cached run's overhead)."""
        if self.behaviors[run_id][node_name] == CachingBehavior.DEFAULT:
            super()._set_stored_metadata(run_id=run_id, node_name=node_name, cache_key=cache_key,
                                         data_version=data_version, task_id=task_id)

    def version_code(self, node_name: str, run_id: str | None = None) -> str:
        """The code version of a node: the folder's :func:`code_version` (every node source and
        helper) with the node's name and function. Hamilton's own (inspect + ast of each node's
        source, every run) costs about 5 ms a node, half a second a fresh process."""
        memo = self.__dict__.setdefault("_code_memo", {})
        if node_name not in memo:
            run_id = self.last_run_id if run_id is None else run_id
            fn = getattr(self._fn_graphs[run_id].nodes[node_name], "originating_functions", None) or ()
            where = ",".join(f"{f.__module__}.{f.__qualname__}" for f in fn)
            memo[node_name] = _digest(code_version().encode(), node_name.encode(), where.encode())
        return memo[node_name]

    def forget_runs(self, keep: int = 1) -> None:
        """Drop what the adapter keeps in memory of every run but the last ``keep``."""
        old, self.run_ids = self.run_ids[:-keep], self.run_ids[-keep:]
        for run_id in old:
            for table in (self.__dict__.get("_fp_memo", {}), self.__dict__.get("_hits", {}), self._fn_graphs, self._data_savers, self._data_loaders, self.behaviors,
                          self.data_versions, self.code_versions, self.cache_keys, self._logs):
                table.pop(run_id, None)


class Stores:
    """The metadata and result stores of one cache folder (for the code version in use)."""

    def __init__(self, cache_dir: str | os.PathLike) -> None:
        root = open_project_folder(Path(cache_dir))
        self.folder = os.fspath(cache_dir)
        self.key = usercache.cache_key()
        self.metadata = open_metadata(root)
        self.results = SQLiteResultStore(self.metadata, self.key)
        self.memo_table = self.results.memo_table
        self.written_files: dict[str, str] = {}  # project.txt and last_run.json as last written
        self.runs_since_prune: int | None = None

    def forget_results(self) -> None:
        """Delete every result and its metadata: a stored pickle that no longer loads was written
        by code that differs from this one in a way the code version did not see."""
        self.results.delete_all()
        self.metadata._known.clear()
        with _suppress(sqlite3.Error):
            self.metadata.connection.execute("DELETE FROM cache_metadata")
            self.metadata.connection.commit()


def open_metadata(folder: Path) -> "_MetadataStore":
    """The metadata store of a code version's folder; a file that is not an SQLite database
    (garbage bytes, a torn copy) is removed and made again, with a warning."""
    try:
        store = _MetadataStore(str(folder))
        store.connection.execute("SELECT COUNT(*) FROM run_ids").fetchone()
        return store
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError):
            raise  # locked, read-only, full: not corrupt
        _WARN.warning("warning: cache: %s is not a valid cache database (%s); it is rebuilt", folder / DATABASE, exc)
    for suffix in ("", "-wal", "-shm", "-journal"):
        with _suppress():
            os.unlink(folder / (DATABASE + suffix))
    return _MetadataStore(str(folder))


_STORES: OrderedDict[str, Stores] = OrderedDict()
_STORES_LOCK = threading.Lock()
_CURRENT: contextvars.ContextVar[Stores | None] = contextvars.ContextVar("ctxengine_cache_stores", default=None)


def stores_for(cache_dir: str | os.PathLike) -> Stores:
    """The stores of ``cache_dir``, opened once per process (the last 32 folders are kept);
    OSError (a CacheFolderError naming the folder) or sqlite3.Error when it cannot be made or opened."""
    key = os.path.abspath(os.fspath(cache_dir))
    with _STORES_LOCK:
        found = _STORES.get(key)
        if found is not None and found.metadata._directory.name == code_version():
            _STORES.move_to_end(key)
            return found
    made = Stores(key)
    with _STORES_LOCK:
        _STORES[key] = made
        while len(_STORES) > 32:
            _STORES.popitem(last=False)
    return made


@contextlib.contextmanager
def using(cache_dir: str | os.PathLike):
    """Runs of a cached driver inside this block use the cache folder ``cache_dir`` (one driver
    serves every folder: building one costs about 40 ms)."""
    token = _CURRENT.set(stores_for(cache_dir))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def new_adapter(cache_dir: str | os.PathLike | None = None, uncached: Iterable[str] = ()) -> CacheAdapter:
    """The cache adapter of a driver: every node is stored and served while its inputs are
    unchanged, except the loaders (``@cache(behavior="recompute")``: they always run, and their
    values are fingerprinted, so an edited file invalidates what reads it) and the ``uncached``
    nodes, which recompute. Its folder is the one of :func:`using` around a run, else ``cache_dir``."""
    if cache_dir is not None:
        stores_for(cache_dir)  # fails now when the folder is unusable
    adapter = CacheAdapter(path=os.fspath(cache_dir or "."), metadata_store=_NO_STORE, result_store=_NO_STORE,
                           recompute=sorted(uncached), ignore=list(IGNORED_INPUTS), default_behavior="default")
    adapter.home = cache_dir
    return adapter


# ----------------------------------------------------------------------------- after a run


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What the cache did in one run: nodes served from it, computed and stored, recomputed."""

    hits: tuple[str, ...]
    misses: tuple[str, ...]  # DEFAULT nodes computed (then stored)
    recomputed: tuple[str, ...]  # loaders and cheap nodes: always run

    def as_dict(self) -> dict:
        return {"hits": len(self.hits), "misses": len(self.misses), "recomputed": len(self.recomputed),
                "hit_nodes": list(self.hits), "miss_nodes": list(self.misses)}


def run_summary(adapter: CacheAdapter, run_id: str | None = None) -> RunSummary:
    """Hits, misses and recomputed nodes of a run (default: the last), from the adapter's logs."""
    run_id = run_id or adapter.last_run_id
    hits, executed = [], []
    for event in adapter._logs.get(run_id, []):
        if event.event_type == CachingEventType.GET_RESULT and event.msg == "hit":
            hits.append(event.node_name)
        elif event.event_type == CachingEventType.EXECUTE_NODE:
            executed.append(event.node_name)
    behaviors = adapter.behaviors.get(run_id, {})
    misses = [n for n in executed if behaviors.get(n) == CachingBehavior.DEFAULT]
    recomputed = [n for n in executed if behaviors.get(n) != CachingBehavior.DEFAULT]
    return RunSummary(tuple(dict.fromkeys(hits)), tuple(dict.fromkeys(misses)), tuple(dict.fromkeys(recomputed)))


def after_run(adapter: CacheAdapter, cache_dir: str | os.PathLike, project_dir: str, max_bytes: int,
              max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> RunSummary:
    """Record the run's hits, prune the project's folder to ``max_bytes`` (when it is over, and
    on a process's first build, then after every :data:`PRUNE_EVERY` builds or an eighth of the
    cap written) and then the root to ``max_total_bytes`` (:func:`prune_root`, sparing this
    folder), forget older runs in memory."""
    summary = run_summary(adapter)
    folder, stores = Path(cache_dir), stores_for(cache_dir)
    for name, text in ((PROJECT_FILE, os.path.realpath(project_dir) + "\n"),
                       (LAST_RUN_FILE, json.dumps(summary.as_dict()) + "\n")):
        if stores.written_files.get(name) != text:  # an unchanged rerun writes nothing
            with _suppress():
                _write_text(folder / name, text)
                stores.written_files[name] = text
    runs = stores.runs_since_prune
    if (runs is None or runs >= PRUNE_EVERY or stores.results.written > max_bytes // 8
            or _tree_size(folder) > max_bytes):  # a few files: their sizes are cheap to read
        prune(folder, max_bytes, stores.metadata)
        prune_root(folder.parent.parent, max_total_bytes, keep=folder)
        runs, stores.results.written = 0, 0
    stores.runs_since_prune = runs + 1
    adapter.forget_runs()
    return summary


def prune(cache_dir: Path, max_bytes: int, metadata_store: SQLiteMetadataStore | None = None) -> int:
    """Bound one project's cache folder: folders of other code versions go, then the least
    recently used results until the folder is within ``max_bytes`` (down to 80% of it); their
    metadata and that of older runs is deleted and the file gives the space back. Returns the
    bytes removed. Never fails a build."""
    removed = 0
    current = code_version()
    for child in _children(cache_dir):
        if child.name != current:
            size = _tree_size(child)
            removed += size if usercache.remove_owned(child, VERSION_NAME) else 0
    if metadata_store is None or getattr(metadata_store, "busy", False):
        return removed
    with _suppress(sqlite3.Error):
        connection = metadata_store.connection
        over = _tree_size(cache_dir) > max_bytes
        if over:  # the space no row holds first: the write-ahead log, the pages the memo table freed
            _give_space_back(connection)
        for _ in range(3):  # a page holds more than its rows: measure again after giving space back
            total = _tree_size(cache_dir)
            dropped: list[str] = []
            if total > max_bytes * (0.8 if over else 1.0):  # once over: down to 80%, room for some builds
                # at equal times a value goes before the shared parts it refers to (a part is as
                # recent as the newest value referring to it): no kept value loses a part
                rows = connection.execute("SELECT data_version, size FROM results "
                                          "ORDER BY used, data_version LIKE 'shared-%'").fetchall()
                for data_version, size in rows:
                    if total <= max_bytes * 0.8:
                        break
                    dropped.append(data_version)
                    removed += size
                    total -= size
            _trim_metadata(connection, dropped)
            for data_version in dropped:
                MEMORY.discard(data_version)
            if not dropped:
                break
            _give_space_back(connection)
    return removed


def _give_space_back(connection: sqlite3.Connection) -> None:
    """The database file's free pages returned and its write-ahead log emptied, so that the
    folder's size counts only what its rows hold (a build's deletes, the memo table's trim
    among them, leave free pages that no result row accounts for)."""
    connection.executescript("PRAGMA incremental_vacuum;")  # execute() would free one page
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def _trim_metadata(connection: sqlite3.Connection, dropped: list[str]) -> None:
    """History of the last KEEP_RUNS runs only; no metadata pointing at a removed result."""
    cur = connection.cursor()
    cur.execute("SELECT COUNT(*) FROM run_ids")
    if cur.fetchone()[0] > 2 * KEEP_RUNS or dropped:
        cur.execute("SELECT run_id FROM run_ids ORDER BY id DESC LIMIT ?", (KEEP_RUNS,))
        keep = [row[0] for row in cur.fetchall()]
        marks = ",".join("?" * len(keep))
        cur.execute(f"DELETE FROM run_ids WHERE run_id NOT IN ({marks})", keep)
        cur.execute(f"DELETE FROM history WHERE run_id NOT IN ({marks})", keep)
        for start in range(0, len(dropped), 500):
            chunk = dropped[start:start + 500]
            marks = ",".join("?" * len(chunk))
            cur.execute(f"DELETE FROM results WHERE data_version IN ({marks})", chunk)
            cur.execute(f"DELETE FROM cache_metadata WHERE data_version IN ({marks})", chunk)
        connection.commit()


def prune_root(root: Path, max_total_bytes: int, keep: Path | None = None) -> int:
    """Bound the project folders of a cache root together: when they pass ``max_total_bytes``,
    whole folders go, those of projects that no longer exist first (:func:`stale`), then the
    least recently used, down to 80% of the cap; ``keep`` (the folder just built) stays. Only
    folders ctxengine made go (:func:`clear`). The bytes removed."""
    folders = all_cache_dirs(root)
    sizes = {folder: _tree_size(folder) for folder in folders}
    total = sum(sizes.values())
    if total <= max_total_bytes:
        return 0
    removed = 0
    for folder in sorted(folders, key=lambda f: (not stale(f), last_used(f))):
        if total - removed <= max_total_bytes * 0.8:
            break
        if folder != keep and clear(folder):
            removed += sizes[folder]
    return removed


def total_bytes(root: Path) -> int:
    """The bytes of every project folder of a cache root (what ``cache.maxTotalBytes`` bounds)."""
    return sum(_tree_size(folder) for folder in all_cache_dirs(root))


def last_used(folder: Path) -> float:
    """When a project's cache folder was last written (its newest file)."""
    newest = 0.0
    for base, _, files in os.walk(folder):
        for name in files:
            with _suppress():
                newest = max(newest, os.lstat(os.path.join(base, name)).st_mtime)
    return newest


def stale(folder: Path) -> bool:
    """Whether a project's cache folder belongs to a project that no longer exists (the path in
    its project.txt is gone; a folder without one has not finished a build: not stale)."""
    try:
        project = (folder / PROJECT_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(project) and not os.path.isdir(project)


def stats(cache_dir: Path) -> dict:
    """Size, entries, the last run's hits and whether the project still exists, of one project's cache folder."""
    entries = 0
    with _suppress(sqlite3.Error):
        path = store_dir(cache_dir) / DATABASE
        if path.is_file():
            with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=SQLITE_TIMEOUT)) as db:
                entries = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    last = {}
    with _suppress(OSError, ValueError):
        last = json.loads((cache_dir / LAST_RUN_FILE).read_text(encoding="utf-8"))
    project = ""
    with _suppress(OSError, ValueError):
        project = (cache_dir / PROJECT_FILE).read_text(encoding="utf-8").strip()
    return {
        "folder": str(cache_dir),
        "project": project,
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


def clear(cache_dir: Path) -> int:
    """Remove one project's cache folder when ctxengine made it (its name and marker); the bytes it held."""
    size = _tree_size(cache_dir)
    return size if usercache.remove_owned(cache_dir, PROJECT_NAME) else 0


# ----------------------------------------------------------------------------- helpers


class _suppress:
    """Ignore OSError (and the given exception types): the cache never fails a build."""

    def __init__(self, *kinds: type[BaseException]) -> None:
        self.kinds = kinds or (OSError,)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


def _write_text(path: Path, text: str) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(handle, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(temp, path)


def _scandir(folder: Path) -> Iterable[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _children(folder: Path) -> list[Path]:
    return [Path(e.path) for e in _scandir(folder)]


def _tree_size(folder: Path) -> int:
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            with _suppress():
                total += os.lstat(os.path.join(base, name)).st_size
    return total
