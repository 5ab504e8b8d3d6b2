"""Fitting a session history to a budget: the graded tail (recent rounds verbatim, older
ones first-last, then summary lines, then dropped oldest first), and keeping whole rounds
from the start (head) or both ends (middle)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from ...types import Message, Round
from .measure import DEFAULT_CHARS_PER_TOKEN, calibrated_ratio, estimate_tokens
from .textcut import Origin, cut_text
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
                  newest: str | None = None, trimmed: Mapping[int, str] | None = None) -> list[tuple[tuple, str]]:
    """The history's parts in order as (cache key, text with the separator that follows it):
    a note for the dropped rounds, summary lines (one a line), then the first-last and
    verbatim rounds, oldest first, blank lines between groups (``newest`` replaces the last
    round; ``trimmed`` the text of rounds trimmed inside, by index). Every part starts with a
    non-space character, so tiktoken never merges tokens across parts and the exact tokens of
    the whole are the sum of the parts' exact tokens."""
    dropped = [forms.rounds[i] for i, level in enumerate(levels) if level == DROPPED]
    items: list[tuple[tuple, str, bool]] = []  # (key, text, is summary line)
    if dropped:
        items.append((("note", len(dropped), dropped[0].index), drop_note(dropped, location), False))
    last = len(levels) - 1
    trimmed = trimmed or {}
    for i, level in enumerate(levels):
        if level == DROPPED:
            continue
        if i == last and newest is not None:
            items.append((("newest", len(newest)), newest, False))
        elif i in trimmed:
            items.append((("trimmed", i, len(trimmed[i])), trimmed[i], False))
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
    give_back: bool = True,
) -> HistoryFit:
    """The graded tail of a history within ``budget`` exact tokens (see :func:`graded_levels`).
    With ``keep_all`` no round is dropped: when the budget needs that, the history stops at its
    summary floor (older rounds summary lines, the last ``keep_last`` verbatim), over budget.
    With ``give_back`` what the whole-round steps removed beyond the budget's need goes back to
    rounds trimmed inside (:func:`_room_given_back`).

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
    floor = max(0, min(int(summarized_before), len(rounds) - 1))
    graded = _graded_fit(forms, tokens_of, budget, keep_last, recent_share, floor, location, keep_all, give_back)
    if graded is not None:
        return graded
    if keep_all:
        return _summary_floor(forms, tokens_of, keep_last, location)
    tight = _tight_fit(forms, tokens_of, budget, counter, location)
    if tight is not None:
        return tight
    levels = [DROPPED] * (len(rounds) - 1) + [VERBATIM]
    return _trim_newest(forms, levels, budget, counter, location, DEFAULT_CHARS_PER_TOKEN)


def _graded_fit(forms: _Forms, tokens_of: "_PartTokens", budget: int, keep_last: int, recent_share: float,
                floor: int, location: str | None, keep_all: bool, give_back: bool) -> HistoryFit | None:
    """The graded fit (:func:`graded_levels`) within ``budget``, counted exactly: the target
    lowered by each miss, up to 8 tries (room given back when ``give_back``, see
    :func:`_room_given_back`); None when there is none: the grading is over its target, drops a
    round with ``keep_all``, or keeps the newest round whole at the cost of what explains it."""
    marker = tokens_of.counter.count(drop_note(forms.rounds, location)) + 2
    target = budget
    for _ in range(8):
        levels, total = _floored_levels(forms, tokens_of, target, keep_last, recent_share, marker, floor)
        if total > target or (keep_all and DROPPED in levels):
            return None
        parts = history_parts(forms, levels, location)
        exact = tokens_of.total(parts)
        if exact <= budget:
            if not keep_all and _newest_crowds_out(levels, tokens_of, budget):
                return None  # the newest round would push out what explains it: the tight fit
            if keep_all or not give_back:
                return _history_fit(forms, levels, "".join(text for _, text in parts), exact)
            return _room_given_back(forms, tokens_of, levels, exact, budget, floor, location)
        target -= exact - budget + 2
    return None


def _floored_levels(forms: _Forms, tokens_of: "_PartTokens", target: int, keep_last: int, recent_share: float,
                    marker: int, floor: int) -> tuple[list[int], int]:
    """(level of each round, their tokens) graded within ``target`` (:func:`graded_levels`), the
    rounds before ``floor`` at most summary lines."""

    def at_most_summary(level: int) -> Callable[[int], int]:
        return lambda i: tokens_of.cost(i, SUMMARY if i < floor else level)

    levels, total = graded_levels(len(forms.rounds), at_most_summary(VERBATIM), at_most_summary(FIRST_LAST),
                                  at_most_summary(SUMMARY), target, keep_last, recent_share, marker,
                                  rough=lambda i: estimate_tokens(forms.verbatim[i]))
    return [max(level, SUMMARY) if i < floor else level for i, level in enumerate(levels)], total


MIN_MESSAGE_TOKENS = 12  # a message given fewer tokens than this is cut whole (a note stands for it)
GIVE_BACK_MIN = MIN_MESSAGE_TOKENS  # room below this is one unit's slack: not worth a trim inside


def _room_given_back(forms: _Forms, tokens_of: "_PartTokens", levels: list[int], exact: int, budget: int,
                     floor: int, location: str | None) -> HistoryFit:
    """The graded fit with what its whole-round steps removed beyond their need given back:
    demoting one round (verbatim to first-last, first-last to a summary line) can remove far
    more than the budget asked for (one long reply). The rounds kept below verbatim, newest
    first (those the state stage summarized excepted), are trimmed inside
    (:func:`round_within`; a first-last round keeps its first and last messages whole and
    grows by its middle) into the room left, until it is less than one unit, with the gist of
    its summary line after it (the facts the line drew from what is cut stay); each grows
    only when its trimmed text is longer than its form and the whole still fits, counted
    exactly."""
    trimmed: dict[int, str] = {}
    kept: dict[int, Round] = {}
    text = None
    for i in range(len(levels) - 2, floor - 1, -1):
        if budget - exact < GIVE_BACK_MIN:
            break
        if not _may_grow(forms, levels, i):
            continue
        grown = _grown_round(forms, tokens_of, levels, trimmed, i, budget - exact, budget, location)
        if grown is not None:
            trimmed[i], kept[i], exact, text = grown
    if text is None:
        return _history_fit(forms, levels, render_levels(forms, levels, location), exact)
    levels = [FIRST_LAST if i in trimmed else level for i, level in enumerate(levels)]
    return _history_fit(forms, levels, text, exact, replaced=kept)


def _may_grow(forms: _Forms, levels: Sequence[int], i: int) -> bool:
    """Whether round ``i`` is kept below verbatim (first-last or a summary line) in a form shorter than its whole."""
    return levels[i] in (FIRST_LAST, SUMMARY) and forms.text(i, levels[i]) is not forms.verbatim[i]


def _grown_round(forms: _Forms, tokens_of: "_PartTokens", levels: Sequence[int], trimmed: Mapping[int, str], i: int,
                 room: int, budget: int, location: str | None) -> tuple[str, Round, int, str] | None:
    """Round ``i`` trimmed inside (:func:`round_within`) into its form's tokens plus ``room``,
    with its summary line's gist after it: (its text, the round as kept, the history's exact
    tokens and text with it) when it grows and the whole history fits ``budget`` (up to 3 tries,
    the room cut by each miss: the separators cost a token or two more); None when it does not."""
    counter = tokens_of.counter
    current = counter.count(forms.text(i, levels[i]))
    tail_start = first_last_split(forms.rounds[i].messages)[1] if levels[i] == FIRST_LAST else None
    gist = _gist_note(forms.summary(i))
    room -= counter.count(gist) + 1 if gist else 0
    for _ in range(3):
        grown = round_within(forms.rounds[i], current + room, counter, forms.render_round, location, tail_start)
        if grown.round is not forms.rounds[i] and gist:
            grown = replace(grown, text=grown.text + "\n" + gist)  # what its summary line said stays
        if counter.count(grown.text) <= current:
            return None
        parts = history_parts(forms, levels, location, trimmed={**trimmed, i: grown.text})
        total = tokens_of.total(parts)
        if total <= budget:
            return grown.text, grown.round, total, "".join(t for _, t in parts)
        room -= total - budget
    return None


def _gist_note(summary: str) -> str:
    """The note that keeps a round's summary line's gist (what was done, files, facts noted)
    beside the round trimmed inside; empty when the line has none."""
    gist = summary.split(" — ", 1)[1] if " — " in summary else ""
    return f"[summary: {gist}]" if gist else ""


def _newest_crowds_out(levels: Sequence[int], tokens_of: "_PartTokens", budget: int) -> bool:
    """Whether a graded fit keeps the newest round whole at the cost of what explains it: a
    round dropped while the newest round alone takes more than half the budget (the tight
    fit then trims the newest round inside instead)."""
    return DROPPED in levels and len(levels) > 1 and tokens_of.cost(len(levels) - 1, VERBATIM) > budget // 2


TIGHT_PREVIOUS_SHARE = 1 / 3  # of the room after the newest prompt: the round before it, at most
TIGHT_OLDER_SHARE = 1 / 2  # of the room then left: the older rounds' summary lines (newest first), at first


@dataclass(frozen=True)
class _Trimmed:
    """One round trimmed inside: its text (header first), exact tokens, the round as kept."""

    text: str
    tokens: int
    round: Round


def _tight_fit(forms: _Forms, tokens_of: "_PartTokens", budget: int, counter, location: str | None) -> HistoryFit | None:
    """The history at a tight budget, in this order of survival: the newest user prompt, the
    round before it (what the newest one refers to; verbatim, else trimmed inside to a third
    of the room, else its summary line), the older rounds as summary lines, newest first (half
    of what is left, at first), then the newest round's own text and tool output trimmed into
    the rest (:func:`round_within`); what the newest round leaves unused goes to more summary
    lines, then back to the round before it. None when not even the newest prompt fits (the
    caller then cuts the request itself)."""
    rounds, render = forms.rounds, forms.render_round
    n = len(rounds)
    older = n - 2 if n > 2 else 0
    marker = counter.count(drop_note(rounds[:older], location)) + 2 if older else 0
    target = budget
    minimal = round_within(rounds[-1], 0, counter, render, location)  # the newest prompt alone: whatever the target
    for _ in range(6):
        room = target - minimal.tokens - marker - (2 if n > 1 else 0)
        if room < 0:
            return None
        previous, room = _previous_within(forms, tokens_of, room, counter, location) if n > 1 else (None, room)
        lines, room = _summary_lines_within(tokens_of, older, int(room * TIGHT_OLDER_SHARE), room, [])
        newest = round_within(rounds[-1], minimal.tokens + room, counter, render, location)
        left = room - (newest.tokens - minimal.tokens)
        lines, left = _summary_lines_within(tokens_of, older, left, left, lines)
        if previous is not None and previous.tokens < tokens_of.cost(n - 2, VERBATIM) and left > 8:
            regrown = round_within(rounds[n - 2], previous.tokens + left, counter, render, location)
            if previous.tokens < regrown.tokens <= previous.tokens + left:
                previous = regrown
        fit = _tight_history(forms, lines, previous, newest, location, counter)
        if fit.tokens <= budget:
            return fit
        target -= fit.tokens - budget + 2
    return None


def _previous_within(forms: _Forms, tokens_of: "_PartTokens", room: int, counter,
                     location: str | None) -> tuple[_Trimmed | None, int]:
    """The round before the newest within a third of ``room`` (verbatim, else trimmed inside),
    else its summary line when that fits ``room``; and the room left."""
    i = len(forms.rounds) - 2
    cap = int(room * TIGHT_PREVIOUS_SHARE)
    verbatim = tokens_of.cost(i, VERBATIM)
    summary = tokens_of.cost(i, SUMMARY)
    if verbatim <= cap:
        return _Trimmed(forms.verbatim[i], verbatim, forms.rounds[i]), room - verbatim
    if cap > summary:
        trimmed = round_within(forms.rounds[i], cap, counter, forms.render_round, location)
        if summary < trimmed.tokens <= cap:
            return trimmed, room - trimmed.tokens
    if summary <= room:
        return _Trimmed(forms.summary(i), summary, replace(forms.rounds[i], messages=())), room - summary
    return None, room


def _summary_lines_within(tokens_of: "_PartTokens", older: int, share: int, room: int,
                          lines: list[int]) -> tuple[list[int], int]:
    """More of the older rounds (indices below ``older``) as summary lines, newest first after
    those in ``lines``, within ``share`` tokens; the lines (newest first) and ``room`` less
    what they take."""
    lines = list(lines)
    i = (min(lines) if lines else older) - 1
    while i >= 0:
        cost = tokens_of.cost(i, SUMMARY)
        if cost > share:
            break
        share -= cost
        room -= cost
        lines.append(i)
        i -= 1
    return lines, room


def _tight_history(forms: _Forms, lines: Sequence[int], previous: _Trimmed | None, newest: _Trimmed,
                   location: str | None, counter) -> HistoryFit:
    """The tight fit assembled: a note for the dropped rounds, the summary lines (oldest first),
    the round before the newest, then the newest; counted exactly once."""
    n = len(forms.rounds)
    kept_lines = sorted(lines)
    levels = [DROPPED] * n
    for i in kept_lines:
        levels[i] = SUMMARY
    blocks: list[str] = []
    dropped = [forms.rounds[i] for i in range(max(0, n - 2)) if levels[i] == DROPPED]
    if dropped:
        blocks.append(drop_note(dropped, location))
    if kept_lines:
        blocks.append("\n".join(forms.summary(i) for i in kept_lines))
    kept: list[Round] = [replace(forms.rounds[i], messages=()) for i in kept_lines]
    if previous is not None:
        whole = previous.round is forms.rounds[n - 2]
        levels[n - 2] = VERBATIM if whole else (SUMMARY if not previous.round.messages else FIRST_LAST)
        blocks.append(previous.text)
        kept.append(previous.round)
    levels[-1] = VERBATIM
    blocks.append(newest.text)
    kept.append(newest.round)
    text = "\n\n".join(blocks)
    return HistoryFit(text, counter.count(text), tuple(levels), tuple(kept),
                      newest.round is not forms.rounds[-1])




def _is_tool_output(message: Message) -> bool:
    return message.role == "tool"


def round_within(round_: Round, room: int, counter, render_round: Callable[[Round], str],
                 location: str | None = None, tail_start: int | None = None) -> _Trimmed:
    """``round_`` within about ``room`` exact tokens, trimmed inside, never dropped whole: its
    opening up to the user's words is kept; then the assistant's own text, then tool output
    and tool-call arguments (cut first), each long message cut to its part of what is left
    (its beginning kept; tool output both ends) with a marker; messages given too little go
    whole, a note naming them. The opening alone may exceed ``room`` (``room`` 0: the
    opening only). ``tail_start``: the messages from there on are kept whole too (a
    first-last round grown by its middle)."""
    verbatim = render_round(round_)
    tokens = counter.count(verbatim)
    if tokens <= room:
        return _Trimmed(verbatim, tokens, round_)
    thirds = round_thirds(round_.messages, tail_start)
    fixed = counter.count(render_round(replace(round_, messages=thirds.head + thirds.tail)))

    def trimmed_to(space: int) -> _Trimmed:
        return _trimmed_round(round_, thirds, space, counter, render_round, location)

    return _closest_trim(trimmed_to, room, room - fixed - 24)


class _Thirds(NamedTuple):
    """A round's messages in three runs: the opening kept whole, the middle that is cut, the tail kept whole."""

    head: tuple[Message, ...]
    rest: tuple[Message, ...]
    tail: tuple[Message, ...]


