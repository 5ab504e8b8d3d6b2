"""Hamilton's cache between runs: where it lives, how it stays safe and bounded, what it holds.

One folder per project: ``<root>/graph/<sha256 of the project's real path>[:16]`` with root
``$CTXENGINE_CACHE_DIR``, else ``$XDG_CACHE_HOME/ctxengine``, else ``~/.cache/ctxengine``
(or the folder given as ``cache_dir``/``--cache-dir``). Inside it::

    project.txt           the project's real path (for `ctxengine cache stats`)
    last_run.json         hits and misses of the last build
    <code version>/       Hamilton's metadata_store.db and results/ (pickles)

The code version hashes ctxengine's version with the source of its node modules and bundled
configs, so a new version (or an edited helper, which Hamilton's per-node key misses) starts a
fresh folder; the old ones are removed by :func:`prune`. Results are written atomically and a
torn or vanished result is recomputed, SQLite waits for a concurrent writer, so two processes
can share one folder. The folder is private to the user (results are pickles).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import pickle
import shutil
import sqlite3
import tempfile
import types
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from hamilton.caching.adapter import CachingBehavior, CachingEventType, HamiltonCacheAdapter
from hamilton.caching.stores.base import ResultRetrievalError, StoredResult
from hamilton.caching.stores.file import FileResultStore
from hamilton.caching.stores.sqlite import SQLiteMetadataStore

from .nodes.types import CtxEngineError

#: The cap of one project's cache folder when the config has no ``cache.maxBytes``.
DEFAULT_MAX_BYTES = 256 << 20
#: Runs whose history rows stay in the metadata store.
KEEP_RUNS = 20
#: Seconds a process waits for another one writing the metadata store.
SQLITE_TIMEOUT = 60.0
PROJECT_FILE = "project.txt"
LAST_RUN_FILE = "last_run.json"
RESULTS = "results"
#: The data version of a recomputed value no cached node reads (never part of a cache key).
NOT_VERSIONED = "<not versioned>"

# ----------------------------------------------------------------------------- where


def cache_root() -> Path:
    """The user's cache folder of ctxengine (shared with the tokenizer cache)."""
    base = os.environ.get("CTXENGINE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ctxengine")
    return Path(base)


def graph_root() -> Path:
    """The folder holding one cache folder per project."""
    return cache_root() / "graph"


def project_cache_dir(project_dir: str | os.PathLike) -> Path:
    """The cache folder of one project: named by a hash of its real path."""
    real = os.path.realpath(os.fspath(project_dir))
    return graph_root() / hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:16]


