"""Tool-call units: which messages belong together (a call and its results), and trimming a
sequence of units to a budget without splitting a group."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ...types import Message


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

    hi = _acceptable_end(units, n, pinned_set, first_of, end_ok) if order_last and end_ok is not None else n
    if remaining < 0:
        return Trimmed(tuple(sorted(pinned_set)))
    kept_lo, kept_hi, partial = _kept_span(units, hi, remaining, cost, order_last, first_of, last_of, pinned_set,
                                           split, join)
    run, view = _run_and_view(units, kept_lo, kept_hi, pinned_set, partial, order_last)
    run = _trim_run_edges(run, view, first_of, last_of, groups, start_ok if order_last else None,
                          end_ok if not order_last else None)
    if partial is not None and partial[0] not in run:
        partial = None
    return Trimmed(tuple(sorted(pinned_set | set(run))), partial)


def _run_and_view(units, kept_lo, kept_hi, pinned, partial, order_last) -> tuple[list[int], dict[int, Any]]:
    """(run, view): the indexes of the kept span that are not pinned, with the partial unit's
    index before (``last``) or after it, and each index's unit as kept (the partial one shortened)."""
    run = [i for i in range(kept_lo, kept_hi) if i not in pinned]
    if partial is not None:
        run = [partial[0]] + run if order_last else run + [partial[0]]
    view = {i: units[i] for i in run}
    if partial is not None:
        view[partial[0]] = partial[1]
    return run, view


def _acceptable_end(units, hi, pinned, first_of, end_ok) -> int:
    """The end of the candidate range for ``last`` with ``end_ok``: whole groups dropped from
    the input's end until it ends on an acceptable (or a pinned) unit."""
    while hi > 0 and hi - 1 not in pinned and not end_ok(units[hi - 1]):
        hi = first_of[hi - 1]
    return hi


def _kept_span(units, hi, remaining, cost, order_last, first_of, last_of, pinned, split,
               join) -> tuple[int, int, tuple[int, Any] | None]:
    """(kept_lo, kept_hi, partial): the run of [0, hi) kept within ``remaining``, grown block by
    block (:func:`_next_block`) from the end (``last``) or the start; then, with ``split`` and
    ``join``, the part of the first block that does not fit, when it is a unit of its own."""
    kept_lo, kept_hi = (hi, hi) if order_last else (0, 0)
    while (kept_lo > 0) if order_last else (kept_hi < hi):
        edge, block = _next_block(kept_lo, kept_hi, order_last, first_of, last_of, pinned)
        block_cost = sum(cost(units[i]) for i in block)
        if block_cost <= remaining:
            remaining -= block_cost
            kept_lo, kept_hi = (edge, kept_hi) if order_last else (kept_lo, edge)
            continue
        if split is not None and join is not None and len(block) == 1 and first_of[block[0]] == last_of[block[0]]:
            return kept_lo, kept_hi, _partial_unit(units[block[0]], block[0], remaining, cost, split, join,
                                                   from_end=order_last)
        break
    return kept_lo, kept_hi, None


def _next_block(kept_lo, kept_hi, order_last, first_of, last_of, pinned) -> tuple[int, list[int]]:
    """The next block to keep beyond the kept run [kept_lo, kept_hi) (before it for ``last``,
    after it for ``first``): one unit and everything its group pulls in, pinned units left
    out; with the run's new edge."""
    if order_last:
        block_lo = scan = kept_lo - 1
        while scan >= block_lo:  # a group pulls in everything back to its first member
            block_lo = min(block_lo, first_of[scan])
            scan -= 1
        return block_lo, [i for i in range(block_lo, kept_lo) if i not in pinned]
    block_hi = scan = kept_hi
    while scan <= block_hi:
        block_hi = max(block_hi, last_of[scan])
        scan += 1
    return block_hi + 1, [i for i in range(kept_hi, block_hi + 1) if i not in pinned]


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
