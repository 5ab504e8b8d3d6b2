"""The errors ctxengine raises on purpose (nodes/types.py gives them too).

A leaf module (nothing of ctxengine imported): the CLI catches them at its top, and
``ctxengine --version`` loads no more than this for it (nodes/types.py brings the digests,
hashlib, pickle and its dataclasses: about 6 ms of a 55 ms ``--version``).
"""

from __future__ import annotations


class CtxEngineError(Exception):
    """Base of every error ctxengine raises on purpose; the CLI prints it without a traceback."""

    exit_code = 2


class ConfigError(CtxEngineError):
    """Bad configuration: names the file and key and says how to fix it (CLI exit 2)."""


class ReferenceLoadError(CtxEngineError):
    """A reference that cannot be loaded: missing file, cycle, bad URL (CLI exit 2)."""


class TemplateError(CtxEngineError):
    """A template that cannot be parsed: names the template and line (CLI exit 2)."""


class BudgetExceededError(CtxEngineError):
    """The immutable sections alone do not fit the available budget (CLI exit 3)."""

    exit_code = 3
