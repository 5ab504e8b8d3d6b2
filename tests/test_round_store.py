"""The memo between processes (nodes/lib/memo.py, its table in the project's cache database): a
transcript that grew is summarized and measured only in its new rounds by the next process too,
and parsed only after its last complete run of rounds; a row is unpickled only when its MAC
under the user's key checks."""

from __future__ import annotations

import contextlib
import pickle
import sqlite3
from pathlib import Path

import pytest

from ctxengine import caching, driver
from ctxengine.nodes.lib import usercache
from ctxengine.nodes.lib.memo import NO_MEMO, Memo

from test_state_session import _aider_transcript

REQUEST = "Next step"
ROUNDS = 70  # one complete run of 64 rounds (aider.ROUNDS_CHUNK), 6 after it
OVERRIDES = {"state.maxHistoryRounds": 2, "state.summaryBlock": 1}


def _new_process() -> None:
    """What a fresh process starts with: an empty memo, no results in memory."""
    driver.MEMO.clear()
    caching.MEMORY.clear()


def _build(project: Path, folder: Path):
    return driver.execute(["build_result", "session_history", "round_summaries", "round_token_use"], project,
                          OVERRIDES, REQUEST, cache_dir=folder)


def _db(project: Path, folder: Path) -> Path:
    return caching.store_dir(driver.cache_dir_for(project, folder)) / caching.DATABASE


@pytest.fixture
def grown(tmp_path):
    """(project, cache folder, the first build) of a 70-round aider transcript, then a 71st round
    appended, in what is now a fresh process."""
    project = tmp_path / "p"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    history.write_text(_aider_transcript("grown", ROUNDS), encoding="utf-8")
    folder = tmp_path / "cache"
    _new_process()
    first = _build(project, folder)
    with history.open("a", encoding="utf-8") as fh:
        fh.write("\n#### Step 71: add docs\n\nDone: docs/x.md written.\n")
    _new_process()
    return project, folder, first


def test_a_fresh_process_summarizes_and_measures_only_the_new_round_and_parses_after_the_last_run(grown):
    project, folder, first = grown
    second = _build(project, folder)
    made = driver.MEMO.made
    # the 6 rounds after the complete run of 64 (never written: they change with each round) and the new one
    assert made["aider-stretch"] == ROUNDS - 64 + 1 and made["summary"] == 1
    rounds = second["session_history"].rounds
    assert len(rounds) == ROUNDS + 1 and rounds[:ROUNDS] == first["session_history"].rounds
    assert second["round_summaries"][:ROUNDS] == first["round_summaries"]
    _new_process()  # the same build with nothing kept gives the same context
    again = driver.execute(["build_result"], project, OVERRIDES, REQUEST, cache=False)["build_result"]
    assert again.context == second["build_result"].context
    assert driver.MEMO.made["aider-stretch"] == ROUNDS + 1


def test_rows_without_the_users_mac_are_never_unpickled(grown, tmp_path):
    project, folder, _ = grown
    marker = tmp_path / "marker"
    bad = pickle.dumps(_Boom(marker))
    with contextlib.closing(sqlite3.connect(_db(project, folder))) as db:
        assert db.execute("UPDATE memo SET payload = ?, mac = ?", (bad, usercache.mac(b"k" * 32, bad))).rowcount
        db.commit()
    second = _build(project, folder)
    assert not marker.exists() and len(second["session_history"].rounds) == ROUNDS + 1
    assert driver.MEMO.made["aider-stretch"] == ROUNDS + 1  # every row refused: all made again


def test_no_memo_keeps_nothing_and_pickles_as_itself():
    memo, made = Memo(), []
    assert memo.get("k", b"d" * 16, lambda: made.append(1) or "v") == "v"
    assert memo.get("k", b"d" * 16, lambda: made.append(1) or "w") == "v" and made == [1]
    assert NO_MEMO.get("k", b"d" * 16, lambda: "x") == "x" and NO_MEMO.peek("k", b"d" * 16) is None
    assert pickle.loads(pickle.dumps(memo)) is NO_MEMO


def test_the_memo_is_bounded_by_bytes():
    memo = Memo(max_bytes=10_000)
    for i in range(100):
        memo.get("text", i.to_bytes(16, "little"), lambda: "x" * 500)
    assert memo.bytes <= 10_000 and 0 < len(memo) < 100
    assert memo.peek("text", (99).to_bytes(16, "little")) is not None  # the newest stay


class _Boom:
    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_a_grown_text_is_given_with_the_digest_of_its_content():
    from ctxengine.nodes.lib.digest import bytes_digest, text_digest
    from ctxengine.nodes.lib.grown import GrownTexts
    from ctxengine.nodes.lib.sessions import SessionText

    texts, make, safe = GrownTexts(min_bytes=0), (lambda raw: (raw.decode(), 0, None)), (lambda raw: True)
    first, _, first_digest, _ = texts.text("k", b"one\n" * 10, make, safe)
    grown, _, digest, _ = texts.text("k", b"one\n" * 10 + b"two\n", make, safe)  # extended from the kept state
    assert digest == bytes_digest(("one\n" * 10 + "two\n").encode()) == text_digest(grown) != first_digest
    assert texts.text("k", b"one\n" * 10 + b"two\n", make, safe)[0] is grown  # unchanged: the same text
    assert type(grown) is str  # plain: a str subclass carrying the digest is made by copying the text
    read, before = SessionText(grown, digest), SessionText(first, first_digest)
    assert caching.fingerprint({"t": read}) != caching.fingerprint({"t": before})  # by the digests they carry
