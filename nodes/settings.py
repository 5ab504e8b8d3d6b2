"""Settings of each stage: one frozen value per stage, built from the resolved configuration.

The stages take these instead of ``context_config``, so a changed key invalidates only the
nodes that read it (Hamilton's cache keys follow the values a node receives). The types live
in nodes/lib/settings.py; defaults only in configs/defaults.yaml (a missing key is a bug, so
every key is indexed directly).
"""

import os
from typing import Optional
from dataclasses import replace

from hamilton.function_modifiers import tag

from .lib import settings as _s
from .lib.code.settings import CodeSettings
from .lib.references import GROUPS, group_priorities
from .lib.reserve import is_auto
from .lib.textio import Trust, allowed_paths, trust_from

STAGE = "config"


@tag(stage=STAGE)
def trust_settings(context_config: dict) -> Trust:
    """The trust rules (``trust.*``) without a project: loaders root them at theirs."""
    return replace(trust_from(context_config, os.sep), root="")


@tag(stage=STAGE)
def budget_settings(context_config: dict, config_provenance: Optional[dict] = None) -> _s.BudgetSettings:
    """``model`` and the budget keys the budget stage reads, and whether the caller set
    ``budget.maxTokens`` (an override: --max-tokens, --set, the API)."""
    reserve = context_config["budget"]["reserveTokens"]
    given = (config_provenance or {}).get("budget.maxTokens") == _s.OVERRIDE_ORIGIN
    return _s.from_config(_s.BudgetSettings, context_config, reserve_tokens=None if is_auto(reserve) else int(reserve),
                          max_tokens_given=given)


@tag(stage=STAGE)
def truncation_settings(context_config: dict) -> _s.TruncationSettings:
    """``truncation.*`` with the soft limit, exact band and pools the truncation stage reads, and
    the code pool's share (``code.share``; 0 when ``code.enabled`` is false)."""
    pools = context_config["budget"]["pools"]
    code = context_config["code"]
    return _s.from_config(_s.TruncationSettings, context_config,
                          pools=_s.FrozenMap((name, float(share)) for name, share in pools.items()),
                          code_share=float(code["share"]) if code["enabled"] else 0.0)


@tag(stage=STAGE)
def code_settings(context_config: dict) -> CodeSettings:
    """``code.*`` and the priorities of the two code sections (named files, repo map)."""
    return _s.from_config(CodeSettings, context_config)


@tag(stage=STAGE)
def quality_settings(context_config: dict) -> _s.QualitySettings:
    """The exact fit's passes and minimum, the required headings and the templates."""
    return _s.from_config(_s.QualitySettings, context_config)


@tag(stage=STAGE)
def monitor_settings(context_config: dict) -> _s.MonitorSettings:
    """``monitor.*``: the budget monitor's compaction threshold and how it folds rounds."""
    return _s.from_config(_s.MonitorSettings, context_config)


@tag(stage=STAGE)
def reference_settings(context_config: dict) -> _s.ReferenceSettings:
    """``references.*`` and the default priority of each reference group."""
    return _s.from_config(_s.ReferenceSettings, context_config,
                          groups=_s.picked(context_config["references"], GROUPS),
                          group_priorities=_s.FrozenMap(group_priorities(context_config["priorities"])))


@tag(stage=STAGE)
def disclosure_settings(context_config: dict) -> _s.DisclosureSettings:
    """``disclosure.*``, the mode, the URL limits and the default priority of a document."""
    return _s.from_config(_s.DisclosureSettings, context_config,
                          rules=str(context_config["disclosure"]["rules"] or "").strip())


@tag(stage=STAGE)
def state_settings(context_config: dict, config_provenance: dict, project_dir: str) -> _s.StateSettings:
    """``state.*``, the priority of each state section kind, the folders git may read, and
    whether the project itself named its Claude Code transcript (then it must lie inside)."""
    state, priorities = context_config["state"], context_config["priorities"]
    named_in = str(config_provenance.get("state.claudeCode.transcript", ""))
    config_json = os.path.join(project_dir, ".planning", "config.json")
    return _s.from_config(
        _s.StateSettings, context_config,
        switches=_s.FrozenMap((kind, bool(state[key])) for kind, key in _s.STATE_SWITCHES.items()),
        priorities=_s.FrozenMap((kind, int(priorities[kind])) for kind in _s.STATE_SWITCHES),
        gsd_phase=str(state["gsdPhase"] or ""),
        allowed_paths=allowed_paths(context_config),
        claude_transcript_from_project=named_in.startswith(config_json),
    )


@tag(stage=STAGE)
def render_settings(context_config: dict) -> _s.RenderSettings:
    """The templates, escaping, output instructions and the priorities the render stage sets."""
    return _s.from_config(_s.RenderSettings, context_config)
