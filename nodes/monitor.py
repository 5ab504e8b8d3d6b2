"""Budget monitor (multi-round): how the session spends the context window round by round,
how many more rounds fit, and whether to fold older rounds into a rolling summary now.

Pure nodes over the session history; the arithmetic lives in nodes/lib/monitor.py. A round's
tokens are the ``usage`` its log lines report (``total_tokens``, else prompt + completion or
input + output), else the exact token count of its messages (by the run's memoizing counter). ``preventive_compaction`` asks
the truncation stage to compact the history before a hard cut is forced: when the projected
number of rounds left is at or below ``monitor.thresholdRounds``.
"""

from typing import Any, Optional

from hamilton.function_modifiers import tag

from .lib import monitor as _mon
from .lib import sessions as _session
from .lib.memo import NO_MEMO, Memo
from .lib.monitor import BudgetMonitor
from .lib.settings import MonitorSettings
from .lib.truncate import CachedCounter
from .types import BudgetReport, LedgerEntry, Round, Section

STEP = "preventive_compaction"


@tag(stage="monitor")
def round_token_use(session_history: Any, exact_counter: CachedCounter, memo: Memo = NO_MEMO) -> tuple:
    """Tokens each round of the session added (RoundUse, oldest first): the usage field where
    a log line has one, else the count of the round as the history renders it: exact for the
    rounds the growth is read from, estimated (chars / 4) for older ones; each made once per
    round content (kept by the ``memo``)."""
    return _mon.round_uses(_session.rounds_of(session_history), exact_counter.count, _session.render_round,
                           estimate=exact_counter.estimate, exact_last=2 * _mon.GROWTH_WINDOW,
                           memo=memo, counted_as=exact_counter.encoding_name)


@tag(stage="monitor")
def budget_monitor(
    round_token_use: tuple,
    available_tokens: int,
    budget_report: BudgetReport,
    history_section: Optional[Section],
    round_summaries: tuple,
    exact_counter: CachedCounter,
) -> BudgetMonitor:
    """initial_budget (maxTokens - reserveTokens), cumulative_used (the context without the
    history, plus what every round occupies in it: verbatim rounds their tokens, rounds the
    history section summarises their summary line), current_round_used, remaining, and
    projected_rounds: floor(remaining / mean tokens of the last three rounds), None when
    nothing grows."""
    history = 0
    if history_section is not None:
        # measured like the report: exactly (the run's counter: paragraphs the report counted
        # are not counted again), or by the same estimate when the report is one
        exact = getattr(budget_report, "exact", True)
        history = exact_counter.count(history_section.content) if exact else exact_counter.estimate(
            history_section.content)
    base = max(0, budget_report.total_tokens - history)
    verbatim_from = 0
    if history_section is not None:
        verbatim_from = int((history_section.data or {}).get("verbatim_from", 0) or 0)
    # a summarised round occupies its summary line (estimated: there can be thousands of them;
    # the lines are the history section's own, made once by the round_summaries node)
    in_context = [
        exact_counter.estimate(summary) if position < verbatim_from else use.tokens
        for position, (summary, use) in enumerate(zip(round_summaries, round_token_use))
    ]
    return _mon.budget_monitor_for(round_token_use, available_tokens, base, in_context)


@tag(stage="monitor")
def preventive_compaction(budget_monitor: BudgetMonitor, round_token_use: tuple, monitor_settings: MonitorSettings) -> dict:
    """{"active", "keep_last", "reason", "fold", "projected_after", "target"}: active when
    projected_rounds <= monitor.thresholdRounds, so the older rounds are folded into the rolling
    summary now, keeping the last ``keep_last`` verbatim, before a hard cut is forced; ``target``
    is the largest context that leaves room for ``projected_after`` more rounds (truncation's
    target when the fold is what triggers it)."""
    compaction = _mon.compaction_for(
        budget_monitor,
        round_token_use,
        threshold=monitor_settings.threshold_rounds,
        keep_rounds=monitor_settings.keep_rounds,
        summary_tokens_per_round=monitor_settings.summary_tokens_per_round,
    )
    return compaction.as_dict()


@tag(stage="monitor")
def monitor_report(budget_monitor: BudgetMonitor, preventive_compaction: dict) -> dict:
    """The monitor's figures and its compaction decision as one JSON-ready mapping."""
    return {**budget_monitor.as_dict(), "preventive_compaction": dict(preventive_compaction)}


@tag(stage="monitor")
def preventively_compacted_sections(sections: list, preventive_compaction: dict) -> list[Section]:
    """The sections, with the history section's older rounds folded when preventive compaction
    is active: rolling-summary rounds verbatim, the last ``keep_last`` rounds verbatim, older
    rounds one summary line each (``data["verbatim_from"]`` updated). Unchanged otherwise, or
    when the history already carries no more than ``keep_last`` rounds verbatim."""
    if not preventive_compaction.get("active"):
        return list(sections)
    out = []
    for section in sections:
        out.append(_compacted(section, int(preventive_compaction["keep_last"])) if section.kind == "history" else section)
    return out


@tag(stage="monitor")
def preventive_ledger(
    sections: list, preventively_compacted_sections: list, preventive_compaction: dict, exact_counter: CachedCounter
) -> list[LedgerEntry]:
    """One "compacted" ledger entry per section preventive compaction changed (step
    ``preventive_compaction``, tokens before and after, the monitor's reason); [] otherwise."""
    before = {s.key: s for s in sections}
    entries = []
    for section in preventively_compacted_sections:
        old = before.get(section.key)
        if old is not None and old.content != section.content:
            entries.append(LedgerEntry(section.key, STEP, "compacted", exact_counter.count(old.content),
                                       exact_counter.count(section.content), str(preventive_compaction["reason"])))
    return entries


def _compacted(section: Section, keep_last: int) -> Section:
    rounds = tuple(r for r in (section.data or {}).get("rounds", ()) if isinstance(r, Round))
    conversation = [r for r in rounds if _mon.is_conversation_round(r)]
    verbatim_from = int((section.data or {}).get("verbatim_from", 0) or 0)
    verbatim_now = sum(1 for r in rounds[verbatim_from:] if _mon.is_conversation_round(r))
    if not conversation or verbatim_now <= keep_last:
        return section
    text, folded = _mon.folded_history(rounds, keep_last, _session.render_rounds, _session.compact_history)
    trailer = (f"({len(conversation)} rounds; the last {min(keep_last, len(conversation))} verbatim, "
               f"{folded} older ones folded into summary lines by preventive compaction)")
    first_kept = len(rounds) - min(keep_last, len(conversation))
    data = {**dict(section.data), "verbatim_from": first_kept, "preventive": True}
    return section.with_content(text + "\n\n" + trailer, data=data)
