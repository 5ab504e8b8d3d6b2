"""Trust paths made absolute where configuration enters (the user's file, CLI/API overrides), so
the configuration stage never reads the working folder or ``$HOME``: a cached node is a function
of its inputs."""

from __future__ import annotations

import os
from typing import Any, Mapping


def absolute_trust_paths(layer: Mapping, base: str, home: str) -> dict:
    """A configuration layer (the user's file, or overrides; nested or dotted keys) with its
    ``trust.allowedPaths`` entries made absolute: ``~`` is ``home``, a relative path is under
    ``base`` (the user file's folder, or the working folder where overrides enter: CLI, API,
    batch, experiment, serve); a single path becomes a list. Anything else is left for the
    configuration stage to check."""
    out = dict(layer)
    if "trust.allowedPaths" in out:
        out["trust.allowedPaths"] = _absolute_list(out["trust.allowedPaths"], base, home)
    trust = out.get("trust")
    if isinstance(trust, Mapping) and "allowedPaths" in trust:
        out["trust"] = {**trust, "allowedPaths": _absolute_list(trust["allowedPaths"], base, home)}
    return out


def _absolute_list(value: Any, base: str, home: str) -> Any:
    paths = [value] if isinstance(value, str) else value
    if not isinstance(paths, list):
        return value
    return [os.path.normpath(os.path.join(base, _home_expanded(p, home))) if isinstance(p, str) else p for p in paths]


def _home_expanded(path: str, home: str) -> str:
    if path == "~" or path.startswith("~/") or path.startswith("~" + os.sep):
        return home + path[1:]
    return os.path.expanduser(path) if path.startswith("~") else path  # ~user: that user's home
