"""The memo's table (nodes/lib/memo.py: MemoTable) and the last aider parse kept through it: what a
build writes is read back identical by the next process, a row without the user's MAC is never
unpickled, and a transcript that only grew is parsed again only in its tail (counted, not timed)."""

from __future__ import annotations

import contextlib
import pickle
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from ctxengine.nodes.lib.sessions import aider as S
from ctxengine.nodes.lib import usercache
from ctxengine.nodes.lib.digest import digest16, text_digest
from ctxengine.nodes.lib.grown import GrownTexts
from ctxengine.nodes.lib.memo import Memo, MemoTable

from test_state_session import _aider_transcript

KEY = b"k" * 32


@pytest.fixture
def table(tmp_path):
    """A memo table in a real sqlite database under tmp_path (one connection, as the cache's)."""
    with contextlib.closing(sqlite3.connect(tmp_path / "memo.db")) as db:
        yield MemoTable(lambda: db, KEY, str(tmp_path / "memo.db"))


def _written(memo: Memo, table: MemoTable) -> None:
    """The end of a cached build: the memo's new entries written in one transaction."""
    cursor = table.connection().cursor()
    table.write(cursor, memo.close(), 32 << 20)
    table.connection().commit()


class _Asked(Memo):
    """The memo, counting what it is asked for by kind (made or not)."""

    def clear(self) -> None:
        super().clear()
        self.asked: Counter = Counter()

    def get(self, kind, digest, make, **options):
        self.asked[kind] += 1
        return super().get(kind, digest, make, **options)


def _process(table: MemoTable) -> _Asked:
    """A new process's memo, its build started on ``table``."""
    memo = _Asked()
    memo.open(table)
    return memo


def _kinds(table: MemoTable) -> list[str]:
    return [kind for (kind,) in table.connection().execute("SELECT kind FROM memo ORDER BY id")]


def test_a_builds_entries_are_read_back_identical_by_the_next_process(table):
    first = _process(table)
    values = {i.to_bytes(16, "little"): (f"line {i}", i, (i, None)) for i in range(300)}
    for digest, value in values.items():
        first.get("summary", digest, lambda value=value: value)
    first.get("count:x", "a short text", lambda: 3)
    _written(first, table)
    assert _kinds(table) == ["summary", "count:x"]  # one row a kind, whatever the number of entries
    second = _process(table)
    assert all(second.get("summary", d, lambda: pytest.fail("made again")) == v for d, v in values.items())
    assert second.get("count:x", "a short text", lambda: pytest.fail("made again")) == 3
    assert not second.made


def test_a_row_without_the_users_mac_is_refused_unread(table, tmp_path):
    memo = _process(table)
    memo.get("summary", b"d" * 16, lambda: "kept")
    _written(memo, table)
    marker = tmp_path / "marker"
    bad = pickle.dumps(_Touch(marker))
    db = table.connection()
    assert db.execute("UPDATE memo SET payload = ?, mac = ?", (bad, usercache.mac(b"x" * 32, bad))).rowcount == 1
    db.commit()
    again = _process(table)
    assert again.get("summary", b"d" * 16, lambda: "made") == "made" and again.made["summary"] == 1
    assert not marker.exists()  # never unpickled
    assert db.execute("SELECT COUNT(*) FROM memo").fetchone()[0] == 0  # and deleted



def test_values_read_from_the_table_are_held_within_the_memos_one_bound(table):
    first = _process(table)
    for i in range(500):
        first.get("count:x", i.to_bytes(16, "little"), lambda i=i: i)
    _written(first, table)
    assert first.bytes > 3 * 10_000  # more than three times the small memo's bound
    small = Memo(max_bytes=10_000)
    small.open(table)
    assert all(small.get("count:x", i.to_bytes(16, "little"), lambda: -1) == i for i in range(500))
    assert not small.made and 0 < small.bytes <= 10_000  # read values are entries: counted, bounded, evicted


def test_a_kind_with_a_value_that_does_not_pickle_is_left_out_of_the_table(table):
    memo = _process(table)
    memo.get("summary", b"s" * 16, lambda: "kept")
    memo.get("odd", b"o" * 16, lambda: (lambda: "no pickle"))  # made and used in this process
    assert memo.get("odd", b"o" * 16, lambda: pytest.fail("made again"))() == "no pickle"
    _written(memo, table)
    assert _kinds(table) == ["summary"]
    again = _process(table)
    assert again.get("summary", b"s" * 16, lambda: "made") == "kept" and not again.made



def test_a_row_written_again_replaces_the_row_that_held_it(table):
    for _ in range(2):  # two processes make the same values: one row
        memo = _process(table)
        for i in range(3):
            memo.get("summary", i.to_bytes(16, "little"), lambda i=i: f"line {i}")
        _written(memo, table)
    for text in ("first parse", "second parse"):  # a last parse put again: no copy left behind
        memo = _process(table)
        memo.put("last-parse", b"p" * 16, text, 100, persist=True)
        _written(memo, table)
    assert _kinds(table) == ["summary", "last-parse"]
    assert _process(table).peek("last-parse", b"p" * 16) == "second parse"


