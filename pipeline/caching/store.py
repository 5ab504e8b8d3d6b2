"""The results of one cache folder: an SQLite store beside Hamilton's metadata, a memory layer
in front of it, lazy hits, shared chunks, and the stores of each folder of a process.

A build's results and metadata are written in one SQLite transaction after it (WAL; a
concurrent writer is waited for a few seconds, then the build's results are not stored, with a
warning); a result is unpickled only when its HMAC under the user's key checks, else it is
discarded and rebuilt (one warning); a database that is not one is rebuilt (one warning). Hits
come from a memory layer in a warm process and are unpickled only when needed. A project's
folder is bounded by its ``cache.maxBytes`` (:func:`prune`).
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import logging
import os
import pickle
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from cachetools import LRUCache
from hamilton.caching.stores.base import ResultRetrievalError, ResultStore
from hamilton.caching.stores.sqlite import SQLiteMetadataStore

from ..nodes.lib import usercache
from ..nodes.lib.memo import MISSING, MemoTable, SizedLRU
from ..nodes.types import Section
from ..nodes.lib.digest import CHUNK_ITEMS, LONG_TEXT, DigestedText, Unhashable, chunks_of, content_digest
from .folders import (DATABASE, DEFAULT_MAX_BYTES, SQLITE_TIMEOUT, VERSION_NAME, _children, _tree_size,
                      open_project_folder)
from . import folders

#: Runs whose history rows stay in the metadata store.
KEEP_RUNS = 20
#: Builds of one process between two prunings of a folder it has not written much to.
PRUNE_EVERY = 50

#: Pickled bytes of results the memory layer of one process keeps (least recently used out).
MEMORY_MAX_BYTES = 64 << 20


class StaleResult(Exception):
    """A stored result whose pickle no longer loads (found only when a node needed its value)."""


class Lazy:
    """A stored result read from disk but not unpickled yet. A hit whose dependents are all hits
    too is never unpickled (the 4 MB parsed transcript of an unchanged rebuild); a node that
    runs gets the value (:func:`materialize`), as does the caller of the driver. It is kept in
    :data:`MEMORY` as it is (then as its value, once loaded): a warm process reads its row once."""

    __slots__ = ("data_version", "_payload", "_value", "_store")

    def __init__(self, data_version: str, payload: bytes, store: "SQLiteResultStore") -> None:
        self.data_version, self._payload, self._value, self._store = data_version, payload, MISSING, store

    def load(self) -> Any:
        # The payload read first: kept in MEMORY, a Lazy is shared by a server's threads, and one
        # that loads it sets the value before it drops the payload.
        payload = self._payload
        if self._value is MISSING:
            try:
                self._value = self._store.loads(payload)
            except Exception as exc:  # noqa: BLE001 - a shared part pruned, a class changed outside the nodes
                MEMORY.discard(self.data_version)
                raise StaleResult(f"cached result {self.data_version} does not load: {type(exc).__name__}: {exc}") from None
            MEMORY.put(self.data_version, self._value, len(payload))
            self._payload = b""
        return self._value


def _large(section: Section) -> bool:
    """Whether a section is stored once, by its digest: a long text or a long tuple (rounds) in it."""
    return len(section.content) > LONG_TEXT or any(
        type(item) is tuple and len(item) >= CHUNK_ITEMS for item in section.data.values())


def _pickled(value: Any, persistent_id) -> bytes:
    """The pickle of ``value``, each part for which ``persistent_id`` gives a key referring to it."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = persistent_id
    pickler.dump(value)
    return buffer.getvalue()


def materialize(value: Any) -> Any:
    """``value``, unpickled first when it is a :class:`Lazy` stored result."""
    return value.load() if type(value) is Lazy else value


