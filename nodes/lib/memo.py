"""The memo: values made from content, kept by the content's digest, reused by every build.

One interface, :meth:`Memo.get` ``(kind, digest, make)``: the value of ``kind`` made from the
content whose digest (:mod:`.digest`, 16 bytes) is ``digest``, remembered, else ``make()``.
What it keeps: the parse of a transcript's stretch, a round's summary line and token use, the
exact token count of a text piece, the reading of a transcript line. Keys are content
digests only (never the identity of an object, never a file stamp), so an entry can never be
stale: changed content has another digest.

It enters the Hamilton graph as the driver input ``memo`` that the cache ignores: the nodes
that reuse work take ``memo`` as a parameter (the DAG drawing shows them); library functions
take ``memo=NO_MEMO`` (keeps nothing). One bound: the least recently used entries go past
:data:`MAX_BYTES` (sizes are the entries' pickled bytes; cachetools' LRU cache). One
persistence: the table ``memo`` of the project's cache database (:class:`MemoTable`), whose
rows the memo reads on its first miss of a cached build and to which the entries the build
made are written in the build's transaction; each row carries the HMAC of its pickle under the
user's key (:func:`usercache.mac`), and a row whose MAC fails is never unpickled.
"""

from __future__ import annotations

import logging
import pickle
import sqlite3
import threading
from collections import Counter
from typing import Any, Callable, Iterable

from cachetools import LRUCache

from . import usercache

#: Bytes of entries the memo of a process holds (least recently used out).
MAX_BYTES = 96 << 20
#: A value pickled to more than this share of :data:`MAX_BYTES` is made, never kept.
_LARGEST = 4
_SCALAR_BYTES = 64  # what an int, a float or None costs as an entry (key and slot included)
_WARN = logging.getLogger("ctxengine.cache")
_LOGGER = logging.getLogger(__name__)


def _entry_size(entry: tuple[Any, int]) -> int:
    return entry[1]


class Memo:
    """Values made from content, by (kind, content digest); see the module docstring.

    ``made`` counts the values made (misses) by kind; :meth:`open` / :meth:`close` bracket a
    cached build (the table read on the first miss, the entries made handed back for the
    build's transaction)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self.clear()

    def clear(self) -> None:
        """Forget every entry and every table read (and reset the counters)."""
        with self._lock:
            self._values: LRUCache = LRUCache(maxsize=self.max_bytes, getsizeof=_entry_size)
            self.made: Counter = Counter()
            self._table: MemoTable | None = None
            self._unread = False
            self._new: dict[tuple[str, bytes], bytes] = {}
            self._read_upto: dict[str, int] = {}  # table name -> the last row id read

    def get(self, kind: str, digest: bytes, make: Callable[[], Any], *, persist: bool = True) -> Any:
        """The value of ``kind`` made from the content of ``digest``: remembered (in this process,
        else in the open table), else ``make()`` (counted in ``made[kind]``; kept, and written
        with the build when ``persist``). ``make`` must return the same value for the same
        content, and a value nobody mutates."""
        key = (kind, digest)
        with self._lock:
            found = self._values.get(key, _MISSING)
        if found is not _MISSING:
            return found[0]
        if self._unread and self._read_table():
            with self._lock:
                found = self._values.get(key, _MISSING)
            if found is not _MISSING:
                return found[0]
        value = make()
        self._keep(key, value, persist)
        return value

    def peek(self, kind: str, digest: bytes) -> Any:
        """The value kept under (kind, digest), or None (nothing is made or read)."""
        with self._lock:
            found = self._values.get((kind, digest))
        return None if found is None else found[0]

    def put(self, kind: str, digest: bytes, value: Any, size: int) -> None:
        """Keep ``value`` (about ``size`` bytes) under (kind, digest) in this process only, in
        place of what was there (a parser's record of its last parse of a source, to go on from
        when the source only grew)."""
        with self._lock:
            self._store((kind, digest), value, size)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def bytes(self) -> int:
        """The bytes the kept entries cost (their pickles)."""
        return self._values.currsize

    # ------------------------------------------------------------------ a cached build

    def open(self, table: "MemoTable") -> None:
        """A cached build starts: the rows of ``table`` this process has not read yet are read
        on the first miss; the entries made from now on are recorded for :meth:`close`."""
        with self._lock:
            self._table, self._unread, self._new = table, True, {}

    def close(self) -> dict[tuple[str, bytes], bytes]:
        """The build is over: the pickles of the entries it made (by key), for its transaction."""
        with self._lock:
            new, self._table, self._unread, self._new = self._new, None, False, {}
        return new

    def _read_table(self) -> bool:
        """Take in the rows of the open table this process has not read; whether any came."""
        with self._lock:
            table, self._unread = self._table, False
            if table is None:
                return False
            after = self._read_upto.get(table.name, 0)
        last, taken = after, 0
        for row_id, kind, digest, payload in table.rows_after(after):
            last = max(last, row_id)
            try:
                value = pickle.loads(payload)  # noqa: S301 - its MAC under the user's key checked (rows_after)
            except Exception:  # noqa: BLE001 - a class that changed outside the nodes: made again
                continue
            with self._lock:
                if (kind, digest) not in self._values:
                    self._store((kind, digest), value, len(payload))
                    taken += 1
        with self._lock:
            self._read_upto[table.name] = last
        return taken > 0

    def _keep(self, key: tuple[str, bytes], value: Any, persist: bool) -> None:
        size, payload = _size_and_pickle(value, persist)
        with self._lock:
            self.made[key[0]] += 1
            self._store(key, value, size)
            if payload is not None and self._table is not None:
                self._new[key] = payload

    def _store(self, key: tuple[str, bytes], value: Any, size: int) -> None:
        if size <= self.max_bytes // _LARGEST:
            self._values[key] = (value, size)


class _NoMemo(Memo):
    """A memo that keeps nothing: every value is made (library functions called on their own)."""

    def get(self, kind: str, digest: bytes, make: Callable[[], Any], *, persist: bool = True) -> Any:
        return make()

    def put(self, kind: str, digest: bytes, value: Any, size: int) -> None:
        return None

    def open(self, table: "MemoTable") -> None:
        return None


#: The memo that keeps nothing (the default of every library function taking ``memo``).
NO_MEMO: Memo = _NoMemo(max_bytes=0)
_MISSING = object()


def _no_memo() -> Memo:
    return NO_MEMO


def _pickles_as_no_memo(self: Memo):
    """A memo in a stored value (a counter holding one) pickles as :data:`NO_MEMO`: what is kept
    never carries a process's memo, and its fingerprint never depends on what the memo holds."""
    return (_no_memo, ())


