"""The rules of progressive disclosure (``configs/disclosure.yaml`` and a project's rules file
over it): their types, how a project's file is laid over the bundled one, and their validation,
whose ConfigError names the file and the key to fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

from ...types import ConfigError
from ..digest import fields_digest
from ..quote import quoted
from .signals import SIGNALS

#: The GSD phase types (GSD's own engine: discuss, research, plan, execute, verify, repair).
PHASES = ("execute", "research", "plan", "verify", "repair", "discuss")
#: Which of the files a phase glob matches load (in natural path order; open: the first PLAN without a SUMMARY).
PICKS = ("all", "first", "last", "open")


@dataclass(frozen=True)
class ModeRule:
    name: str
    load: tuple[str, ...]


@dataclass(frozen=True)
class TriggerRule:
    name: str
    load: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    where: tuple[str, ...] = SIGNALS


@dataclass(frozen=True)
class PhaseEntry:
    glob: str  # may hold {phase}: the current phase folder, relative to .planning/
    required: bool
    pick: str = "all"  # all | first | last (in path order)


@dataclass(frozen=True)
class DisclosureRules:
    """The parsed rules of configs/disclosure.yaml (and a project's rules file over them)."""

    state: tuple[str, ...] = ()
    modes: Mapping[str, tuple[ModeRule, ...]] = field(default_factory=dict)
    triggers: tuple[TriggerRule, ...] = ()
    phases: Mapping[str, tuple[PhaseEntry, ...]] = field(default_factory=dict)
    source: str = "configs/disclosure.yaml"

    DIGEST_TAG = b"D"  # carries a content digest (nodes/lib/digest.py)

    @cached_property
    def digest(self) -> bytes:
        """A digest of its content (every field), computed on first use and kept: the rules are
        made once per content of their files (the node keeps them in the memo) but fingerprinted
        at every build (~0.3 ms walked). Never pickled (loaded rules compute their own)."""
        return fields_digest(self)

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "digest"}


def merge_rules(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict:
    """A project's rules file laid over the bundled one: ``modes`` and ``phases`` replace per
    mode or phase, ``triggers`` replace by name (new names are added), ``state`` replaces."""
    out = dict(base)
    for key in ("modes", "phases"):
        if key in over:
            out[key] = _merged_mapping(base.get(key) or {}, over.get(key))
    if "triggers" in over:
        out["triggers"] = _merged_triggers(base.get("triggers") or [], over.get("triggers"))
    if "state" in over:
        out["state"] = over["state"]
    return out


def _merged_mapping(mine: Any, theirs: Any) -> Any:
    """``theirs`` over ``mine`` key by key when both are mappings, else ``theirs`` as it is
    (parse_rules names a wrong shape)."""
    return {**mine, **theirs} if isinstance(mine, Mapping) and isinstance(theirs, Mapping) else theirs


def _merged_triggers(mine: Any, theirs: Any) -> Any:
    """The triggers of ``mine`` with those of ``theirs`` replacing the ones of the same name (in
    place) and the new names added after; ``theirs`` as it is when not a list (parse_rules names
    the wrong shape)."""
    if not isinstance(theirs, list):
        return theirs
    by_name = {str(t.get("name")): t for t in mine if isinstance(t, Mapping)}
    for trigger in theirs:
        by_name[str(trigger.get("name")) if isinstance(trigger, Mapping) else repr(trigger)] = trigger
    return list(by_name.values())


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where} must be a list of non-empty strings, got {quoted(value)}")
    return tuple(v.strip() for v in value)


