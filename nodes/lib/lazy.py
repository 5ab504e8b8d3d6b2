"""Packages whose names load on first use.

A package ``__init__`` that imports every submodule makes each importer pay for all of them
(the truncation and summary code costs 30-60 ms at start-up, and a build that cuts nothing never
runs it). ``__getattr__, __dir__ = lazy_exports(globals(), {"fit": ("solve",), "measure": ("*", "_x")})``
keeps ``package.name`` and ``from package import name`` working while importing a submodule only
when one of its names is first asked for: each submodule lists the names it gives, ``"*"`` for all
its public names (as ``from .sub import *`` would; such submodules are searched in the order given).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(namespace: dict, submodules: Mapping[str, tuple[str, ...]]) -> tuple[Callable, Callable]:
    """(``__getattr__``, ``__dir__``) for the package whose globals are ``namespace``."""
    package = namespace["__name__"]
    named = {name: sub for sub, names in submodules.items() for name in names if name != "*"}
    starred = tuple(sub for sub, names in submodules.items() if "*" in names)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        for sub in (named[name],) if name in named else () if name.startswith("_") else starred:
            module = importlib.import_module(f"{package}.{sub}")
            if hasattr(module, name):
                value = namespace[name] = getattr(module, name)  # found directly from now on
                return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *named})

    return __getattr__, __dir__
