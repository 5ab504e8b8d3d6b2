"""Truncation: when the context does not fit (or should be compacted), cut it down by priority.

The trigger (a TruncationTrigger) decides whether and to what target (hard: over the available
tokens; soft: over ``budget.softLimit``; requested: ``truncation.compact``). Priority decides the
order of cuts, whatever pool a section is in: every step acts only on the sections of the lowest
priority that still has tokens to give (the priority frontier), so a higher priority is never
cut while a lower one is present. One exception, the least loss: a tail history's older rounds
fold into first-last and summary lines (every round kept) before lower priorities are cut;
dropping its rounds waits for the frontier. Budget pools (shares of the available tokens,
``budget.pools``; nodes/lib/layout.py maps kinds to pools) shape how much the sections of one
priority give: the pools over their share give first (``pool_*`` steps), each by its part of
the cut, then everything (the same steps again). The steps, their order and scope are one
table, ``STEPS`` in nodes/lib/truncate/engine.py; the step nodes below are built from it:

    drop discardable -> head-cut deprecated -> compact history -> summarize -> cut
    (pools over their share, then all) -> refill the unused tokens -> (quality) exact fit

Sections of one priority share the room of a step by size. The cut step goes on from priority
to priority until the target is met; a section it reaches whole is summarized first when its
summary fits (so the current plan keeps its task list). ``slack_refilled`` gives the tokens left
unused back to the reduced sections, highest priority first.

Strategies are nodes too (``tail_strategy``, ``head_strategy``, ``middle_strategy``: frozen
values, picklable), picked per section by content kind (``truncation.strategies``) unless
``truncation.strategy`` forces one. Counting goes through ``exact_counter`` (a frozen value
over the process-wide count cache). The algorithms live in nodes/lib/truncate/; the exact fit
of the rendered context and the quality checks are in nodes/quality.py.
"""

from dataclasses import replace

from typing import Any

from hamilton.function_modifiers import cache, parameterize, source, tag, value

from .lib import crossref as _crossref
from .lib import sessions as _session
from .lib import truncate as _t
from .lib.layout import POOLS as _POOLS
from .lib.layout import render_context
from .lib.memo import NO_MEMO, Memo
from .lib.settings import BudgetSettings, TruncationSettings
from .lib import summarize as _summarize
from .lib.tokens import model_presets
from .types import BudgetExceededError, BudgetReport, LedgerEntry, Section

STAGE = "truncation"
POOLS = _POOLS  # the budget pools (nodes/lib/layout.py maps each section kind to one)


# ----------------------------------------------------------------------------- trigger


@tag(stage=STAGE)
def soft_limit_tokens(truncation_settings: TruncationSettings, available_tokens: int) -> int:
    """The soft limit in tokens: budget.softLimit times the available tokens."""
    return int(truncation_settings.soft_limit * available_tokens)


@tag(stage=STAGE)
def truncation_trigger(
    budget_report: BudgetReport, rendered_context: str, exact_counter: _t.CachedCounter, available_tokens: int,
    soft_limit_tokens: int, truncation_settings: TruncationSettings, preventive_compaction: dict,
) -> _t.TruncationTrigger:
    """Whether truncation runs, why, and the token target it cuts to: hard (over the available
    tokens) and soft (over budget.softLimit) cut to the soft limit; requested
    (truncation.compact) cuts to softLimit times the current size when already under it;
    preventive (the budget monitor folds older rounds ahead of a hard cut) aims at the fold's
    own target: the largest context that leaves room for the rounds the fold makes room for.
    Decided on an exact count unless the budget report's estimate is far over the budget (a
    context that may be returned as it is gets counted exactly once, and that count is reused)."""
    total, exact = budget_report.total_tokens, bool(getattr(budget_report, "exact", True))
    upper = truncation_settings.exact_band[1]
    if not exact and total <= upper * available_tokens:
        total, exact = exact_counter.count(rendered_context), True
    soft, compact = truncation_settings.soft_limit, truncation_settings.compact
    if total > available_tokens:
        reason, target = "hard", soft_limit_tokens
    elif total > soft_limit_tokens:
        reason, target = "soft", soft_limit_tokens
    elif compact:
        reason, target = "requested", min(soft_limit_tokens, int(total * soft))
    elif preventive_compaction.get("active"):
        reason = "preventive"
        target = min(available_tokens, int(preventive_compaction.get("target") or available_tokens))
    else:
        reason, target = None, available_tokens
    return _t.TruncationTrigger(reason is not None, reason, target, soft, soft_limit_tokens, available_tokens, compact,
                                total, exact)