#: The memory layer of this process: results by data version, in front of the folders (a data
#: version is a fingerprint of the value, so it names the same value in any folder), sized by
#: their pickles; a warm process (the API, a Session, a server) serves a hit without reading or
#: unpickling a file. Nodes never mutate their inputs, so values are shared. ``MEMORY.clear()``
#: empties it.
MEMORY = SizedLRU(MEMORY_MAX_BYTES)


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
        self._shared_here: set[str] = set()  # chunk keys known to be in this folder (this build)
        #: the memo's table (nodes/lib/memo.py), written with the results
        self.memo_table = MemoTable(lambda: metadata.connection, key, str(metadata.folder / DATABASE))
        with contextlib.suppress(sqlite3.Error):  # DDL: no transaction to commit
            metadata.connection.execute(
                "CREATE TABLE IF NOT EXISTS results (data_version TEXT PRIMARY KEY, digest BLOB NOT NULL, "
                "payload BLOB NOT NULL, size INTEGER NOT NULL, used REAL NOT NULL)")

    def sign(self, data_version: str, payload: bytes) -> bytes:
        """The MAC of a row: its data version and pickle, under the user's key."""
        return usercache.mac(self.key, data_version.encode("utf-8", "surrogatepass"), payload)

    def _row(self, data_version: str, columns: str):
        """The row of ``data_version`` (``columns`` of it), None when there is none or it cannot be read."""
        with contextlib.suppress(sqlite3.Error):
            return self.metadata.connection.execute(
                f"SELECT {columns} FROM results WHERE data_version = ?", (data_version,)).fetchone()
        return None

    def exists(self, data_version: str) -> bool:
        """Whether a hit can be served (from memory, which holds values by content, or this folder)."""
        return data_version in MEMORY or self.stored(data_version)

    def stored(self, data_version: str) -> bool:
        """Whether this folder holds the result (or will, after the flush)."""
        return data_version in self._pending or self._row(data_version, "1") is not None

    def set(self, data_version: str, result: Any, **kwargs) -> None:
        """Keep a result for the flush after the build; one that does not pickle is not cached.
        Always pickled (ctxengine's nodes use no ``@cache(format=...)``)."""
        try:
            result = materialize(result)
            payload = _pickled(result, self.shared_key)
        except Exception as exc:  # noqa: BLE001 - an unpicklable value never fails a build
            _LOGGER.debug("result %s not cached: %s", data_version, exc)
            return
        MEMORY.put(data_version, result, len(payload))
        self._pending[data_version] = payload

    def shared_key(self, obj: Any) -> tuple | str | None:
        """How the pickle of a stored value refers to a part of it stored once (its persistent
        id): a long tuple by the keys of its chunks, a long text (the fitted context sits in half
        a dozen values of a build) or a large section (the history, in every truncation state)
        by its key, else None (pickled in place)."""
        kind = type(obj)
        if kind is tuple and len(obj) >= CHUNK_ITEMS:
            try:
                return tuple(map(self._kept, chunks_of(obj)))
            except Unhashable:
                return None
        if ((kind is str or kind is DigestedText) and len(obj) > LONG_TEXT) or (kind is Section and _large(obj)):
            return self._kept(obj)
        return None

    def _kept(self, part: tuple | str | Section) -> str:
        """The key of a shared part (its content digest), stored once in this folder, or kept as
        recent as the value now stored that refers to it (pruning never takes it first). A
        section's own long tuples and text are shared in turn (it is pickled again when stored
        already: they stay as recent as it)."""
        key = "shared-" + content_digest(part).hex()
        if key in self._pending or key in self._shared_here:
            return key
        row = self._row(key, "used")
        if type(part) is Section:
            data = _pickled(part, lambda obj: None if obj is part else self.shared_key(obj))
        elif row is None:
            data = pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL)
        if row is None:
            self._pending[key] = data
            MEMORY.put(key, part, len(data))
        else:
            self._touched.add(key)
        self._shared_here.add(key)  # once it pickled: a part that does not leaves no key behind
        return key

    def joined(self, keys: tuple[str, ...]) -> tuple:
        """A long tuple from its chunks (from memory, else each unpickled from its row once)."""
        return tuple(item for key in keys for item in self.shared(key))

    def shared(self, key: str) -> Any:
        """A shared part: from memory, else unpickled from its row (checked) once, as a result is."""
        return materialize(self.get(key))

    def loads(self, payload: bytes) -> Any:
        """A stored value unpickled, its shared parts (:meth:`shared_key`) read back."""
        unpickler = pickle.Unpickler(io.BytesIO(payload))
        unpickler.persistent_load = lambda pid: self.shared(pid) if isinstance(pid, str) else self.joined(pid)
        return unpickler.load()

    def _payload(self, data_version: str) -> tuple[bytes, float]:
        """The pickle of a result or shared part, to be flushed or from its row (its MAC checked),
        and the time of its last use (now for one to be flushed); a retrieval error when it is
        gone, torn or not ours (a row whose MAC fails is reported, once a build: the caller
        discards it and rebuilds it, it was not written by this user's ctxengine)."""
        payload = self._pending.get(data_version)
        if payload is not None:
            return payload, time.time()
        row = self._row(data_version, "digest, payload, used")
        if row is not None and usercache.mac_ok(self.key, row[0], data_version.encode("utf-8", "surrogatepass"), row[1]):
            return row[1], row[2]
        if row is not None and not self.warned:
            self.warned = True
            _WARN.warning("warning: cache: a stored result in %s does not carry this user's MAC (written by "
                          "someone else, or torn); it is discarded and rebuilt", self.metadata.folder)
        raise ResultRetrievalError(f"result {data_version} is gone, torn or not ours")

    def get(self, data_version: str, **kwargs) -> Any:
        value = MEMORY.value(data_version)
        if value is not MISSING:
            return value
        payload, used = self._payload(data_version)
        if used < time.time() - self.TOUCH_AFTER:
            self._touched.add(data_version)
        lazy = Lazy(data_version, payload, self)
        MEMORY.put(data_version, lazy, len(payload))  # a warm process's next hit reads no row
        return lazy

    def delete(self, data_version: str) -> None:
        MEMORY.discard(data_version)
        self._pending.pop(data_version, None)
        with contextlib.suppress(sqlite3.Error), self.metadata.connection as db:
            db.execute("DELETE FROM results WHERE data_version = ?", (data_version,))

    def delete_all(self) -> None:
        """Delete every result, and the metadata pointing at them (a shared part this build
        stored already is stored again)."""
        self._pending.clear()
        self._shared_here.clear()
        with contextlib.suppress(sqlite3.Error):
            self.metadata.connection.executescript("DELETE FROM results; DELETE FROM cache_metadata;")

    def flush(self, memo_entries: dict | None = None, memo_max_bytes: int = DEFAULT_MAX_BYTES // 4) -> None:
        """Write the results kept since the last flush, with their metadata and the memo's new
        entries (``memo_entries``, the table kept within ``memo_max_bytes``), in one transaction
        (a failure, such as a full disk or a lock held past the timeout, forgets them)."""
        pending, touched = self._pending, self._touched
        self._pending, self._touched, self.warned = {}, set(), False
        self._shared_here = set()  # within one build only: another process may prune the folder
        rows, self.metadata.pending = self.metadata.pending, []
        if not (pending or touched or rows or memo_entries):
            return
        if self.metadata.busy:  # another process held the write lock past the timeout at the start
            _WARN.warning("warning: cache: %s is being written by another process; this build waited %.0f s, "
                          "then built without storing its results", self.metadata.folder, SQLITE_TIMEOUT)
            return
        now = time.time()
        try:
            with self.metadata.connection as db:  # one transaction: committed, or rolled back on an error
                db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)",
                               [(dv, self.sign(dv, data), data, len(data), now) for dv, data in pending.items()])
                db.executemany("UPDATE results SET used = ? WHERE data_version = ?", [(now, dv) for dv in touched])
                db.executemany("INSERT INTO history (cache_key, run_id) VALUES (?, ?)", [row[:2] for row in rows])
                db.executemany("INSERT OR IGNORE INTO cache_metadata (cache_key, node_name, code_version, data_version) "
                               "VALUES (?, ?, ?, ?)", [(k, n, c, d) for k, _, n, c, d in rows])
                self.memo_table.write(db.cursor(), memo_entries or {}, memo_max_bytes)
            self.written += sum(map(len, pending.values()))
        except sqlite3.Error as exc:  # a full disk, a file size limit: the next build tries again
            log = _WARN.warning if "locked" in str(exc) else _LOGGER.debug
            log("warning: cache: this build's results were not stored in %s: %s", self.metadata.folder, exc)