def round_thirds(messages: Sequence[Message], tail_start: int | None = None) -> _Thirds:
    """(head, rest, tail) of a round's messages: the head up to the user's words
    (:func:`first_last_split`), the tail from ``tail_start`` on (None: no tail; never inside the head)."""
    head_end, _ = first_last_split(messages)
    tail_start = len(messages) if tail_start is None else max(head_end, tail_start)
    return _Thirds(tuple(messages[:head_end]), tuple(messages[head_end:tail_start]), tuple(messages[tail_start:]))


def _trimmed_round(round_: Round, thirds: _Thirds, space: int, counter, render_round: Callable[[Round], str],
                   location: str | None) -> _Trimmed:
    """``round_`` with its middle messages cut to about ``space`` tokens (:func:`_messages_within`),
    a note naming the messages that went whole."""
    within = _messages_within(thirds.rest, max(0, space), counter, location)
    kept = [m for _, m in within] + list(thirds.tail)
    kept_at = {j for j, _ in within}
    cut = [m for i, m in enumerate(thirds.rest) if i not in kept_at]
    trimmed = replace(round_, messages=thirds.head + tuple(kept))  # (a Round hashes its messages when made)
    if cut:
        text = _with_note(round_, thirds.head, kept, _messages_note(cut) + "]", render_round)
    else:
        text = render_round(trimmed)
    return _Trimmed(text, counter.count(text), trimmed)


