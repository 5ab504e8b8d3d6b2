"""The step engine: the truncation state, the steps (drop, head-cut, compact, summarize,
cut), the refill of unused tokens and one more cut for the exact fit, and the table of steps
the truncation nodes and the tests both read."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ...types import LedgerEntry
from .pools import cut_order, pool_debts, pool_use
from .strategy import Reduced, Strategy, is_history, origin_of


@dataclass(frozen=True)
class TruncationState:
    """Where truncation stands between steps: the sections still present (render order), their
    tokens (exact or estimated), the target, and the ledger of what each step did."""

    sections: tuple = ()
    tokens: Mapping[str, int] = None  # type: ignore[assignment]
    exact: frozenset = frozenset()
    initial: Mapping[str, int] = None  # type: ignore[assignment]
    originals: Mapping[str, Any] = None  # type: ignore[assignment]
    overhead: int = 0
    target: int = 0
    limit: int = 0
    shares: Mapping[str, int] = None  # type: ignore[assignment]
    strategies: Mapping[str, str] = None  # type: ignore[assignment]
    ledger: tuple = ()
    removed: Mapping[str, Mapping[str, str]] = None  # type: ignore[assignment]
    pristine: frozenset = frozenset()

    @property
    def total(self) -> int:
        """Tokens of the whole context: template overhead plus every present section."""
        return self.overhead + sum(self.tokens.values())

    @property
    def need(self) -> int:
        """Tokens still to cut to reach the target (<= 0: done)."""
        return self.total - self.target

    def pool_use(self) -> dict[str, int]:
        """Tokens each pool uses now (the template overhead counts in the system pool)."""
        return pool_use(self.sections, self.tokens, self.overhead)

    def pool_debts(self) -> dict[str, int]:
        """The pools now over their share, and by how much."""
        return pool_debts(self.shares, self.pool_use())


def start_state(sections, tokens: Mapping[str, int], exact, overhead: int, target: int, limit: int,
                shares: Mapping[str, int], strategies: Mapping[str, str]) -> TruncationState:
    """The state before any step: every section present and pristine."""
    return TruncationState(
        sections=tuple(sections), tokens=dict(tokens), exact=frozenset(exact), initial=dict(tokens),
        originals={s.key: s for s in sections}, overhead=overhead, target=target, limit=limit,
        shares=dict(shares), strategies=dict(strategies), ledger=(), removed={},
        pristine=frozenset(s.key for s in sections),
    )


def _with_change(state: TruncationState, section, reduced: Reduced | None, step: str, reason: str) -> TruncationState:
    """``state`` after ``step`` replaced ``section`` by ``reduced`` (None: dropped)."""
    key = section.key
    before = state.tokens[key]
    tokens = dict(state.tokens)
    if reduced is None:
        del tokens[key]
        sections = tuple(s for s in state.sections if s.key != key)
        action, after = "dropped", 0
    else:
        new = section.with_content(reduced.content, **({"data": reduced.data} if reduced.data is not None else {}))
        sections = tuple(new if s.key == key else s for s in state.sections)
        tokens[key] = reduced.tokens
        action, after = reduced.action, reduced.tokens
        if reduced.note:
            reason = f"{reason} ({reduced.note})"
    estimated = key not in state.exact
    if estimated:
        reason = f"{reason}; tokens before estimated (chars / 4)"
    entry = LedgerEntry(key, step, action, before, after, reason, estimated)
    removed = dict(state.removed)
    worst = removed.get(key, {}).get("action")
    if worst != "dropped":
        removed[key] = {"title": section.title, "action": action if action != "compacted" else "summarized",
                        "location": origin_of(section).location or key}
    return replace(state, sections=sections, tokens=tokens, exact=state.exact | {key}, ledger=state.ledger + (entry,),
                   removed=removed, pristine=state.pristine - {key})


def priority_frontier(state: TruncationState) -> int | None:
    """The lowest priority of the sections that still have tokens to give (present and not
    immutable, in any pool); None when there is none. Every step acts only at this priority:
    a higher priority waits until every section of a lower one is gone."""
    return min((s.priority for s in state.sections if s.tier != "immutable" and state.tokens.get(s.key, 0) > 0),
               default=None)


def _candidates(state: TruncationState, scope: str, wanted: Callable[[Any], bool]) -> list:
    """Sections a step may act on now, in cut order: those at the priority frontier (see
    :func:`priority_frontier`), pools over their share first (only those when ``scope`` is
    "pools"), ties in render order. Pools shape how much each section of one priority gives,
    never the order across priorities."""
    level = priority_frontier(state)
    debts = state.pool_debts()
    chosen = [s for s in state.sections if s.tier != "immutable" and s.priority == level and wanted(s)]
    if scope == "pools":
        chosen = [s for s in chosen if s.pool in debts]
    order = cut_order([(s.pool, s.priority) for s in chosen], {s.pool: 0 if s.pool in debts else 1 for s in chosen})
    return [chosen[i] for i in order]


def _room(state: TruncationState, section, scope: str) -> int:
    """Tokens this step should take from ``section``: what is still over the target, and in
    the pools pass no more than its pool is over its share, nor more than its pool's part of
    the cut (see :func:`pool_quotas`) less what its pool has given already."""
    need = state.need
    if scope == "pools":
        need = min(need, state.pool_debts().get(section.pool, 0), _quota_left(state, section.pool))
    return need


def pool_quotas(state: TruncationState) -> dict[str, int]:
    """Each over-share pool's part of the cut in the pools pass: the tokens the context was over
    its target before any step, split between the pools that were over their share in
    proportion to how much each was over (its debt), so that one large pool is not cut to the
    bone while another over its share keeps everything."""
    debts = pool_debts(state.shares, pool_use(state.originals.values(), state.initial, state.overhead))
    total_debt = sum(debts.values())
    need = state.overhead + sum(state.initial.values()) - state.target
    if total_debt <= 0 or need <= 0:
        return {p: 0 for p in debts}
    return {p: min(d, math.ceil(need * d / total_debt)) for p, d in debts.items()}


def _quota_left(state: TruncationState, pool: str) -> int:
    """What ``pool`` still has to give of its part of the cut in the pools pass."""
    quota = pool_quotas(state).get(pool, 0)
    initial = sum(state.initial[k] for k, s in state.originals.items() if s.pool == pool)
    now = sum(state.tokens[s.key] for s in state.sections if s.pool == pool)
    return quota - (initial - now)


def _why(state: TruncationState, section, scope: str, what: str) -> str:
    where = f"pool {section.pool} over its share" if scope == "pools" else "over the target"
    return (f"{what}; {state.need:,} tokens over the target of {state.target:,} ({where}); "
            f"priority {section.priority} ({section.tier})")


def _step(state: TruncationState, scope: str, wanted, act, exhaust: bool = False, stuck=None) -> TruncationState:
    """Run ``act`` over the candidates at the priority frontier while the context is over its
    target, each given its part of the room (:func:`summary_parts`: sections of one priority
    share the cut by size). When they are all gone the next priority follows; while one is
    left, higher priorities wait, so the step stops there (``exhaust``, the last step: it
    takes the whole room from them, one after the other, until the target is met; a section
    that cannot be made smaller is then given to ``stuck``, which drops it)."""
    split = True
    for _ in range(4 * len(state.sections) + 4):
        candidates = _candidates(state, scope, wanted)
        if state.need <= 0 or not candidates:
            break
        level, total = priority_frontier(state), state.total
        state = _pass(state, candidates, scope, act, _parts(state, candidates, scope, split))
        if priority_frontier(state) != level:
            continue  # that priority is gone: the next one may give
        if not exhaust:
            break
        if not split and state.total >= total:
            if stuck is None or state.need <= 0:
                break
            state = stuck(state, candidates[0])  # nothing smaller to be had: it goes, the next may give
        split = False
    return state


def _parts(state: TruncationState, candidates: list, scope: str, split: bool) -> dict[str, int]:
    """Each candidate's part of the room when the room is split between several
    (:func:`summary_parts`), else none (each may take the whole room)."""
    return summary_parts(state, candidates, scope) if split and len(candidates) > 1 else {}


def _pass(state: TruncationState, candidates: list, scope: str, act, parts: Mapping[str, int]) -> TruncationState:
    """``state`` after ``act`` ran once over each candidate still present while over the target,
    each given the room still over the target (at most its part)."""
    for section in candidates:
        if state.need <= 0:
            break
        current = next((s for s in state.sections if s.key == section.key), None)
        room = _room(state, current, scope) if current is not None else 0
        room = min(room, parts.get(section.key, room))
        if room > 0:
            state = act(state, current, room)
    return state


def drop_discardable(state: TruncationState, scope: str, step: str) -> TruncationState:
    """Discardable sections dropped, lowest priority first, while over the target."""
    def act(st, section, room):
        return _with_change(st, section, None, step, _why(st, section, scope, "discardable: dropped without a summary"))
    return _step(state, scope, lambda s: s.tier == "discardable", act, exhaust=True)


def head_cut_deprecated(state: TruncationState, scope: str, step: str, strategies: Mapping[str, Strategy],
                        counter, min_keep: int) -> TruncationState:
    """Sections whose strategy is ``head`` (deprecated documents) cut to keep their beginning."""
    def wanted(s):
        return s.tier == "summarizable" and state.strategies.get(s.key) == "head" and not is_history(s)
    return _step(state, scope, wanted, lambda st, s, room: _cut(st, s, room, step, scope, strategies, counter,
                                                               min_keep, "deprecated: head kept"))


def compact_histories(state: TruncationState, scope: str, step: str, strategies: Mapping[str, Strategy],
                      counter, min_keep: int) -> TruncationState:
    """Session histories compacted by their strategy (tail: recent rounds verbatim, older
    rounds first-last, then summary lines, then dropped oldest first). Old rounds are the
    least valuable part of a history: before the priority frontier reaches it, a tail history
    is summarized down to its summary floor (no round dropped, see :func:`summarize_old_rounds`);
    dropping rounds waits for the frontier like every other cut."""
    state = summarize_old_rounds(state, scope, step, strategies, counter)
    return _step(state, scope, lambda s: s.tier == "summarizable" and is_history(s),
                 lambda st, s, room: _cut(st, s, room, step, scope, strategies, counter, min_keep,
                                          f"history: {st.strategies.get(s.key, 'tail')} strategy"))


def summarize_old_rounds(state: TruncationState, scope: str, step: str, strategies: Mapping[str, Strategy],
                         counter) -> TruncationState:
    """Tail histories not yet reduced and above the priority frontier (at it, the step itself
    compacts them), lowest priority first: each gives its part of the room by folding older rounds (first-last, then summary lines),
    never below its summary floor (every round kept, the recent ones verbatim)."""
    frontier = priority_frontier(state)
    histories = [s for s in state.sections if s.tier == "summarizable" and is_history(s) and s.key in state.pristine
                 and state.strategies.get(s.key) == "tail" and frontier is not None and s.priority > frontier]
    for section in sorted(histories, key=lambda s: s.priority):
        room = _room(state, section, scope)
        tokens = state.tokens[section.key]
        if room <= 0 or state.need <= 0:
            continue
        reduced = strategies["tail"].reduce_history(section, tokens - room, counter, keep_all=True)
        if reduced.tokens < tokens:
            state = _with_change(state, section, reduced, step, _why(state, section, scope, "history: older rounds "
                                                                      "summarized before lower priorities are cut"))
    return state


def summarize_summarizable(state: TruncationState, scope: str, step: str, strategies: Mapping[str, Strategy],
                           counter, min_keep: int) -> TruncationState:
    """Summarizable sections of the middle strategy at the priority frontier replaced by a
    summary, each capped at what the section may keep (its part of the room)."""
    def wanted(s):
        return (s.tier == "summarizable" and not is_history(s) and state.strategies.get(s.key) == "middle"
                and s.key in state.pristine)

    def act(st, section, room):
        if section.key not in st.pristine:
            return st
        keep = max(min_keep, st.tokens[section.key] - room)
        reduced = strategies["middle"].summarize(section, keep, counter)
        if reduced is None or reduced.tokens >= st.tokens[section.key]:
            return st
        return _with_change(st, section, reduced, step, _why(st, section, scope, "summarized"))
    return _step(state, scope, wanted, act)


def summary_parts(state: TruncationState, candidates: Sequence, scope: str) -> dict[str, int]:
    """How many tokens each of ``candidates`` gives: the room of the step (per pool in the
    pools pass) split in proportion to each section's tokens times (100 - its priority), so
    that no section is cut to nothing while another of the same priority stays whole (the
    steps hand it the sections of one priority, see :func:`_step`)."""
    groups: dict[str, list] = {}
    for section in candidates:
        groups.setdefault(section.pool if scope == "pools" else "", []).append(section)
    parts: dict[str, int] = {}
    for sections in groups.values():
        room = _room(state, sections[0], scope)
        weights = [state.tokens[s.key] * max(1, 100 - int(s.priority)) for s in sections]
        total = sum(weights)
        for section, weight in zip(sections, weights):
            parts[section.key] = math.ceil(room * weight / total) if total > 0 else room
    return parts


def cut_summarizable(state: TruncationState, scope: str, step: str, strategies: Mapping[str, Strategy],
                     counter, min_keep: int) -> TruncationState:
    """Summarizable sections cut at paragraph or line boundaries (a marker names what was cut
    and where the full text is), lowest priority first; a cut that would leave fewer than
    ``min_keep`` tokens drops the section instead."""
    def stuck(st, section):
        return _with_change(st, section, None, step,
                            _why(st, section, scope, "cut: it could not be made smaller, dropped"))
    return _step(state, scope, lambda s: s.tier == "summarizable",
                 lambda st, s, room: _cut(st, s, room, step, scope, strategies, counter, min_keep, "cut"),
                 exhaust=scope == "all", stuck=stuck)


def _cut(state: TruncationState, section, room: int, step: str, scope: str, strategies, counter, min_keep: int,
         what: str) -> TruncationState:
    """``section`` reduced by ``room`` tokens in its strategy's shape, or dropped when what
    would be left is under ``min_keep``. A section cut before is cut again from its original."""
    tokens = state.tokens[section.key]
    keep = tokens - room
    if keep < min_keep:
        return _with_change(state, section, None, step,
                            _why(state, section, scope, f"{what}: fewer than {min_keep} tokens would be left, dropped"))
    strategy = strategies[state.strategies.get(section.key, "middle")]
    original = state.originals[section.key]
    last = _last_action(state, section.key)
    if strategy.summarizer is not None and not is_history(section) and last in (None, "kept", "summarized"):
        summary = strategy.summarize(original, keep, counter)  # least loss: a summary of the whole first
        if summary is not None and summary.tokens <= keep and summary.tokens < tokens:
            return _with_change(state, section, summary, step, _why(state, section, scope, f"{what}: summarized"))
    recut = section.key not in state.pristine and last in ("cut", "compacted", "summarized")
    source = original if (recut or is_history(section)) else section
    estimated = section.key not in state.exact
    reduced = strategy.cut(source, keep, counter, state.initial[section.key] if source is original else tokens,
                           estimated and source is original, section.key in state.pristine or source is original)
    if reduced.tokens >= tokens:
        return state
    return _with_change(state, section, reduced, step, _why(state, section, scope, what))


def _last_action(state: TruncationState, key: str) -> str | None:
    for entry in reversed(state.ledger):
        if entry.section_key == key:
            return entry.action
    return None


REFILL_MARGIN = 8  # tokens left unused by a refill, for the exact render count (headings, mending)


def refill_slack(state: TruncationState, step: str, strategies: Mapping[str, Strategy], counter,
                 min_keep: int) -> TruncationState:
    """The tokens the steps left unused (whole rounds and paragraphs rarely land on the target)
    given back, highest priority first, to sections a step reduced: a history refitted from its
    rounds, a summary made again from the original, a cut (or a dropped deprecated document)
    cut again from the original, each within its tokens now plus what is still unused.
    A history grows by whole rounds in this pass (what they leave goes on to lower
    priorities); what is still unused after it goes to the histories' rounds trimmed inside.
    Discardable sections stay dropped; nothing grows past its original."""
    if not state.ledger:
        return state
    slack = state.target - state.total - REFILL_MARGIN
    if slack < min_keep:
        return state
    state = _refilled(state, _refillable(state), step, strategies, counter, min_keep, whole_rounds=True)
    return _refilled(state, [o for o in _refillable(state) if is_history(o)], step, strategies, counter, min_keep)


def _refilled(state: TruncationState, originals: list, step: str, strategies: Mapping[str, Strategy], counter,
              min_keep: int, whole_rounds: bool = False) -> TruncationState:
    """One pass of :func:`refill_slack` over ``originals`` (``whole_rounds``: histories grow by
    whole rounds only)."""
    for original in originals:
        key = original.key
        slack = state.target - state.total - REFILL_MARGIN
        now = state.tokens.get(key, 0)
        keep = now + slack
        if slack < max(min_keep, now // 100) or keep < min_keep:
            continue  # too little to buy anything (a history grows by whole rounds)
        strategy = strategies[state.strategies.get(key, "middle")]
        action = _last_action(state, key)
        regrown = None
        if action == "summarized" and not is_history(original):
            regrown = strategy.summarize(original, keep, counter)
        elif is_history(original) and state.initial[key] > keep:
            regrown = strategy.reduce_history(original, keep, counter, whole_rounds=whole_rounds)
        elif state.initial[key] > keep:
            estimated = key not in state.exact and key in state.pristine
            regrown = strategy.cut(original, keep, counter, state.initial[key], estimated, True)
        if regrown is None or regrown.tokens <= now or regrown.tokens > keep:
            continue
        state = _regrown(state, original, regrown, step, f"refilled: {slack:,} tokens were left unused under the "
                                                      f"target of {state.target:,}; priority {original.priority}")
    return state


def _refillable(state: TruncationState) -> list:
    """The originals of the summarizable sections a step reduced, highest priority first (render
    order among equals); a dropped one only when it is a deprecated (head) document."""
    present = {s.key for s in state.sections}
    reduced = [original for key, original in state.originals.items()
               if original.tier == "summarizable" and key not in state.pristine and _last_action(state, key) is not None
               and (key in present or state.strategies.get(key) == "head")]
    return [reduced[i] for i in sorted(range(len(reduced)), key=lambda i: (-reduced[i].priority, i))]


def _regrown(state: TruncationState, original, reduced: Reduced, step: str, reason: str) -> TruncationState:
    """``state`` with ``original`` back in its place (render order) with ``reduced``'s content."""
    key = original.key
    before = state.tokens.get(key, 0)
    new = original.with_content(reduced.content, **({"data": reduced.data} if reduced.data is not None else {}))
    current = {s.key: s for s in state.sections}
    current[key] = new
    sections = tuple(current[k] for k in state.originals if k in current)
    tokens = dict(state.tokens)
    tokens[key] = reduced.tokens
    if reduced.note:
        reason = f"{reason} ({reduced.note})"
    entry = LedgerEntry(key, step, reduced.action, before, reduced.tokens, reason)
    removed = dict(state.removed)
    removed[key] = {"title": original.title, "action": reduced.action if reduced.action != "compacted" else "summarized",
                    "location": origin_of(original).location or key}
    return replace(state, sections=sections, tokens=tokens, exact=state.exact | {key}, ledger=state.ledger + (entry,),
                   removed=removed)