def test_the_table_over_its_bound_drops_its_oldest_rows_down_to_half_of_it(table):
    kept = []
    for n in range(5):  # one row of ~1,270 bytes a build (a 1,000-character value, its row and key)
        memo = _process(table)
        memo.get(f"kind{n}", bytes([n]) * 16, lambda: "x" * 1000)
        cursor = table.connection().cursor()
        table.write(cursor, memo.close(), 5_000)
        table.connection().commit()
        kept.append(_kinds(table))
    # under the bound nothing goes; the 4th row takes it over: the oldest go until half is left
    assert kept == [["kind0"], ["kind0", "kind1"], ["kind0", "kind1", "kind2"], ["kind3"], ["kind3", "kind4"]]
    assert [kind for (kind,) in table.connection().execute("SELECT kind FROM memo_keys ORDER BY row")] == ["kind3", "kind4"]


def test_keys_left_without_their_row_over_the_bound_are_dropped_not_a_crash(table):
    # keys whose row is gone (a kind that did not pickle this build writes no row) count
    # towards the bound; with no row to drop, the write drops those keys and goes on
    cursor = table.connection().cursor()
    cursor.executemany("INSERT INTO memo_keys VALUES (?, ?, ?)", [("gone", bytes([n]) * 16, 7) for n in range(50)])
    table.connection().commit()
    memo = _process(table)
    memo.get("unpicklable", b"u" * 16, lambda: (lambda: None))
    table.write(cursor, memo.close(), 100)
    table.connection().commit()
    assert _kinds(table) == []
    assert table.connection().execute("SELECT COUNT(*) FROM memo_keys").fetchone() == (0,)


class _Touch:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def _grown(text: str, n: int) -> str:
    return text + "".join(f"\n#### Step {i} added later\n\nDone: step {i}.\n" for i in range(n))


def test_a_new_process_parses_only_the_tail_of_a_grown_transcript_and_its_last_partial_run(table):
    text, path = _aider_transcript("tail", 300), "/p/.aider.chat.history.md"
    first = _process(table)
    S.parse_aider(text, path, first)
    assert first.made[S.STRETCH] == 300
    _written(first, table)
    grown = _grown(text, 2)
    second = _process(table)
    parsed = S.parse_aider(grown, path, second)
    # the two new rounds and the 44 after the last complete run of 64 (never written)
    assert S.ROUNDS_CHUNK == 64 and second.made[S.STRETCH] == second.asked[S.STRETCH] == 2 + 300 - 256
    assert parsed == S.parse_aider(grown, path)  # what a parse from nothing gives
    _written(second, table)
    # the runs of rounds 1-256 were written once (one row); only the last parse is replaced
    kinds = _kinds(table)
    assert kinds.count(S.LAST_PARSE) == 1 and kinds.count(S.ROUNDS) == 1
    third = _process(table)
    assert S.parse_aider(_grown(text, 3), path, third) == S.parse_aider(_grown(text, 3), path)
    assert third.made[S.STRETCH] == third.asked[S.STRETCH] == 3 + 300 - 256


def test_a_transcript_that_grows_writes_each_complete_run_of_rounds_once_and_no_partial_one(table):
    text, path = _aider_transcript("runs", 62), "/p/.aider.chat.history.md"
    memo = _process(table)  # one process: each build's new memo entries written, as a warm API's
    sizes, parses = [], []
    for n in range(5):  # rounds 62 to 66: the first run of 64 completes on the third build
        S.parse_aider(_grown(text, n), path, memo)
        entries = memo.close()
        sizes.append(sum(1 for kind, _ in entries if kind == S.ROUNDS))
        parses.append(sum(1 for kind, _ in entries if kind == S.LAST_PARSE))
        cursor = table.connection().cursor()
        table.write(cursor, entries, 32 << 20)
        table.connection().commit()
        memo.open(table)
    assert sizes == [0, 0, 1, 0, 0]
    # the last parse is written by the first build and the one that completed the run, not by
    # the builds that only added a round
    assert parses == [1, 0, 1, 0, 0]
    fresh = _process(table)
    assert S.parse_aider(_grown(text, 5), path, fresh) == S.parse_aider(_grown(text, 5), path)
    # the stretches of rounds 64-67: the written parse ended with round 64, whose stretch may have
    # grown since (its run of rounds is checked by parsing it again)
    assert fresh.made[S.STRETCH] == 67 - 63


def test_the_written_last_parse_ends_where_the_stretch_after_its_last_complete_run_begins(table):
    text, path = _aider_transcript("cut", 70), "/p/.aider.chat.history.md"
    memo = _process(table)
    S.parse_aider(text, path, memo)
    last = memo.peek(S.LAST_PARSE, digest16(path.encode()))
    kept = pickle.loads(pickle.dumps(last))
    assert len(last.starts) == 70 and len(kept.starts) == 65 and kept.chunks == last.chunks
    assert text[:kept.length].endswith("\n") and text[kept.length:].startswith("#### ")
    assert kept.digest == text_digest(text[:kept.length]) and kept.text is None and kept.rounds is None
    assert kept.cursors == last.cursors[:65] and kept.cursors[-1][-1] == S.ROUNDS_CHUNK
    table.write(table.connection().cursor(), memo.close(), 32 << 20)
    table.connection().commit()
    fresh = _process(table)
    assert S.parse_aider(text, path, fresh) == S.parse_aider(text, path)
    assert fresh.made[S.STRETCH] == 70 - 64  # the rounds after the complete run only


