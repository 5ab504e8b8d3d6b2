"""The one Hamilton driver: built once per process (cached or not, per swap set), reused by everything.

The CLI, the Python API, batch runs and experiments all execute through :func:`execute`.
Node modules are listed in :data:`NODE_MODULES`; ``execute(..., nodes=[...])`` replaces nodes
of the same name by one's own functions (modules, functions or paths to .py files), checked
against the replaced node's type, with one driver per swap set (see "Node swaps" below).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import hashlib
import importlib.util
import inspect
import logging
import os
import sqlite3
import threading
import sys
import traceback
from functools import lru_cache
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from hamilton import ad_hoc_utils, graph as h_graph, htypes, node as h_node
from hamilton import driver as h_driver

from .nodes.lib.quote import quoted
from .nodes.lib.trust_paths import absolute_trust_paths
from .nodes import (
    budget,
    code,
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
from .nodes.lib.memo import Memo
from .nodes.types import CtxEngineError
from . import caching

#: The stage modules, in dataflow order.
NODE_MODULES: tuple[ModuleType, ...] = (
    config,
    settings,
    references,
    state,
    disclosure,
    code,
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

def cached_nodes(dr: h_driver.Driver | None = None) -> frozenset[str]:
    """The nodes of ``dr`` (default: the shared driver) that Hamilton's cache stores and serves:
    every node but the loaders (files, git, URLs, the environment, the clock), which carry
    ``@cache(behavior="recompute")``: they always run, and their values are fingerprinted, so an
    edited file invalidates exactly what reads it."""
    graph = (dr or default_driver()).graph
    return frozenset(n.name for n in graph.get_nodes()
                     if not n.user_defined and n.tags.get("cache.behavior") != "recompute")


def build_driver(modules: Iterable[ModuleType] = NODE_MODULES, cache_dir: str | os.PathLike | None = None, *,
                 cached: bool = False, swaps: Sequence[ModuleType] = (), adapters: Iterable[Any] = ()):
    """A new Hamilton driver over ``modules``; ``cached`` (or a ``cache_dir``): with Hamilton's
    cache (see :mod:`ctxengine.caching`), holding every node but the loaders, in the folder of
    ``ctxengine.caching.using(folder)`` around a run, else ``cache_dir``. ``swaps``: modules whose
    functions replace the nodes of the same name (checked first, see :func:`check_swaps`);
    ``adapters``: more Hamilton lifecycle adapters. No driver config: a choice from the settings
    (the summarizer) is a node reading them, so every build runs the graph once."""
    modules = tuple(modules)
    builder = h_driver.Builder().with_modules(*modules)
    if swaps:
        check_swaps(swaps, modules)
        builder = builder.with_modules(*swaps).allow_module_overrides()  # later modules win
    extra = list(adapters)
    if cached or cache_dir is not None:
        extra.append(caching.new_adapter(cache_dir))
    if extra:
        builder = builder.with_adapters(*extra)
    return builder.build()


def driver_for(cached: bool = False, swaps: tuple[ModuleType, ...] = ()) -> h_driver.Driver:
    """The shared driver with Hamilton's cache or without (one cached driver serves every cache
    folder) and one swap set (:func:`swap_modules`), built on first use, then reused."""
    return _shared_driver(bool(cached), tuple(swaps))


@lru_cache(maxsize=16)
def _shared_driver(cached: bool, swaps: tuple) -> h_driver.Driver:
    """One driver per (cached, swaps), keyed the same however :func:`driver_for` is called."""
    return build_driver(cached=cached, swaps=swaps)


driver_for.cache_clear = _shared_driver.cache_clear  # type: ignore[attr-defined]  # lru_cache's own API
driver_for.cache_info = _shared_driver.cache_info  # type: ignore[attr-defined]


#: The memo of this process (nodes/lib/memo.py): the driver input ``memo`` of every build, so a
#: transcript that grew makes only its new rounds; a cached build reads and writes its table in
#: the project's cache database. ``MEMO.clear()`` empties it (tests, benchmarks: a fresh process).
MEMO = Memo()
_LAST_CACHE_RUN: list = [None]
#: Hamilton's cache adapter keeps the state of its runs (and prunes all but the last); runs from
#: threads of one process (a threaded Dask worker, a server) take turns on the cached driver.
_CACHED_RUN_LOCK = threading.RLock()
#: The process's default for :func:`execute` calls that do not say (the CLI sets it from
#: --no-cache/--cache-dir). On: measured by benchmarks/cache.py, an unchanged cached rebuild
#: costs a fraction of an uncached build (loaders run, every other node is a hit).
_CACHE_DEFAULTS: dict[str, Any] = {"cache": True, "cache_dir": None}


def set_cache_defaults(cache: bool = True, cache_dir: str | os.PathLike | None = None) -> None:
    """Whether builds of this process use the cache, and in which folder, when a call does not
    say (a relative ``cache_dir`` is resolved against the working folder now)."""
    _CACHE_DEFAULTS.update(cache=bool(cache), cache_dir=None if cache_dir is None else os.path.abspath(os.fspath(cache_dir)))


def last_cache_run() -> "caching.RunSummary | None":
    """Hits and misses of the last cached :func:`execute` in this process (None: uncached)."""
    return _LAST_CACHE_RUN[0]


def cache_dir_for(project_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """The cache folder a build of ``project_dir`` uses: the project's folder in
    ``cache_dir/ctxengine-cache`` (a relative ``cache_dir`` resolved against the working
    folder), else in the user's cache root. A root inside the project, by its path or its real
    path, or a relative ``$CTXENGINE_CACHE_DIR`` is a CtxEngineError (exit 2) naming the folder:
    what a project could have written is never unpickled."""
    given = None if cache_dir is None else os.path.abspath(os.fspath(cache_dir))
    return str(caching.checked_project_cache_dir(project_dir, given))


def default_driver() -> h_driver.Driver:
    """The shared driver, uncached."""
    return driver_for()


def execute(
    outputs: list[str],
    project_dir: str | os.PathLike,
    overrides: Mapping[str, Any] | None = None,
    user_request: str = "",
    node_overrides: Mapping[str, Any] | None = None,
    *,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    nodes: Sequence["NodeSwap"] = (),
) -> dict[str, Any]:
    """Run the shared driver for ``outputs`` on one project; only what they need is computed.

    ``node_overrides`` replaces node values (Hamilton overrides), e.g. an in-memory
    ``session_history`` from :class:`ctxengine.Session`. ``nodes`` replaces nodes by one's own
    functions of the same name: modules, functions, or paths to .py files (loaded under a
    unique module name; paths keep a job picklable for process workers). ``cache``: Hamilton's cache between
    runs, in ``cache_dir`` (default: the project's folder under the user cache, see
    :mod:`ctxengine.caching`); None for both: the process default (:func:`set_cache_defaults`,
    cached unless the CLI's --no-cache or ``set_cache_defaults(False)`` said otherwise).
    """
    if not os.path.isdir(project_dir):
        raise CtxEngineError(f"project folder {quoted(os.fspath(project_dir))} does not exist or is not a folder")
    inputs = {
        "project_dir": os.path.abspath(os.fspath(project_dir)),
        "overrides": absolute_trust_paths(overrides or {}, os.getcwd(), os.path.expanduser("~")),  # nodes read neither
        "user_request": user_request,
        "memo": MEMO,  # ignored by Hamilton's cache: what it keeps is keyed by content
    }
    wanted = list(dict.fromkeys([*outputs, "context_config", "resolved_config"]))
    if cache is None:  # a folder given asks for the cache
        cache = _CACHE_DEFAULTS["cache"] or cache_dir is not None
    if cache_dir is None:
        cache_dir = _CACHE_DEFAULTS["cache_dir"]
    folder = cache_dir_for(inputs["project_dir"], cache_dir) if cache else None
    dr, folder = _driver_with_cache(folder, swap_modules(nodes))
    out = _run(dr, wanted, inputs, dict(node_overrides or {}), folder)  # one run, whatever the project sets
    keep_tokenizer_files(out["context_config"])
    return {name: out[name] for name in outputs}


def keep_tokenizer_files(context_config: Mapping[str, Any]) -> None:
    """After a run, outside the graph (no node writes files): what later processes reuse to count
    with the configured model's encoding (the table check, the Encoding's pickle), in the user cache."""
    from .nodes.lib import tokens

    preset = tokens.model_presets().get(str(context_config.get("model", "")))
    if isinstance(preset, Mapping) and preset.get("encoding"):
        tokens.keep_tokenizer_files(str(preset["encoding"]))


def _driver_with_cache(folder: str | None, swaps: tuple = ()) -> tuple[h_driver.Driver, str | None]:
    """The cached driver when ``folder`` is given; the uncached one when that folder cannot be
    created or opened (a read-only home, a full disk; with a warning, a folder refused: a
    symbolic link, one ctxengine did not make, another user's): the cache never fails a build."""
    if folder is None:
        return driver_for(False, swaps), None
    try:
        caching.stores_for(folder)
    except (OSError, sqlite3.Error, CtxEngineError) as exc:
        # a folder refused (a link, not ctxengine's, another user's) is said; a full or read-only disk is not
        log = logging.getLogger("ctxengine.cache").warning if isinstance(exc, CtxEngineError) else \
            logging.getLogger(__name__).debug
        log("warning: cache: %s cannot be used (%s); building without the cache", folder, exc)
        return driver_for(False, swaps), None
    return driver_for(True, swaps), folder


def _run(dr: h_driver.Driver, wanted: list[str], inputs: dict, overrides: dict, folder: str | None) -> dict:
    """One Hamilton run; with a cache, in its folder, then its bookkeeping (the build's results
    written in one transaction, hits, pruning, memory)."""
    if folder is None:
        _LAST_CACHE_RUN[0] = None
        return _execute_materialized(dr, wanted, inputs, overrides)
    with _CACHED_RUN_LOCK, caching.using(folder):  # one cached run at a time: the adapter keeps per-run state
        stores = caching.stores_for(folder)
        MEMO.open(stores.results.memo_table)  # what earlier processes made (a transcript that grew), read on the first miss
        out = None
        try:
            out = _execute_materialized(dr, wanted, inputs, overrides)
        except caching.StaleResult:  # a stored pickle that no longer loads: the folder's results go
            stores.forget_results()
            out = _execute_materialized(dr, wanted, inputs, overrides)
        finally:
            limit = int(out["context_config"]["cache"]["maxBytes"]) if out else caching.DEFAULT_MAX_BYTES
            stores.results.flush(MEMO.close(), limit // 8)  # the memo's new entries in the build's transaction
            dr.cache.forget_runs(keep=1)
        _LAST_CACHE_RUN[0] = caching.after_run(dr.cache, folder, inputs["project_dir"], limit,
                                              total_cap(out["resolved_config"], inputs["project_dir"]))
    return out


def total_cap(resolved: Any, project_dir: str) -> int:
    """``cache.maxTotalBytes`` (the cap of every project folder of the cache root together) as
    the user set it: a project's own config.json bounds its own folder (``cache.maxBytes``) at
    most, never the folders of other projects, so a value from it is not used."""
    origin = resolved.provenance.get("cache.maxTotalBytes", "")
    if origin.startswith(os.path.join(project_dir, ".planning") + os.sep):
        return int(config.defaults()["cache"]["maxTotalBytes"])
    return int(resolved.values["cache"]["maxTotalBytes"])


def _execute_materialized(dr: h_driver.Driver, wanted: list[str], inputs: dict, overrides: dict) -> dict:
    out = dr.execute(wanted, inputs=inputs, overrides=overrides)
    return {name: caching.materialize(value) for name, value in out.items()}


# ----------------------------------------------------------------------------- node swaps

#: What replaces nodes: a module (its public functions), a function, or a path to a .py file.
NodeSwap = Union[ModuleType, Callable, str, os.PathLike]
#: The driver inputs (no node may replace one).
DRIVER_INPUTS = ("project_dir", "overrides", "user_request", "memo")
_LOADED: dict[tuple, ModuleType] = {}  # (real path, mtime, size) -> the module loaded from that file


def swap_modules(nodes: Sequence[NodeSwap] = ()) -> tuple[ModuleType, ...]:
    """The modules of a swap set, in order: a module as it is, a .py path loaded (once per
    version of the file), loose functions gathered into one temporary module (the same
    functions give the same module, so the driver built for them is reused)."""
    if isinstance(nodes, (str, os.PathLike, ModuleType)) or callable(nodes):
        nodes = [nodes]  # one swap given bare
    modules: list[ModuleType] = []
    functions: list[Callable] = []
    for item in nodes:
        if isinstance(item, ModuleType):
            modules.append(item)
        elif isinstance(item, (str, os.PathLike)):
            modules.append(load_swap_file(item))
        elif inspect.isfunction(item):
            functions.append(item)
        else:
            raise CtxEngineError(f"nodes: {quoted(item)} is not a module, a function or a path to a .py file; "
                                 "pass e.g. nodes=[my_nodes] or nodes=['my_nodes.py']")
    if functions:
        modules.append(_functions_module(tuple(functions)))
    return tuple(modules)


def load_swap_file(path: str | os.PathLike) -> ModuleType:
    """The module of a .py file of nodes, under a unique module name; loaded again when the
    file changes. A missing file, or one that fails to import, is a CtxEngineError naming it
    (and the line of a syntax error or of the failing statement)."""
    shown = quoted(os.fspath(path))
    real = os.path.realpath(os.fspath(path))
    if not real.endswith(".py"):
        raise CtxEngineError(f"node file {shown}: not a .py file; give the path to a Python file of node functions")
    try:
        stat = os.stat(real)
    except OSError as exc:
        raise CtxEngineError(f"node file {shown}: {exc.strerror or exc}; give the path to a Python file of node "
                             "functions") from None
    key = (real, stat.st_mtime_ns, stat.st_size)
    if key in _LOADED:
        return _LOADED[key]
    digest = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
    name = f"ctxengine_swap_{os.path.basename(real)[:-3].replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, real)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and Hamilton look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's file is reported as its error
        del sys.modules[name]
        line = exc.lineno if isinstance(exc, SyntaxError) else next(
            (f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == real), None)
        where = f"{os.fspath(path)}:{line}" if line else os.fspath(path)
        raise CtxEngineError(f"node file {quoted(where)}: importing it failed: {type(exc).__name__}: {exc}") from None
    _LOADED[key] = module
    return module


@lru_cache(maxsize=16)
def _functions_module(functions: tuple[Callable, ...]) -> ModuleType:
    return ad_hoc_utils.create_temporary_module(*functions, module_name=f"ctxengine_swap_functions_{id(functions):x}")


def check_swaps(swaps: Sequence[ModuleType], modules: Iterable[ModuleType] = NODE_MODULES) -> dict[str, str]:
    """Check that every public function of ``swaps`` replaces a node of ``modules``: one that
    exists (else the closest names), returns what the replaced node returns (what its users
    expect), and takes only parameters the graph has, of matching types. Returns node name ->
    the replacing function's name; raises a CtxEngineError naming the function otherwise."""
    base = h_graph.create_function_graph(*modules, config={})
    known = sorted(name for name, n in base.items() if n.user_defined is False)
    replaced: dict[str, h_node.Node] = {}
    for module in swaps:
        for name, new in _module_nodes(module).items():
            _check_replacement(name, new, base, known)
            replaced[name] = new
    graph = {**{n: v for n, v in base.items() if not v.user_defined}, **replaced}
    for new in replaced.values():
        for param, (wanted, dependency) in new.input_types.items():
            giver = graph.get(param) or (base[param] if param in DRIVER_INPUTS else None)
            _check_parameter(new, param, wanted, dependency, giver, known)
    return {name: new.originating_functions[0].__name__ for name, new in replaced.items()}


def _module_nodes(module: ModuleType) -> dict[str, h_node.Node]:
    """The nodes a swap module defines (its functions' parameters left out), by name; a
    CtxEngineError naming the module when Hamilton cannot build them."""
    try:
        own = h_graph.create_function_graph(module, config={}, allow_module_overrides=True)
    except Exception as exc:  # noqa: BLE001 - Hamilton's reason, with the module named
        raise CtxEngineError(f"node swap {_module_label(module)}: {exc}") from None
    return {name: new for name, new in own.items() if not new.user_defined}


def _closest(name: str, known: list[str]) -> str:
    """'; closest: a, b' for the node names like ``name``, or nothing."""
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f"; closest: {', '.join(close)}" if close else ""


def _check_replacement(name: str, new: h_node.Node, base: dict[str, h_node.Node], known: list[str]) -> None:
    """Raise a CtxEngineError unless ``new`` replaces a node of ``base`` of that name and returns
    what it returns."""
    old, where = base.get(name), _function_label(new)
    if old is None or old.user_defined or name in DRIVER_INPUTS:
        raise CtxEngineError(f"node swap {where}: there is no node {quoted(name)} to replace{_closest(name, known)} "
                             "(a helper that is not a node must start with _)")
    if not _fits(new.type, old.type):
        raise CtxEngineError(f"node swap {where}: it returns {_type_label(new.type)}, but node {quoted(name)} "
                             f"returns {_type_label(old.type)} (what the nodes using it expect); "
                             f"return a {_type_label(old.type)} and annotate it so{_missing(new.type, old.type)}")


def _check_parameter(new: h_node.Node, param: str, wanted: Any, dependency: h_node.DependencyType,
                     giver: h_node.Node | None, known: list[str]) -> None:
    """Raise a CtxEngineError unless parameter ``param`` of swapped-in node ``new`` names a node
    of the dataflow (``giver``; an optional parameter may name none) of a type it takes."""
    if giver is None:
        if dependency == h_node.DependencyType.OPTIONAL:
            return
        raise CtxEngineError(f"node swap {_function_label(new)}: parameter {quoted(param)} names no node "
                             f"of the dataflow{_closest(param, known)}; name a parameter after the node whose value it takes")
    if not _fits(giver.type, wanted):
        raise CtxEngineError(f"node swap {_function_label(new)}: parameter {quoted(param)} is annotated "
                             f"{_type_label(wanted)}, but node {quoted(param)} returns {_type_label(giver.type)}")


def _fits(given: Any, expected: Any) -> bool:
    """Whether a value of type ``given`` may go where ``expected`` is wanted (Hamilton's own
    check: the graph is built with it), Any given only where Any is expected."""
    if given is Any and expected is not Any:
        return False
    try:
        return htypes.types_match(expected, given)
    except TypeError:  # issubclass() refused (a protocol Python cannot check)
        return False


def _missing(given: Any, expected: Any) -> str:
    """`` (missing: a, b)`` when ``expected`` is a protocol and ``given`` a class lacking its members."""
    if not (getattr(expected, "_is_protocol", False) and inspect.isclass(given)):
        return ""
    members = [m for b in expected.__mro__ if getattr(b, "_is_protocol", False) and b.__module__ != "typing"
               for m in (*vars(b).get("__annotations__", {}), *vars(b)) if not m.startswith("_")]
    absent = [m for m in dict.fromkeys(members)
              if not any(m in vars(b) or m in vars(b).get("__annotations__", {}) for b in given.__mro__)]
    return f" ({given.__name__} lacks: {', '.join(absent)})" if absent else ""


def _type_label(kind: Any) -> str:
    if kind is Any:
        return "Any (no return annotation?)"
    if inspect.isclass(kind):
        return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__name__} ({kind.__module__})"
    return str(kind).replace("typing.", "")


def _function_label(n: h_node.Node) -> str:
    fn = n.originating_functions[0] if n.originating_functions else None
    if fn is None:
        return quoted(n.name)
    try:
        where = f"{inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]}"
    except (OSError, TypeError):
        where = getattr(fn, "__module__", "?")
    return f"{quoted(fn.__name__)} ({where})"


def _module_label(module: ModuleType) -> str:
    if getattr(module, "__file__", None):
        return quoted(module.__file__)
    functions = [name for name, value in vars(module).items() if inspect.isfunction(value)]
    return f"of the function{'s' if len(functions) > 1 else ''} {', '.join(functions)}" if functions else quoted(module.__name__)
