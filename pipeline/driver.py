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
    settings,
    state,
    summarize,
    truncation,
)
from .nodes.types import CtxEngineError  # noqa: E402
from . import cache as _cache  # noqa: E402

#: The stage modules, in dataflow order.
NODE_MODULES: tuple[ModuleType, ...] = (
    config,
    settings,
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


#: The nodes Hamilton's cache stores and serves while their inputs are unchanged; every other
#: node recomputes on every run (Hamilton's "recompute": it runs, and its value is fingerprinted
#: so its dependents see whether it changed). Loaders (files, git, URLs, the environment, the
#: clock) carry ``@cache(behavior="recompute")`` and must never be listed here.
#: Measured with ``python benchmarks/cache.py --nodes`` (compute time of a warm uncached run vs
#: the cost of a hit: lookup and unpickling): a node is cached when computing it costs clearly
#: more than loading it. Everything else costs under ~1 ms and loads slower than it computes
#: (the section lists carry the whole parsed transcript: 3.6 MB, 20-70 ms to unpickle each;
#: the parsed session itself unpickles in 190 ms and parses in 80 ms).
CACHED_NODES: frozenset[str] = frozenset({
    "history_section",  # round summaries of the older rounds: 160 ms on the 4.1 MB transcript, loads in 30
    "budget_monitor",  # 190 ms (counts every round), loads in 0.2
    "round_token_use",  # 28 ms, loads in 2
    "section_tallies",  # 4-65 ms (token counts of every section), loads in 0.1
    "budget_report",  # 28 ms (an exact count of the assembled context)
    "structure_check",  # 2-8 ms
    "truncation_trigger",  # 2.5 ms on the GSD corpus
    "gsd_position",  # 2-5 ms on the GSD corpus (parses STATE/ROADMAP)
    "plan_state",  # 1-4 ms on the GSD corpus
    "roadmap_state",  # 1-4 ms on the GSD corpus
    "disclosure_decisions",  # 3 ms on the GSD corpus
    "template_overhead",  # 1-2 ms
})


def build_driver(variants: Mapping[str, str] | None = None, modules: Iterable[ModuleType] = NODE_MODULES,
                 cache_dir: str | os.PathLike | None = None, cached: Iterable[str] | None = None):
    """A new Hamilton driver over ``modules`` with the given variant choices; with
    ``cache_dir``, Hamilton's cache in that folder (see :mod:`ctxengine.cache`) holding the
    ``cached`` nodes (default :data:`CACHED_NODES`)."""
    builder = h_driver.Builder().with_modules(*modules).with_config(dict(variants or {}))
    if cache_dir is not None:
        builder = builder.with_adapters(_cache.new_adapter(cache_dir, CACHED_NODES if cached is None else cached))
    return builder.build()


@lru_cache(maxsize=16)
def driver_for(variant_items: tuple[tuple[str, str], ...] = (), cache_dir: str | None = None) -> h_driver.Driver:
    """The shared driver for one set of variant choices and one cache folder (None: no
    cache), built on first use, then reused."""
    return build_driver(dict(variant_items), cache_dir=cache_dir)


_LAST_CACHE_RUN: list = [None]
#: The process's default for :func:`execute` calls that do not say (the CLI sets it from --cache/--cache-dir).
#: Off: measured by benchmarks/cache.py, a cached build of a small project is slower than an
#: uncached one (loaders always run; fingerprinting costs more than the cheap nodes it saves).
_CACHE_DEFAULTS: dict[str, Any] = {"cache": False, "cache_dir": None}


def set_cache_defaults(cache: bool = False, cache_dir: str | os.PathLike | None = None) -> None:
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
    uncached unless the CLI's --cache or --cache-dir set it).
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
    """The driver for ``folder``; an uncached one when that folder cannot be created or opened
    (a read-only home, a full disk): the cache never fails a build."""
    if folder is None:
        return driver_for(variants, None), None
    try:
        return driver_for(variants, folder), folder
    except (OSError, sqlite3.Error) as exc:
        logging.getLogger(__name__).debug("cache folder %s unusable (%s): building without the cache", folder, exc)
        return driver_for(variants, None), None


def _run(dr: h_driver.Driver, wanted: list[str], inputs: dict, overrides: dict, folder: str | None) -> dict:
    """One Hamilton run; with a cache, then its bookkeeping (hits, pruning, memory)."""
    try:
        out = dr.execute(wanted, inputs=inputs, overrides=overrides)
    finally:
        if folder is not None:
            dr.cache.forget_runs(keep=1)
    if folder is not None:
        limit = out["context_config"]["cache"]["maxBytes"]
        _LAST_CACHE_RUN[0] = _cache.after_run(dr.cache, folder, inputs["project_dir"], int(limit))
    else:
        _LAST_CACHE_RUN[0] = None
    return out


def _variants_of(context_config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    items = []
    for name, (section, key) in VARIANT_KEYS.items():
        items.append((name, str(context_config[section][key])))
    return tuple(sorted(items))


@lru_cache(maxsize=1)
def _default_variants() -> tuple[tuple[str, str], ...]:
    return _variants_of(config.defaults())
