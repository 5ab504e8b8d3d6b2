"""ctxengine: assemble the context for one request against one project, and make it fit.

    >>> import ctxengine
    >>> result = ctxengine.build_context("path/to/project", request="Add a login endpoint")
    >>> result.budget.total_tokens, result.context[:80]

The names below load on first use (PEP 562), so ``import ctxengine`` and the CLI's
``--version``, ``--help`` and signal setup run before Hamilton (and pandas) are imported
(``python benchmarks/coldstart.py``: ``import ctxengine`` 57 ms, with what its names need 1.9 s,
min of 5 on a loaded 2-core machine).
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .version import __version__

# Before any module of ctxengine imports Hamilton: its extension autoload costs about 0.8 s.
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")

#: Public name -> the submodule defining it (imported on first access).
_EXPORTS = {
    "build_context": ".api",
    "bundled_example": ".api",
    "explain_config": ".api",
    "experiment": ".experiment",  # the module is callable: ctxengine.experiment(projects, vary=...)
    "run_nodes": ".api",
    "report_html": ".viz.report",
    "build_report": ".api",
    "BuildResult": ".nodes.report",
    "Session": ".session",
    "BudgetExceededError": ".nodes.errors",
    "ConfigError": ".nodes.errors",
    "CtxEngineError": ".nodes.errors",
    "ReferenceLoadError": ".nodes.errors",
    "TemplateError": ".nodes.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .api import build_context, build_report, bundled_example, explain_config, run_nodes
    from .nodes.report import BuildResult
    from .viz.report import report_html
    from .nodes.errors import BudgetExceededError, ConfigError, CtxEngineError, ReferenceLoadError, TemplateError
    from .session import Session


def __getattr__(name: str) -> Any:
    """Import the submodule of a public name on first access, then keep the value here."""
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'ctxengine' has no attribute {name!r}") from None
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
