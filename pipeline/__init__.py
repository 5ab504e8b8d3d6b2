"""ctxengine: assemble the context for one request against one project, and make it fit.

    >>> import ctxengine
    >>> result = ctxengine.build_context("path/to/project", request="Add a login endpoint")
    >>> result.budget.total_tokens, result.context[:80]

The names below load on first use (PEP 562), so ``import ctxengine`` and the CLI's
``--version``, ``--help`` and signal setup run before Hamilton (and pandas) are imported.
"""

from __future__ import annotations

from importlib import import_module

from .version import __version__
from typing import TYPE_CHECKING, Any

#: Public name -> the submodule defining it (imported on first access).
_EXPORTS = {
    "build_context": ".api",
    "bundled_example": ".api",
    "explain_config": ".api",
    "experiment": ".experiment",  # the module is callable: ctxengine.experiment(projects, vary=...)
    "run_nodes": ".api",
    "report_html": ".viz.report",
    "build_report": ".viz.report",
    "BuildResult": ".nodes.report",
    "Session": ".session",
    "BudgetExceededError": ".nodes.types",
    "ConfigError": ".nodes.types",
    "CtxEngineError": ".nodes.types",
    "ReferenceLoadError": ".nodes.types",
    "TemplateError": ".nodes.types",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .api import build_context, bundled_example, explain_config, run_nodes
    from .nodes.report import BuildResult
    from .viz.report import build_report, report_html
    from .nodes.types import BudgetExceededError, ConfigError, CtxEngineError, ReferenceLoadError, TemplateError
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