# ----------------------------------------------------------------------------- measuring


@tag(stage=STAGE)
def truncation_sections(
    sections: list, preventively_compacted_sections: list, truncation_trigger: _t.TruncationTrigger
) -> list:
    """The sections truncation starts from: with the budget monitor's preventive compaction
    (older history folded) applied when it is what triggers truncation; as assembled when the
    context is over its hard or soft limit or compaction is requested, so that the steps cut
    only what the target needs (folding every older round first would land far under it)."""
    if _preventive_applies(truncation_trigger):
        return list(preventively_compacted_sections)
    return list(sections)


def _preventive_applies(trigger: _t.TruncationTrigger) -> bool:
    """Whether truncation starts from the preventively folded sections: unless a hard, soft or
    requested cut (which has its own target) runs."""
    return trigger.reason not in ("hard", "soft", "requested")


@tag(stage=STAGE)
def template_overhead(
    truncation_sections: list, context_template: str, mode_template: str, truncation_settings: TruncationSettings,
    exact_counter: _t.CachedCounter
) -> int:
    """Exact tokens of the rendered prompt outside the section contents (mode template,
    headings, titles): the prompt rendered with every content emptied."""
    empty = [s.with_content("") for s in truncation_sections]
    return exact_counter.count(render_context(empty, context_template, mode_template, truncation_settings.escape))


@tag(stage=STAGE)
def immutable_context_tokens(
    truncation_sections: list, context_template: str, mode_template: str, truncation_settings: TruncationSettings,
    exact_counter: _t.CachedCounter, truncation_trigger: _t.TruncationTrigger,
) -> int:
    """Exact tokens of the smallest context truncation can reach: the prompt rendered with
    the immutable sections only (0 when truncation does not run)."""
    if not truncation_trigger.triggered:
        return 0
    immutable = [s for s in truncation_sections if s.tier == "immutable"]
    return exact_counter.count(render_context(immutable, context_template, mode_template, truncation_settings.escape))


@tag(stage=STAGE)
def section_tallies(
    truncation_sections: list, exact_counter: _t.CachedCounter, truncation_trigger: _t.TruncationTrigger
) -> _t.SectionTallies:
    """Tokens of each section before truncation, and which were counted exactly:
    counted exactly for immutable sections and for any section that could be kept whole
    (estimate within the target), estimated (chars / 4) for the rest, which must shrink."""
    target = truncation_trigger.target
    tokens: dict[str, int] = {}
    exact: list[str] = []
    for section in truncation_sections:
        estimate = exact_counter.estimate(section.content)
        if section.tier == "immutable" or not truncation_trigger.triggered or estimate <= target:
            tokens[section.key] = exact_counter.count(section.content)
            exact.append(section.key)
        else:
            tokens[section.key] = estimate
    return _t.SectionTallies(tokens, tuple(exact))


# ----------------------------------------------------------------------------- pools


@tag(stage=STAGE)
def pool_share_tokens(truncation_settings: TruncationSettings, available_tokens: int, reserve_tokens: int) -> dict:
    """Each pool's share in tokens: the pools split the available tokens in proportion to their
    budget.pools weights (the buffer takes the rounding and any weight left under 1), after the
    code pool's ``code.share`` when the code stage is on (nodes/lib/truncate/pools.py); the
    reserve is the answer reserve (reserve_tokens, budget.reserveTokens / reserveShare)."""
    weights = dict(truncation_settings.pools)
    weights.pop(_t.RESERVE, None)
    weights.setdefault(_t.BUFFER, max(0.0, 1.0 - sum(float(w) for w in weights.values())))
    weights = _t.with_code_pool(weights, truncation_settings.code_share)
    shares = _t.pool_shares(available_tokens, weights)
    shares[_t.RESERVE] = reserve_tokens
    return shares


