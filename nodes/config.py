"""Stage 1, configuration: bundled defaults, then the user's file, then .planning/config.json,
then overrides.

Every effective value carries its origin. Unknown keys are kept and ignored (real GSD
config.json files carry many of their own); a near-miss of a known key earns a warning with
the suggestion; a wrong type or a value out of its range (:data:`RANGES`) is a ConfigError
that names the file and the key. The ``trust.*`` keys widen what ctxengine reads and fetches,
so they come only from the defaults, the user's file or the overrides: a project's
config.json cannot set them.
"""

import difflib
import json
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, NamedTuple

from hamilton.function_modifiers import cache, tag

from .lib.quote import quoted
from .lib.reserve import is_auto
from .lib.settings import OVERRIDE_ORIGIN
from .lib.trust_paths import absolute_trust_paths
from .lib.textio import read_config_text
from .lib.tokens import model_presets
from .lib.yamlio import YAMLError, load_yaml, nesting_depth
from .types import ConfigError

DEFAULTS_ORIGIN = "defaults (configs/defaults.yaml)"
USER_ORIGIN = "user config"
#: The environment variable naming the user's configuration file.
USER_CONFIG_ENV = "CTXENGINE_CONFIG"
USER_CONFIG_HINT = "~/.config/ctxengine/config.yaml"
#: How deeply a configuration may nest (objects and lists).
MAX_DEPTH = 32
#: Keys that only the user may set (defaults, user file, overrides), never the project.
TRUSTED_PREFIX = "trust"

# GSD's own config.json keys: never "did you mean" them, never interpret them.
_GSD_KEYS = {
    "mode", "depth", "granularity", "parallelization", "commit_docs", "model_profile",
    "workflow", "planning", "gates", "safety", "git", "search_gitignored", "brave_search",
    "hooks", "agents", "version",
}
# GSD keys that mean one of ours: (GSD key, our dotted key).
_GSD_ALIASES = {"context_window": "budget.maxTokens", "context": "template"}


