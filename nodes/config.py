"""Stage 1, configuration: bundled defaults, then .planning/config.json, then overrides.

Every effective value carries its origin. Unknown keys are kept and ignored (real GSD
config.json files carry many of their own); a near-miss of a known key earns a warning with
the suggestion; a wrong type is a ConfigError that names the file and the key.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from hamilton.function_modifiers import cache, tag

from .lib.textio import read_config_text
from .lib.tokens import model_presets
from .lib.yamlio import load_yaml
from .types import ConfigError

DEFAULTS_ORIGIN = "defaults (configs/defaults.yaml)"
OVERRIDE_ORIGIN = "override"

# GSD's own config.json keys: never "did you mean" them, never interpret them.
_GSD_KEYS = {
    "mode", "depth", "granularity", "parallelization", "commit_docs", "model_profile",
    "workflow", "planning", "gates", "safety", "git", "search_gitignored", "brave_search",
    "hooks", "agents", "version",
}
# GSD keys that mean one of ours: (GSD key, our dotted key).
_GSD_ALIASES = {"context_window": "budget.maxTokens", "context": "template"}


@dataclass(frozen=True)
class ResolvedConfig:
    """The effective configuration, the origin of every leaf value, and the warnings met."""

    values: Mapping[str, Any]
    provenance: Mapping[str, str]
    warnings: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default=())


@tag(stage="config")
def defaults() -> dict:
    """The bundled defaults (configs/defaults.yaml), shipped as package data."""
    return _deep_copy(_bundled_defaults())


@tag(stage="config", loader="file")
@cache(behavior="recompute")
def project_config(project_dir: str) -> dict:
    """The project's .planning/config.json as parsed JSON ({} when there is none)."""
    path = os.path.join(project_dir, ".planning", "config.json")
    if not os.path.isfile(path):
        return {}
    text = read_config_text(path)
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); fix the file or remove it"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object, not {type(data).__name__}")
    return data


@tag(stage="config")
def resolved_config(project_dir: str, defaults: dict, project_config: dict, overrides: dict) -> ResolvedConfig:
    """Defaults, then config.json, then overrides, validated, with the origin of each value."""
    config_path = os.path.join(project_dir, ".planning", "config.json")
    values = _deep_copy(defaults)
    provenance = {key: DEFAULTS_ORIGIN for key in _leaf_keys(defaults)}
    warnings: list[str] = []
    layers = [
        (config_path, _project_layer(project_config, defaults)),
        (OVERRIDE_ORIGIN, _flatten(overrides or {})),
    ]
    for origin, flat in layers:
        for dotted, value, how in flat:
            error_or_warning = _check(defaults, dotted, value, origin)
            if isinstance(error_or_warning, ConfigError):
                raise error_or_warning
            if error_or_warning:
                warnings.append(error_or_warning)
                continue
            if _lookup(defaults, dotted) is _MISSING:
                continue  # unknown: kept in the file, ignored here
            _assign(values, dotted, value)
            for key in [k for k in provenance if k == dotted or k.startswith(dotted + ".")]:
                del provenance[key]
            label = origin if how is None else f"{origin} ({how})"
            for leaf in _leaf_keys(value, dotted) if isinstance(value, dict) else [dotted]:
                provenance[leaf] = label
    _check_ranges(values, provenance)
    return ResolvedConfig(values, provenance, tuple(warnings), (config_path,) if project_config else ())


@tag(stage="config")
def context_config(resolved_config: ResolvedConfig) -> dict:
    """The effective configuration as a nested dict (keys as the article spells them)."""
    return resolved_config.values


@tag(stage="config")
def config_provenance(resolved_config: ResolvedConfig) -> dict:
    """Dotted key -> where its effective value came from (defaults, config.json, override)."""
    return dict(resolved_config.provenance)


@tag(stage="config")
def config_warnings(resolved_config: ResolvedConfig) -> tuple:
    """Warnings met while resolving the configuration (near-miss keys)."""
    return tuple(resolved_config.warnings)


# ----------------------------------------------------------------------------- helpers

_MISSING = object()


@lru_cache(maxsize=1)
def _bundled_defaults() -> dict:
    """Parsed once per process: the file ships with the package and never changes under it."""
    text = resources.files("ctxengine.configs").joinpath("defaults.yaml").read_text(encoding="utf-8")
    return load_yaml(text)


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _leaf_keys(tree: Mapping, prefix: str = "") -> list[str]:
    keys = []
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict) and value:
            keys.extend(_leaf_keys(value, dotted))
        else:
            keys.append(dotted)
    return keys


