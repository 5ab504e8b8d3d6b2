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


def build_driver(variants: Mapping[str, str] | None = None, modules: Iterable[ModuleType] = NODE_MODULES):
    """A new Hamilton driver over ``modules`` with the given variant choices."""
    return h_driver.Builder().with_modules(*modules).with_config(dict(variants or {})).build()


@lru_cache(maxsize=8)
def driver_for(variant_items: tuple[tuple[str, str], ...] = ()) -> h_driver.Driver:
    """The shared driver for one set of variant choices (built on first use, then reused)."""
    return build_driver(dict(variant_items))


def default_driver() -> h_driver.Driver:
    """The shared driver with the default variants."""
    return driver_for(_default_variants())


def execute(
    outputs: list[str],
    project_dir: str | os.PathLike,
    overrides: Mapping[str, Any] | None = None,
    user_request: str = "",
    node_overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the shared driver for ``outputs`` on one project; only what they need is computed.

    ``node_overrides`` replaces node values (Hamilton overrides), e.g. an in-memory
    ``session_history`` from :class:`ctxengine.Session`.
    """
    if not os.path.isdir(project_dir):
        raise CtxEngineError(f"project folder {quoted(os.fspath(project_dir))} does not exist or is not a folder")
    inputs = {
        "project_dir": os.path.abspath(os.fspath(project_dir)),
        "overrides": dict(overrides or {}),
        "user_request": user_request,
    }
    wanted = list(dict.fromkeys([*outputs, "context_config"]))
    out = default_driver().execute(wanted, inputs=inputs, overrides=dict(node_overrides or {}))
    variants = _variants_of(out["context_config"])
    if variants != _default_variants():  # the project picks another variant: run again with its driver
        overrides = {"context_config": out["context_config"], **(node_overrides or {})}
        out = driver_for(variants).execute(wanted, inputs=inputs, overrides=overrides)
    return {name: out[name] for name in outputs}


def _variants_of(context_config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    items = []
    for name, (section, key) in VARIANT_KEYS.items():
        items.append((name, str(context_config[section][key])))
    return tuple(sorted(items))


@lru_cache(maxsize=1)
def _default_variants() -> tuple[tuple[str, str], ...]:
    return _variants_of(config.defaults())