class Range(NamedTuple):
    """The values a numeric key may take: ``low`` to ``high`` (``low`` excluded when
    ``above``), whole numbers only when ``whole``."""

    low: float
    high: float
    whole: bool = False
    above: bool = False

    def admits(self, value: float) -> bool:
        if not math.isfinite(value) or (self.whole and value != int(value)):
            return False
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def describe(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        low = f"above {self.low:,}" if self.above else f"from {self.low:,}"
        return f"{kind} {low} {'and at most' if self.above else 'to'} {self.high:,}"


_GIB = 1 << 30
_HOURS = 24 * 3600.0
_COUNT = 1_000_000
#: The range of every numeric key of configs/defaults.yaml ("parent.*": every key under parent).
RANGES: dict[str, Range] = {
    "references.maxDepth": Range(0, 64, whole=True),
    "references.urlTimeout": Range(0, 3600.0, above=True),
    "references.urlMaxBytes": Range(1, _GIB, whole=True),
    "references.maxFileBytes": Range(1, _GIB, whole=True),
    "references.projectRulesMaxBytes": Range(1, _GIB, whole=True),
    "state.maxHistoryRounds": Range(0, _COUNT, whole=True),
    "state.summaryBlock": Range(1, _COUNT, whole=True),
    "state.gitDiffMaxLines": Range(1, 10 * _COUNT, whole=True),
    "state.fileTreeMaxEntries": Range(1, 10 * _COUNT, whole=True),
    "state.gitTimeout": Range(0, 3600.0, above=True),
    "state.gitMaxBytes": Range(1, _GIB, whole=True),
    "state.gitLogCount": Range(0, 1000, whole=True),
    "state.claudeCode.toolResultMaxLines": Range(1, _COUNT, whole=True),
    "state.claudeCode.toolResultMaxChars": Range(100, _GIB, whole=True),
    "priorities.*": Range(0, 100),
    "budget.maxTokens": Range(1, 10 * _COUNT, whole=True),
    "budget.reserveTokens": Range(0, 10 * _COUNT, whole=True),  # or "auto"
    "budget.reserveShare": Range(0, 0.9),
    "budget.softLimit": Range(0, 1, above=True),
    "budget.pools.*": Range(0, 1),
    "budget.exactBand.*": Range(0, 1000, above=True),
    "truncation.minKeepTokens": Range(0, _COUNT, whole=True),
    "truncation.keepRecentRounds": Range(0, _COUNT, whole=True),
    "truncation.recentShare": Range(0, 1),
    "truncation.maxFitPasses": Range(1, 100, whole=True),
    "disclosure.maxFileBytes": Range(1, _GIB, whole=True),
    "code.share": Range(0, 0.9),
    "code.mapMinShare": Range(0, 0.9),
    "code.maxFileBytes": Range(1, _GIB, whole=True),
    "code.maxFiles": Range(0, 10 * _COUNT, whole=True),
    "trust.maxRedirects": Range(0, 20, whole=True),
    "cache.maxBytes": Range(1 << 20, 1 << 40, whole=True),
    "cache.maxTotalBytes": Range(1 << 20, 1 << 44, whole=True),
    "trust.urlConnectTimeout": Range(0, 3600.0, above=True),
    "trust.buildDeadline": Range(0, _HOURS, above=True),
    "monitor.thresholdRounds": Range(-1, _COUNT, whole=True),  # -1: never
    "monitor.keepRounds": Range(0, _COUNT, whole=True),
    "monitor.summaryTokensPerRound": Range(0, 100_000, whole=True),
}
#: Words a key takes besides a value of its default's type.
_ALTERNATIVES = {"budget.reserveTokens": ("auto", None)}


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


@tag(stage="config", loader="environment")
@cache(behavior="recompute")
def user_config_path() -> str:
    """The user's configuration file: $CTXENGINE_CONFIG, else config.yaml (or .yml, .json) in
    $XDG_CONFIG_HOME/ctxengine (~/.config/ctxengine when unset). It need not exist."""
    named = os.environ.get(USER_CONFIG_ENV, "").strip()
    if named:
        return os.path.abspath(os.path.expanduser(named))
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".config")
    folder = os.path.join(os.path.abspath(base), "ctxengine")
    for name in ("config.yaml", "config.yml", "config.json"):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return os.path.join(folder, "config.yaml")


@tag(stage="config", loader="file")
@cache(behavior="recompute")
def user_config(user_config_path: str) -> dict:
    """The user's configuration file parsed (YAML, or JSON for .json; {} when there is none), its
    ``trust.allowedPaths`` made absolute here, where the file is read (``~`` is $HOME, a relative
    path is under the file's folder), so the configuration stage reads neither."""
    if not os.path.isfile(user_config_path):
        return {}
    text = read_config_text(user_config_path)
    if user_config_path.lower().endswith(".json"):
        data = _parse_json(user_config_path, text)
    else:
        try:
            data = load_yaml(text) if text.strip() else {}
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{user_config_path}:{mark.line + 1}" if mark is not None else user_config_path
            raise ConfigError(f"{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); "
                              f"fix the file (the user config, ${USER_CONFIG_ENV}) or remove it") from None
        data = _top_level_object(user_config_path, {} if data is None else data, "a YAML mapping")
    return absolute_trust_paths(data, os.path.dirname(user_config_path), os.path.expanduser("~"))


@tag(stage="config", loader="file")
@cache(behavior="recompute")
def project_config(project_dir: str) -> dict:
    """The project's .planning/config.json as parsed JSON ({} when there is none)."""
    path = os.path.join(project_dir, ".planning", "config.json")
    if not os.path.isfile(path):
        return {}
    return _parse_json(path, read_config_text(path))


