"""Hamilton's cache adapter, thin: a fast path for the plain case, lazy hits, and what a run did.

Every node is stored and served while its inputs are unchanged, except the loaders
(``@cache(behavior="recompute")``). The cache key of a node is a digest of its code version and
its inputs' fingerprints (:mod:`.fingerprints`); its value goes to the folder's store
(:mod:`.store`) of the run (:func:`.store.using`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from cachetools import LRUCache
from hamilton.caching.adapter import CachingBehavior, CachingEventType, HamiltonCacheAdapter
from hamilton.caching.stores.base import ResultRetrievalError

from ..nodes.lib import usercache
from ..nodes.lib.digest import digest16
from .fingerprints import fingerprint
from .folders import DEFAULT_MAX_TOTAL_BYTES, LAST_RUN_FILE, PROJECT_FILE, _tree_size, prune_root, root_prune_due
from . import folders
from .store import _CURRENT, PRUNE_EVERY, Stores, materialize, prune, stores_for

#: The data version of a recomputed value no cached node reads (never part of a cache key).
NOT_VERSIONED = "<not versioned>"

_DEFAULT, _RECOMPUTE, _IGNORE = CachingBehavior.DEFAULT, CachingBehavior.RECOMPUTE, CachingBehavior.IGNORE


_NO_STORE = object()
#: Driver inputs no cache key depends on: the memo (nodes/lib/memo.py) keeps values by the
#: digest of their content, so what it holds never changes what a node returns.
IGNORED_INPUTS = ("memo",)


def _materialized(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A node's inputs as values: a :class:`.store.Lazy` hit unpickled."""
    return {name: materialize(value) for name, value in kwargs.items()}