def _mapping(value: Any, where: str, shape: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of {shape}, got {_shown(value)}")
    return value


def _sequence(value: Any, where: str, shape: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of {shape}, got {_shown(value)}")
    return value


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_rules(data: Any, source: str) -> DisclosureRules:
    """Validate the rules mapping; a ConfigError names the file and the key to fix."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping with modes, triggers, phases, state")
    state = _strings(data.get("state"), f"{source}: key 'state'")
    modes = {str(mode): _mode_rules(entries, f"{source}: key 'modes.{mode}'")
             for mode, entries in _mapping(data.get("modes"), f"{source}: key 'modes'", "mode -> rules").items()}
    triggers = tuple(_trigger_rule(entry, index, f"{source}: key 'triggers[{index}]'") for index, entry
                     in enumerate(_sequence(data.get("triggers"), f"{source}: key 'triggers'", "trigger rules")))
    phases = {str(phase): _phase_entries(phase, spec, f"{source}: key 'phases.{phase}'") for phase, spec
              in _mapping(data.get("phases"), f"{source}: key 'phases'", "phase -> manifest").items()}
    return DisclosureRules(state, modes, triggers, phases, source)


def _mode_rules(entries: Any, where: str) -> tuple[ModeRule, ...]:
    """The rules of one mode (``where`` names its key): each a ``{name, load}`` mapping or a glob,
    which is its own name and load list."""
    rules = []
    for index, entry in enumerate(_sequence(entries, where, "{name, load} rules")):
        if isinstance(entry, str):
            entry = {"name": entry, "load": [entry]}
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{where}[{index}] must be a mapping with name and load")
        load = _strings(entry.get("load"), f"{where}[{index}].load")
        if not load:
            raise ConfigError(f"{where}[{index}] needs a 'load' list of globs")
        rules.append(ModeRule(str(entry.get("name") or load[0]), load))
    return tuple(rules)


def _trigger_rule(entry: Any, index: int, where: str) -> TriggerRule:
    """One trigger (``where`` names its key): ``load`` globs, and ``keywords`` or ``paths`` to fire
    on, looked for ``in`` some of the signals (all by default)."""
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be a mapping with name, keywords or paths, and load")
    load = _strings(entry.get("load"), f"{where}.load")
    keywords = _strings(entry.get("keywords"), f"{where}.keywords")
    paths = _strings(entry.get("paths"), f"{where}.paths")
    where_in = _strings(entry.get("in"), f"{where}.in") or SIGNALS
    bad = [w for w in where_in if w not in SIGNALS]
    if bad:
        raise ConfigError(f"{where}.in has {quoted(bad[0])}; use any of {', '.join(SIGNALS)}")
    if not load or not (keywords or paths):
        raise ConfigError(f"{where} needs 'load' globs and 'keywords' or 'paths' to fire on")
    return TriggerRule(str(entry.get("name") or f"trigger {index}"), load, keywords, paths, where_in)


def _phase_entries(phase: Any, spec: Any, where: str) -> tuple[PhaseEntry, ...]:
    """The manifest of one GSD phase (``where`` names its key): its ``required`` then ``optional``
    globs."""
    if str(phase) not in PHASES:
        raise ConfigError(f"{where}: unknown phase {quoted(phase)}; GSD phases are {', '.join(PHASES)}")
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a mapping with 'required' and 'optional' lists")
    return tuple(_phase_entry(item, kind == "required", f"{where}.{kind}[{index}]")
                 for kind in ("required", "optional")
                 for index, item in enumerate(_sequence(spec.get(kind), f"{where}.{kind}", "globs")))


def _phase_entry(item: Any, required: bool, where: str) -> PhaseEntry:
    """One glob of a phase manifest: a glob, or ``{glob, pick}`` (pick: one of PICKS)."""
    if isinstance(item, str):
        item = {"glob": item}
    if not isinstance(item, Mapping) or not isinstance(item.get("glob"), str):
        raise ConfigError(f"{where} must be a glob or {{glob, pick}}")
    pick = str(item.get("pick", "all"))
    if pick not in PICKS:
        raise ConfigError(f"{where}.pick is {quoted(pick)}; use one of {', '.join(PICKS)}")
    return PhaseEntry(item["glob"].strip(), required, pick)
