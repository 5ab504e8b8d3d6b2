"""ctxengine: assemble the context for one request against one project, and make it fit.

    >>> import ctxengine
    >>> result = ctxengine.build_context("path/to/project", request="Add a login endpoint")
    >>> result.budget.total_tokens, result.context[:80]
"""

from .api import build_context, bundled_example, explain_config, run_nodes
from .nodes.report import BuildResult
from .session import Session
from .nodes.types import BudgetExceededError, ConfigError, CtxEngineError, ReferenceLoadError, TemplateError

__all__ = [
    "BuildResult",
    "BudgetExceededError",
    "ConfigError",
    "CtxEngineError",
    "ReferenceLoadError",
    "Session",
    "TemplateError",
    "build_context",
    "bundled_example",
    "explain_config",
    "run_nodes",
]
