"""Fitting a session history to a budget: the graded tail (recent rounds verbatim, older
ones first-last, then summary lines, then dropped oldest first), and keeping whole rounds
from the start (head) or both ends (middle)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ...types import Message, Round
from .measure import DEFAULT_CHARS_PER_TOKEN, calibrated_ratio, estimate_tokens
from .textcut import cut_text
from .units import _group_spans, message_groups, trim_units


VERBATIM, FIRST_LAST, SUMMARY, DROPPED = 0, 1, 2, 3
LEVELS = ("verbatim", "first-last", "summary", "dropped")


def graded_levels(
    count: int,
    verbatim: Callable[[int], int],
    first_last: Callable[[int], int],
    summary: Callable[[int], int],
    budget: int,
    keep_last: int = 1,
    recent_share: float = 0.75,
    drop_marker: int = 0,
    rough: Callable[[int], int] | None = None,
) -> tuple[list[int], int]:
    """The level of each of ``count`` rounds (oldest first) so that the history fits
    ``budget``, and its cost: (levels, total). The total exceeds the budget only when the
    newest round alone does (the caller then trims that round). The caller keeps the forms
    monotone (a round's first-last form no longer than its verbatim one, its summary no longer
    than either), e.g. by giving the shorter text for a level whose own form is longer.

    Recent rounds stay verbatim: the newest ones whose verbatim cost fits ``recent_share`` of
    the budget, and at least ``keep_last``. Older rounds go, least loss first and oldest
    first: each keeps its first and last message with a summary between, then each becomes a
    summary line, then summary lines are dropped. Only when every older round is gone do the
    recent rounds but the newest go the same way. A form that is not smaller than the one
    before it is skipped. Costs are callables (round index -> tokens, additive), asked lazily:
    the forms of rounds that end up dropped are mostly never built. ``drop_marker`` is
    charged once when any round is dropped. ``rough`` (a cheap estimate of the verbatim cost)
    skips the exact check of the whole history when it is clearly over (twice the budget).
    Linear in the rounds.
    """
    v, f, s = _memo(verbatim), _memo(first_last), _memo(summary)
    levels = [VERBATIM] * count
    clearly_over = rough is not None and _bounded_sum(rough, 0, count, 2 * budget) is None
    whole = None if clearly_over else _bounded_sum(v, 0, count, budget)  # newest first, stops once over
    if whole is not None:
        return levels, whole
    recent, acc = 0, 0
    for i in range(count - 1, -1, -1):
        if acc + v(i) > recent_share * budget and recent >= keep_last:
            break
        acc += v(i)
        recent += 1
    older = count - recent
    fits, cost = _grade_span(levels, 0, older, acc, budget, v, f, s, drop_marker)
    if fits or recent <= 1:
        return levels, cost + acc
    marker = drop_marker if older else 0
    newest = v(count - 1)
    fits, cost = _grade_span(levels, older, count - 1, newest, budget - marker, v, f, s, 0 if older else drop_marker)
    return levels, cost + newest + marker


def _memo(fn: Callable[[int], int]) -> Callable[[int], int]:
    cache: dict[int, int] = {}

    def get(i: int) -> int:
        if i not in cache:
            cache[i] = fn(i)
        return cache[i]

    return get


def _bounded_sum(cost: Callable[[int], int], lo: int, hi: int, limit: int) -> int | None:
    """The sum of ``cost`` over rounds [lo, hi) newest first, or None once it passes ``limit``."""
    total = 0
    for i in range(hi - 1, lo - 1, -1):
        total += cost(i)
        if total > limit:
            return None
    return total


def _grade_span(levels, lo, hi, rest, budget, v, f, s, drop_marker) -> tuple[bool, int]:
    """Set the levels of rounds [lo, hi) by the sweeps of :func:`graded_levels`, given that
    ``rest`` tokens are spent elsewhere: (whether it fits, the span's cost)."""
    room = budget - rest
    if lo >= hi:
        return room >= 0, 0
    if _bounded_sum(s, lo, hi, room) is None:  # even all summary lines are over: sweep 3
        return _drop_oldest(levels, lo, hi, room, v, s, drop_marker)
    if _bounded_sum(f, lo, hi, room) is not None:  # sweep 1 ends within budget
        return True, _demote(levels, lo, hi, sum(v(i) for i in range(lo, hi)), room, f, v, FIRST_LAST)
    for i in range(lo, hi):  # sweep 2 ends within budget (all summary lines would fit)
        levels[i] = FIRST_LAST if f(i) < v(i) else VERBATIM
    return True, _demote(levels, lo, hi, sum(f(i) for i in range(lo, hi)), room, s, f, SUMMARY)


def _demote(levels, lo, hi, total, room, cheaper, dearer, level) -> int:
    """Rounds lo..hi, oldest first, set to ``level`` (costing ``cheaper`` instead of ``dearer``)
    while ``total`` is over ``room``; the total after."""
    for i in range(lo, hi):
        if total <= room:
            break
        if cheaper(i) < dearer(i):
            levels[i] = level
            total += cheaper(i) - dearer(i)
    return total


def _drop_oldest(levels, lo, hi, room, v, s, drop_marker) -> tuple[bool, int]:
    """Sweep 3: the newest summary lines that fit ``room``, the older rounds dropped."""
    kept, total = hi, 0
    while kept > lo and total + s(kept - 1) + drop_marker <= room:
        kept -= 1
        total += s(kept)
    for i in range(lo, hi):
        levels[i] = DROPPED if i < kept else SUMMARY
    return room >= total + drop_marker, total + drop_marker


@dataclass(frozen=True)
class RoundForms:
    """One round at each level: verbatim, first and last message with a summary between,
    one summary line; and the messages the first-last form keeps."""

    round: Round
    verbatim: str
    first_last: str
    summary: str
    first_last_messages: tuple[Message, ...]


def first_last_split(messages: Sequence[Message]) -> tuple[int, int]:
    """(head end, tail start) of a round's first-last form: the head runs to its first user
    message, the tail is its last message; both grow to whole tool groups. Equal when there
    is nothing between them."""
    if not messages:
        return 0, 0
    groups = message_groups(messages)
    first_of, last_of = _group_spans(groups)
    opening = next((i for i, m in enumerate(messages) if m.role == "user"), 0)
    head_end = opening + 1
    i = 0
    while i < head_end:  # everything before head_end brings its whole group
        head_end = max(head_end, last_of[i] + 1)
        i += 1
    tail_start = len(messages) - 1
    j = len(messages) - 1
    while j >= tail_start:
        tail_start = min(tail_start, first_of[j])
        j -= 1
    return head_end, max(head_end, tail_start)


def round_forms(round_: Round, render_round: Callable[[Round], str], round_summary: Callable[[Round], str],
                summary: str | None = None) -> RoundForms:
    """The three forms of a round (``render_round`` starts with one header line)."""
    messages = round_.messages
    verbatim = render_round(round_)
    summary = round_summary(round_) if summary is None else summary
    head_end, tail_start = first_last_split(messages)
    if tail_start <= head_end:
        return RoundForms(round_, verbatim, verbatim, summary, messages)
    head, middle, tail = messages[:head_end], messages[head_end:tail_start], messages[tail_start:]
    gist = summary.split(" — ", 1)[1] if " — " in summary else ""
    note = _messages_note(middle) + (f"; summary: {gist}" if gist else "") + "]"
    first_last = _with_note(round_, head, tail, note, render_round)
    return RoundForms(round_, verbatim, first_last, summary, head + tail)


def _messages_note(messages: Sequence[Message]) -> str:
    """The opening of the note standing for cut messages (without its closing bracket)."""
    lines = [m.line for m in messages if m.line is not None]
    span = f" (lines {min(lines)}-{max(lines)})" if lines else ""
    return f"[… {len(messages)} message{'s' if len(messages) != 1 else ''} cut{span}"


def _with_note(round_: Round, head: Sequence[Message], tail: Sequence[Message], note: str, render_round) -> str:
    """The round rendered with only ``head`` and ``tail`` and ``note`` between them."""
    text = render_round(replace(round_, messages=tuple(head))) + "\n" + note
    if tail:
        rest = render_round(replace(round_, messages=tuple(tail))).split("\n", 1)
        if len(rest) > 1:
            text += "\n" + rest[1]
    return text


def drop_note(rounds: Sequence[Round], location: str | None) -> str:
    """The line standing for dropped rounds: how many, which, and where they are."""
    if not rounds:
        return ""
    lines = [r.lines for r in rounds if r.lines]
    where = ""
    if location:
        span = f" lines {lines[0][0]}-{lines[-1][1]}" if lines else ""
        where = f"; full text: {location}{span}"
    first, last = rounds[0].index, rounds[-1].index
    which = f"round {first}" if first == last else f"rounds {first}-{last}"
    return f"[… {len(rounds):,} earlier round{'s' if len(rounds) != 1 else ''} dropped ({which}){where}]"


class _Forms:
    """The forms of each round, built on first use (private, local to one fit)."""

    def __init__(self, rounds, render_round, round_summary):
        self.rounds = rounds
        self.render_round = render_round
        self.round_summary = round_summary
        self.verbatim = [render_round(r) for r in rounds]
        self._summary: dict[int, str] = {}
        self._forms: dict[int, RoundForms] = {}

    def summary(self, i: int) -> str:
        if i not in self._summary:
            self._summary[i] = self.round_summary(self.rounds[i])
        return self._summary[i]

    def form(self, i: int) -> RoundForms:
        if i not in self._forms:
            self._forms[i] = round_forms(self.rounds[i], lambda r, v=self.verbatim[i], o=self.rounds[i]:
                                         v if r is o else self.render_round(r), self.round_summary, self.summary(i))
        return self._forms[i]

    def text(self, i: int, level: int) -> str:
        """The text of round ``i`` at ``level``: the shortest of the forms the level allows
        (a summary line longer than its tiny round gives the round itself)."""
        verbatim = self.verbatim[i]
        if level == VERBATIM:
            return verbatim
        if level == SUMMARY:
            summary = self.summary(i)
            if len(summary) < len(verbatim):
                return summary
        first_last = self.form(i).first_last
        return first_last if len(first_last) < len(verbatim) else verbatim


def history_parts(forms: _Forms, levels: Sequence[int], location: str | None,
                  newest: str | None = None) -> list[tuple[tuple, str]]:
    """The history's parts in order as (cache key, text with the separator that follows it):
    a note for the dropped rounds, summary lines (one a line), then the first-last and
    verbatim rounds, oldest first, blank lines between groups (``newest`` replaces the last
    round). Every part starts with a non-space character, so tiktoken never merges tokens
    across parts and the exact tokens of the whole are the sum of the parts' exact tokens."""
    dropped = [forms.rounds[i] for i, level in enumerate(levels) if level == DROPPED]
    items: list[tuple[tuple, str, bool]] = []  # (key, text, is summary line)
    if dropped:
        items.append((("note", len(dropped), dropped[0].index), drop_note(dropped, location), False))
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if level == DROPPED:
            continue
        if i == last and newest is not None:
            items.append((("newest", len(newest)), newest, False))
        else:
            text = forms.text(i, level)
            items.append(((i, level), text, level == SUMMARY and text is forms.summary(i)))
    parts = []
    for n, (key, text, summary) in enumerate(items):
        if n == len(items) - 1:
            sep = ""
        else:
            sep = "\n" if summary and items[n + 1][2] else "\n\n"
        parts.append((key + (sep,), text + sep))
    return parts


def render_levels(forms: _Forms, levels: Sequence[int], location: str | None, newest: str | None = None) -> str:
    """The history text for ``levels`` (see :func:`history_parts`)."""
    return "".join(text for _, text in history_parts(forms, levels, location, newest))


@dataclass(frozen=True)
class HistoryFit:
    """A history fitted to a budget: its text, exact tokens, the level of each round, and the
    rounds as kept (first-last rounds with their kept messages; summary rounds without)."""

    text: str
    tokens: int
    levels: tuple[int, ...]
    rounds: tuple[Round, ...]
    trimmed_newest: bool = False


EXACT_PART_CHARS = 48_000  # parts up to this size are counted exactly when asked for; larger ones estimated


class _PartTokens:
    """Tokens of history parts: exact (tiktoken, each part counted once) for parts small
    enough to be kept or already known, estimated for large ones until they are kept."""

    def __init__(self, forms: _Forms, counter):
        self.forms = forms
        self.counter = counter
        self.exact: dict[tuple, int] = {}

    def count(self, key: tuple, text: str) -> int:
        if key not in self.exact:
            self.exact[key] = self.counter.count(text)
        return self.exact[key]

    def cost(self, i: int, level: int) -> int:
        """Tokens of round ``i`` at ``level`` with a following separator."""
        sep = "\n" if level == SUMMARY else "\n\n"
        key = (i, level, sep)
        if key in self.exact:
            return self.exact[key]
        text = self.forms.text(i, level)
        if len(text) > EXACT_PART_CHARS:
            return estimate_tokens(text) + 1
        return self.count(key, text + sep)

    def total(self, parts: Sequence[tuple[tuple, str]]) -> int:
        """Exact tokens of the whole text the parts make."""
        return sum(self.count(key, text) for key, text in parts)


def fit_history(
    rounds: Sequence[Round],
    budget: int,
    counter,
    render_round: Callable[[Round], str],
    round_summary: Callable[[Round], str],
    keep_last: int = 1,
    recent_share: float = 0.75,
    location: str | None = None,
    summarized_before: int = 0,
    keep_all: bool = False,
) -> HistoryFit:
    """The graded tail of a history within ``budget`` exact tokens (see :func:`graded_levels`).
    With ``keep_all`` no round is dropped: when the budget needs that, the history stops at its
    summary floor (older rounds summary lines, the last ``keep_last`` verbatim), over budget.

    Each part that may be kept is counted exactly once (parts add up exactly, see
    :func:`history_parts`); large parts are estimated until they are kept. The whole history
    is never counted: only what is kept (and the few rounds at the edge of the choice).
    Rounds before ``summarized_before`` are at most summary lines (the state stage already
    summarised them; truncation never brings back more than was there). When even the newest
    round alone is over, it keeps its request and as many of its last tool groups and
    messages as fit (:func:`trim_units`); the request itself is cut last.
    """
    rounds = tuple(rounds)
    if not rounds:
        return HistoryFit("", 0, (), ())
    forms = _Forms(rounds, render_round, round_summary)
    tokens_of = _PartTokens(forms, counter)
    marker = counter.count(drop_note(rounds, location)) + 2
    floor = max(0, min(int(summarized_before), len(rounds) - 1))

    def at_most_summary(level: int) -> Callable[[int], int]:
        return lambda i: tokens_of.cost(i, SUMMARY if i < floor else level)

    target = budget
    for _ in range(8):
        levels, total = graded_levels(len(rounds), at_most_summary(VERBATIM), at_most_summary(FIRST_LAST),
                                      at_most_summary(SUMMARY), target, keep_last, recent_share, marker,
                                      rough=lambda i: estimate_tokens(forms.verbatim[i]))
        levels = [max(level, SUMMARY) if i < floor else level for i, level in enumerate(levels)]
        if keep_all and (total > target or DROPPED in levels):
            break
        if total > target:
            break
        parts = history_parts(forms, levels, location)
        exact = tokens_of.total(parts)
        if exact <= budget:
            return _history_fit(forms, levels, "".join(text for _, text in parts), exact)
        target -= exact - budget + 2
    if keep_all:
        return _summary_floor(forms, tokens_of, keep_last, location)
    levels = [DROPPED] * (len(rounds) - 1) + [VERBATIM]
    return _trim_newest(forms, levels, budget, counter, location, DEFAULT_CHARS_PER_TOKEN)


def _summary_floor(forms: _Forms, tokens_of: _PartTokens, keep_last: int, location: str | None) -> HistoryFit:
    """Every round kept: the last ``keep_last`` verbatim, the older ones summary lines."""
    n = len(forms.rounds)
    recent = max(1, min(int(keep_last), n))
    levels = [SUMMARY] * (n - recent) + [VERBATIM] * recent
    parts = history_parts(forms, levels, location)
    return _history_fit(forms, levels, "".join(text for _, text in parts), tokens_of.total(parts))


def _history_fit(forms: _Forms, levels, text, tokens, newest: Round | None = None) -> HistoryFit:
    kept = []
    for i, level in enumerate(levels):
        if level == VERBATIM:
            kept.append(forms.rounds[i])
        elif level == FIRST_LAST:
            kept.append(replace(forms.rounds[i], messages=forms.form(i).first_last_messages))
        elif level == SUMMARY:
            kept.append(replace(forms.rounds[i], messages=()))
    if newest is not None:
        kept[-1] = newest
    return HistoryFit(text, tokens, tuple(levels), tuple(kept), newest is not None)


def _trim_newest(forms: _Forms, levels, budget, counter, location, ratio) -> HistoryFit:
    """Every older round dropped; the newest trimmed to the room left."""
    others = drop_note(forms.rounds[:-1], location)
    room = budget - (counter.count(others) + 2 if others else 0)
    for _ in range(6):
        text, kept = _newest_within(forms.rounds[-1], room, counter, forms.render_round, ratio)
        full = render_levels(forms, levels, location, newest=text)
        tokens = counter.count(full)
        if tokens <= budget or room <= 0:
            break
        room -= tokens - budget + 2
    if tokens > budget:  # not even the request fits: only the note, or nothing
        note = drop_note(forms.rounds, location)
        text = note if counter.count(note) <= budget else ""
        return HistoryFit(text, counter.count(text), tuple(DROPPED for _ in forms.rounds), ())
    return _history_fit(forms, levels, full, tokens, newest=kept)


def _newest_within(round_: Round, room: int, counter, render_round, ratio) -> tuple[str, Round]:
    """The newest round within about ``room`` tokens: its opening up to the request, then its
    last tool groups and messages that fit, with a note for those cut between; the request is
    cut (head kept) when it alone is over."""
    messages = round_.messages
    groups = message_groups(messages)
    head_end, _ = first_last_split(messages)
    pinned = range(head_end)
    header = counter.count(render_round(replace(round_, messages=())))
    note_cost = 24
    space = room - header - note_cost

    def cost(message: Message) -> int:
        return max(1, estimate_tokens(render_round(replace(round_, messages=(message,))), ratio) - header + 1)

    trimmed = trim_units(messages, space, cost, strategy="last", pinned=pinned, groups=groups)
    kept = [i for i in trimmed.indices]
    chosen = [messages[i] for i in kept]
    if sum(cost(messages[i]) for i in pinned) > space:
        opening = max(pinned)
        others = sum(cost(messages[i]) for i in pinned if i != opening)
        cut = cut_text(messages[opening].content, max(1, space - others), counter, "head")
        chosen = [replace(messages[i], content=cut.text) if i == opening else messages[i] for i in pinned]
        kept = list(pinned)
    head = [m for i, m in zip(kept, chosen) if i < head_end]
    tail = [m for i, m in zip(kept, chosen) if i >= head_end]
    cut_messages = [m for i, m in enumerate(messages) if i not in set(kept)]
    if not cut_messages:
        text = render_round(replace(round_, messages=tuple(chosen)))
    else:
        text = _with_note(round_, head, tail, _messages_note(cut_messages) + "]", render_round)
    return text, replace(round_, messages=tuple(chosen))


def keep_first_rounds(rounds: Sequence[Round], budget: int, counter, render_round, location: str | None = None,
                      shape: str = "head") -> HistoryFit:
    """Whole rounds within ``budget``: the oldest ones (``head``), or the first round and the
    newest ones (``middle``); a note stands for the rest. Rounds are never split, so tool calls
    keep their results; the newest round is trimmed when nothing else fits."""
    rounds = tuple(rounds)
    texts = [render_round(r) for r in rounds]
    ratio = calibrated_ratio(texts[-1], counter) if texts else DEFAULT_CHARS_PER_TOKEN
    target = budget
    for _ in range(6):
        room = target - (counter.count(drop_note(rounds, location)) + 2)
        if shape == "head":
            trimmed = trim_units(range(len(rounds)), room, lambda i: estimate_tokens(texts[i], ratio) + 1, strategy="first")
        else:
            trimmed = trim_units(range(len(rounds)), room, lambda i: estimate_tokens(texts[i], ratio) + 1,
                                 strategy="last", pinned=[0] if rounds else [])
        kept = set(trimmed.indices)
        parts: list[str] = []
        gap: list[Round] = []
        for i, r in enumerate(rounds):
            if i in kept:
                if gap:
                    parts.append(drop_note(gap, location).replace("earlier ", ""))
                    gap = []
                parts.append(texts[i])
            else:
                gap.append(r)
        if gap:
            parts.append(drop_note(gap, location).replace("earlier ", "later " if shape == "head" else ""))
        text = "\n\n".join(parts)
        tokens = counter.count(text)
        if tokens <= budget:
            levels = tuple(VERBATIM if i in kept else DROPPED for i in range(len(rounds)))
            return HistoryFit(text, tokens, levels, tuple(rounds[i] for i in sorted(kept)))
        ratio = max(1.0, len(text) / tokens)
        target = int(target * min(0.99, budget / tokens))
    text = drop_note(rounds, location)
    return HistoryFit(text, counter.count(text), tuple(DROPPED for _ in rounds), ())