@lru_cache(maxsize=1)
def code_version() -> str:
    """ctxengine's version and a hash of its node sources and bundled configs."""
    from importlib import metadata

    try:
        version = metadata.version("ctxengine")
    except metadata.PackageNotFoundError:
        version = "dev"
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(version.encode())
    for folder in ("nodes", "configs"):
        for path in sorted((package / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".yaml", ".yml", ".md", ".json"):
                digest.update(str(path.relative_to(package)).encode())
                digest.update(path.read_bytes())
    return f"{version}-{digest.hexdigest()[:12]}"


def store_dir(cache_dir: str | os.PathLike) -> Path:
    """Hamilton's folder (metadata and results) inside a project cache folder, for this code."""
    return Path(cache_dir) / code_version()


def ensure_private(folder: Path) -> None:
    """Create ``folder`` (mode 0700); refuse one another user could write: results are pickles."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise CtxEngineError(f"cache folder {folder} is writable by other users or not yours; "
                             "fix its permissions (chmod 700) or pass another --cache-dir")


# ----------------------------------------------------------------------------- stores


class AtomicResultStore(FileResultStore):
    """Hamilton's file result store, made safe for concurrent processes: each result is
    written to a temporary file and renamed into place; a result that vanished (pruned by
    another process) or does not unpickle is a retrieval error, so the node recomputes.
    A hit refreshes the file's time: pruning removes the least recently used first."""

    @staticmethod
    def _write_result(file_path: Path, stored_result) -> None:
        handle, temp = tempfile.mkstemp(dir=file_path.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "wb") as fh:
                fh.write(stored_result.save())
            os.replace(temp, file_path)
        except BaseException:
            with _suppress():
                os.unlink(temp)
            raise

    def exists(self, data_version: str) -> bool:
        try:
            return super().exists(data_version)
        except OSError:
            return False

    def set(self, data_version: str, result: Any, saver_cls=None, loader_cls=None) -> None:
        """Store a result; one that cannot be written or pickled is simply not cached."""
        try:
            super().set(data_version, result, saver_cls, loader_cls)
        except Exception as exc:  # noqa: BLE001 - a full disk or an unpicklable value never fails a build
            _LOGGER.debug("result %s not cached: %s", data_version, exc)

    def get(self, data_version: str) -> Any:
        path = self._path_from_data_version(data_version)
        try:
            value = StoredResult.load(path.read_bytes()).value
        except Exception as exc:  # missing, torn or from an incompatible build
            raise ResultRetrievalError(f"{path}: {exc}") from None
        with _suppress():
            os.utime(path)
        return value


class _MetadataStore(SQLiteMetadataStore):
    """SQLite with a long busy timeout and WAL: concurrent builds wait, readers never block."""

    def __init__(self, path: str) -> None:
        super().__init__(path, connection_kwargs={"timeout": SQLITE_TIMEOUT})

    # A metadata store that cannot be read or written (disk full, file size limit, a lock held
    # past the timeout) makes the run uncached, never failed: a failed read is a miss, a failed
    # write is forgotten.
    def get(self, cache_key: str) -> str | None:
        try:
            return super().get(cache_key)
        except sqlite3.Error:
            return None

    def set(self, **kwargs: Any) -> None:
        try:
            super().set(**kwargs)
        except sqlite3.Error as exc:
            _LOGGER.debug("cache metadata not written: %s", exc)
            with _suppress(sqlite3.Error):
                self.connection.rollback()

    def initialize(self, run_id) -> None:
        try:
            super().initialize(run_id)
        except sqlite3.Error:
            with _suppress(sqlite3.Error):
                self.connection.rollback()

    def delete(self, cache_key: str) -> None:
        with _suppress(sqlite3.Error):
            super().delete(cache_key)

    def _get_connection(self) -> sqlite3.Connection:
        fresh = not hasattr(self._thread_local, "connection")
        connection = super()._get_connection()
        if fresh:
            with _suppress(sqlite3.Error):
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
    inputs, so the 4 MB history section is hashed once a run, not once a node); wider containers
    and other objects are hashed through their pickle; sets are walked in sorted order. Equal hashes mean equal values (types
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
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _fp(value: Any, memo: dict) -> str:
    kind = type(value)
    if kind is str:
        return _digest(b"s", value.encode("utf-8", "surrogatepass"))
    if kind in _SCALARS:
        return _digest(kind.__name__.encode(), repr(value).encode())
    known = memo.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    if isinstance(value, types.FunctionType):
        cells = tuple(cell.cell_contents for cell in (value.__closure__ or ()))
        result = _digest(b"fn", value.__module__.encode(), value.__qualname__.encode(),
                         _fp(cells, memo).encode(), _fp(value.__defaults__, memo).encode())
    elif kind in (list, tuple) and len(value) <= _WIDE:
        result = _digest(kind.__name__.encode(), *(_fp(item, memo).encode() for item in value))
    elif kind in (set, frozenset):  # the pickle of a set follows the per-process string hash order
        result = _digest(kind.__name__.encode(), *sorted(_fp(item, memo).encode() for item in value))
    elif kind is dict and len(value) <= _WIDE:
        result = _digest(b"dict", *(f"{_fp(k, memo)}={_fp(v, memo)}".encode() for k, v in value.items()))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f.name for f in dataclasses.fields(value)]
        result = _digest(f"{kind.__module__}.{kind.__qualname__}".encode(),
                         *(f"{name}={_fp(getattr(value, name), memo)}".encode() for name in fields))
    else:
        result = _pickled(value)
    memo[id(value)] = (value, result)
    return result


def _pickled(value: Any) -> str:
    buffer = io.BytesIO()
    try:
        pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:  # noqa: BLE001 - closures, locks: not ours to hash
        raise _Unhashable(str(exc)) from None
    return "p" + _digest(buffer.getvalue())[1:]


