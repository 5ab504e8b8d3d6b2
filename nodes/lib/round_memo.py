"""The round memo: what a transcript's rounds cost to make, remembered outside the Hamilton graph.

A transcript only grows between two turns of an agent, and its rounds are the expensive part
of a build (parsing, the summary line of each round, the monitor's count of each). The memo
keeps, per round, the parse of its stretch of text and every value derived from it, so a
rebuild of a transcript that only grew makes just its new rounds, even when the nodes re-run:

* ``parsed_round(key, parse)``: the parse of an aider round's stretch, keyed by the hash of
  that text, its first line and the session header it inherits;
* ``round(key, index, build)``: the Round of a stretch as round ``index``, the same object
  while both hold, with a content digest known without hashing its text again;
* ``derived(round_, kind, make)``: a value made from one round (its summary line, its token
  use), keyed by the round's content digest;
* ``last_parse(source)`` / ``keep_parse(source, record)``: a parser's record of its last parse
  of a source, to go on from when the source only grew;
* ``line(key, read)``: the reading of one line of a JSON Lines transcript (a Claude Code
  transcript decodes only its new lines);
* ``token_count(digest, encoding, count)``: the exact count of a text piece the count cache
  has not seen in this process (the lines of the context made from those rounds), so a fresh
  process counts only what no earlier build counted.

Within a process the memo serves every build; :meth:`RoundMemo.snapshot` and
:meth:`RoundMemo.offer` carry the entries a build used to the next process, which takes them
in on its first miss (the pipeline keeps them in the project's cache folder, see
``ctxengine.round_store``). ``parsed``, ``summarized``, ``derived_made`` and ``counted`` count
the work actually done (misses).
"""

from __future__ import annotations

import hashlib
import operator
import pickle
import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence

from ..types import Round
from .digest import digest16

SUMMARY = "summary"
COUNT = "count:"  # the kind of a text piece's token count, before its encoding's name
_COUNT_KINDS: dict[str, str] = {}  # encoding -> its count kind (shared by every key, in memory and in pickles)
LAST_PARSES = 8  # transcripts whose last parse is kept
LAST_ALL = 16  # kinds of derived value whose last derived_all is kept
MAX_LINES = 200_000  # JSON Lines transcript lines whose reading is kept