def cut_more(state: TruncationState, step: str, strategies: Mapping[str, Strategy], counter,
             min_keep: int) -> TruncationState:
    """One more round of work anywhere, for an exact count that came out over the target:
    discardable sections dropped, then summarizable ones cut (or dropped), lowest priority first."""
    state = drop_discardable(state, "all", step)
    return cut_summarizable(state, "all", step, strategies, counter, min_keep)


@dataclass(frozen=True)
class FittedContext:
    """The context as it goes out: the final sections and rendered text with its exact
    tokens, each section's exact tokens, the truncation state that led there, how many
    render-count passes it took, the cross-reference notes, and a late trigger ("hard" when
    only the exact count found the context over the available tokens)."""

    state: TruncationState
    sections: tuple
    text: str
    tokens: int
    section_tokens: Mapping[str, int]
    passes: int = 1
    notes: tuple = ()
    late_trigger: str | None = None

    @property
    def changed(self) -> bool:
        """Whether any step changed any section."""
        return bool(self.state.ledger)


# ----------------------------------------------------------------------------- values on the edges


@dataclass(frozen=True)
class TruncationTrigger:
    """Whether truncation runs, why (hard | soft | requested | preventive), the token target it
    cuts to, and the count it decided on."""

    triggered: bool
    reason: str | None
    target: int
    soft_limit: float
    soft_limit_tokens: int
    available: int
    compact: bool
    initial_tokens: int
    initial_exact: bool