@tag(stage="config")
def resolved_config(
    project_dir: str, defaults: dict, project_config: dict, overrides: dict,
    user_config: dict | None = None, user_config_path: str = "",
) -> ResolvedConfig:
    """Defaults, then the user's file, then config.json, then overrides, validated, with the
    origin of each value. trust.* keys in config.json are ignored with a warning. A function of
    its inputs only: ``trust.allowedPaths`` arrive absolute (the user file's loader and the
    driver's entry, :func:`absolute_trust_paths`, resolve them); a relative one is a ConfigError."""
    config_path = os.path.join(project_dir, ".planning", "config.json")
    overrides = _shallow_overrides(overrides or {})
    user_config = user_config or {}
    values = _deep_copy(defaults)
    provenance = {key: DEFAULTS_ORIGIN for key in _leaf_keys(defaults)}
    warnings: list[str] = []
    layers = [
        (f"{user_config_path} ({USER_ORIGIN})", _project_layer(user_config, defaults), True),
        (config_path, _project_layer(project_config, defaults), False),
        (OVERRIDE_ORIGIN, _flatten(overrides), True),
    ]
    for origin, flat, users in layers:
        for dotted, value, how in flat:
            kept, warning = _layer_entry(defaults, dotted, value, origin, users)
            if warning:
                warnings.append(warning)
            if kept is not _MISSING:
                _assign(values, dotted, kept)
                _set_provenance(provenance, dotted, kept, _label(origin, how))
    _check_ranges(values, provenance)
    return ResolvedConfig(values, provenance, tuple(warnings),
                          _config_files((user_config_path, user_config), (config_path, project_config)))


def _config_files(*files: tuple[str, Mapping]) -> tuple[str, ...]:
    """The paths of the configuration files that set something (path, parsed content)."""
    return tuple(path for path, data in files if data)


def _label(origin: str, how: str | None) -> str:
    """The provenance of a value: its origin, and how it got there (a GSD key's alias)."""
    return origin if how is None else f"{origin} ({how})"


def _shallow_overrides(overrides: dict) -> dict:
    """``overrides`` when they nest at most MAX_DEPTH levels, else a ConfigError saying how to pass them."""
    if nesting_depth(overrides, MAX_DEPTH) > MAX_DEPTH:
        raise ConfigError(f"{OVERRIDE_ORIGIN}: the overrides nest deeper than {MAX_DEPTH} levels; "
                          "pass dotted keys (budget.maxTokens) with plain values")
    return overrides


def _layer_entry(defaults: Mapping, dotted: str, value: Any, origin: str, users: bool) -> tuple[Any, str | None]:
    """(the value a layer's entry sets, or _MISSING when it sets none; its warning): a trust.* key
    from a project's layer is ignored with a warning, a near-miss key too, an unknown key is
    ignored; a wrong type or value is a ConfigError; the user's trust.allowedPaths are checked."""
    if not users and _is_trusted(dotted):
        return _MISSING, (f"{quoted(dotted)[1:-1]} in {origin} is ignored: a project cannot widen what "
                          f"ctxengine reads; set it in {USER_CONFIG_HINT} or with --set")
    error_or_warning = _check(defaults, dotted, value, origin)
    if isinstance(error_or_warning, ConfigError):
        raise error_or_warning
    if error_or_warning:
        return _MISSING, error_or_warning
    if _lookup(defaults, dotted) is _MISSING:
        return _MISSING, None  # unknown: kept in the file, ignored here
    return (_checked_trust_paths(dotted, value, origin) if users else value), None


def _set_provenance(provenance: dict[str, str], dotted: str, value: Any, label: str) -> None:
    """Record ``label`` as the origin of ``dotted`` (every leaf of an object set there), replacing
    what came from lower layers at or under it."""
    for key in [k for k in provenance if k == dotted or k.startswith(dotted + ".")]:
        del provenance[key]
    for leaf in _leaf_keys(value, dotted) if isinstance(value, dict) else [dotted]:
        provenance[leaf] = label


@tag(stage="config")
def context_config(resolved_config: ResolvedConfig) -> dict:
    """The effective configuration as a nested dict (keys as the article spells them)."""
    return resolved_config.values


@tag(stage="config")
def config_provenance(resolved_config: ResolvedConfig) -> dict:
    """Dotted key -> where its effective value came from (defaults, user config, config.json, override)."""
    return dict(resolved_config.provenance)