def _lookup(tree: Mapping, dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _assign(tree: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if isinstance(value, dict) and isinstance(node.get(parts[-1]), dict):
        for key, sub in value.items():
            _assign(node[parts[-1]], key, sub)
    else:
        node[parts[-1]] = _deep_copy(value)


def _flatten(overrides: Mapping) -> list[tuple[str, Any, str | None]]:
    """Overrides as (dotted key, value, note); nested dicts and dotted keys both work."""
    flat = []
    for key, value in overrides.items():
        if isinstance(value, dict) and value and "." not in key:
            flat.extend((f"{key}.{k}", v, n) for k, v, n in _flatten(value))
        else:
            flat.append((key, value, None))
    return flat


def _project_layer(data: Mapping, defaults: Mapping) -> list[tuple[str, Any, str | None]]:
    flat: list[tuple[str, Any, str | None]] = []
    for key, value in data.items():
        if key in _GSD_ALIASES:
            flat.append((_GSD_ALIASES[key], value, f"GSD key {key!r}"))
        elif key in _GSD_KEYS:
            continue
        elif isinstance(value, dict) and isinstance(_lookup(defaults, key), dict):
            flat.extend((f"{key}.{k}", v, n) for k, v, n in _flatten(value))
        else:
            flat.append((key, value, None))
    return flat


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _compatible(default: Any, value: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, list):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    if isinstance(default, str):
        return isinstance(value, str)
    return True


def _check(defaults: Mapping, dotted: str, value: Any, origin: str) -> ConfigError | str | None:
    """A ConfigError for a wrong type, a warning for a near-miss key, else None."""
    default = _lookup(defaults, dotted)
    if default is _MISSING:
        parent, _, leaf = dotted.rpartition(".")
        siblings = _lookup(defaults, parent) if parent else defaults
        if isinstance(siblings, dict):
            close = difflib.get_close_matches(leaf, list(siblings), n=1, cutoff=0.75)
            if close and close[0] != leaf:
                suggestion = f"{parent}.{close[0]}" if parent else close[0]
                return (f"{origin}: unknown key {dotted!r} is ignored; did you mean {suggestion!r}?")
        return None
    if default is None or _compatible(default, value):
        if isinstance(default, dict) and isinstance(value, dict):
            for key, sub in value.items():
                problem = _check(defaults, f"{dotted}.{key}", sub, origin)
                if isinstance(problem, ConfigError):
                    return problem
        return None
    return ConfigError(
        f"{origin}: key {dotted!r} must be {_type_name(default)} (like the default {default!r}), "
        f"got {_type_name(value)} {value!r}"
    )


def _check_ranges(values: Mapping, provenance: Mapping[str, str]) -> None:
    budget = values["budget"]
    for key in ("maxTokens", "reserveTokens"):
        if budget[key] < 0:
            raise ConfigError(f"{provenance[f'budget.{key}']}: key 'budget.{key}' must not be negative")
    if budget["reserveTokens"] >= budget["maxTokens"]:
        raise ConfigError(
            f"{provenance['budget.reserveTokens']}: key 'budget.reserveTokens' ({budget['reserveTokens']}) "
            f"must be smaller than budget.maxTokens ({budget['maxTokens']}, from {provenance['budget.maxTokens']})"
        )
    if not 0 < budget["softLimit"] <= 1:
        raise ConfigError(f"{provenance['budget.softLimit']}: key 'budget.softLimit' must be in (0, 1]")
    for key, allowed in _CHOICES.items():
        value = _lookup(values, key)
        if value is not _MISSING and value not in allowed:
            raise ConfigError(
                f"{provenance.get(key, DEFAULTS_ORIGIN)}: key {key!r} is {value!r}; "
                f"use one of {', '.join(str(choice) for choice in allowed if choice)}"
            )
    if values["model"] not in model_presets():
        raise ConfigError(f"{provenance.get('model', DEFAULTS_ORIGIN)}: key 'model' is {values['model']!r}, which "
                          f"configs/models.yaml does not know; use one of {', '.join(sorted(model_presets()))}")
    for kind, strategy in values["truncation"]["strategies"].items():
        if strategy not in _STRATEGIES:
            key = f"truncation.strategies.{kind}"
            raise ConfigError(f"{provenance.get(key, DEFAULTS_ORIGIN)}: key {key!r} is {strategy!r}; "
                              f"use one of {', '.join(_STRATEGIES)}")
    band = budget.get("exactBand")
    if not (isinstance(band, list) and len(band) == 2 and all(_is_number(x) for x in band) and band[0] <= band[1]):
        raise ConfigError(f"{provenance.get('budget.exactBand', DEFAULTS_ORIGIN)}: key 'budget.exactBand' must be "
                          f"two numbers [low, high] with low <= high, like [0.5, 1.5]; got {band!r}")
    for kind, priority in values["priorities"].items():
        if not (_is_number(priority) and 0 <= priority <= 100):
            key = f"priorities.{kind}"
            raise ConfigError(f"{provenance.get(key, DEFAULTS_ORIGIN)}: key {key!r} must be a number from 0 to 100")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_STRATEGIES = ("tail", "head", "middle")
_CHOICES = {
    "template": ("dev", "research", "review"),
    "escape": ("none", "html"),
    "state.layout": ("auto", "article", "gsd"),
    "state.sessionFormat": ("auto", "jsonl", "aider"),
    "state.gsdPendingPlans": ("outline", "full"),
    "truncation.strategy": ("auto",) + _STRATEGIES,
    "truncation.summarizer": ("extractive", "headings"),
    "disclosure.phase": ("", None, "execute", "research", "plan", "verify", "repair", "discuss"),
}