@tag(stage=STAGE)
def pool_accounts(pool_share_tokens: dict, section_tallies: _t.SectionTallies, truncation_sections: list, template_overhead: int) -> dict:
    """Each pool's share, use, loan (unused share given to the buffer) and debt (borrowed from
    the buffer) before truncation, and what the buffer has left (negative: over budget)."""
    use = _t.pool_use(truncation_sections, section_tallies.tokens, template_overhead)
    shares = {k: v for k, v in pool_share_tokens.items() if k != _t.RESERVE}
    accounts = _t.pool_accounts(shares, use)
    accounts[_t.RESERVE] = {"share": pool_share_tokens[_t.RESERVE], "use": pool_share_tokens[_t.RESERVE],
                           "loan": 0, "debt": 0}
    return accounts


# ----------------------------------------------------------------------------- strategies


@tag(stage=STAGE)
def strategy_by_kind(truncation_settings: TruncationSettings) -> dict:
    """The strategy for each content kind (truncation.strategies: history, deprecated,
    default), or the one truncation.strategy forces for all."""
    forced = truncation_settings.strategy
    by_kind = dict(truncation_settings.strategies)
    if forced != "auto":
        by_kind = {kind: forced for kind in by_kind}
    return by_kind


@tag(stage=STAGE)
def section_strategies(truncation_sections: list, strategy_by_kind: dict) -> dict:
    """The strategy of each section: by its kind, "deprecated" for a deprecated document,
    else the default."""
    def pick(section: Section) -> str:
        if section.deprecated and "deprecated" in strategy_by_kind:
            return strategy_by_kind["deprecated"]
        return strategy_by_kind.get(section.kind, strategy_by_kind["default"])
    return {s.key: pick(s) for s in truncation_sections}


@cache(behavior="recompute")  # holds the memo, which a stored value would not keep
@tag(stage=STAGE)
def tail_strategy(truncation_settings: TruncationSettings, memo: Memo = NO_MEMO) -> _t.Strategy:
    """Tail: keep the end. A session history keeps its recent rounds verbatim; older rounds
    keep their first and last message with a summary between, then become summary lines (with
    the sentences that carry ids, few files), then are dropped oldest first. Other text is cut
    from its beginning. Summary lines are kept in the ``memo``."""
    return _t.BuiltinStrategy("tail", None, truncation_settings.keep_recent_rounds, truncation_settings.recent_share,
                              _session.render_round, _t.round_summary_with_ids(_summaries_in(memo), memo))


@cache(behavior="recompute")
@tag(stage=STAGE)
def head_strategy(memo: Memo = NO_MEMO) -> _t.Strategy:
    """Head: keep the beginning (documents marked deprecated); a history keeps its oldest rounds."""
    return _t.BuiltinStrategy("head", None, render_round=_session.render_round, round_summary=_summaries_in(memo))


def _summaries_in(memo: Memo) -> _t.SummaryInMemo:
    """:func:`~.lib.sessions.round_summary` keeping its lines in ``memo``."""
    return _t.SummaryInMemo(_session.round_summary, memo)


@cache(behavior="recompute")
@tag(stage=STAGE)
def middle_strategy(summarizer: Any, memo: Memo = NO_MEMO) -> _t.Strategy:
    """Middle: for mixed content. Summarized by priority (lowest first) with the summarizer,
    then cut keeping both ends; a history keeps its first and newest rounds."""
    if summarizer is None or isinstance(summarizer, str):  # a method name (driver config) instead of the node
        summarizer = _summarize.as_summarizer(summarizer)
    return _t.BuiltinStrategy("middle", summarizer, render_round=_session.render_round, round_summary=_summaries_in(memo))