@tag(stage="config")
def config_warnings(resolved_config: ResolvedConfig) -> tuple:
    """Warnings met while resolving the configuration (near-miss keys, trust.* in config.json)."""
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
    if not all(part.strip() for part in parts):
        raise ConfigError(f"key {quoted(dotted)} has an empty name between its dots; write keys as dotted.key")
    node = tree
    for depth, part in enumerate(parts[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"key {quoted(dotted)}: {quoted('.'.join(parts[:depth + 1]))} is a value, not a group "
                              "of keys; set that value, or a key of a group")
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


def _parse_json(path: str, text: str) -> dict:
    """A JSON configuration file: an object, not nested too deeply; errors name the file."""
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); fix the file or remove it"
        ) from None
    except RecursionError:
        data = None
    if data is None or nesting_depth(data, MAX_DEPTH) > MAX_DEPTH:
        raise ConfigError(f"{path}: nested deeper than {MAX_DEPTH} levels; a configuration is a few levels "
                          "of objects, fix the file")
    return _top_level_object(path, data, "a JSON object")


def _top_level_object(path: str, data: Any, what: str) -> dict:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be {what}, not {type(data).__name__}")
    return data


def _is_trusted(dotted: str) -> bool:
    return dotted == TRUSTED_PREFIX or dotted.startswith(TRUSTED_PREFIX + ".")


def _checked_trust_paths(dotted: str, value: Any, origin: str) -> Any:
    """trust.allowedPaths (a single path as a list), every entry absolute: resolved where the layer
    entered (:func:`absolute_trust_paths`), never against this process's working folder here."""
    if dotted == "trust" and isinstance(value, dict) and "allowedPaths" in value:
        return {**value, "allowedPaths": _checked_trust_paths("trust.allowedPaths", value["allowedPaths"], origin)}
    if dotted != "trust.allowedPaths":
        return value
    paths = [value] if isinstance(value, str) else value
    relative = next((p for p in paths if not os.path.isabs(p)), None)
    if relative is not None:
        raise ConfigError(f"{origin}: trust.allowedPaths entry {quoted(relative)} is not an absolute path; pass "
                          "overrides through ctxengine's API or CLI (they resolve it) or give an absolute path")
    return [os.path.normpath(p) for p in paths]


