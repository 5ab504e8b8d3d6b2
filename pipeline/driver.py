"""The one Hamilton driver: built once per process and per variant set, reused by everything.

The CLI, the Python API, batch runs and experiments all execute through :func:`execute`.
Node modules are listed in :data:`NODE_MODULES`; an experiment swaps one by building a
driver with :func:`build_driver` and its own module list.
"""

from __future__ import annotations

import os

os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")  # before hamilton is imported: ~0.8 s less

import contextlib  # noqa: E402
import contextvars  # noqa: E402
import logging  # noqa: E402
import sqlite3  # noqa: E402
from functools import lru_cache  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any, Iterable, Mapping  # noqa: E402

from hamilton import driver as h_driver  # noqa: E402

from .nodes.lib.quote import quoted
from .nodes import (  # noqa: E402
    budget,
    config,
    disclosure,
    monitor,
    quality,
    references,
    render,
    report,
    state,
    summarize,
    truncation,
)
from .nodes.types import CtxEngineError  # noqa: E402
from . import cache as _cache  # noqa: E402

#: The stage modules, in dataflow order.
NODE_MODULES: tuple[ModuleType, ...] = (
    config,
    references,
    state,
    disclosure,
    render,
    budget,
    monitor,
    summarize,
    truncation,
    quality,
    report,
)


_QUIET_FAILURES = contextvars.ContextVar("ctxengine_quiet_failures", default=False)


class _UserErrorFilter(logging.Filter):
    """Hamilton logs every node failure with a traceback; a CtxEngineError is the user's
    input at fault, reported once by the caller with its own message, so drop that log
    (and every failure log inside :func:`quiet_failures`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "Need help with Hamilton?" in str(record.msg):  # the driver's banner on every failure
            return False
        if record.exc_info and _QUIET_FAILURES.get():
            return False
        return not (record.exc_info and isinstance(record.exc_info[1], CtxEngineError))


@contextlib.contextmanager
def quiet_failures():
    """Within this block Hamilton logs no node failure: the caller reports each one itself
    (batch rows, the CLI without --debug)."""
    token = _QUIET_FAILURES.set(True)
    try:
        yield
    finally:
        _QUIET_FAILURES.reset(token)


for _name in ("hamilton.execution.graph_functions", "hamilton.driver"):
    logging.getLogger(_name).addFilter(_UserErrorFilter())

#: Driver-level config: the keys that pick `@config.when` variants, with their defaults.
VARIANT_KEYS = {"summarizer_method": ("truncation", "summarizer")}


#: The nodes Hamilton's cache recomputes although they are not loaders; every other node is
#: stored and served while its inputs are unchanged. Loaders (files, git, URLs, the environment,
#: the clock) carry ``@cache(behavior="recompute")``: they always run, and their values are
#: fingerprinted, so an edited file invalidates exactly what reads it. Measured with
#: ``python benchmarks/cache.py --nodes``: with hits served from memory in a warm process and
#: unpickled only when a node that runs needs them (:class:`ctxengine.cache.Lazy`), a hit costs
#: less than computing every node, so none is left out.
UNCACHED_NODES: frozenset[str] = frozenset()


def cached_nodes(dr: h_driver.Driver | None = None) -> frozenset[str]:
    """The nodes of ``dr`` (default: the shared driver) that Hamilton's cache stores and serves."""
    graph = (dr or default_driver()).graph
    return frozenset(n.name for n in graph.get_nodes()
                     if not n.user_defined and n.tags.get("cache.behavior") != "recompute" and n.name not in UNCACHED_NODES)


def build_driver(variants: Mapping[str, str] | None = None, modules: Iterable[ModuleType] = NODE_MODULES,
                 cache_dir: str | os.PathLike | None = None, uncached: Iterable[str] | None = None, *,
                 cached: bool = False):
    """A new Hamilton driver over ``modules`` with the given variant choices; ``cached`` (or a
    ``cache_dir``): with Hamilton's cache (see :mod:`ctxengine.cache`), holding every node but
    the loaders and the ``uncached`` ones (default :data:`UNCACHED_NODES`), in the folder of
    ``ctxengine.cache.using(folder)`` around a run, else ``cache_dir``."""
    builder = h_driver.Builder().with_modules(*modules).with_config(dict(variants or {}))
    if cached or cache_dir is not None:
        builder = builder.with_adapters(_cache.new_adapter(cache_dir, UNCACHED_NODES if uncached is None else uncached))
    return builder.build()


@lru_cache(maxsize=16)
def driver_for(variant_items: tuple[tuple[str, str], ...] = (), cached: bool = False) -> h_driver.Driver:
    """The shared driver for one set of variant choices, with Hamilton's cache or without (one
    cached driver serves every cache folder), built on first use, then reused."""
    return build_driver(dict(variant_items), cached=cached)


_LAST_CACHE_RUN: list = [None]
#: The process's default for :func:`execute` calls that do not say (the CLI sets it from
#: --no-cache/--cache-dir). On: measured by benchmarks/cache.py, an unchanged cached rebuild
#: costs a fraction of an uncached build (loaders run, every other node is a hit).
_CACHE_DEFAULTS: dict[str, Any] = {"cache": True, "cache_dir": None}


