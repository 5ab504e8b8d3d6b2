"""The settings of each stage: frozen values built from the resolved configuration.

One value per stage (``nodes/settings.py`` builds them) instead of the whole configuration
dict, so a changed key invalidates only the nodes of the stage that reads it. Every value is a
frozen dataclass (never ``slots=True``: Hamilton's cache fingerprints through ``__dict__``),
hashable and picklable; nested values are tuples or :class:`FrozenMap`. A field declared with
``key("dotted.key")`` is read from that key by :func:`from_config`; the others (no key) are
computed by the settings node. Defaults live only in configs/defaults.yaml: a missing key is a
KeyError, never a literal fallback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Iterator, Mapping, get_type_hints

from .reserve import effective_reserve
from .textio import Trust

#: The provenance of a key given as an override (``--set``, or ``overrides=`` of the API).
OVERRIDE_ORIGIN = "override (--set or API)"

#: The ``state.include*`` switch of each state section kind.
STATE_SWITCHES = {
    "plan": "includePlan",
    "roadmap": "includePlan",
    "history": "includeSession",
    "git": "includeGit",
    "tree": "includeFileTree",
    "environment": "includeEnvironment",
}


class FrozenMap(Mapping):
    """A read-only mapping: hashable, picklable, equal to any mapping with the same items."""

    def __init__(self, items: Mapping | Iterable[tuple[Any, Any]] = ()):
        self._data = dict(items)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __reduce__(self):
        return FrozenMap, (tuple(self._data.items()),)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"


def frozen(value: Any) -> Any:
    """``value`` with every list made a tuple and every mapping a :class:`FrozenMap`."""
    if isinstance(value, Mapping):
        return FrozenMap((key, frozen(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(frozen(item) for item in value)
    return value


def picked(mapping: Mapping[str, Any], keys: Iterable[str]) -> FrozenMap:
    """The entries of ``mapping`` named by ``keys`` (each must be there), frozen."""
    return FrozenMap((key, frozen(mapping[key])) for key in keys)


def key(dotted: str) -> Any:
    """A settings field read from the configuration key ``dotted`` (``budget.maxTokens``)."""
    return field(metadata={"key": dotted})


def from_config(cls: type, config: Mapping[str, Any], **computed: Any) -> Any:
    """A settings value of ``cls``: each field declared with :func:`key` read from its key in
    ``config`` (a missing key is a KeyError: the defaults hold every key) and converted to the
    field's type (lists to tuples, mappings to FrozenMap); the other fields from ``computed``."""
    hints = get_type_hints(cls)
    values = dict(computed)
    for item in fields(cls):
        if item.name not in values:
            values[item.name] = _converted(hints[item.name], _at(config, item.metadata["key"]))
    return cls(**values)


def _at(config: Mapping[str, Any], dotted: str) -> Any:
    value: Any = config
    for part in dotted.split("."):
        value = value[part]
    return value


def _converted(kind: Any, value: Any) -> Any:
    return kind(value) if kind in (int, float, str, bool) else frozen(value)


def trust_at(trust: Trust, project_dir: str) -> Trust:
    """The trust rules (``trust_settings``, rootless) for one project folder."""
    return replace(trust, root=os.path.realpath(project_dir))


@dataclass(frozen=True)
class BudgetSettings:
    """``model`` and ``budget.*`` as the budget stage reads them (reserve_tokens None: auto)."""

    model: str = key("model")
    max_tokens: int = key("budget.maxTokens")
    reserve_tokens: int | None
    reserve_share: float = key("budget.reserveShare")
    exact_band: tuple[float, float] = key("budget.exactBand")
    max_tokens_given: bool = False  # budget.maxTokens set by the caller (--max-tokens, --set, API): a fixed budget

    def reserve_for(self, preset: Mapping[str, Any], max_tokens: int | None = None) -> int:
        """The answer reserve for a model preset (lib/reserve.py ``effective_reserve``)."""
        budget = {"reserveTokens": self.reserve_tokens, "reserveShare": self.reserve_share,
                  "maxTokens": self.max_tokens}
        return effective_reserve(budget, preset, max_tokens)