_LOGGER = logging.getLogger("hamilton.caching")
_KEPT_EVENTS = frozenset({
    CachingEventType.GET_RESULT, CachingEventType.EXECUTE_NODE, CachingEventType.SET_RESULT,
    CachingEventType.MISSING_RESULT, CachingEventType.FAILED_RETRIEVAL, CachingEventType.FAILED_EXECUTION,
    CachingEventType.UNHASHABLE_DATA_VERSION, CachingEventType.IS_OVERRIDE,
})


class CacheAdapter(HamiltonCacheAdapter):
    """Hamilton's cache adapter that stores only the results it may serve later (a node that
    always recomputes is fingerprinted but not pickled: some of those values, such as
    strategies holding functions, do not pickle) and forgets all but the last run in memory."""

    def pre_node_execute(self, *, run_id, node_, kwargs, task_id=None, **future_kwargs):
        if self.behaviors[run_id][node_.name] == CachingBehavior.RECOMPUTE:
            return  # no cache key: a recomputed node is never looked up
        super().pre_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id, **future_kwargs)

    def do_node_execute(self, *, run_id, node_, kwargs, task_id=None, **future_kwargs):
        """A recomputed node runs, and its value is fingerprinted only when a cached node reads
        it (Hamilton keys, versions and records every node: about 1 ms a node)."""
        if self.behaviors[run_id][node_.name] != CachingBehavior.RECOMPUTE or task_id is not None:
            return super().do_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id, **future_kwargs)
        result = self._execute_node(run_id=run_id, node_name=node_.name, node_callable=node_.callable,
                                    node_kwargs=self._resolve_default_parameter_values(node_, kwargs))
        if node_.name in self._versioned(run_id):
            self.data_versions[run_id][node_.name] = self._version_data(node_.name, run_id, result)
        return result

    def post_node_execute(self, *, run_id, node_, result, success=True, error=None, task_id=None, **kwargs):
        if success and self.behaviors[run_id][node_.name] != CachingBehavior.DEFAULT:
            return
        super().post_node_execute(run_id=run_id, node_=node_, result=result, success=success, error=error,
                                  task_id=task_id, **kwargs)

    def _log_event(self, run_id, node_name, actor, event_type, msg=None, value=None, task_id=None) -> None:
        """Hamilton logs about ten events a node (a dataclass with a timestamp each); only those
        that say what happened to a node are kept (all of them at logging.DEBUG)."""
        if event_type in _KEPT_EVENTS or _LOGGER.isEnabledFor(logging.DEBUG):
            super()._log_event(run_id=run_id, node_name=node_name, actor=actor, event_type=event_type,
                               msg=msg, value=value, task_id=task_id)

    def _version_data(self, node_name: str, run_id: str, result: Any, task_id: str | None = None) -> str:
        """The fingerprint of a value (:func:`fingerprint`, 10-50x faster than Hamilton's
        recursive hash; Hamilton's for what neither pickles nor is a function). A recomputed
        value that no cached node reads is not fingerprinted: no cache key ever uses it."""
        if node_name is not None and run_id in self.behaviors and node_name not in self._versioned(run_id):
            return NOT_VERSIONED
        memo = self.__dict__.setdefault("_fp_memo", {}).setdefault(run_id, {})
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
            names = {n.name for n in cached} | {d.name for n in cached for d in n.dependencies}
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
            for table in (self.__dict__.get("_fp_memo", {}), self._fn_graphs, self._data_savers, self._data_loaders, self.behaviors,
                          self.data_versions, self.code_versions, self.cache_keys, self._logs):
                table.pop(run_id, None)


def new_adapter(cache_dir: str | os.PathLike, cached: Iterable[str]) -> CacheAdapter:
    """The adapter for one cache folder: the ``cached`` nodes are stored and served while their
    inputs are unchanged; every other node recomputes (and is fingerprinted, so what depends
    on it sees whether it changed)."""
    root = store_dir(cache_dir)
    ensure_private(Path(cache_dir))
    ensure_private(root)
    return CacheAdapter(
        path=str(root),
        metadata_store=_MetadataStore(str(root)),
        result_store=AtomicResultStore(str(root / RESULTS)),
        default=sorted(cached),
        default_behavior="recompute",
    )


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