@tag(stage=STAGE)
def truncation_strategies(tail_strategy: _t.Strategy, head_strategy: _t.Strategy, middle_strategy: _t.Strategy) -> dict:
    """The strategies by name, as the steps look them up."""
    return {"tail": tail_strategy, "head": head_strategy, "middle": middle_strategy}


# ----------------------------------------------------------------------------- start


@tag(stage=STAGE)
def truncation_start(
    truncation_sections: list,
    section_tallies: _t.SectionTallies,
    template_overhead: int,
    truncation_trigger: _t.TruncationTrigger,
    pool_share_tokens: dict,
    section_strategies: dict,
    available_tokens: int,
    budget_settings: BudgetSettings,
    immutable_context_tokens: int,
    preventive_ledger: list,
) -> _t.TruncationState:
    """The state the steps start from. When truncation runs and the immutable sections with
    the template alone do not fit the available tokens, raises BudgetExceededError naming each
    immutable section with its tokens, the shortfall, and the models that would fit."""
    tallied = template_overhead + sum(section_tallies.tokens.values())
    # Untriggered: no step acts (the exact count of the rendered context said it fits; the
    # tallies, summed per section, may differ by a few tokens). The exact fit still checks it.
    target = truncation_trigger.target if truncation_trigger.triggered else max(available_tokens, tallied)
    state = _t.start_state(truncation_sections, section_tallies.tokens, section_tallies.exact, template_overhead,
                           target, available_tokens, pool_share_tokens, section_strategies)
    if _preventive_applies(truncation_trigger):
        state = replace(state, ledger=tuple(preventive_ledger))  # the monitor's folding comes first
    if immutable_context_tokens > available_tokens:
        _raise_immutable(truncation_sections, section_tallies.tokens, immutable_context_tokens, available_tokens, budget_settings)
    return state


def _raise_immutable(sections, tokens, needed, available, budget: BudgetSettings) -> None:
    immutable = [s for s in sections if s.tier == "immutable"]
    overhead = needed - sum(tokens[s.key] for s in immutable)
    reserve = budget.reserve_for(model_presets()[budget.model])
    listed = "; ".join(f"{s.title} ({s.key}): {tokens[s.key]:,} token{'s' if tokens[s.key] != 1 else ''}"
                       for s in immutable)
    fits = [name for name, p in sorted(model_presets().items(), key=lambda kv: kv[1]["window"])
            if int(p["window"]) - budget.reserve_for(p, int(p["window"])) >= needed]
    models = ", ".join(fits) if fits else "none of configs/models.yaml"
    # A budget the caller fixed (--max-tokens, --set, the API) is theirs: no other models suggested.
    other = "" if budget.max_tokens_given else f" Models whose window minus the reserve would fit: {models}."
    raise BudgetExceededError(
        f"the immutable sections alone do not fit: rendered alone they need {needed:,} tokens ({listed}; "
        f"templates and headings {overhead:,} tokens) but only {available:,} are available (budget.maxTokens {budget.max_tokens:,} "
        f"- budget.reserveTokens {reserve:,}), {needed - available:,} short.{other} Raise budget.maxTokens, lower "
        "budget.reserveTokens, or shorten these sections."
    )


# ----------------------------------------------------------------------------- the steps
# One node per row of the table of steps (lib/truncate/engine.py STEPS): each runs twice, first
# over the pools that are over their share ("pool_" nodes), then over every pool, and acts only
# while the context is over its target. Their order is the table's.


def _rows(action: str) -> dict:
    """@parameterize arguments of the table's rows that run ``action``."""
    return {row.name: {"state": source(row.after), "scope": value(row.scope), "step": value(row.name)}
            for row in _t.steps_running(action)}


@tag(stage=STAGE)
@parameterize(**_rows("drop_discardable"))
def discardable_dropped(state: _t.TruncationState, scope: str, step: str) -> _t.TruncationState:
    """Discardable sections (priority < 50) dropped without a summary, lowest priority first."""
    return _t.drop_discardable(state, scope, step)