@dataclass(frozen=True)
class TruncationSettings:
    """What the truncation stage reads: ``truncation.*``, the soft limit, the exact band, the
    pools and the escaping of the rendered prompt."""

    soft_limit: float = key("budget.softLimit")
    exact_band: tuple[float, float] = key("budget.exactBand")
    pools: FrozenMap
    code_share: float  # the code pool's share (code.share; 0 with the code stage off)
    compact: bool = key("truncation.compact")
    strategy: str = key("truncation.strategy")  # auto | tail | head | middle
    strategies: FrozenMap = key("truncation.strategies")  # content kind -> strategy
    min_keep_tokens: int = key("truncation.minKeepTokens")
    keep_recent_rounds: int = key("truncation.keepRecentRounds")
    recent_share: float = key("truncation.recentShare")
    summarizer: str = key("truncation.summarizer")  # extractive | headings
    escape: str = key("escape")


@dataclass(frozen=True)
class QualitySettings:
    """What the quality stage reads: the exact fit's passes and minimum, the required headings
    and the templates that should render them."""

    max_fit_passes: int = key("truncation.maxFitPasses")
    min_keep_tokens: int = key("truncation.minKeepTokens")
    required_sections: tuple[str, ...] = key("truncation.requiredSections")
    escape: str = key("escape")
    context_template: str = key("contextTemplate")
    template: str = key("template")


@dataclass(frozen=True)
class MonitorSettings:
    """``monitor.*``: when preventive compaction folds older rounds, and how."""

    threshold_rounds: int = key("monitor.thresholdRounds")
    keep_rounds: int = key("monitor.keepRounds")
    summary_tokens_per_round: int = key("monitor.summaryTokensPerRound")


@dataclass(frozen=True)
class ReferenceSettings:
    """``references.*`` and the default priority of each reference group."""

    groups: FrozenMap  # core | project | session -> tuple of entries as configured
    max_depth: int = key("references.maxDepth")
    url_timeout: float = key("references.urlTimeout")
    url_max_bytes: int = key("references.urlMaxBytes")
    max_file_bytes: int = key("references.maxFileBytes")
    group_priorities: FrozenMap  # group -> priority
    gsd_rules: str = key("references.gsdRules")
    project_rules: tuple = key("references.projectRules")
    project_rules_max_bytes: int = key("references.projectRulesMaxBytes")


@dataclass(frozen=True)
class DisclosureSettings:
    """``disclosure.*``, the mode, the URL limits of references and the default priority of a
    disclosed document."""

    phase: str | None = key("disclosure.phase")
    rules: str
    max_file_bytes: int = key("disclosure.maxFileBytes")
    url_timeout: float = key("references.urlTimeout")
    url_max_bytes: int = key("references.urlMaxBytes")
    template: str = key("template")
    reference_priority: int = key("priorities.reference")


@dataclass(frozen=True)
class StateSettings:
    """``state.*``, the priority of each state section kind and the folders git may read."""

    layout: str = key("state.layout")
    switches: FrozenMap  # section kind -> included
    priorities: FrozenMap  # section kind -> priority
    max_history_rounds: int = key("state.maxHistoryRounds")
    summary_block: int = key("state.summaryBlock")
    git_diff_max_lines: int = key("state.gitDiffMaxLines")
    file_tree_max_entries: int = key("state.fileTreeMaxEntries")
    session_format: str = key("state.sessionFormat")
    gsd_pending_plans: str = key("state.gsdPendingPlans")
    git_timeout: float = key("state.gitTimeout")
    git_max_bytes: int = key("state.gitMaxBytes")
    git_log_count: int = key("state.gitLogCount")
    claude_transcript: str = key("state.claudeCode.transcript")
    claude_sidechains: str = key("state.claudeCode.sidechains")
    claude_compacted: str = key("state.claudeCode.compacted")
    claude_result_max_lines: int = key("state.claudeCode.toolResultMaxLines")
    claude_result_max_chars: int = key("state.claudeCode.toolResultMaxChars")
    claude_projects: bool = key("trust.claudeProjects")
    claude_transcript_from_project: bool  # the transcript was named in the project's config.json
    gsd_phase: str
    allowed_paths: tuple[str, ...]


@dataclass(frozen=True)
class RenderSettings:
    """What the render stage reads: the templates, escaping, the output instructions, the
    priorities of the request and instructions, and the size cap of a template file."""

    template: str = key("template")
    context_template: str = key("contextTemplate")
    escape: str = key("escape")
    output_instructions: str = key("outputInstructions")
    request_priority: int = key("priorities.request")
    instructions_priority: int = key("priorities.instructions")
    max_file_bytes: int = key("references.maxFileBytes")