@pytest.mark.parametrize("after", ["I kept going.\n> tool out\n",
                                   "# aider chat started at 2027-01-01 10:00:00\n\n#### next\n\nok\n",
                                   "#### (Y)es/(N)o [Yes]: y\n\nmore of the answer\n"])
def test_a_text_edited_where_the_written_parse_ends_is_not_resumed_there(table, after):
    # the written parse ends where a request began; a new process given a text whose request
    # there is gone (the answer before it runs on, a new session, a confirmation answer) must
    # not take the round before it from the written parse
    text, path = _aider_transcript("cut", 70), "/p/.aider.chat.history.md"
    memo = _process(table)
    S.parse_aider(text, path, memo)
    table.write(table.connection().cursor(), memo.close(), 32 << 20)
    table.connection().commit()
    edited = text[:S._user_run_starts(text)[64]] + after
    assert S.parse_aider(edited, path, _process(table)) == S.parse_aider(edited, path)
    crlf = edited.replace("\n", "\r\n")
    assert S.parse_aider(crlf, path, _process(table)) == S.parse_aider(crlf, path)


def _plain(data: bytes) -> tuple[str, int, bytes]:
    return data.decode("utf-8"), 0, data


def test_a_grown_file_is_read_with_the_length_and_digest_of_the_text_it_begins_with():
    grown, first = GrownTexts(min_bytes=0), "#### one\n\nok é\n"
    text, _, digest, before = grown.text("/p/h.md", first.encode(), _plain, lambda data: True)
    assert (text, digest, before) == (first, text_digest(first), None)  # read whole: nothing before
    more = first + "#### two\n"
    text, _, digest, before = grown.text("/p/h.md", more.encode(), _plain, lambda data: True)
    assert (text, digest, before) == (more, text_digest(more), (len(first), text_digest(first)))
    assert grown.text("/p/h.md", more.encode(), _plain, lambda data: True)[3] == (len(more), text_digest(more))
    assert grown.text("/p/h.md", b"#### rewritten\n", _plain, lambda data: True)[3] is None


def test_a_text_known_to_begin_with_the_last_parse_is_resumed_without_comparing_them():
    text, path = _aider_transcript("known", 20), "/p/.aider.chat.history.md"
    memo = Memo()
    S.parse_aider(text, path, memo)
    last = memo.peek(S.LAST_PARSE, digest16(path.encode()))
    grown = _grown(text, 1)
    known = (len(text), text_digest(text))
    assert last.begins(grown) and last.begins(grown, known) and not last.begins("x" + grown)
    assert last.begins("x" + grown, known)  # taken from the digests: the texts are not compared
    assert not last.begins("x" + grown, (len(text), text_digest("x")))  # another text's digest: compared
    assert S.parse_aider(grown, path, memo, text_digest(grown), known) == S.parse_aider(grown, path)


def test_an_edited_transcript_is_parsed_again_whole(table):
    text, path = _aider_transcript("edit", 12), "/p/.aider.chat.history.md"
    first = _process(table)
    S.parse_aider(text, path, first)
    _written(first, table)
    edited = text.replace("Step 3 of edit", "Step three of edit")
    second = _process(table)
    assert S.parse_aider(edited, path, second) == S.parse_aider(edited, path)
    assert second.made[S.STRETCH] == 12  # stretches are kept in a process only: all parsed again


def test_a_last_parse_whose_rounds_are_gone_is_not_resumed(table):
    text, path = _aider_transcript("gone", 20), "/p/.aider.chat.history.md"
    first = _process(table)
    S.parse_aider(text, path, first)
    _written(first, table)
    table.connection().execute("DELETE FROM memo WHERE kind = ?", (S.ROUNDS,))
    table.connection().commit()
    second = _process(table)
    grown = _grown(text, 1)
    assert S.parse_aider(grown, path, second) == S.parse_aider(grown, path)
    assert second.made[S.STRETCH] == 21


def test_a_sequence_that_grew_by_one_is_looked_up_by_runs():
    memo, made = _Asked(), []

    def square(item: int) -> int:
        made.append(item)
        return item * item

    def digests(items):
        return [item.to_bytes(16, "little") for item in items]

    items = list(range(200))
    assert memo.values_of("square", items, digests(items), square) == tuple(i * i for i in items)
    assert memo.asked["square"] == 200 and len(made) == 200
    grown = items + [200]
    assert memo.values_of("square", grown, digests(grown), square) == tuple(i * i for i in grown)
    # three runs of 64 unchanged (one lookup each); the last run looked up item by item, one made
    assert memo.asked["square"] - 200 == 200 - 3 * 64 + 1 and made[200:] == [200]
    assert memo.values_of("square", [5, 3], digests([5, 3]), square) == (25, 9) and made[201:] == []
