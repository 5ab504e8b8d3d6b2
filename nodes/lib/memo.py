"""The memo: values made from content, kept by the content's digest, reused by every build.

One interface, :meth:`Memo.get` ``(kind, digest, make)``: the value of ``kind`` made from the
content whose digest (:mod:`.digest`, 16 bytes) is ``digest``, remembered, else ``make()``.
What it keeps: the parse of a transcript's stretch and the reading of a transcript line (both
in the process only), runs of a transcript's rounds, a round's summary line and token use, the
exact token count of a text piece, a source file's code tags. Keys are content digests (never
the identity of an object, never a file stamp), so an entry can never be stale: changed content
has another digest (a short text given as the key, a counted piece, is kept by its digest). Two
exceptions, through :meth:`Memo.put`/:meth:`Memo.peek`: a parser's record of its last parse of a
source, by the digest of the source's path, replaced at each parse and checked against the
content before use (``sessions.aider._AiderParse``); and a compiled program's answer to its
arguments (``git --version``), by the digest of its binary's real path, inode, size and
modification time (``programs.program_answer``: starting it is what the key saves).

It enters the Hamilton graph as the driver input ``memo`` that the cache ignores: the nodes
that reuse work take ``memo`` as a parameter (the DAG drawing shows them); library functions
take ``memo=NO_MEMO`` (keeps nothing). One bound: the least recently used entries go past
:data:`MAX_BYTES` (sizes: given by the caller who knows the text a value was made from, else a
text's length, a few bytes for a number, else the pickle's; cachetools' LRU cache). One
persistence: the table ``memo`` of the project's cache database (:class:`MemoTable`), whose
rows the memo reads on a miss of a key they hold (their values then join its entries, under
the one bound) and to which the entries the build made (those not made with
``persist=False``: what is cheaper to make again than to write and read) are written in the
build's transaction, one row a kind (the pickle of its values by digest: a build's thousands
of entries are a few rows, pickled once, one MAC each); each row carries the HMAC of its pickle
under the user's key (:func:`usercache.mac`), and a row whose MAC fails is never unpickled.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import sqlite3
import threading
from collections import Counter
from typing import Any, Callable, Sequence

from cachetools import LRUCache

from . import usercache
from .digest import bytes_digest, digest16, text_digest

#: Bytes of entries the memo of a process holds (least recently used out).
MAX_BYTES = 96 << 20
#: Items a run of :meth:`Memo.values_of` holds.
RUN = 64
#: A value costing more than this share of its LRU's bytes is never kept (:class:`SizedLRU`).
_LARGEST = 4
_SCALAR_BYTES = 64  # what an int, a float or None costs as an entry (key and slot included)
_WARN = logging.getLogger("ctxengine.cache")
#: What :meth:`SizedLRU.value` gives for a key it does not hold.
MISSING = object()


class SizedLRU(LRUCache):
    """Values by key, each with its size in bytes (``(value, size)`` entries): cachetools' LRU
    cache bounded by the sizes (``currsize`` of ``maxsize``), keeping no value above a quarter of
    it (it would push out everything else) and nothing with no room (``maxsize`` 0). Reads and
    writes take its lock (a server's threads share it). The memo's entries, and the cache's
    memory layer (``ctxengine.caching.MEMORY``)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(maxsize=max_bytes, getsizeof=lambda entry: entry[1])
        self.lock = threading.RLock()

    def value(self, key: Any) -> Any:
        """The value kept under ``key``, or :data:`MISSING`."""
        with self.lock:
            return self.get(key, (MISSING,))[0]

    def put(self, key: Any, value: Any, size: int) -> None:
        if self.maxsize and size <= self.maxsize // _LARGEST:
            with self.lock:
                self[key] = (value, size)

    def discard(self, key: Any) -> None:
        with self.lock:
            self.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            super().clear()


class Memo:
    """Values made from content, by (kind, content digest); see the module docstring.

    ``made`` counts the values made (misses) by kind; :meth:`open` / :meth:`close` bracket a
    cached build (the table read on a miss, the entries made handed back for the
    build's transaction)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._values = SizedLRU(max_bytes)
        self._lock = self._values.lock  # one lock: a miss reads the table and keeps its values at once
        self.clear()

    def clear(self) -> None:
        """Forget every entry and every table read (and reset the counters)."""
        with self._lock:
            self._values.clear()
            self.made: Counter = Counter()
            self.open(None)

    def get(self, kind: str, digest: bytes | str, make: Callable[[], Any], *, persist: bool = True,
            size: int | None = None) -> Any:
        """The value of ``kind`` made from the content of ``digest``: remembered (in this process,
        else in the open table), else ``make()`` (counted in ``made[kind]``; kept, and written
        with the build when ``persist``). ``make`` must return the same value for the same
        content, and a value nobody mutates. ``size``: about the bytes the value costs, when the
        caller knows it (the length of the text it was made from); else it is measured (a text's
        or a scalar's at a glance, any other value's pickle).

        ``digest`` may be a short text itself (a piece whose tokens are counted): it is kept by
        the text's digest (:func:`.digest.text_digest`)."""
        key = (kind, digest if type(digest) is bytes else text_digest(digest))
        found = self._stored(key)
        if found is not MISSING:
            return found
        value = make()
        with self._lock:
            self.made[kind] += 1
            self.put(kind, key[1], value, _value_size(value) if size is None else size, persist=persist)
        return value

    def values_of(self, kind: str, items: Sequence[Any], digests: Sequence[bytes], make: Callable[[Any], Any],
                  size: int | None = None) -> tuple:
        """``make(item)`` for each of ``items`` (``digests``: their content digests, in order),
        each value kept under (``kind``, its digest) as :meth:`get` keeps it (``size``: what one
        costs, when known), and the values of each run of :data:`RUN` items under (``kind`` +
        ``":run"``, the digest of the run's digests), in this process only: a long sequence that
        grew by one item (a transcript's rounds) costs one lookup a run, not one an item."""
        out: list = []
        for start in range(0, len(items), RUN):
            part, keys = items[start:start + RUN], digests[start:start + RUN]
            out.extend(self.get(kind + ":run", digest16(b"run", b"".join(keys)), lambda part=part, keys=keys: tuple(
                [self.get(kind, key, lambda item=item: make(item), size=size) for item, key in zip(part, keys)]),
                persist=False, size=_SCALAR_BYTES + 8 * len(part)))  # the run's tuple: its values are the items'
        return tuple(out)

    def peek(self, kind: str, digest: bytes) -> Any:
        """The value kept under (kind, digest) in this process, else in the open table, or None
        (nothing is made)."""
        found = self._stored((kind, digest))
        return None if found is MISSING else found

    def put(self, kind: str, digest: bytes, value: Any, size: int, *, persist: bool = False) -> None:
        """Keep ``value`` (about ``size`` bytes) under (kind, digest), in place of what was there
        (a parser's record of its last parse of a source, to go on from when the source only
        grew); with ``persist``, written with the build too, in place of the row that held it
        (:meth:`MemoTable.write`: a row of one value is keyed by that value's key)."""
        with self._lock:
            self._values.put((kind, digest), value, size)
            if persist and self._table is not None:
                self._new[(kind, digest)] = value

    def __reduce__(self):
        """A memo in a stored value (a counter holding one) pickles as :data:`NO_MEMO`: what is kept
        never carries a process's memo, and its fingerprint never depends on what the memo holds."""
        return (_no_memo, ())

    def __len__(self) -> int:
        return len(self._values)

    @property
    def bytes(self) -> int:
        """The bytes the kept entries cost (their pickles)."""
        return self._values.currsize

    # ------------------------------------------------------------------ a cached build

    def open(self, table: "MemoTable | None") -> None:
        """A cached build starts: a miss looks ``table`` up (the row holding the key is read
        whole); the entries made from now on are recorded for :meth:`close` (``None``: no table,
        nothing recorded)."""
        with self._lock:
            self._table: MemoTable | None = table
            self._kinds: frozenset[str] | None = None  # the kinds the table holds (read on the first miss)
            self._new: dict[tuple[str, bytes], Any] = {}

    def close(self) -> dict[tuple[str, bytes], Any]:
        """The build is over: the entries it made to be written (by key), for its transaction
        (:meth:`MemoTable.write`)."""
        with self._lock:
            new, self._table, self._kinds, self._new = self._new, None, None, {}
        return new

    def _stored(self, row_key: tuple[str, bytes]) -> Any:
        """The value under ``row_key`` (a digest key) in this process, else in the open table, or
        :data:`MISSING`. On a miss, the open table's row holding it is found by its key (one indexed
        query, only for a kind the table holds) and read whole (its MAC checked, then
        unpickled): its values join the entries (each costing its share of the row's bytes)."""
        with self._lock:
            found, table = self._values.get(row_key), self._table  # an entry is (value, bytes): never None
            if found is not None:
                return found[0]
            if table is None:
                return MISSING
            if self._kinds is None:
                self._kinds = table.kinds()
            read = table.values_with(*row_key) if row_key[0] in self._kinds else None
            if read is None:
                return MISSING
            values, size = read
            each = _SCALAR_BYTES + size // max(1, len(values))
            for digest, value in values.items():
                if (row_key[0], digest) not in self._values:  # a value put since is newer
                    self._values.put((row_key[0], digest), value, each)
            return values.get(row_key[1], MISSING)


class _NoMemo(Memo):
    """A memo that keeps nothing: every value is made (library functions called on their own);
    with no room (``max_bytes=0``) and never opened, :meth:`Memo.peek` finds nothing and
    :meth:`Memo.put` keeps nothing."""

    def get(self, kind: str, digest: bytes, make: Callable[[], Any], *, persist: bool = True,
            size: int | None = None) -> Any:
        return make()  # not even measured


#: The memo that keeps nothing (the default of every library function taking ``memo``).
NO_MEMO: Memo = _NoMemo(max_bytes=0)


def _no_memo() -> Memo:
    return NO_MEMO


def _value_size(value: Any) -> int:
    """About the bytes an entry of ``value`` costs (its key's slot included): a text's length, a
    few bytes for a number, else its pickle's (a value that does not pickle: a few)."""
    if type(value) is str or type(value) is bytes:
        return _SCALAR_BYTES + len(value)
    if type(value) in (int, float, bool, type(None)):
        return _SCALAR_BYTES
    with contextlib.suppress(Exception):  # a value that does not pickle: kept in this process only
        return _SCALAR_BYTES + len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return _SCALAR_BYTES


# ----------------------------------------------------------------------------- the table

SCHEMA = ("CREATE TABLE IF NOT EXISTS memo (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, digest BLOB NOT NULL, "
          "mac BLOB NOT NULL, payload BLOB NOT NULL, UNIQUE (kind, digest));"
          "CREATE TABLE IF NOT EXISTS memo_keys (kind TEXT NOT NULL, digest BLOB NOT NULL, row INTEGER NOT NULL, "
          "PRIMARY KEY (kind, digest)) WITHOUT ROWID")


#: What a row costs in the database beyond its pickle (its id, kind, digest, MAC, its entry in
#: the (kind, digest) index, the pages' slack; sqlite's dbstat gave 142 bytes a row of that shape).
ROW_BYTES = 160
#: What a value's entry in the ``memo_keys`` index costs (its kind, digest and row id, the slack
#: of a WITHOUT ROWID table's pages).
KEY_BYTES = 80


class MemoTable:
    """The ``memo`` table of one cache database: rows (kind, digest, MAC, pickle), the MAC
    under the user's ``key`` over the kind, the digest and the pickle. ``name``: the database's
    path, for messages."""

    def __init__(self, connection: Callable[[], sqlite3.Connection], key: bytes, name: str) -> None:
        self.connection, self.key, self.name = connection, key, name
        self.warned = False
        with contextlib.suppress(sqlite3.Error):  # else reads find nothing, and the build's write fails
            connection().executescript(SCHEMA)  # in autocommit: nothing to commit

    def kinds(self) -> frozenset[str]:
        """The kinds of the values the table holds."""
        return frozenset(kind for (kind,) in self._fetched("SELECT DISTINCT kind FROM memo"))

    def values_with(self, kind: str, digest: bytes) -> tuple[dict[bytes, Any], int] | None:
        """(the values of the row holding the value of (kind, digest), by digest; the row's
        bytes), or None: no such row, its MAC fails (never unpickled: :meth:`authentic`) or it no
        longer unpickles. A row whose MAC checks was written by :meth:`write`: a dict."""
        found = self._fetched("SELECT memo.kind, memo.digest, mac, payload FROM memo_keys JOIN memo ON id = row "
                              "WHERE memo_keys.kind = ? AND memo_keys.digest = ?", kind, digest)
        if not found or not self.authentic(*found[0]):
            return None
        with contextlib.suppress(Exception):  # a class that changed outside the nodes: made again
            return pickle.loads(found[0][3]), len(found[0][3])  # noqa: S301 - its MAC under the user's key checked
        return None

    def _fetched(self, sql: str, *parameters: Any) -> list[tuple]:
        """The rows ``sql`` gives (none when the database cannot be read)."""
        with contextlib.suppress(sqlite3.Error):
            return self.connection().execute(sql, parameters).fetchall()
        return []

    def authentic(self, kind: str, digest: bytes, tag: bytes, payload: bytes) -> bool:
        """Whether a row's MAC checks; a row whose MAC fails is deleted, never unpickled (one
        warning a table)."""
        if usercache.mac_ok(self.key, tag, kind.encode(), digest, payload):
            return True
        if not self.warned:
            self.warned = True
            _WARN.warning("warning: cache: memo entries in %s do not carry this user's MAC (written by someone "
                          "else); they are discarded and made again", self.name)
        with contextlib.suppress(sqlite3.Error), self.connection() as db:
            db.execute("DELETE FROM memo WHERE kind = ? AND digest = ?", (kind, digest))
        return False

    def write(self, cursor: sqlite3.Cursor, entries: dict[tuple[str, bytes], Any], max_bytes: int) -> None:
        """Insert ``entries`` (inside the caller's transaction) as one row a kind (the pickle of
        its values by digest, one MAC: a build's thousands of entries cost a few rows), then,
        when the table holds more than ``max_bytes`` (its pickles and :data:`ROW_BYTES` a row),
        delete the oldest rows down to half of it. A row of many values is keyed by its pickle's
        digest, a row of one value by that value's key; a row written again replaces the row that
        held it (the same values written twice are one row, now the newest; :meth:`Memo.put`: the
        last parse of a transcript, written again by each build that parsed it, leaves no copy
        behind). A kind with a value that does not pickle is not written (its values stay in the
        process)."""
        if not entries:
            return
        by_kind: dict[str, dict[bytes, Any]] = {}
        for (kind, digest), value in entries.items():
            by_kind.setdefault(kind, {})[digest] = value
        for kind, values in by_kind.items():
            try:
                payload = pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - made again when needed
                continue
            digest = next(iter(values)) if len(values) == 1 else bytes_digest(payload)
            cursor.execute("INSERT OR REPLACE INTO memo (kind, digest, mac, payload) VALUES (?, ?, ?, ?)",
                           (kind, digest, usercache.mac(self.key, kind.encode(), digest, payload), payload))
            row_id = cursor.lastrowid
            cursor.executemany("INSERT OR REPLACE INTO memo_keys VALUES (?, ?, ?)",
                               [(kind, key, row_id) for key in values])
        (total,) = cursor.execute("SELECT COALESCE((SELECT SUM(LENGTH(payload)) + ? * COUNT(*) FROM memo), 0) "
                                  "+ ? * (SELECT COUNT(*) FROM memo_keys)", (ROW_BYTES, KEY_BYTES)).fetchone()
        if total > max_bytes:  # summed by SQLite: the keys of each row are counted (a sort of them all) only to cut
            keys = dict(cursor.execute("SELECT row, COUNT(*) FROM memo_keys GROUP BY row").fetchall())
            sizes = [(row_id, size + ROW_BYTES + KEY_BYTES * keys.get(row_id, 0)) for row_id, size
                     in cursor.execute("SELECT id, LENGTH(payload) FROM memo ORDER BY id").fetchall()]
            cut, held = 0, sum(size for _, size in sizes)
            for row_id, size in sizes:  # the oldest rows go, up to the one that brings it to half
                if held <= max_bytes // 2:
                    break
                cut, held = row_id, held - size
            cursor.execute("DELETE FROM memo WHERE id <= ?", (cut,))
            cursor.execute("DELETE FROM memo_keys WHERE row NOT IN (SELECT id FROM memo)")  # theirs and any left