Memo.__reduce__ = _pickles_as_no_memo  # type: ignore[method-assign]


def _size_and_pickle(value: Any, persist: bool) -> tuple[int, bytes | None]:
    """(the bytes an entry costs, its pickle when it is to be written; None when it does not pickle)."""
    if type(value) in (int, float, bool) or value is None:
        return _SCALAR_BYTES, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL) if persist else None
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - a value that does not pickle is kept in this process only
        return _SCALAR_BYTES + len(str(type(value))), None
    return len(payload) + _SCALAR_BYTES, payload if persist else None


# ----------------------------------------------------------------------------- the table

SCHEMA = ("CREATE TABLE IF NOT EXISTS memo (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, digest BLOB NOT NULL, "
          "mac BLOB NOT NULL, payload BLOB NOT NULL, UNIQUE (kind, digest))")


#: What a row costs in the database beyond its pickle (its id, kind, digest, MAC, index entry).
ROW_BYTES = 120


class MemoTable:
    """The ``memo`` table of one cache database: rows (kind, digest, MAC, pickle), the MAC
    under the user's ``key`` over the kind, the digest and the pickle. ``name`` tells the
    tables apart (the memo reads each one's new rows once)."""

    def __init__(self, connection: Callable[[], sqlite3.Connection], key: bytes, name: str) -> None:
        self.connection, self.key, self.name = connection, key, name
        self.warned = False
        try:
            connection().execute(SCHEMA)
            connection().commit()
        except sqlite3.Error as exc:
            _LOGGER.debug("memo table of %s not made: %s", name, exc)

    def sign(self, kind: str, digest: bytes, payload: bytes) -> bytes:
        return usercache.mac(self.key, kind.encode(), digest, payload)

    def rows_after(self, row_id: int) -> list[tuple[int, str, bytes, bytes]]:
        """(id, kind, digest, pickle) of the rows after ``row_id`` whose MAC checks; a row whose
        MAC fails is deleted, never unpickled (one warning)."""
        try:
            rows = self.connection().execute(
                "SELECT id, kind, digest, mac, payload FROM memo WHERE id > ?", (row_id,)).fetchall()
        except sqlite3.Error:
            return []
        good, forged = [], []
        for row_id, kind, digest, tag, payload in rows:
            if usercache.mac_ok(self.key, tag, kind.encode(), digest, payload):
                good.append((row_id, kind, digest, payload))
            else:
                forged.append(row_id)
        if forged:
            if not self.warned:
                self.warned = True
                _WARN.warning("warning: cache: %d memo entries in %s do not carry this user's MAC (written by "
                              "someone else); they are discarded and made again", len(forged), self.name)
            try:
                self.connection().executemany("DELETE FROM memo WHERE id = ?", [(i,) for i in forged])
                self.connection().commit()
            except sqlite3.Error:
                pass
        return good

    def write(self, cursor: sqlite3.Cursor, entries: dict[tuple[str, bytes], bytes], max_bytes: int) -> None:
        """Insert ``entries`` (inside the caller's transaction), then, when the table holds more
        than ``max_bytes`` (its pickles and :data:`ROW_BYTES` a row), delete the oldest rows
        down to half of it."""
        if not entries:
            return
        cursor.executemany("INSERT OR IGNORE INTO memo (kind, digest, mac, payload) VALUES (?, ?, ?, ?)",
                           [(kind, digest, self.sign(kind, digest, payload), payload)
                            for (kind, digest), payload in entries.items()])
        total = cursor.execute(f"SELECT COALESCE(SUM(LENGTH(payload) + {ROW_BYTES}), 0) FROM memo").fetchone()[0]
        if total > max_bytes:
            cut, held = 0, total
            for row_id, size in cursor.execute(f"SELECT id, LENGTH(payload) + {ROW_BYTES} FROM memo ORDER BY id"):
                if held <= max_bytes // 2:
                    break
                cut, held = row_id, held - size
            cursor.execute("DELETE FROM memo WHERE id <= ?", (cut,))


def kinds_made(memo: Memo, kinds: Iterable[str]) -> int:
    """How many values of ``kinds`` the memo made (kinds given by their names or name prefixes)."""
    prefixes = tuple(kinds)
    return sum(n for kind, n in memo.made.items() if kind.startswith(prefixes))