class _TunedConnection(sqlite3.Connection):
    """A connection to a cache database (given to Hamilton's store as ``connection_kwargs``):
    write-ahead log (readers never block), a bounded log, pages given back by pruning."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with contextlib.suppress(sqlite3.Error):
            if self.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new file (else it needs the write lock)
                self.execute("PRAGMA auto_vacuum=INCREMENTAL")  # pruning can give pages back
            self.execute("PRAGMA journal_size_limit=4194304")
            self.execute("PRAGMA journal_mode=WAL")
            self.execute("PRAGMA synchronous=NORMAL")


class _MetadataStore(SQLiteMetadataStore):
    """SQLite with a long busy timeout and WAL: concurrent builds wait, readers never block."""

    def __init__(self, path: str) -> None:
        super().__init__(path, connection_kwargs={"timeout": SQLITE_TIMEOUT, "factory": _TunedConnection})
        self.folder = Path(path).resolve()  # the code version's folder holding the database
        self._known: LRUCache = LRUCache(maxsize=20_000)  # cache key -> data version, seen by this process
        self.pending: list[tuple] = []  # metadata rows set since the last flush (:meth:`SQLiteResultStore.flush`)

    # A metadata store that cannot be read or written (disk full, file size limit, a lock held
    # past the timeout) makes the run uncached, never failed: a failed read is a miss, a failed
    # write is forgotten. A key this process has read or written is answered from memory (a
    # result pruned meanwhile by another process is then missing, and recomputed).
    def get(self, cache_key: str) -> str | None:
        found = self._known.get(cache_key)
        if found is None:
            with contextlib.suppress(sqlite3.Error):
                found = super().get(cache_key)
                if found is not None:
                    self._known[cache_key] = found
        return found

    def set(self, *, cache_key: str, data_version: str, run_id: str, node_name: str | None = None,
            code_version: str | None = None, **kwargs: Any) -> None:
        """Remembered now, written by :meth:`flush` after the run: one transaction a build, not a
        commit per node (a result is always written before the metadata pointing at it)."""
        self._known[cache_key] = data_version
        self.pending.append((cache_key, run_id, node_name, code_version, data_version))

    busy = False  # the write lock was held by another process past the timeout at the start of this run

    def initialize(self, run_id) -> None:
        """A run's row; when another process holds the write lock past :data:`SQLITE_TIMEOUT`,
        the run goes on (hits are read: WAL readers never wait) and stores nothing."""
        self.busy = False
        try:
            super().initialize(run_id)
        except sqlite3.Error as exc:
            self.busy = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
            with contextlib.suppress(sqlite3.Error):
                self.connection.rollback()

    def delete(self, cache_key: str) -> None:
        self._known.pop(cache_key, None)
        with contextlib.suppress(sqlite3.Error):
            super().delete(cache_key)



_LOGGER = logging.getLogger("hamilton.caching")
#: Warnings the user sees (on stderr in the CLI): a forged entry, a busy or corrupt database.
_WARN = logging.getLogger("ctxengine.cache")


class Stores:
    """The metadata and result stores of one cache folder (for the code version in use)."""

    def __init__(self, cache_dir: str | os.PathLike) -> None:
        self.metadata = open_metadata(open_project_folder(Path(cache_dir)))
        self.results = SQLiteResultStore(self.metadata, usercache.cache_key())
        self.written_files: dict[str, str] = {}  # project.txt and last_run.json as last written
        self.runs_since_prune: int | None = None

    def forget_results(self) -> None:
        """Delete every result and its metadata: a stored pickle that no longer loads was written
        by code that differs from this one in a way the code version did not see."""
        self.results.delete_all()
        self.metadata._known.clear()


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
        with contextlib.suppress(OSError):
            os.unlink(folder / (DATABASE + suffix))
    return _MetadataStore(str(folder))


_STORES: LRUCache = LRUCache(maxsize=32)
_STORES_LOCK = threading.Lock()
_CURRENT: contextvars.ContextVar[Stores | None] = contextvars.ContextVar("ctxengine_cache_stores", default=None)


def stores_for(cache_dir: str | os.PathLike) -> Stores:
    """The stores of ``cache_dir``, opened once per process (the last 32 folders are kept);
    OSError (a CacheFolderError naming the folder) or sqlite3.Error when it cannot be made or opened."""
    key = os.path.abspath(os.fspath(cache_dir))
    with _STORES_LOCK:
        found = _STORES.get(key)
        if found is None or found.metadata.folder.name != folders.code_version():
            found = _STORES[key] = Stores(key)
        return found


@contextlib.contextmanager
def using(cache_dir: str | os.PathLike):
    """Runs of a cached driver inside this block use the cache folder ``cache_dir`` (one driver
    serves every folder: building one costs about 40 ms)."""
    token = _CURRENT.set(stores_for(cache_dir))
    try:
        yield
    finally:
        _CURRENT.reset(token)



def prune(cache_dir: Path, max_bytes: int, metadata_store: SQLiteMetadataStore | None = None) -> int:
    """Bound one project's cache folder: folders of other code versions go, then the least
    recently used results until the folder is within ``max_bytes`` (down to 80% of it); their
    metadata and that of older runs is deleted and the file gives the space back. Returns the
    bytes removed. Never fails a build."""
    current = folders.code_version()
    removed = sum(folders.clear(child, VERSION_NAME) for child in _children(cache_dir) if child.name != current)
    if metadata_store is None or getattr(metadata_store, "busy", False):
        return removed
    with contextlib.suppress(sqlite3.Error):
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
    """History of the last KEEP_RUNS runs only; the ``dropped`` results deleted, and every
    metadata row pointing at a result this folder does not hold (a miss anyway)."""
    if dropped or connection.execute("SELECT COUNT(*) FROM run_ids").fetchone()[0] > 2 * KEEP_RUNS:
        connection.execute("DELETE FROM run_ids WHERE id NOT IN (SELECT id FROM run_ids ORDER BY id DESC LIMIT ?)",
                           (KEEP_RUNS,))
        connection.execute("DELETE FROM history WHERE run_id NOT IN (SELECT run_id FROM run_ids)")
        connection.executemany("DELETE FROM results WHERE data_version = ?", [(version,) for version in dropped])
        connection.execute("DELETE FROM cache_metadata WHERE data_version NOT IN (SELECT data_version FROM results)")
        connection.commit()