def after_run(adapter: CacheAdapter, cache_dir: str | os.PathLike, project_dir: str, max_bytes: int) -> RunSummary:
    """Record the run's hits, prune the folder to ``max_bytes``, forget older runs in memory."""
    summary = run_summary(adapter)
    folder = Path(cache_dir)
    written = adapter.__dict__.setdefault("_written", {})
    for name, text in ((PROJECT_FILE, os.path.realpath(project_dir) + "\n"),
                       (LAST_RUN_FILE, json.dumps(summary.as_dict()) + "\n")):
        if written.get(name) != text:  # an unchanged rerun writes nothing
            with _suppress():
                _write_text(folder / name, text)
                written[name] = text
    prune(folder, max_bytes, adapter.metadata_store)
    adapter.forget_runs()
    return summary


def prune(cache_dir: Path, max_bytes: int, metadata_store: SQLiteMetadataStore | None = None) -> int:
    """Bound one project's cache folder: folders of other code versions go, then the least
    recently used results until the folder is within ``max_bytes``; metadata of older runs
    and of removed results is deleted. Returns the bytes removed. Never fails a build."""
    removed = 0
    current = code_version()
    for child in _children(cache_dir):
        if child.is_dir() and child.name != current:
            removed += _tree_size(child)
            shutil.rmtree(child, ignore_errors=True)
    root = cache_dir / current
    results = _result_files(root)
    total = sum(size for _, size, _ in results) + _db_size(root)
    if total > max_bytes and metadata_store is not None:  # the write-ahead log first (up to 4 MB)
        with _suppress(sqlite3.Error):
            metadata_store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        total = sum(size for _, size, _ in results) + _db_size(root)
    dropped = []
    if total > max_bytes:
        for _, size, path in sorted(results):  # oldest first, down to 80% of the cap
            with _suppress():
                path.unlink()
                dropped.append(path.name)
                removed += size
                total -= size
            if total <= max_bytes * 0.8:
                break
    if metadata_store is not None:
        with _suppress(sqlite3.Error):
            _trim_metadata(metadata_store.connection, dropped)
    return removed


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
            cur.execute(f"DELETE FROM cache_metadata WHERE data_version IN ({','.join('?' * len(chunk))})", chunk)
        connection.commit()


# ----------------------------------------------------------------------------- stats and clear


def stats(cache_dir: Path) -> dict:
    """Size, entries and the last run's hits of one project's cache folder."""
    root = cache_dir / code_version()
    results = _result_files(root)
    last = {}
    with _suppress():
        last = json.loads((cache_dir / LAST_RUN_FILE).read_text(encoding="utf-8"))
    project = ""
    with _suppress():
        project = (cache_dir / PROJECT_FILE).read_text(encoding="utf-8").strip()
    return {
        "folder": str(cache_dir),
        "project": project,
        "bytes": _tree_size(cache_dir),
        "entries": len(results),
        "last_run": {k: last.get(k) for k in ("hits", "misses", "recomputed")} if last else None,
    }


def all_cache_dirs() -> list[Path]:
    """Every project cache folder under the user's cache root."""
    return sorted(p for p in _children(graph_root()) if p.is_dir())


def clear(cache_dir: Path) -> int:
    """Remove one cache folder; the bytes it held."""
    size = _tree_size(cache_dir)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return size


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


def _result_files(root: Path) -> list[tuple[float, int, Path]]:
    """(mtime, size, path) of every stored result (one vanishing meanwhile is skipped)."""
    out = []
    for entry in _scandir(root / RESULTS):
        if not entry.name.startswith(".tmp-"):
            with _suppress():
                info = entry.stat()
                out.append((info.st_mtime, info.st_size, Path(entry.path)))
    return out


def _db_size(root: Path) -> int:
    total = 0
    for entry in _scandir(root):
        if entry.name.startswith("metadata_store"):
            with _suppress():
                total += entry.stat().st_size
    return total


def _tree_size(folder: Path) -> int:
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            with _suppress():
                total += os.lstat(os.path.join(base, name)).st_size
    return total