@tag(stage=STAGE)
@parameterize(**_rows("head_cut_deprecated"))
def deprecated_head_cut(
    state: _t.TruncationState, scope: str, step: str, truncation_strategies: dict, exact_counter: _t.CachedCounter,
    truncation_settings: TruncationSettings,
) -> _t.TruncationState:
    """Deprecated documents (head strategy) cut to keep their beginning, with a marker."""
    return _t.head_cut_deprecated(state, scope, step, truncation_strategies, exact_counter, _min_keep(truncation_settings))


@tag(stage=STAGE)
@parameterize(**_rows("compact_histories"))
def history_compacted(
    state: _t.TruncationState, scope: str, step: str, truncation_strategies: dict, exact_counter: _t.CachedCounter,
    truncation_settings: TruncationSettings,
) -> _t.TruncationState:
    """Session histories compacted by whole rounds (tail: recent rounds verbatim, older ones
    first-last, then summary lines, then dropped oldest first); tool calls keep their results."""
    return _t.compact_histories(state, scope, step, truncation_strategies, exact_counter, _min_keep(truncation_settings))


@tag(stage=STAGE)
@parameterize(**_rows("summarize_summarizable"))
def summarizable_summarized(
    state: _t.TruncationState, scope: str, step: str, truncation_strategies: dict, exact_counter: _t.CachedCounter,
    truncation_settings: TruncationSettings,
) -> _t.TruncationState:
    """Summarizable sections (middle strategy) summarized, lowest priority first, each summary
    capped at what the section may keep."""
    return _t.summarize_summarizable(state, scope, step, truncation_strategies, exact_counter,
                                     _min_keep(truncation_settings))


@tag(stage=STAGE)
@parameterize(**_rows("cut_summarizable"))
def summarizable_cut(
    state: _t.TruncationState, scope: str, step: str, truncation_strategies: dict, exact_counter: _t.CachedCounter,
    truncation_settings: TruncationSettings,
) -> _t.TruncationState:
    """Summarizable sections cut at paragraph or line boundaries with a marker naming what was
    cut and where the full text is, lowest priority first; dropped when too little would stay."""
    return _t.cut_summarizable(state, scope, step, truncation_strategies, exact_counter, _min_keep(truncation_settings))


@tag(stage=STAGE)
def slack_refilled(
    summarizable_cut: _t.TruncationState, truncation_strategies: dict, exact_counter: _t.CachedCounter,
    truncation_settings: TruncationSettings,
) -> _t.TruncationState:
    """The tokens the steps left unused given back to the reduced sections, highest priority
    first (a dropped deprecated document comes back head-cut)."""
    return _t.refill_slack(summarizable_cut, "slack_refilled", truncation_strategies, exact_counter,
                           _min_keep(truncation_settings))


def _min_keep(truncation_settings: TruncationSettings) -> int:
    return truncation_settings.min_keep_tokens


# ----------------------------------------------------------------------------- outputs


@tag(stage=STAGE)
def truncation_ledger(fitted_context: _t.FittedContext, truncation_sections: list) -> list[LedgerEntry]:
    """For every section, what each step did (tokens before and after, action, step, reason),
    then one "mended" entry per cross-reference mended in it; a section no step touched has one
    "kept" entry. Each section's last entry ends at its final tokens, so the ledger adds up to
    the final context's sections."""
    return _final_ledger(fitted_context, truncation_sections)