@dataclass(frozen=True)
class SectionTallies:
    """Tokens of each section before truncation, and the keys counted exactly (the rest estimated)."""

    tokens: Mapping[str, int]
    exact: tuple[str, ...]


@dataclass(frozen=True)
class ExactFit:
    """The rendered prompt after the exact fit: the state that led there, the sections and text,
    its exact tokens, the render-count passes, the cross-reference notes, and a late trigger
    ("hard" or "soft" when only the exact count found the context over)."""

    state: TruncationState
    sections: tuple
    text: str
    tokens: int
    passes: int = 1
    notes: tuple = ()
    late_trigger: str | None = None


# ----------------------------------------------------------------------------- the table of steps


@dataclass(frozen=True)
class StepSpec:
    """One truncation step: its node (the name the ledger gives it), the node it follows, its
    scope ("pools": only pools over their share; "all"), the engine function it runs, and what
    it does."""

    name: str
    after: str
    scope: str
    action: str
    does: str


_PASS = (
    ("discardable_dropped", "drop_discardable", "discardable sections (priority < 50) dropped, lowest priority first"),
    ("deprecated_head_cut", "head_cut_deprecated", "deprecated documents (head strategy) cut to their beginning"),
    ("history_compacted", "compact_histories", "histories compacted by whole rounds, tool calls with their results"),
    ("summarizable_summarized", "summarize_summarizable", "middle-strategy sections replaced by their summary"),
    ("summarizable_cut", "cut_summarizable", "summarizable sections cut at line boundaries with a marker, or dropped"),
)


def _step_table() -> tuple[StepSpec, ...]:
    rows, after = [], "truncation_start"
    for scope, prefix in (("pools", "pool_"), ("all", "")):
        for name, action, does in _PASS:
            rows.append(StepSpec(prefix + name, after, scope, action,
                                 does + (" (pools over their share, by their part of the cut)" if prefix else "")))
            after = prefix + name
    rows.append(StepSpec("slack_refilled", after, "all", "refill_slack",
                         "tokens left unused given back to reduced sections, highest priority first"))
    rows.append(StepSpec("exact_fit", "crossref_mending", "all", "cut_more",
                         "rendered and counted exactly; while over the target, cut more (lowest priority first)"))
    return tuple(rows)


#: Every truncation step in order: the truncation nodes are built from it and the tests read it.
STEPS: tuple[StepSpec, ...] = _step_table()


def steps_running(action: str) -> tuple[StepSpec, ...]:
    """The rows of :data:`STEPS` that run the engine function ``action``."""
    return tuple(s for s in STEPS if s.action == action)


def step_named(name: str) -> StepSpec:
    """The row of :data:`STEPS` called ``name``."""
    return next(s for s in STEPS if s.name == name)
