"""The settings of each stage: frozen values built from the resolved configuration.

One value per stage (``nodes/settings.py`` builds them) instead of the whole configuration
dict, so a changed key invalidates only the nodes of the stage that reads it. Every value is a
frozen dataclass (never ``slots=True``: Hamilton's cache fingerprints through ``__dict__``),
hashable and picklable; nested values are tuples or :class:`FrozenMap`. Defaults live only in
configs/defaults.yaml: the builders index the configuration directly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Iterable, Iterator, Mapping

from .reserve import effective_reserve
from .textio import Trust

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


def trust_at(trust: Trust, project_dir: str) -> Trust:
    """The trust rules (``trust_settings``, rootless) for one project folder."""
    return replace(trust, root=os.path.realpath(project_dir))


@dataclass(frozen=True)
class BudgetSettings:
    """``model`` and ``budget.*`` as the budget stage reads them (reserve_tokens None: auto)."""

    model: str
    max_tokens: int
    reserve_tokens: int | None
    reserve_share: float
    exact_band: tuple[float, float]

    def reserve_for(self, preset: Mapping[str, Any], max_tokens: int | None = None) -> int:
        """The answer reserve for a model preset (lib/reserve.py ``effective_reserve``)."""
        budget = {"reserveTokens": self.reserve_tokens, "reserveShare": self.reserve_share,
                  "maxTokens": self.max_tokens}
        return effective_reserve(budget, preset, max_tokens)


@dataclass(frozen=True)
class TruncationSettings:
    """What the truncation stage reads: ``truncation.*``, the soft limit, the exact band, the
    pools and the escaping of the rendered prompt."""

    soft_limit: float
    exact_band: tuple[float, float]
    pools: FrozenMap
    compact: bool
    strategy: str  # auto | tail | head | middle
    strategies: FrozenMap  # content kind -> strategy
    min_keep_tokens: int
    keep_recent_rounds: int
    recent_share: float
    escape: str


@dataclass(frozen=True)
class QualitySettings:
    """What the quality stage reads: the exact fit's passes and minimum, the required headings
    and the templates that should render them."""

    max_fit_passes: int
    min_keep_tokens: int
    required_sections: tuple[str, ...]
    escape: str
    context_template: str
    template: str


@dataclass(frozen=True)
class MonitorSettings:
    """``monitor.*``: when preventive compaction folds older rounds, and how."""

    threshold_rounds: int
    keep_rounds: int
    summary_tokens_per_round: int


@dataclass(frozen=True)
class ReferenceSettings:
    """``references.*`` and the default priority of each reference group."""

    groups: FrozenMap  # core | project | session -> tuple of entries as configured
    max_depth: int
    url_timeout: float
    url_max_bytes: int
    max_file_bytes: int
    group_priorities: FrozenMap  # group -> priority


@dataclass(frozen=True)
class DisclosureSettings:
    """``disclosure.*``, the mode, the URL limits of references and the default priority of a
    disclosed document."""

    phase: str | None
    rules: str
    max_file_bytes: int
    url_timeout: float
    url_max_bytes: int
    template: str
    reference_priority: int


@dataclass(frozen=True)
class StateSettings:
    """``state.*``, the priority of each state section kind and the folders git may read."""

    layout: str
    switches: FrozenMap  # section kind -> included
    priorities: FrozenMap  # section kind -> priority
    max_history_rounds: int
    git_diff_max_lines: int
    file_tree_max_entries: int
    session_format: str
    gsd_pending_plans: str
    git_timeout: float
    git_max_bytes: int
    git_log_count: int
    gsd_phase: str
    allowed_paths: tuple[str, ...]


@dataclass(frozen=True)
class RenderSettings:
    """What the render stage reads: the templates, escaping, the output instructions, the
    priorities of the request and instructions, and the size cap of a template file."""

    template: str
    context_template: str
    escape: str
    output_instructions: str
    request_priority: int
    instructions_priority: int
    max_file_bytes: int