class RoundMemo:
    """A process-wide bounded memo (least recently used out) of parsed rounds and of the
    values made from each round (see the module docstring)."""

    def __init__(self, max_entries: int = 50_000):
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget everything (and reset the counters)."""
        with self._lock:
            self._parses: OrderedDict = OrderedDict()
            self._rounds: dict = {}
            self._derived: OrderedDict = OrderedDict()
            self._digests: dict[int, tuple[Round, bytes]] = {}
            self._used_parses: set = set()
            self._used_derived: set = set()
            self._made: set = set()  # ("parses" | "derived", key) made since start_tracking
            self._offered: Callable[[], dict] | None = None
            self._last_parses: OrderedDict = OrderedDict()
            self._lines: OrderedDict = OrderedDict()
            self._last_all: dict[str, tuple[tuple[Round, ...], list, tuple]] = {}  # kind -> the last derived_all
            self.lines_read = 0
            self.parsed = 0
            self.summarized = 0
            self.derived_made = 0
            self.counted = 0

    # ------------------------------------------------------------------ parses and rounds

    def parsed_round(self, key, parse: Callable[[], Any]):
        """The parse of a round's stretch under ``key``: remembered, else ``parse()`` (counted)."""
        found = self._lookup(self._parses, self._used_parses, key)
        if found is None:
            found = parse()
            with self._lock:
                self.parsed += 1
                self._put(self._parses, key, found)
                self._made.add(("parses", key))
        return found

    def round(self, key, index: int, build: Callable[[], Round]) -> Round:
        """The Round of the stretch ``key`` as round ``index``: the same object while both hold;
        its content digest is the stretch's key and index (no need to hash its text again)."""
        made = self._rounds.get(key)
        if made is None or made.index != index:
            made = build()
            # one pickle, hashed once (it starts with pickle's protocol byte, never with digest16's length prefix)
            digest = hashlib.sha256(pickle.dumps((b"aider-round", key, index), protocol=5)).digest()[:16]
            with self._lock:
                if len(self._rounds) >= self.max_entries:
                    self._rounds.clear()
                    self._digests.clear()
                self._rounds[key] = made
                self._digests[id(made)] = (made, digest)
        return made

    def last_parse(self, source: str):
        """What :meth:`keep_parse` kept for ``source`` (a parser's own record), or None."""
        return self._last_parses.get(source)

    def keep_parse(self, source: str, record: Any) -> None:
        """Keep the last parse of ``source`` (the last :data:`LAST_PARSES` sources), so the
        parser can go on from it when the source only grew."""
        with self._lock:
            self._last_parses[source] = record
            self._last_parses.move_to_end(source)
            while len(self._last_parses) > LAST_PARSES:
                self._last_parses.popitem(last=False)

    def line(self, key, read: Callable[[], Any]):
        """The reading of one line of a JSON Lines transcript under ``key`` (its text and where it
        sits): remembered (the last :data:`MAX_LINES` lines), else ``read()`` (counted)."""
        found = self._lines.get(key)  # no recency kept: a hit costs one lookup (oldest lines go first)
        if found is None:
            found = read()
            with self._lock:
                self.lines_read += 1
                self._lines[key] = found
                while len(self._lines) > MAX_LINES:
                    self._lines.popitem(last=False)  # O(1); a dict's next(iter()) skips every slot freed before it
        return found

    # ------------------------------------------------------------------ values made from a round

    def digest(self, round_: Round) -> bytes:
        """A content digest of ``round_``: known for rounds this memo built, else its pickle hashed
        (and remembered while the object lives in the memo's table)."""
        known = self._digests.get(id(round_))
        if known is not None and known[0] is round_:
            return known[1]
        digest = digest16(b"round", pickle.dumps(round_, protocol=pickle.HIGHEST_PROTOCOL))
        with self._lock:
            if len(self._digests) >= self.max_entries:
                self._digests.clear()
            self._digests[id(round_)] = (round_, digest)
        return digest

    def known_digest(self, round_: Round) -> bytes | None:
        """The digest of a round this memo built or hashed already; None otherwise (never hashes)."""
        known = self._digests.get(id(round_))
        return known[1] if known is not None and known[0] is round_ else None

    def derived(self, round_: Round, kind: str, make: Callable[[Round], Any]):
        """The value of ``kind`` made from ``round_``: remembered by the round's content, else
        ``make(round_)`` (counted)."""
        found, made = self._derived_value((self.digest(round_), kind), lambda: make(round_))
        if made:
            with self._lock:
                self.derived_made += 1
                if kind == SUMMARY:
                    self.summarized += 1
        return found

    def token_count(self, text_digest: bytes, encoding: str, count: Callable[[], int]) -> int:
        """The exact token count of a text piece (by its digest) in ``encoding``: remembered,
        here or by an earlier process, else ``count()`` (counted in ``counted``). The count
        cache asks when a piece is new to this process, so a fresh process counts only the
        pieces of its context no earlier build had."""
        kind = _COUNT_KINDS.get(encoding) or _COUNT_KINDS.setdefault(encoding, COUNT + encoding)  # one string a kind
        found, made = self._derived_value((text_digest, kind), count)
        if made:
            with self._lock:
                self.counted += 1
        return found

    def _derived_value(self, key: tuple, make: Callable[[], Any]) -> tuple[Any, bool]:
        """(the value under ``key``, whether it was made now by ``make()``)."""
        found = self._lookup(self._derived, self._used_derived, key)
        if found is not None:
            return found, False
        found = make()
        with self._lock:
            self._put(self._derived, key, found)
            self._made.add(("derived", key))
            if len(self._made) > 4 * self.max_entries:  # a process that keeps nothing (no cached builds)
                self._forget_untracked()
        return found, True

    def _forget_untracked(self) -> None:
        """Drop the records of made and used entries that left the tables (caller holds the lock).

        The tables hold at most ``2 * max_entries`` keys, so at most that many records stay and
        the next call comes after ``2 * max_entries`` more are made: each call's cost is paid for
        by the entries made since the last (pruning at ``2 * max_entries`` re-ran on every new
        entry once the tables were full: quadratic past 50,000 rounds)."""
        tables = {"parses": self._parses, "derived": self._derived}
        self._made = {(kind, key) for kind, key in self._made if key in tables[kind]}
        self._used_derived = {key for key in self._used_derived if key in self._derived}
        self._used_parses = {key for key in self._used_parses if key in self._parses}

    def derived_all(self, rounds: Sequence[Round], kind: str, make: Callable[[Round], Any]) -> list:
        """:meth:`derived` of every round, the remembered ones looked up together (one lock, not
        one a round: a 1,776-round transcript's summaries in 2 ms instead of 7). The rounds that
        begin the last call's for ``kind`` (the same objects: a transcript that grew) take that
        call's keys and values without a lookup."""
        rounds = tuple(rounds)
        table = self._derived
        with self._lock:
            last_rounds, last_keys, last_values = self._last_all.get(kind, ((), [], ()))
        same = _same_start(last_rounds, rounds)
        keys = last_keys[:same] + [(self.digest(r), kind) for r in rounds[same:]]
        with self._lock:
            found = [*last_values[:same], *[table.get(key) for key in keys[same:]]]
            self._used_derived.update(keys)
            for key, value in zip(keys, found):
                if value is not None and key in table:
                    table.move_to_end(key)
        values = [self.derived(r, kind, make) if value is None else value for r, value in zip(rounds, found)]
        with self._lock:
            self._last_all[kind] = (rounds, keys, tuple(values))
            while len(self._last_all) > LAST_ALL:
                self._last_all.pop(next(iter(self._last_all)))
        return values

    def summary(self, round_: Round, summarize: Callable[[Round], str]) -> str:
        """The summary line of ``round_``: remembered by its content, else ``summarize(round_)``."""
        return self.derived(round_, SUMMARY, summarize)

    # ------------------------------------------------------------------ across processes

    @property
    def work(self) -> int:
        """Parses, derived values and token counts made so far (grows when a build made something new)."""
        return self.parsed + self.derived_made + self.counted

    def start_tracking(self) -> None:
        """Start recording which entries are used (:meth:`snapshot` returns them)."""
        with self._lock:
            self._used_parses, self._used_derived, self._made = set(), set(), set()

    @property
    def rounds_used(self) -> int:
        """How many entries made from a transcript's rounds (parses, summaries, token uses; not
        the token counts of texts) were used since :meth:`start_tracking`; 0: the build did not
        read a transcript (its rounds were all cache hits)."""
        with self._lock:
            return len(self._used_parses) + sum(not kind.startswith(COUNT) for _, kind in self._used_derived)

    @property
    def used(self) -> int:
        """How many entries were used since :meth:`start_tracking`."""
        return len(self._used_parses) + len(self._used_derived)

    def snapshot(self, made_only: bool = False) -> dict:
        """The entries used since :meth:`start_tracking` (``made_only``: only those made since):
        {"parses": {key: value}, "derived": {key: value}}, plain data that pickles (for the next
        process)."""
        with self._lock:
            tables = {"parses": (self._parses, self._used_parses), "derived": (self._derived, self._used_derived)}
            if made_only:
                return {name: {k: table[k] for kind, k in self._made if kind == name and k in table}
                        for name, (table, _) in tables.items()}
            return {name: {k: table[k] for k in used if k in table} for name, (table, used) in tables.items()}

    def offer(self, load: Callable[[], dict]) -> None:
        """Entries to take in on the first miss: ``load()`` gives a :meth:`snapshot` (so a build
        that misses nothing, such as an unchanged rebuild, never reads them)."""
        with self._lock:
            self._offered = load

    def _take_offer(self) -> bool:
        with self._lock:
            load, self._offered = self._offered, None
        if load is None:
            return False
        snapshot = load()
        return bool(snapshot) and self.absorb(snapshot) > 0

    def absorb(self, snapshot: dict) -> int:
        """Take in the entries of a :meth:`snapshot` (made by another process); how many."""
        parses, derived = snapshot.get("parses") or {}, snapshot.get("derived") or {}
        with self._lock:
            for key, value in parses.items():
                self._parses.setdefault(key, value)
            for key, value in derived.items():
                self._derived.setdefault(key, value)
            for table in (self._parses, self._derived):
                while len(table) > self.max_entries:
                    table.popitem(last=False)
        return len(parses) + len(derived)

    def _lookup(self, table: OrderedDict, used: set, key):
        """``table[key]`` (recorded as used), looked for again in the offered entries on a miss; None when absent."""
        with self._lock:
            found = _get(table, key)
            used.add(key)
        if found is None and self._take_offer():
            with self._lock:
                found = _get(table, key)
        return found

    def _put(self, table: OrderedDict, key, value) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.max_entries:
            table.popitem(last=False)


def _same_start(before: tuple, now: tuple) -> int:
    """How many items ``now`` begins with that ``before`` began with too (the same objects)."""
    n = min(len(before), len(now))
    if all(map(operator.is_, before[:n], now[:n])):  # a transcript that grew: one C-speed pass
        return n
    return next(i for i, (a, b) in enumerate(zip(before, now)) if a is not b)


def _get(table: OrderedDict, key):
    value = table.get(key)
    if value is not None:
        table.move_to_end(key)
    return value


#: The memo of this process (``ROUND_MEMO.clear()`` empties it; tests and benchmarks read its counters).
ROUND_MEMO = RoundMemo()
