"""Pure arithmetic of the multi-round budget monitor and of preventive compaction.

A session spends its context window round by round: every round adds its request, the
answer and the tool traffic to the history the next round carries. The monitor measures
what each round added (the ``usage`` a log line reports, else an exact token count of the
message), how much of the window is used now, and how many more rounds fit at the pace of
the last three rounds. When that projection reaches the threshold, preventive compaction
folds the older rounds into a rolling summary before a hard cut is forced.

Every function here is plain arithmetic over numbers (and a token-count callable), so the
tests check them against sequences computed by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..types import Message, Round
from .digest import digest16
from .memo import NO_MEMO, Memo

#: How many recent rounds the growth rate averages over.
GROWTH_WINDOW = 3

# usage field names, by API: OpenAI (prompt/completion/total), Anthropic (input/output + cache).
_TOTAL_KEYS = ("total_tokens", "totalTokens")
_PART_KEYS = (
    ("prompt_tokens", "completion_tokens"),
    ("input_tokens", "output_tokens"),
    ("promptTokens", "completionTokens"),
    ("inputTokens", "outputTokens"),
)
_CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def usage_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """Tokens a ``usage`` field reports: ``total_tokens`` when present, else the sum of the
    prompt/completion (or input/output, with Anthropic's cache counts) parts it has; None
    when it holds no token count."""
    if not isinstance(usage, Mapping):
        return None
    for key in _TOTAL_KEYS:
        total = _int(usage.get(key))
        if total is not None:
            return total
    for first, second in _PART_KEYS:
        parts = [_int(usage.get(first)), _int(usage.get(second))]
        if any(p is not None for p in parts):
            extra = [_int(usage.get(k)) for k in _CACHE_KEYS] if first == "input_tokens" else []
            return sum(p for p in parts + extra if p is not None)
    return None


def message_text(message: Message) -> str:
    """What a message puts in the history: its content and its tool calls."""
    calls = [f"{c.get('name', 'tool')}: {c.get('arguments', '')}" for c in message.tool_calls]
    return "\n".join([message.content, *calls]) if calls else message.content


def is_conversation_round(round_: Round) -> bool:
    """A round with a user request (not a rolling-summary round of system text only)."""
    return any(m.role == "user" for m in round_.messages)


@dataclass(frozen=True)
class RoundUse:
    """Tokens one round added to the history, and whether a usage field gave them."""

    index: int
    tokens: int
    measured: int  # tokens counted from the text (0 when every message had usage)
    reported: int  # tokens taken from usage fields
    conversation: bool = True
    #: A digest of its content, set when it is made: a tuple of a transcript's uses is
    #: fingerprinted by one hash of them joined (nodes/lib/digest.py).
    digest: bytes = field(init=False, default=b"", compare=False, repr=False)

    DIGEST_TAG = b"u"  # carries a content digest

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", digest16(b"use", b"%d,%d,%d,%d,%d" % (
            self.index, self.tokens, self.measured, self.reported, self.conversation)))

    @property
    def source(self) -> str:
        if self.reported and self.measured:
            return "mixed"
        return "usage" if self.reported else "measured"


#: What a RoundUse costs in the memo (its pickle, digest included, and the entry's slot,
#: measured): sized without pickling each one.
USE_BYTES = 224


def round_use(
    round_: Round, count: Callable[[str], int], render: Callable[[Round], str] | None = None
) -> RoundUse:
    """The usage tokens of the messages whose line had a usage field, plus the exact count
    of the others: their text, or, with ``render``, the round as the history renders it
    without the usage-reported messages (headers and role labels included)."""
    reported = 0
    counted: list[Message] = []
    for message in round_.messages:
        reported_here = None if message.usage is None else usage_tokens(message.usage)
        if reported_here is None:
            counted.append(message)
        else:
            reported += reported_here
    if render is None:
        measured = sum(count(message_text(m)) for m in counted)
    elif counted and len(counted) == len(round_.messages):  # no usage field: the round as it is
        measured = count(render(round_))
    elif counted:
        measured = count(render(Round(round_.index, tuple(counted), round_.lines)))
    else:
        measured = 0
    return RoundUse(round_.index, measured + reported, measured, reported, is_conversation_round(round_))


def round_uses(
    rounds: Iterable[Round],
    count: Callable[[str], int],
    render: Callable[[Round], str] | None = None,
    estimate: Callable[[str], int] | None = None,
    exact_last: int | None = None,
    memo: Memo = NO_MEMO,
    counted_as: str = "",
) -> tuple[RoundUse, ...]:
    """:func:`round_use` of every round, oldest first. With ``estimate`` and ``exact_last``,
    only the last ``exact_last`` rounds (the ones the growth is read from) are counted
    exactly; older rounds are estimated, so a long transcript costs no full tokenizer pass.
    ``memo``: each round's use is made once per content and way of counting
    (``counted_as`` names the exact counter, e.g. its encoding)."""
    rounds = tuple(rounds)
    cut = 0 if estimate is None or exact_last is None else max(0, len(rounds) - exact_last)
    ways = ((estimate, "estimate"), (count, "exact:" + counted_as))
    shape = "rendered" if render is not None else "text"

    def uses(part: tuple[Round, ...], exact: bool) -> tuple[RoundUse, ...]:
        counter, name = ways[exact]
        kind = f"use:{name}:{shape}"
        return memo.values_of(kind, part, [r.digest for r in part], lambda r: round_use(r, counter, render),
                              size=USE_BYTES)

    return uses(rounds[:cut], False) + uses(rounds[cut:], True)


def growth_rate(tokens: Sequence[int], window: int = GROWTH_WINDOW) -> float:
    """Average tokens a round adds, over the last ``window`` rounds (fewer when there are
    fewer); 0.0 without rounds."""
    recent = list(tokens)[-window:] if window > 0 else []
    return sum(recent) / len(recent) if recent else 0.0


def projected_rounds(remaining: int, growth: float) -> int | None:
    """How many more rounds fit: floor(remaining / growth), never below 0; None when the
    history does not grow (no rounds, or rounds that add nothing)."""
    if growth <= 0:
        return None
    return max(0, math.floor(remaining / growth))


@dataclass(frozen=True)
class BudgetMonitor:
    """The session's use of the context window after its latest round."""

    initial_budget: int  # tokens the context may use (maxTokens - reserveTokens)
    cumulative_used: int  # base context + every round's tokens
    current_round_used: int  # tokens the latest round added
    remaining: int  # initial_budget - cumulative_used (negative when over)
    projected_rounds: int | None  # rounds that still fit at the recent pace; None: no growth
    growth_per_round: float  # average tokens per round over the last three rounds
    base_tokens: int  # the context without the session history (rules, references, plan, ...)
    history_tokens: int  # what the rounds occupy in the context
    rounds: int  # conversation rounds seen
    round_tokens: tuple[int, ...] = ()
    sources: tuple[str, ...] = ()  # per round: usage | measured | mixed

    def as_dict(self) -> dict:
        return {
            "initial_budget": self.initial_budget,
            "cumulative_used": self.cumulative_used,
            "current_round_used": self.current_round_used,
            "remaining": self.remaining,
            "projected_rounds": self.projected_rounds,
            "growth_per_round": round(self.growth_per_round, 2),
            "base_tokens": self.base_tokens,
            "history_tokens": self.history_tokens,
            "rounds": self.rounds,
            "round_tokens": list(self.round_tokens),
            "sources": list(self.sources),
        }


def budget_monitor_for(
    uses: Sequence[RoundUse],
    initial_budget: int,
    base_tokens: int = 0,
    in_context: Sequence[int] | None = None,
) -> BudgetMonitor:
    """The monitor figures for rounds that used ``uses`` on top of a ``base_tokens`` context.

    cumulative_used = base_tokens + the history's tokens (each round's tokens, or
    ``in_context[i]`` when given: what round i occupies in the context, e.g. its one-line
    summary once the state stage summarises it); remaining = initial_budget - cumulative_used;
    growth = mean tokens of the last three conversation rounds (a rolling-summary round counts
    in the total, not in the pace); projected_rounds = floor(remaining / growth), at least 0,
    None when nothing grows.
    """
    if in_context is not None and len(in_context) != len(uses):
        raise ValueError("in_context needs one entry per round")
    history = sum(in_context) if in_context is not None else sum(u.tokens for u in uses)
    conversation = [u.tokens for u in uses if u.conversation]
    used = int(base_tokens) + history
    remaining = int(initial_budget) - used
    growth = growth_rate(conversation)
    return BudgetMonitor(
        initial_budget=int(initial_budget),
        cumulative_used=used,
        current_round_used=conversation[-1] if conversation else 0,
        remaining=remaining,
        projected_rounds=projected_rounds(remaining, growth),
        growth_per_round=growth,
        base_tokens=int(base_tokens),
        history_tokens=history,
        rounds=len(conversation),
        round_tokens=tuple(u.tokens for u in uses),
        sources=tuple(u.source for u in uses),
    )


@dataclass(frozen=True)
class Compaction:
    """Whether to fold older rounds now, how many recent rounds stay verbatim, and why."""

    active: bool
    keep_last: int
    reason: str
    fold: int = 0  # rounds to fold into the rolling summary
    projected_after: int | None = None  # projected rounds once they are folded (estimate)
    target: int | None = None  # the largest context that leaves room for projected_after rounds

    def as_dict(self) -> dict:
        return {"active": self.active, "keep_last": self.keep_last, "reason": self.reason,
                "fold": self.fold, "projected_after": self.projected_after, "target": self.target}


def compaction_for(
    monitor: BudgetMonitor,
    uses: Sequence[RoundUse],
    threshold: int,
    keep_rounds: int,
    summary_tokens_per_round: int,
) -> Compaction:
    """Preventive compaction when ``projected_rounds <= threshold``.

    Keeps the largest ``keep_last`` (from ``keep_rounds`` down to 1) whose folding is
    estimated to lift the projection above the threshold (each folded round leaves about
    ``summary_tokens_per_round`` tokens of summary, an earlier rolling summary round stays);
    when none does, keeps 1. ``fold`` counts the rounds (summary rounds included) before the
    first kept one; ``target`` the fold's own target (:func:`fold_target`). Inactive when the context is already over budget (the hard cut is due now),
    the projection is above the threshold, unknown (no growth), or nothing is old enough to fold.
    """
    conversation = [i for i, u in enumerate(uses) if u.conversation]
    idle = _idle_compaction(monitor, len(uses), threshold, len(conversation))
    if idle is not None:
        return idle
    keep, fold, after = _kept_fold(monitor, uses, conversation, threshold, keep_rounds, summary_tokens_per_round)
    reason = (
        f"preventive compaction: {monitor.remaining} of {monitor.initial_budget} tokens left at "
        f"{monitor.growth_per_round:.0f} tokens/round (last {min(GROWTH_WINDOW, len(conversation))} rounds) "
        f"= {monitor.projected_rounds} more rounds <= monitor.thresholdRounds {threshold}; folding {fold} older "
        f"rounds into the rolling summary, keeping the last {keep} verbatim (about {after} rounds after)"
    )
    return Compaction(True, keep, reason, fold, after, fold_target(monitor, after))


def _idle_compaction(monitor: BudgetMonitor, rounds: int, threshold: int, conversation: int) -> Compaction | None:
    """The inactive compaction (every one of the ``rounds`` kept) with its reason: already over
    budget, no growth measured, a projection above the threshold, or at most one conversation
    round; None when compaction is due."""
    projected = monitor.projected_rounds
    if monitor.remaining < 0:
        return Compaction(False, rounds, f"already {-monitor.remaining} tokens over budget: the truncation "
                                         "engine cuts now, there is nothing to fold ahead of")
    if projected is None:
        return Compaction(False, rounds, "no growth measured yet: nothing to project")
    if projected > threshold:
        return Compaction(False, rounds, f"projected {projected} more rounds > threshold {threshold}")
    if conversation <= 1:
        return Compaction(False, rounds,
                          f"projected {projected} more rounds <= threshold {threshold}, but no older round to fold")
    return None


def _kept_fold(monitor: BudgetMonitor, uses: Sequence[RoundUse], conversation: list[int], threshold: int,
               keep_rounds: int, summary_tokens_per_round: int) -> tuple[int, int, int | None]:
    """(rounds kept verbatim, rounds folded before them, projected rounds after): the largest
    ``keep`` from ``keep_rounds`` (at most all conversation rounds but one) down to 1 whose fold
    lifts the projection above ``threshold``; 1 when none does."""
    for keep in range(min(max(1, keep_rounds), len(conversation) - 1), 0, -1):
        first_kept = conversation[-keep]
        after = _rounds_after_fold(monitor, uses, first_kept, summary_tokens_per_round)
        if after is not None and after > threshold:
            break
    return keep, first_kept, after


def _rounds_after_fold(monitor: BudgetMonitor, uses: Sequence[RoundUse], first_kept: int,
                       summary_tokens_per_round: int) -> int | None:
    """The projected rounds once the rounds before ``first_kept`` are folded: each folded
    conversation round leaves a summary line, an earlier rolling summary stays as it is."""
    kept = sum(u.tokens for u in uses[first_kept:])
    folded = uses[:first_kept]
    summary = summary_tokens_per_round * sum(1 for u in folded if u.conversation) + sum(
        u.tokens for u in folded if not u.conversation)
    remaining = monitor.initial_budget - (monitor.base_tokens + kept + summary)
    return projected_rounds(remaining, monitor.growth_per_round)


def fold_target(monitor: BudgetMonitor, after: int | None) -> int:
    """The fold's own target: the largest context that still leaves room for ``after`` more
    rounds at the measured growth (what the fold makes room for; folding further buys no
    round), within the initial budget."""
    if after is None:
        return monitor.initial_budget
    return max(0, min(monitor.initial_budget, int(monitor.initial_budget - after * monitor.growth_per_round)))


def folded_history(rounds: Sequence[Round], keep_last: int, render_rounds: Callable[[Sequence[Round]], str],
                   compact: Callable[[Sequence[Round], int], str]) -> tuple[str, int]:
    """The history text once the older rounds are folded: rolling-summary rounds (no user
    request) first and verbatim, then the conversation with its last ``keep_last`` rounds
    verbatim and the older ones as one summary line each (``compact``, the state stage's
    compact_history). Also returns how many conversation rounds were folded."""
    summaries = [r for r in rounds if not is_conversation_round(r)]
    conversation = [r for r in rounds if is_conversation_round(r)]
    keep = max(0, min(int(keep_last), len(conversation)))
    parts = []
    if summaries:
        parts.append(render_rounds(summaries))
    if conversation:
        parts.append(compact(conversation, keep))
    return "\n\n".join(parts), len(conversation) - keep