def _final_ledger(fitted, sections) -> list[LedgerEntry]:
    state = fitted.state
    by_key: dict[str, list[LedgerEntry]] = {}
    for entry in state.ledger:
        by_key.setdefault(entry.section_key, []).append(entry)
    final = fitted.section_tokens
    mends = _crossref.mends_by_section(fitted.notes, [s.key for s in sections])
    out: list[LedgerEntry] = []
    for section in sections:
        entries = by_key.get(section.key, [])
        if not entries:
            before = state.initial[section.key]
            why = "immutable: never changed" if section.tier == "immutable" else (
                "fits: no cut needed" if fitted.changed else "the context fits: nothing to cut")
            estimated = section.key not in state.exact
            entries = [LedgerEntry(section.key, "truncation_start", "kept", before, before, why,
                                   estimated)]  # ends at final below
        last = entries[-1]
        if last.action != "dropped":  # one entry per mended cross-reference (nodes/quality.py crossref_mending)
            entries = entries + [LedgerEntry(section.key, _crossref.MEND_STEP, _crossref.MEND_ACTION, last.tokens_after,
                                             last.tokens_after, f"cross-reference mended: {note}")
                                 for note in mends.get(section.key, ())]
            last = entries[-1]
        after = 0 if last.action == "dropped" else final.get(section.key, last.tokens_after)
        if after != last.tokens_after:
            entries[-1] = replace(last, tokens_after=after)
        out.extend(entries)
    return out


@tag(stage=STAGE)
def truncation_summary(
    truncation_trigger: _t.TruncationTrigger, fitted_context: _t.FittedContext, truncation_settings: TruncationSettings,
    budget_report: BudgetReport,
    section_strategies: dict,
) -> dict:
    """Whether truncation ran, why (hard | soft | requested), the strategy, the target, and
    the token counts before (with whether that count was exact) and after."""
    state = fitted_context.state
    changed = sorted({e.section_key for e in state.ledger})
    forced = truncation_settings.strategy
    triggered = truncation_trigger.triggered or fitted_context.late_trigger is not None
    return {
        "triggered": triggered,
        "reason": truncation_trigger.reason or fitted_context.late_trigger,
        "strategy": (forced if forced != "auto" else "auto") if triggered else None,
        "strategies": {key: section_strategies[key] for key in changed if key in section_strategies},
        "target": state.target,
        "soft_limit": truncation_trigger.soft_limit,
        "soft_limit_tokens": truncation_trigger.soft_limit_tokens,
        "available": truncation_trigger.available,
        "initial_tokens": truncation_trigger.initial_tokens,
        "initial_exact": truncation_trigger.initial_exact,
        "final_tokens": fitted_context.tokens,
        "fit_passes": fitted_context.passes,
        "sections_changed": changed,
        "cross_references": list(fitted_context.notes),
    }


@tag(stage=STAGE)
def truncation_warnings(fitted_context: _t.FittedContext, truncation_trigger: _t.TruncationTrigger) -> tuple[str, ...]:
    """Warnings of truncation: a soft target that could not be reached, and cross-references
    in immutable sections to content that was removed (left unchanged)."""
    warnings = []
    state = fitted_context.state
    if fitted_context.tokens > state.target:
        target = {"requested": f"the --compact target ({state.target:,} tokens)",
                  "preventive": f"the preventive compaction target ({state.target:,} tokens)"}.get(
            truncation_trigger.reason,
            f"the soft limit ({truncation_trigger.soft_limit:.0%} = {state.target:,} tokens)")
        warnings.append(
            f"truncation: {target} cannot be reached: the immutable sections and the template alone need "
            f"more; the context uses {fitted_context.tokens:,} of {state.limit:,} available tokens"
        )
    warnings.extend(f"truncation: {note}" for note in fitted_context.notes if "immutable section" in note)
    return tuple(warnings)


@tag(stage=STAGE)
def budget_pools(pool_accounts: dict, fitted_context: _t.FittedContext) -> dict:
    """The pools for the JSON: each pool's share, use, loan (given to the buffer) and debt
    (borrowed) before truncation, and its use after ("final"); the buffer's remaining tokens
    before and after ("final_remaining")."""
    final_use = fitted_context.state.pool_use()
    out = {}
    for name, account in pool_accounts.items():
        row = dict(account)
        if name == _t.BUFFER:
            row["final_remaining"] = fitted_context.state.limit - fitted_context.tokens
        elif name != _t.RESERVE:
            row["final"] = final_use.get(name, 0)
        out[name] = row
    return out