class CacheAdapter(HamiltonCacheAdapter):
    """Hamilton's cache adapter with a fast path for the plain case (no task-based execution,
    every node DEFAULT or RECOMPUTE), where Hamilton's own bookkeeping costs more than a hit:
    the cache key is a digest of the node's code version and its inputs' data versions, a hit
    is served without re-reading the metadata, and a recomputed node is fingerprinted only when
    a cached node reads it. What Hamilton logs for a node (its cache logs) stays the same for
    what the tests and ``run_summary`` read: ``get_result: hit`` and ``execute_node``."""

    def __init__(self, *args: Any, home: str | os.PathLike | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.home = home  # the folder of a run outside :func:`.store.using`
        self.hits: dict[str, set[str]] = {}  # run id -> the nodes served from the cache
        self.versioned_of: tuple[Any, frozenset[str]] = (None, frozenset())  # the last graph's :meth:`_versioned`
        #: Hamilton resolves behaviors and code versions anew every run (about 3 ms of a 17 ms
        #: warm build): the last graph's behaviors; code versions by (graph, outputs, inputs, overrides)
        self.behaviors_of: tuple[Any, dict] = (None, {})
        self.code_versions_of: LRUCache = LRUCache(maxsize=64)

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
            if behaviors.get(dep, _DEFAULT) not in (_DEFAULT, _RECOMPUTE, _IGNORE):
                return super().pre_node_execute(run_id=run_id, node_=node_, kwargs=kwargs, task_id=task_id,
                                                **future_kwargs)
            version = versions.get(dep)  # an ignored input (the memo): NOT_VERSIONED (see _versioned), a constant
            if version is None or isinstance(version, dict):
                version = versions[dep] = self._version_data(dep, run_id, kwargs[dep])
            if version.startswith("<unhashable>"):
                version = f"<unhashable>_{os.urandom(8).hex()}"  # never a hit
            parts.append(f"{dep}={version}".encode())
        self.cache_keys[run_id][name] = f"{name}-{digest16(*parts).hex()}"

    def do_node_execute(self, *, run_id, node_, kwargs, task_id=None, **future_kwargs):
        """A recomputed node runs, and its value is fingerprinted only when a cached node reads
        it; a cached node whose key the metadata knows and whose result is there is a hit. A node
        that runs gets its inputs' values (a hit read from disk is unpickled only now)."""
        behavior, name = self.behaviors[run_id][node_.name], node_.name
        if task_id is None and behavior is _DEFAULT:
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
                    self.hits.setdefault(run_id, set()).add(name)
                    self._log_event(run_id, name, "result_store", CachingEventType.GET_RESULT, "hit", data_version)
                    return result
        elif task_id is None and behavior is _RECOMPUTE:
            result = self._execute_node(run_id=run_id, node_name=name, node_callable=node_.callable,
                                        node_kwargs=self._resolve_default_parameter_values(node_, _materialized(kwargs)))
            if name in self._versioned(run_id):
                self.data_versions[run_id][name] = self._version_data(name, run_id, result)
            return result
        return super().do_node_execute(run_id=run_id, node_=node_, kwargs=_materialized(kwargs), task_id=task_id,
                                       **future_kwargs)

    def resolve_behaviors(self, run_id: str) -> dict:
        """Hamilton's behaviors, resolved once per graph."""
        graph = self._fn_graphs[run_id]
        if self.behaviors_of[0] is not graph:
            self.behaviors_of = (graph, super().resolve_behaviors(run_id))
        return dict(self.behaviors_of[1])

    def resolve_code_versions(self, run_id: str, final_vars=None, inputs=None, overrides=None) -> dict:
        """Hamilton's code versions of the nodes a run needs, resolved once per graph, outputs, inputs and overrides."""
        key = (self._fn_graphs[run_id], tuple(final_vars or ()), tuple(sorted(inputs or ())), tuple(sorted(overrides or ())))
        if key not in self.code_versions_of:
            self.code_versions_of[key] = super().resolve_code_versions(run_id=run_id, final_vars=final_vars,
                                                                       inputs=inputs, overrides=overrides)
        return dict(self.code_versions_of[key])

    def post_node_execute(self, *, run_id, node_, result, success=True, error=None, task_id=None, **kwargs):
        if success and (self.behaviors[run_id][node_.name] is not _DEFAULT
                        or node_.name in self.hits.get(run_id, ())):
            return  # recomputed (never stored) or a hit (stored already)
        data_version = self.data_versions[run_id].get(node_.name)
        if success and task_id is None and isinstance(data_version, str):
            if not self.result_store.stored(data_version):  # in this folder (memory may hold it from another)
                self.result_store.set(data_version, result)
                self._log_event(run_id, node_.name, "result_store", CachingEventType.SET_RESULT, None, data_version)
            return
        super().post_node_execute(run_id=run_id, node_=node_, result=result, success=success, error=error,
                                  task_id=task_id, **kwargs)

    def _version_data(self, node_name: str, run_id: str, result: Any, task_id: str | None = None) -> str:
        """The fingerprint of a value (:func:`fingerprint`, 10-50x faster than Hamilton's
        recursive hash; Hamilton's for what neither pickles nor is a function). A recomputed
        value that no cached node reads is not fingerprinted: no cache key ever uses it. The one
        private member of Hamilton's overridden (Hamilton versions it on inputs, overrides and the
        results it computes): tests/test_hamilton_contract.py checks its signature."""
        if node_name is not None and run_id in self.behaviors and node_name not in self._versioned(run_id):
            return NOT_VERSIONED
        result = materialize(result)  # without a fingerprint: Hamilton's UNHASHABLE, always a miss
        return fingerprint(result) or super()._version_data(node_name=node_name, run_id=run_id, result=result,
                                                            task_id=task_id)

    def _versioned(self, run_id: str) -> frozenset[str]:
        """The nodes whose value enters a cache key or is stored: the cached nodes and their
        inputs (found once per graph, as its behaviors: :meth:`resolve_behaviors`)."""
        graph, behaviors = self._fn_graphs[run_id], self.behaviors[run_id]
        if self.versioned_of[0] is not graph:
            cached = [n for n in graph.nodes.values() if behaviors.get(n.name) == CachingBehavior.DEFAULT]
            names = {n.name for n in cached} | {d.name for n in cached for d in n.dependencies
                                                 if behaviors.get(d.name) is not _IGNORE}
            self.versioned_of = (graph, frozenset(names))
        return self.versioned_of[1]

    def version_code(self, node_name: str, run_id: str | None = None) -> str:
        """The code version of a node: the folder's :func:`code_version` (every node source and
        helper) with the node's name and function. Hamilton's own (inspect + ast of each node's
        source, every run) costs about 5 ms a node, half a second a fresh process."""
        run_id = self.last_run_id if run_id is None else run_id
        fn = getattr(self._fn_graphs[run_id].nodes[node_name], "originating_functions", None) or ()
        where = ",".join(f"{f.__module__}.{f.__qualname__}" for f in fn)
        return digest16(folders.code_version().encode(), node_name.encode(), where.encode()).hex()

    def forget_runs(self, keep: int = 1) -> None:
        """Drop what the adapter keeps in memory of every run but the last ``keep``."""
        old, self.run_ids = self.run_ids[:-keep], self.run_ids[-keep:]
        for run_id in old:
            for table in (self.hits, self.behaviors, self.data_versions,
                          self.code_versions, self.cache_keys, self._fn_graphs, self._data_savers, self._data_loaders,
                          self._logs):
                table.pop(run_id, None)



def new_adapter(cache_dir: str | os.PathLike | None = None) -> CacheAdapter:
    """The cache adapter of a driver: every node is stored and served while its inputs are
    unchanged, except the loaders (``@cache(behavior="recompute")``: they always run, and their
    values are fingerprinted, so an edited file invalidates what reads it). Its folder is the
    one of :func:`.store.using` around a run, else ``cache_dir``."""
    if cache_dir is not None:
        stores_for(cache_dir)  # fails now when the folder is unusable
    return CacheAdapter(path=os.fspath(cache_dir or "."), metadata_store=_NO_STORE, result_store=_NO_STORE,
                        ignore=list(IGNORED_INPUTS), default_behavior="default", home=cache_dir)


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


def run_summary(adapter: CacheAdapter) -> RunSummary:
    """Hits, misses and recomputed nodes of the last run, from the adapter's logs (each node once,
    in the order of its first event)."""
    behaviors = adapter.behaviors.get(adapter.last_run_id, {})
    hits, misses, recomputed = {}, {}, {}  # dicts as ordered sets
    for name, events in adapter.logs(run_id=adapter.last_run_id, level="info").items():
        for event in events:
            if event.event_type == CachingEventType.GET_RESULT and event.msg == "hit":
                hits[name] = None
            elif event.event_type == CachingEventType.EXECUTE_NODE:
                (misses if behaviors.get(name) == CachingBehavior.DEFAULT else recomputed)[name] = None
    return RunSummary(tuple(hits), tuple(misses), tuple(recomputed))


def after_run(adapter: CacheAdapter, cache_dir: str | os.PathLike, project_dir: str, max_bytes: int,
              max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> RunSummary:
    """Record the run's hits, prune the project's folder to ``max_bytes`` (when it is over, and
    on a process's first build, then after every :data:`PRUNE_EVERY` builds or an eighth of the
    cap written) and then the root to ``max_total_bytes`` (:func:`prune_root`, sparing this
    folder; on a process's first build only when the folder is new or the root was last bounded
    :data:`.folders.ROOT_PRUNE_EVERY` seconds ago: a CLI call does not walk every project's
    folder). The caller forgets older runs in memory (:meth:`CacheAdapter.forget_runs`, also
    when a run fails)."""
    summary = run_summary(adapter)
    folder, stores = Path(cache_dir), stores_for(cache_dir)
    runs = stores.runs_since_prune
    made = runs is None and not os.path.exists(folder / PROJECT_FILE)  # a project's first build
    for name, text in ((PROJECT_FILE, os.path.realpath(project_dir) + "\n"),
                       (LAST_RUN_FILE, json.dumps(summary.as_dict()) + "\n")):
        if stores.written_files.get(name) != text:  # an unchanged rerun writes nothing
            with contextlib.suppress(OSError):
                usercache.write_private(folder / name, text)
                stores.written_files[name] = text
    if (runs is None or runs >= PRUNE_EVERY or stores.results.written > max_bytes // 8
            or _tree_size(folder) > max_bytes):  # a few files: their sizes are cheap to read
        prune(folder, max_bytes, stores.metadata)
        if made or runs is not None or root_prune_due(folder.parent.parent):
            prune_root(folder.parent.parent, max_total_bytes, keep=folder)
        runs, stores.results.written = 0, 0
    stores.runs_since_prune = runs + 1
    return summary