def _type_name(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _compatible(default: Any, value: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return _is_number(value)
    if isinstance(default, list):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    if isinstance(default, str):
        return isinstance(value, str)
    return True


def _check(defaults: Mapping, dotted: str, value: Any, origin: str) -> ConfigError | str | None:
    """A ConfigError for a wrong type or a non-finite number, a warning for a near-miss key, else None."""
    default = _lookup(defaults, dotted)
    if default is _MISSING:
        return _near_miss_warning(defaults, dotted, origin)
    if dotted in _ALTERNATIVES and (value in _ALTERNATIVES[dotted] or _is_number(value)):
        return _not_finite(dotted, value, origin)
    if dotted == "trust.allowedPaths" and isinstance(value, str):
        value = [value]
    if default is None or (_compatible(default, value) and dotted not in _ALTERNATIVES):
        return _fitting_value_error(defaults, dotted, default, value, origin)
    return _type_error(dotted, default, value, origin)


def _near_miss_warning(defaults: Mapping, dotted: str, origin: str) -> str | None:
    """The warning for an unknown key close to a known one of the same group (its suggestion),
    else None (an unknown key is kept and ignored)."""
    parent, _, leaf = dotted.rpartition(".")
    siblings = _lookup(defaults, parent) if parent else defaults
    if not isinstance(siblings, dict):
        return None
    close = difflib.get_close_matches(leaf[:200], list(siblings), n=1, cutoff=0.75)
    if not close or close[0] == leaf:
        return None
    suggestion = f"{parent}.{close[0]}" if parent else close[0]
    return f"{origin}: unknown key {quoted(dotted)} is ignored; did you mean {suggestion!r}?"


def _fitting_value_error(defaults: Mapping, dotted: str, default: Any, value: Any, origin: str) -> ConfigError | None:
    """The error of a value of the right type: the first error of an object's keys, an item of a
    string list that is no string, or a number that is not finite; else None."""
    if isinstance(default, dict) and isinstance(value, dict):
        error = _first_key_error(defaults, dotted, value, origin)
        if error is not None:
            return error
    error = _string_list_error(dotted, value, origin)
    return error if error is not None else _not_finite(dotted, value, origin)


def _first_key_error(defaults: Mapping, dotted: str, value: dict, origin: str) -> ConfigError | None:
    """The first ConfigError of the keys of an object set at ``dotted`` (their warnings are not kept)."""
    for key, sub in value.items():
        problem = _check(defaults, f"{dotted}.{key}", sub, origin)
        if isinstance(problem, ConfigError):
            return problem
    return None


def _string_list_error(dotted: str, value: Any, origin: str) -> ConfigError | None:
    """The error of a string-list key holding an item that is no string."""
    if dotted not in _STRING_LISTS:
        return None
    bad = [x for x in value if not isinstance(x, str)]
    if not bad:
        return None
    return ConfigError(f"{origin}: key {quoted(dotted)} must be a list of strings, "
                       f"got {_type_name(bad[0])} {quoted(bad[0])} in it")


def _type_error(dotted: str, default: Any, value: Any, origin: str) -> ConfigError:
    """The error of a value of the wrong type, naming the type wanted (and the words the key
    also takes), the default, and the value given."""
    also = "".join(f" or {alt!r}" for alt in _ALTERNATIVES.get(dotted, ()))
    return ConfigError(
        f"{origin}: key {quoted(dotted)} must be {'a number' if also else _type_name(default)}{also} "
        f"(like the default {default!r}), "
        f"got {_type_name(value)} {quoted(value)}"
    )


def _not_finite(dotted: str, value: Any, origin: str) -> ConfigError | None:
    items = value if isinstance(value, list) else [value]
    if any(isinstance(x, float) and not math.isfinite(x) for x in items):
        return ConfigError(f"{origin}: key {quoted(dotted)} is {quoted(value)}; NaN and infinity are not "
                           "allowed, give a finite number")
    return None


def _range_for(key: str) -> Range | None:
    parent = key.rpartition(".")[0]
    return RANGES.get(key) or RANGES.get(f"{parent}.*")


def _numeric_leaves(tree: Mapping, prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every number in ``tree``; a list's items as ``key.<index>``."""
    out = []
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.extend(_numeric_leaves(value, dotted))
        elif isinstance(value, list):
            out.extend((f"{dotted}.{i}", x) for i, x in enumerate(value) if _is_number(x))
        elif _is_number(value):
            out.append((dotted, value))
    return out


def _origin(provenance: Mapping[str, str], key: str) -> str:
    while key and key not in provenance:
        key = key.rpartition(".")[0]
    return provenance.get(key, DEFAULTS_ORIGIN)


def _check_ranges(values: dict, provenance: Mapping[str, str]) -> None:
    """Every number within its range of :data:`RANGES` (whole-number keys become ints), and
    the rules that tie keys together (reserve below the budget, pools summing to at most 1),
    checked in that order: the first problem is raised as a ConfigError."""
    for key, value in _numeric_leaves(values):
        rule = _range_for(key)
        _raise_if(_number_error(key, value, rule, _origin(provenance, key)))
        if rule is not None and rule.whole and isinstance(value, float):
            _assign(values, key, int(value))
    for error_of in (_reserve_error, _pool_type_error, _pool_sum_error, _choice_error, _model_error,
                     _strategy_error, _band_error):
        _raise_if(error_of(values, provenance))


def _raise_if(error: ConfigError | None) -> None:
    """Raise ``error`` when there is one."""
    if error is not None:
        raise error


def _number_error(key: str, value: Any, rule: Range | None, origin: str) -> ConfigError | None:
    """The error of a number outside its range (``rule``), or not finite where no range applies;
    an exactBand item is named by the band's key."""
    shown = key.rpartition(".")[0] if key.startswith("budget.exactBand.") else key
    if rule is None:
        if not math.isfinite(value):
            return ConfigError(f"{origin}: key {quoted(shown)} is {value}; NaN and infinity are not allowed")
        return None
    if not rule.admits(value):
        return ConfigError(f"{origin}: key {quoted(shown)} is {quoted(value)}; it must be {rule.describe()}")
    return None


def _reserve_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of a budget.reserveTokens (not auto) at or above budget.maxTokens."""
    budget = values["budget"]
    reserve = budget["reserveTokens"]
    if not is_auto(reserve) and reserve >= budget["maxTokens"]:
        return ConfigError(
            f"{provenance['budget.reserveTokens']}: key 'budget.reserveTokens' ({reserve}) "
            f"must be smaller than budget.maxTokens ({budget['maxTokens']}, from {provenance['budget.maxTokens']}); "
            "lower it, or set it to auto (budget.reserveShare of the budget)"
        )
    return None


def _pool_type_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of the first pool whose share is no number (a pool the defaults do not name has
    no type check of its own)."""
    for name, share in (values["budget"].get("pools") or {}).items():
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            return ConfigError(f"{_origin(provenance, f'budget.pools.{name}')}: key {quoted(f'budget.pools.{name}')} "
                               f"is {quoted(share)}; a pool's share is a number from 0 to 1")
    return None


def _pool_sum_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of pool shares summing to more than 1, naming every origin of a pool."""
    pools = values["budget"].get("pools") or {}
    if sum(pools.values()) > 1 + 1e-9:
        origins = sorted({_origin(provenance, f"budget.pools.{name}") for name in pools})
        return ConfigError(f"{'; '.join(origins)}: keys 'budget.pools.*' are shares of budget.maxTokens and sum to "
                           f"{sum(pools.values()):.4g}; lower them so they sum to at most 1")
    return None


def _choice_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of the first key of :data:`_CHOICES` set to a value it does not offer."""
    for key, allowed in _CHOICES.items():
        value = _lookup(values, key)
        if value is not _MISSING and value not in allowed:
            return ConfigError(
                f"{provenance.get(key, DEFAULTS_ORIGIN)}: key {key!r} is {quoted(value)}; "
                f"use one of {', '.join(str(choice) for choice in allowed if choice)}"
            )
    return None


def _model_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of a model configs/models.yaml does not know."""
    if values["model"] in model_presets():
        return None
    return ConfigError(f"{provenance.get('model', DEFAULTS_ORIGIN)}: key 'model' is {quoted(values['model'])}, "
                       f"which configs/models.yaml does not know; use one of {', '.join(sorted(model_presets()))}")


def _strategy_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of the first truncation.strategies.<kind> that names no strategy."""
    for kind, strategy in values["truncation"]["strategies"].items():
        if strategy not in _STRATEGIES:
            key = f"truncation.strategies.{kind}"
            return ConfigError(f"{provenance.get(key, DEFAULTS_ORIGIN)}: key {quoted(key)} is {quoted(strategy)}; "
                               f"use one of {', '.join(_STRATEGIES)}")
    return None


def _band_error(values: dict, provenance: Mapping[str, str]) -> ConfigError | None:
    """The error of a budget.exactBand that is not two numbers [low, high] with low <= high."""
    band = values["budget"].get("exactBand")
    if isinstance(band, list) and len(band) == 2 and all(_is_number(x) for x in band) and band[0] <= band[1]:
        return None
    return ConfigError(f"{provenance.get('budget.exactBand', DEFAULTS_ORIGIN)}: key 'budget.exactBand' must be "
                       f"two numbers [low, high] with low <= high, like [0.5, 1.5]; got {quoted(band)}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_STRATEGIES = ("tail", "head", "middle")
_STRING_LISTS = {"trust.allowedPaths", "trust.allowedHosts", "truncation.requiredSections", "references.projectRules"}
_CHOICES = {
    "template": ("dev", "research", "review"),
    "references.gsdRules": ("auto", "always", "never"),
    "escape": ("none", "html"),
    "state.layout": ("auto", "article", "gsd"),
    "state.sessionFormat": ("auto", "jsonl", "aider", "claude"),
    "state.claudeCode.sidechains": ("fold", "drop"),
    "state.claudeCode.compacted": ("fold", "keep"),
    "state.gsdPendingPlans": ("outline", "full"),
    "truncation.strategy": ("auto",) + _STRATEGIES,
    "truncation.summarizer": ("extractive", "headings"),
    "disclosure.phase": ("", None, "auto", "execute", "research", "plan", "verify", "repair", "discuss"),
}
