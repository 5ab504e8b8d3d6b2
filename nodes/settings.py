"""Settings of each stage: one frozen value per stage, built from the resolved configuration.

The stages take these instead of ``context_config``, so a changed key invalidates only the
nodes that read it (Hamilton's cache keys follow the values a node receives). The types live
in nodes/lib/settings.py; defaults only in configs/defaults.yaml (a missing key is a bug, so
every key is indexed directly).
"""

from __future__ import annotations

import os
from dataclasses import replace

from hamilton.function_modifiers import tag

from .lib import settings as _s
from .lib.references import GROUPS, group_priorities
from .lib.reserve import is_auto
from .lib.textio import Trust, allowed_paths, trust_from

STAGE = "config"


@tag(stage=STAGE)
def trust_settings(context_config: dict) -> Trust:
    """The trust rules (``trust.*``) without a project: loaders root them at theirs."""
    return replace(trust_from(context_config, os.sep), root="")


@tag(stage=STAGE)
def budget_settings(context_config: dict) -> _s.BudgetSettings:
    """``model`` and the budget keys the budget stage reads."""
    budget = context_config["budget"]
    reserve = budget["reserveTokens"]
    return _s.BudgetSettings(
        model=str(context_config["model"]),
        max_tokens=int(budget["maxTokens"]),
        reserve_tokens=None if is_auto(reserve) else int(reserve),
        reserve_share=float(budget["reserveShare"]),
        exact_band=_band(budget["exactBand"]),
    )


@tag(stage=STAGE)
def truncation_settings(context_config: dict) -> _s.TruncationSettings:
    """``truncation.*`` with the soft limit, exact band and pools the truncation stage reads."""
    budget, truncation = context_config["budget"], context_config["truncation"]
    return _s.TruncationSettings(
        soft_limit=float(budget["softLimit"]),
        exact_band=_band(budget["exactBand"]),
        pools=_s.FrozenMap((name, float(share)) for name, share in budget["pools"].items()),
        compact=bool(truncation["compact"]),
        strategy=str(truncation["strategy"]),
        strategies=_s.frozen(truncation["strategies"]),
        min_keep_tokens=int(truncation["minKeepTokens"]),
        keep_recent_rounds=int(truncation["keepRecentRounds"]),
        recent_share=float(truncation["recentShare"]),
        escape=str(context_config["escape"]),
    )


@tag(stage=STAGE)
def quality_settings(context_config: dict) -> _s.QualitySettings:
    """The exact fit's passes and minimum, the required headings and the templates."""
    truncation = context_config["truncation"]
    return _s.QualitySettings(
        max_fit_passes=int(truncation["maxFitPasses"]),
        min_keep_tokens=int(truncation["minKeepTokens"]),
        required_sections=tuple(str(name) for name in truncation["requiredSections"]),
        escape=str(context_config["escape"]),
        context_template=str(context_config["contextTemplate"]),
        template=str(context_config["template"]),
    )


@tag(stage=STAGE)
def monitor_settings(context_config: dict) -> _s.MonitorSettings:
    """``monitor.*``: the budget monitor's compaction threshold and how it folds rounds."""
    monitor = context_config["monitor"]
    return _s.MonitorSettings(
        threshold_rounds=int(monitor["thresholdRounds"]),
        keep_rounds=int(monitor["keepRounds"]),
        summary_tokens_per_round=int(monitor["summaryTokensPerRound"]),
    )


@tag(stage=STAGE)
def reference_settings(context_config: dict) -> _s.ReferenceSettings:
    """``references.*`` and the default priority of each reference group."""
    references = context_config["references"]
    return _s.ReferenceSettings(
        groups=_s.picked(references, GROUPS),
        max_depth=int(references["maxDepth"]),
        url_timeout=float(references["urlTimeout"]),
        url_max_bytes=int(references["urlMaxBytes"]),
        max_file_bytes=int(references["maxFileBytes"]),
        group_priorities=_s.FrozenMap(group_priorities(context_config["priorities"])),
    )


@tag(stage=STAGE)
def disclosure_settings(context_config: dict) -> _s.DisclosureSettings:
    """``disclosure.*``, the mode, the URL limits and the default priority of a document."""
    disclosure, references = context_config["disclosure"], context_config["references"]
    return _s.DisclosureSettings(
        phase=disclosure["phase"],
        rules=str(disclosure["rules"] or "").strip(),
        max_file_bytes=int(disclosure["maxFileBytes"]),
        url_timeout=float(references["urlTimeout"]),
        url_max_bytes=int(references["urlMaxBytes"]),
        template=str(context_config["template"]),
        reference_priority=int(context_config["priorities"]["reference"]),
    )


@tag(stage=STAGE)
def state_settings(context_config: dict) -> _s.StateSettings:
    """``state.*``, the priority of each state section kind and the folders git may read."""
    state, priorities = context_config["state"], context_config["priorities"]
    return _s.StateSettings(
        layout=str(state["layout"]),
        switches=_s.FrozenMap((kind, bool(state[key])) for kind, key in _s.STATE_SWITCHES.items()),
        priorities=_s.FrozenMap((kind, int(priorities[kind])) for kind in _s.STATE_SWITCHES),
        max_history_rounds=int(state["maxHistoryRounds"]),
        git_diff_max_lines=int(state["gitDiffMaxLines"]),
        file_tree_max_entries=int(state["fileTreeMaxEntries"]),
        session_format=str(state["sessionFormat"]),
        gsd_pending_plans=str(state["gsdPendingPlans"]),
        git_timeout=float(state["gitTimeout"]),
        git_max_bytes=int(state["gitMaxBytes"]),
        git_log_count=int(state["gitLogCount"]),
        gsd_phase=str(state["gsdPhase"] or ""),
        allowed_paths=allowed_paths(context_config),
    )


@tag(stage=STAGE)
def render_settings(context_config: dict) -> _s.RenderSettings:
    """The templates, escaping, output instructions and the priorities the render stage sets."""
    priorities = context_config["priorities"]
    return _s.RenderSettings(
        template=str(context_config["template"]),
        context_template=str(context_config["contextTemplate"]),
        escape=str(context_config["escape"]),
        output_instructions=str(context_config["outputInstructions"]),
        request_priority=int(priorities["request"]),
        instructions_priority=int(priorities["instructions"]),
        max_file_bytes=int(context_config["references"]["maxFileBytes"]),
    )


def _band(band) -> tuple[float, float]:
    low, high = band
    return float(low), float(high)
