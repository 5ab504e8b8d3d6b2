"""The Python API: the same driver and the same nodes as the CLI."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from .nodes.lib.quote import quoted
from . import driver
from .nodes.config import MAX_DEPTH, OVERRIDE_ORIGIN
from .nodes.lib.yamlio import nesting_depth
from .nodes.report import BuildResult
from .nodes.types import ConfigError, CtxEngineError

#: What a request may not hold: NUL, or a surrogate code point on its own (see :func:`request_problem`).
_BAD_REQUEST_CHARACTER = re.compile("[\0\ud800-\udfff]")


def bundled_example(name: str = "demo") -> Path:
    """A bundled example project (a folder of examples/; ``demo`` is used when no project is given)."""
    root = resources.files("ctxengine.examples")
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
    if name not in names:
        raise CtxEngineError(f"bundled example {quoted(name)} does not exist; choose one of: {', '.join(names)}")
    return Path(str(root.joinpath(name)))


def build_overrides(
    overrides: Mapping[str, Any] | None = None,
    *,
    mode: str | None = None,
    max_tokens: int | None = None,
    reserve_tokens: int | str | None = None,
    reserve_share: float | None = None,
    compact: bool | None = None,
    strategy: str | None = None,
    layout: str | None = None,
    phase: str | None = None,
    phase_number: str | int | float | None = None,
) -> dict[str, Any]:
    """Overrides as dotted keys: the named options first, then ``overrides`` on top.
    ``reserve_tokens`` is a number or "auto" (the default: ``reserve_share`` of ``max_tokens``,
    capped by the model's maxOutputTokens)."""
    named = {
        "template": mode,
        "budget.maxTokens": max_tokens,
        "budget.reserveTokens": reserve_tokens,
        "budget.reserveShare": reserve_share,
        "truncation.compact": compact,
        "truncation.strategy": strategy,
        "state.layout": layout,
        "disclosure.phase": phase,
        "state.gsdPhase": None if phase_number is None else str(phase_number),
    }
    out = {key: value for key, value in named.items() if value is not None}
    out.update(overrides or {})
    _check_depth(out)
    return out


def _check_depth(overrides: Mapping[str, Any]) -> None:
    """Refuse overrides nested past any configuration before the driver sees them (a failing
    node's inputs are printed, and printing a 1000-deep dict overflows the stack)."""
    if nesting_depth(overrides, MAX_DEPTH) > MAX_DEPTH:
        raise ConfigError(f"{OVERRIDE_ORIGIN}: the overrides nest deeper than {MAX_DEPTH} levels; "
                          "pass dotted keys (budget.maxTokens) with plain values")


def build_context(
    project_dir: str | os.PathLike | None = None,
    request: str = "",
    *,
    overrides: Mapping[str, Any] | None = None,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    nodes: Sequence[driver.NodeSwap] = (),
    **options: Any,
) -> BuildResult:
    """Assemble the context for ``request`` against ``project_dir`` and make it fit.

    ``options`` are the named overrides of :func:`build_overrides` (mode, max_tokens,
    reserve_tokens, reserve_share, compact, strategy, layout, phase); ``overrides`` takes dotted keys
    (``{"budget.maxTokens": 32000}``). Builds use Hamilton's cache between runs, in the
    project's folder under the user cache or ``cache_dir``; ``cache=False`` computes everything.
    ``nodes`` replaces nodes by one's own functions of the same name: modules, functions or
    paths to .py files (``nodes=[my_nodes]``; see the README on swaps).
    Raises a CtxEngineError subclass on bad input (a swap that does not fit the graph too).
    """
    return run_nodes(["build_result"], project_dir, request, overrides=overrides, cache=cache, cache_dir=cache_dir,
                     nodes=nodes, **options)["build_result"]


def run_nodes(
    outputs: list[str],
    project_dir: str | os.PathLike | None = None,
    request: str = "",
    *,
    overrides: Mapping[str, Any] | None = None,
    cache: bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    nodes: Sequence[driver.NodeSwap] = (),
    **options: Any,
) -> dict[str, Any]:
    """Any nodes of the dataflow by name (a partial run computes only what they need), e.g.
    ``run_nodes(["budget_report"], project)`` or ``run_nodes(["build_result", "context_lineage"], ...)``;
    ``nodes`` swaps nodes as in :func:`build_context`."""
    _check_types(project_dir=(project_dir, (str, os.PathLike, type(None))), request=(request, (str,)),
                 overrides=(overrides, (Mapping, type(None))))
    check_request(request)
    project = project_dir if project_dir is not None else bundled_example()
    return driver.execute(list(outputs), project, build_overrides(overrides, **options), request,
                          cache=cache, cache_dir=cache_dir, nodes=nodes)


def build_report(project_dir: str | os.PathLike | None = None, request: str = "", **options: Any) -> str:
    """Build ``project_dir`` (the options of :func:`run_nodes`) and return its run report, the
    self-contained HTML page of :func:`ctxengine.viz.report.report_html`. The drawing code (graphviz,
    about 9 ms) loads here: every CLI build and API call imports this module, few draw a report."""
    from .viz.report import report_html

    out = run_nodes(["build_result", "context_lineage"], project_dir, request, **options)
    return report_html(out["build_result"], out["context_lineage"], project_dir=project_dir)


def explain_config(
    project_dir: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None,
    *, cache: bool | None = None, cache_dir: str | os.PathLike | None = None,
) -> tuple[list[tuple[str, Any, str]], tuple[str, ...]]:
    """Every effective configuration value with its origin, then which rules load and why (rows
    ``rules: NAME``: the project's own CLAUDE.md / AGENTS.md files, the bundled GSD rules), and
    the configuration warnings."""
    project = project_dir if project_dir is not None else bundled_example()
    _check_depth(overrides or {})
    out = driver.execute(["context_config", "config_provenance", "config_warnings", "project_rules"], project,
                         overrides, cache=cache, cache_dir=cache_dir)
    rows = [(key, _lookup(out["context_config"], key), origin) for key, origin in sorted(out["config_provenance"].items())]
    return rows + out["project_rules"].explanation(), out["config_warnings"]


def request_problem(request: str) -> str | None:
    """What makes ``request`` unusable as the text of a prompt, else None: a NUL byte (a binary
    file or a C string's end) or a lone surrogate (bytes that were not UTF-8, kept by Python's
    surrogateescape, which no UTF-8 writer or model API accepts), with its character position."""
    found = _BAD_REQUEST_CHARACTER.search(request)
    if found is None:
        return None
    what = "a NUL byte" if found.group() == "\0" else f"a lone surrogate U+{ord(found.group()):04X} (not UTF-8 text)"
    return f"has {what} at character {found.start() + 1:,} of {len(request):,}"


def check_request(request: str, where: str = "request") -> None:
    """A CtxEngineError (exit 2) naming ``where`` the request came from when :func:`request_problem`
    finds a NUL byte or a lone surrogate in it."""
    problem = request_problem(request)
    if problem:
        raise CtxEngineError(f"{where} {problem}; remove it or give the request as UTF-8 text")


def _check_types(**arguments: tuple[Any, tuple[type, ...]]) -> None:
    """A TypeError naming the first argument whose value is not of its expected type."""
    for name, (value, expected) in arguments.items():
        if not isinstance(value, expected):
            wanted = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
            hint = ' (pass "" for no request)' if name == "request" else ""
            raise TypeError(f"{name} must be {wanted}, not {type(value).__name__}{hint}")


def _lookup(tree: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree[part]
    return tree