def _closest_trim(trimmed_to: Callable[[int], _Trimmed], room: int, space: int) -> _Trimmed:
    """The largest of up to 8 trims (``trimmed_to(space)``) within ``room`` tokens, else the
    smallest made. The render (labels, indents) costs more than the parts, so the space steps by
    the miss, then bisects between the largest space known to fit and the smallest known over;
    it stops once a trim is within max(8, room / 50) tokens of ``room``."""
    best = smallest = None
    fits, over = 0, None
    for _ in range(8):
        trimmed = trimmed_to(space)
        smallest = trimmed if smallest is None or trimmed.tokens < smallest.tokens else smallest
        best = _larger_within(best, trimmed, room)
        if space <= 0 or (best is not None and room - best.tokens <= max(8, room // 50)):
            break
        if trimmed.tokens > room:
            over = space if over is None else min(over, space)
        else:
            fits = max(fits, space)
        space = _next_space(space, room - trimmed.tokens, fits, over)
        if over is not None and over - fits <= 2:
            break
    return best if best is not None else smallest


def _larger_within(best: _Trimmed | None, trimmed: _Trimmed, room: int) -> _Trimmed | None:
    """``trimmed`` when it is within ``room`` and larger than ``best`` (or there is none), else ``best``."""
    return trimmed if trimmed.tokens <= room and (best is None or trimmed.tokens > best.tokens) else best


def _next_space(space: int, miss: int, fits: int, over: int | None) -> int:
    """The space to try next: this one moved by the ``miss`` (room minus the tokens made), unless
    that leaves the bracket (``fits``, ``over``), then the bracket's middle."""
    guess = space + miss
    return guess if over is None or fits < guess < over else (fits + over) // 2


def _messages_within(messages: Sequence[Message], space: int, counter,
                     location: str | None) -> list[tuple[int, Message]]:
    """(index, message as kept) of ``messages`` within about ``space`` tokens: the assistant's own
    text first, tool output and tool-call arguments with what is left; each class, when over,
    shared by size. A tool call and its results stay together: when one of them is given too
    little, the call and all its results go (the message that made the call keeps its own text)."""
    own, tool = _part_keys(messages)
    sizes = {key: counter.count(_part_text(messages[key[0]], key[1])) + 2 for key in own + tool}
    parts = _Parts(messages, counter, location, set(own), sizes)
    given = _given_shares((own, tool), parts.sizes, space)
    kept = {key: parts.cut(key, given[key]) for key in own + tool}
    groups = message_groups(messages)
    lost = _lost_groups(kept, tool, groups)
    slack = space - sum(counter.count(text) + 2 for key, text in kept.items()
                        if text is not None and not (key in tool and groups[key[0]] in lost))
    slack = _with_lost_groups_back(kept, lost, tool, groups, parts, slack)
    _spend_slack(kept, [k for k in own + tool if given[k] < parts.sizes[k]], parts, slack)
    return _kept_messages(messages, kept, groups, _lost_groups(kept, tool, groups))


def _part_keys(messages: Sequence[Message]) -> tuple[list[tuple], list[tuple]]:
    """(own, tool): the keys of the parts of the messages, the own text (of messages that are not
    tool output) and the tool parts (tool output, then every tool call's arguments)."""
    own = [(i, "content") for i, m in enumerate(messages) if not _is_tool_output(m) and m.content]
    tool = [(i, "content") for i, m in enumerate(messages) if _is_tool_output(m) and m.content]
    tool += [(i, ("call", j)) for i, m in enumerate(messages) for j, _ in enumerate(m.tool_calls)]
    return own, tool


@dataclass(frozen=True)
class _Parts:
    """The parts of a round's messages that :func:`_messages_within` cuts (a message's content,
    or a tool call's arguments, keyed ``(index, "content")`` / ``(index, ("call", j))``): their
    sizes in tokens (with 2 for the separator) and how one is cut to a share."""

    messages: Sequence[Message]
    counter: Any
    location: str | None
    own: set  # the keys of the assistant's (and user's) own text: cut keeping the head
    sizes: Mapping[tuple, int]

    def text(self, key: tuple) -> str:
        return _part_text(self.messages[key[0]], key[1])

    def cut(self, key: tuple, share: int) -> str | None:
        """The part within ``share`` tokens (:func:`_part_cut`): own text keeps its head, tool
        output and arguments both ends."""
        return _part_cut(self.text(key), share, self.sizes[key], self.counter, self.location,
                         "head" if key in self.own else "middle")


def _given_shares(classes: Sequence[Sequence[tuple]], sizes: Mapping[tuple, int], space: int) -> dict[tuple, int]:
    """The share of ``space`` each part is given: class by class (own text, then tools), each
    class shared by size (:func:`fair_shares`) from what the classes before it left."""
    given: dict[tuple, int] = {}
    for keys in classes:
        shares = fair_shares([sizes[key] for key in keys], space)
        given.update(zip(keys, shares))
        space -= sum(shares)
    return given


def _lost_groups(kept: Mapping[tuple, str | None], tool: Sequence[tuple], groups: Sequence[int]) -> set[int]:
    """The tool groups (a call and its results) of which a part keeps nothing."""
    return {groups[key[0]] for key in tool if kept[key] is None}


def _with_lost_groups_back(kept: dict, lost: set[int], tool: Sequence[tuple], groups: Sequence[int], parts: _Parts,
                           slack: int) -> int:
    """Lost groups back whole in ``kept``, the newest first, while they fit in ``slack`` (which
    does not count a lost group's parts); the slack left."""
    for group in sorted(lost, reverse=True):
        keys = [key for key in tool if groups[key[0]] == group]
        whole = sum(parts.sizes[key] for key in keys)
        if whole <= slack:
            kept.update((key, parts.text(key)) for key in keys)
            slack -= whole
    return slack


def _spend_slack(kept: dict, short: Sequence[tuple], parts: _Parts, slack: int) -> None:
    """The ``slack`` given to the parts cut ``short`` of their size, those that keep nothing first,
    then the largest: each re-cut with what it kept plus the slack, while more than
    MIN_MESSAGE_TOKENS is left (a cut at line boundaries lands under its share: what it left goes
    to the next part)."""
    for key in sorted(short, key=lambda k: (kept[k] is not None, -parts.sizes[k])):
        if slack <= MIN_MESSAGE_TOKENS:
            break
        now = 0 if kept[key] is None else parts.counter.count(kept[key]) + 2
        more = parts.cut(key, now + slack)
        if more is not None and parts.counter.count(more) + 2 > now:
            slack -= parts.counter.count(more) + 2 - now
            kept[key] = more


def _kept_messages(messages: Sequence[Message], kept: Mapping[tuple, str | None], groups: Sequence[int],
                   lost: set[int]) -> list[tuple[int, Message]]:
    """(index, message as kept) of the messages with their kept parts: a tool result of a lost
    group or cut to nothing goes, a call of a lost group goes (its message keeps its text), a
    message left with nothing goes whole."""
    out = []
    for i, m in enumerate(messages):
        in_lost = groups[i] in lost
        if _is_tool_output(m) and (in_lost or kept.get((i, "content"), "") is None):
            continue
        content = kept.get((i, "content"), m.content) if m.content else m.content
        calls = () if in_lost else tuple({**call, "arguments": kept[(i, ("call", j))]}
                                         for j, call in enumerate(m.tool_calls))
        if not content and not calls:
            continue  # given too little: it goes whole
        out.append((i, replace(m, content=content or "", tool_calls=calls)))
    return out


def fair_shares(sizes: Sequence[int], space: int) -> list[int]:
    """Each of ``sizes`` given at most itself of ``space`` in total, the smallest first and the
    rest split evenly (water-filling): small parts stay whole, the large ones are cut alike."""
    shares = [0] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    left = max(0, space)
    for rank, i in enumerate(order):
        even = left // (len(order) - rank)
        shares[i] = min(sizes[i], even)
        left -= shares[i]
    return shares


def _marker_only(text: str) -> bool:
    """Whether a cut text is its marker alone."""
    stripped = text.strip()
    return stripped.startswith("[… ") and stripped.endswith("]") and "\n" not in stripped


def _part_text(message: Message, part) -> str:
    if part == "content":
        return message.content
    arguments = message.tool_calls[part[1]].get("arguments", "")
    return arguments if isinstance(arguments, str) else str(arguments)


def _part_cut(text: str, share: int, size: int, counter, location: str | None, shape: str) -> str | None:
    """``text`` (``size`` tokens) within ``share`` tokens: whole, cut with a marker, or None
    when the share is too small to keep anything useful."""
    if share >= size:
        return text
    if share < MIN_MESSAGE_TOKENS:
        return None
    cuts = [cut_text(text, share, counter, form, Origin(location)) for form in dict.fromkeys((shape, "head"))]
    fitting = [cut for cut in cuts if cut.tokens <= share and not _marker_only(cut.text)]  # long lines: the
    # other shape may keep more; a cut that keeps nothing but its marker keeps nothing
    return max(fitting, key=lambda cut: cut.tokens).text if fitting else None


def _summary_floor(forms: _Forms, tokens_of: _PartTokens, keep_last: int, location: str | None) -> HistoryFit:
    """Every round kept: the last ``keep_last`` verbatim, the older ones summary lines."""
    n = len(forms.rounds)
    recent = max(1, min(int(keep_last), n))
    levels = [SUMMARY] * (n - recent) + [VERBATIM] * recent
    parts = history_parts(forms, levels, location)
    return _history_fit(forms, levels, "".join(text for _, text in parts), tokens_of.total(parts))


def _history_fit(forms: _Forms, levels, text, tokens, newest: Round | None = None,
                 replaced: Mapping[int, Round] | None = None) -> HistoryFit:
    kept = []
    for i, level in enumerate(levels):
        if replaced and i in replaced:
            kept.append(replaced[i])
        elif level == VERBATIM:
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
    head_end, _ = first_last_split(messages)
    header = counter.count(render_round(replace(round_, messages=())))
    space = room - header - 24  # 24: the note naming what is cut

    def cost(message: Message) -> int:
        return max(1, estimate_tokens(render_round(replace(round_, messages=(message,))), ratio) - header + 1)

    if head_end and sum(cost(messages[i]) for i in range(head_end)) > space:  # (a round without messages: its heading)
        kept, chosen = _opening_cut(messages, head_end, space, cost, counter)
    else:
        kept = list(trim_units(messages, space, cost, strategy="last", pinned=range(head_end),
                               groups=message_groups(messages)).indices)
        chosen = [messages[i] for i in kept]
    kept_round = replace(round_, messages=tuple(chosen))
    return _kept_text(round_, kept, kept_round, head_end, render_round), kept_round


def _opening_cut(messages: Sequence[Message], head_end: int, space: int, cost: Callable[[Message], int],
                 counter) -> tuple[list[int], list[Message]]:
    """(indices, messages) of a round's opening alone, its last message (the request) cut to
    what ``space`` leaves after the others (its head kept)."""
    opening = head_end - 1
    others = sum(cost(messages[i]) for i in range(head_end) if i != opening)
    cut = cut_text(messages[opening].content, max(1, space - others), counter, "head")
    return list(range(head_end)), [replace(messages[i], content=cut.text) if i == opening else messages[i]
                                   for i in range(head_end)]


def _kept_text(round_: Round, kept: Sequence[int], kept_round: Round, head_end: int, render_round) -> str:
    """The text of ``round_`` as ``kept_round`` keeps it (its messages those at indices ``kept``):
    rendered whole when nothing is cut, else with a note naming the cut messages between opening and tail."""
    kept_at = set(kept)
    cut_messages = [m for i, m in enumerate(round_.messages) if i not in kept_at]
    if not cut_messages:
        return render_round(kept_round)
    chosen = kept_round.messages
    head = [m for i, m in zip(kept, chosen) if i < head_end]
    tail = [m for i, m in zip(kept, chosen) if i >= head_end]
    return _with_note(round_, head, tail, _messages_note(cut_messages) + "]", render_round)


def keep_first_rounds(rounds: Sequence[Round], budget: int, counter, render_round, location: str | None = None,
                      shape: str = "head") -> HistoryFit:
    """Whole rounds within ``budget``: the oldest ones (``head``), or the newest round, the
    first when it fits beside it, then the newest others (``middle``); a note stands for the
    rest. Rounds are not split, so tool calls keep their results, except the one round a
    shape keeps first (the oldest for ``head``, the newest for ``middle``): when it alone is
    over the budget it is trimmed inside (:func:`round_within`), never dropped whole."""
    rounds = tuple(rounds)
    if not rounds:
        return HistoryFit("", 0, (), ())
    texts = [render_round(r) for r in rounds]
    ratio = calibrated_ratio(texts[-1], counter) if texts else DEFAULT_CHARS_PER_TOKEN
    anchor = 0 if shape == "head" else len(rounds) - 1
    target = budget
    for _ in range(6):
        room = target - (counter.count(drop_note(rounds, location)) + 2)

        def cost(i: int) -> int:
            return estimate_tokens(texts[i], ratio) + 1

        if cost(anchor) > room:
            return _anchor_trimmed(rounds, anchor, budget, counter, render_round, location, shape)
        if shape == "head":
            trimmed = trim_units(range(len(rounds)), room, cost, strategy="first")
        else:
            pinned = [anchor] + ([0] if len(rounds) > 1 and cost(0) + cost(anchor) <= room else [])
            trimmed = trim_units(range(len(rounds)), room, cost, strategy="last", pinned=pinned)
        kept = set(trimmed.indices)
        text = _kept_rounds_text(rounds, texts, kept, location, shape)
        tokens = counter.count(text)
        if tokens <= budget:
            levels = tuple(VERBATIM if i in kept else DROPPED for i in range(len(rounds)))
            return HistoryFit(text, tokens, levels, tuple(rounds[i] for i in sorted(kept)))
        ratio = max(1.0, len(text) / tokens)
        target = int(target * min(0.99, budget / tokens))
    return _anchor_trimmed(rounds, anchor, budget, counter, render_round, location, shape)


def _kept_rounds_text(rounds, texts, kept, location, shape, anchor_text: str | None = None) -> str:
    """The kept rounds in order with a note for each gap of left-out rounds (``anchor_text``
    replaces the one kept round's text)."""
    parts: list[str] = []
    gap: list[Round] = []
    for i, r in enumerate(rounds):
        if i in kept:
            if gap:
                parts.append(drop_note(gap, location).replace("earlier ", ""))
                gap = []
            parts.append(texts[i] if anchor_text is None else anchor_text)
        else:
            gap.append(r)
    if gap:
        parts.append(drop_note(gap, location).replace("earlier ", "later " if shape == "head" else ""))
    return "\n\n".join(parts)


def _anchor_trimmed(rounds, anchor: int, budget: int, counter, render_round, location, shape) -> HistoryFit:
    """Only the round ``anchor`` kept, trimmed inside to what the budget leaves beside the notes
    for the others; only the note when not even its opening fits."""
    texts = [""] * len(rounds)
    notes = counter.count(_kept_rounds_text(rounds, texts, {anchor}, location, shape))
    room = budget - notes
    for _ in range(6):
        trimmed = round_within(rounds[anchor], room, counter, render_round, location)
        text = _kept_rounds_text(rounds, texts, {anchor}, location, shape, trimmed.text)
        tokens = counter.count(text)
        if tokens <= budget:
            levels = tuple(VERBATIM if i == anchor else DROPPED for i in range(len(rounds)))
            return HistoryFit(text, tokens, levels, (trimmed.round,), trimmed.round is not rounds[anchor])
        room -= tokens - budget + 2
    text = drop_note(rounds, location)
    return HistoryFit(text, counter.count(text), tuple(DROPPED for _ in rounds), ())