def set_cache_defaults(cache: bool = True, cache_dir: str | os.PathLike | None = None) -> None:
    """Whether builds of this process use the cache, and in which folder, when a call does not say."""
    _CACHE_DEFAULTS.update(cache=bool(cache), cache_dir=cache_dir)


def last_cache_run() -> "_cache.RunSummary | None":
    """Hits and misses of the last cached :func:`execute` in this process (None: uncached)."""
    return _LAST_CACHE_RUN[0]


def cache_dir_for(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """The cache folder a build of ``project_dir`` uses: ``cache_dir``, or the project's own."""
    return os.path.abspath(os.fspath(cache_dir)) if cache_dir is not None else str(_cache.project_cache_dir(project_dir))


def default_driver() -> h_driver.Driver:
    """The shared driver with the default variants."""
    return driver_for(_default_variants())


def execute(
    outputs: list[str],
    project_dir: str | os.PathLike,
    overrides: Mapping[str, Any] | None = None,
    user_request: str = "",
    node_overrides: Mapping[str, Any] | None = None,
    *,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Run the shared driver for ``outputs`` on one project; only what they need is computed.

    ``node_overrides`` replaces node values (Hamilton overrides), e.g. an in-memory
    ``session_history`` from :class:`ctxengine.Session`. ``cache``: Hamilton's cache between
    runs, in ``cache_dir`` (default: the project's folder under the user cache, see
    :mod:`ctxengine.cache`); None for both: the process default (:func:`set_cache_defaults`,
    cached unless the CLI's --no-cache or ``set_cache_defaults(False)`` said otherwise).
    """
    if not os.path.isdir(project_dir):
        raise CtxEngineError(f"project folder {quoted(os.fspath(project_dir))} does not exist or is not a folder")
    inputs = {
        "project_dir": os.path.abspath(os.fspath(project_dir)),
        "overrides": dict(overrides or {}),
        "user_request": user_request,
    }
    wanted = list(dict.fromkeys([*outputs, "context_config"]))
    if cache is None:  # a folder given asks for the cache
        cache = _CACHE_DEFAULTS["cache"] or cache_dir is not None
    if cache_dir is None:
        cache_dir = _CACHE_DEFAULTS["cache_dir"]
    folder = cache_dir_for(inputs["project_dir"], cache_dir) if cache else None
    first, folder = _driver_with_cache(_default_variants(), folder)
    out = _run(first, wanted, inputs, dict(node_overrides or {}), folder)
    variants = _variants_of(out["context_config"])
    if variants != _default_variants():  # the project picks another variant: run again with its driver
        overrides = {"context_config": out["context_config"], **(node_overrides or {})}
        second, folder = _driver_with_cache(variants, folder)
        out = _run(second, wanted, inputs, overrides, folder)
    return {name: out[name] for name in outputs}


def _driver_with_cache(variants: tuple, folder: str | None) -> tuple[h_driver.Driver, str | None]:
    """The cached driver when ``folder`` is given; the uncached one when that folder cannot be
    created or opened (a read-only home, a full disk, another user's folder): the cache never
    fails a build."""
    if folder is None:
        return driver_for(variants), None
    try:
        _cache.stores_for(folder)
    except (OSError, sqlite3.Error, CtxEngineError) as exc:
        logging.getLogger(__name__).debug("cache folder %s unusable (%s): building without the cache", folder, exc)
        return driver_for(variants), None
    return driver_for(variants, True), folder


def _run(dr: h_driver.Driver, wanted: list[str], inputs: dict, overrides: dict, folder: str | None) -> dict:
    """One Hamilton run; with a cache, in its folder, then its bookkeeping (the build's results
    written in one transaction, hits, pruning, memory)."""
    if folder is None:
        _LAST_CACHE_RUN[0] = None
        return _execute_materialized(dr, wanted, inputs, overrides)
    with _cache.using(folder):
        try:
            out = _execute_materialized(dr, wanted, inputs, overrides)
        except _cache.StaleResult:  # a stored pickle that no longer loads: the folder's results go
            _cache.stores_for(folder).forget_results()
            out = _execute_materialized(dr, wanted, inputs, overrides)
        finally:
            dr.cache.result_store.flush()
            dr.cache.forget_runs(keep=1)
        limit = (out["context_config"].get("cache") or {}).get("maxBytes", _cache.DEFAULT_MAX_BYTES)
        _LAST_CACHE_RUN[0] = _cache.after_run(dr.cache, folder, inputs["project_dir"], int(limit))
    return out


def _execute_materialized(dr: h_driver.Driver, wanted: list[str], inputs: dict, overrides: dict) -> dict:
    out = dr.execute(wanted, inputs=inputs, overrides=overrides)
    return {name: _cache.materialize(value) for name, value in out.items()}


def _variants_of(context_config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    items = []
    for name, (section, key) in VARIANT_KEYS.items():
        items.append((name, str(context_config[section][key])))
    return tuple(sorted(items))


@lru_cache(maxsize=1)
def _default_variants() -> tuple[tuple[str, str], ...]:
    return _variants_of(config.defaults())
