"""The round memo between processes (pipeline/round_store.py): a transcript that grew is parsed,
summarized and measured only in its new rounds by the next process too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxengine import cache, driver, round_store
from ctxengine.nodes.lib import session as S
from ctxengine.nodes.lib.truncate.measure import cache_size, clear_count_cache

from test_state_session import _aider_transcript

REQUEST = "Next step"
OVERRIDES = {"state.maxHistoryRounds": 2, "state.summaryBlock": 1}


def _new_process() -> None:
    """What a fresh process starts with: no round memo, no token counts, no results in memory,
    nothing read yet."""
    S.ROUND_MEMO.clear()
    clear_count_cache()
    cache.MEMORY.clear()
    round_store._SEEN.clear()


def _build(project: Path, folder: Path):
    return driver.execute(["build_result", "session_history", "round_summaries", "round_token_use"], project,
                          OVERRIDES, REQUEST, cache_dir=folder)


def _rounds(project: Path, folder: Path) -> Path:
    """The round memo file of ``project`` in the cache folder ``folder`` (given as --cache-dir)."""
    return round_store.rounds_file(driver.cache_dir_for(project, folder))


def _load(path: Path) -> dict:
    """The entries of a round memo file, read with the user's key."""
    return round_store.load(path, cache.stores_for(path.parent.parent).key)


@pytest.fixture
def grown(tmp_path):
    """(project, cache folder, the first build) of a 12-round aider transcript, then a 13th round
    appended, in what is now a fresh process."""
    project = tmp_path / "p"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    history.write_text(_aider_transcript("grown", 12), encoding="utf-8")
    folder = tmp_path / "cache"
    _new_process()
    first = _build(project, folder)
    assert _rounds(project, folder).is_file()
    with history.open("a", encoding="utf-8") as fh:
        fh.write("\n#### Step 13: add docs\n\nDone: docs/x.md written.\n")
    _new_process()
    return project, folder, first


def test_a_fresh_process_parses_summarizes_and_measures_only_the_new_round(grown):
    project, folder, first = grown
    second = _build(project, folder)
    assert S.ROUND_MEMO.parsed == 1 and S.ROUND_MEMO.summarized == 1
    assert S.ROUND_MEMO.derived_made == 3  # its summary and exact count; round 7's estimate (out of the exact window)
    known = cache_size()  # the pieces of text this process counted: each an earlier build's, or new
    assert 0 < S.ROUND_MEMO.counted < known / 3, (S.ROUND_MEMO.counted, known)
    rounds = second["session_history"].rounds
    assert len(rounds) == 13 and rounds[:12] == first["session_history"].rounds
    assert second["round_summaries"][:12] == first["round_summaries"]
    _new_process()  # the same build with nothing kept gives the same context
    again = driver.execute(["build_result"], project, OVERRIDES, REQUEST, cache=False)["build_result"]
    assert again.context == second["build_result"].context
    assert S.ROUND_MEMO.parsed == 13


def test_a_build_that_only_counts_a_new_request_keeps_the_rounds_for_the_next_turn(tmp_path):
    project, folder = tmp_path / "p", tmp_path / "cache"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    history.write_text(_aider_transcript("turns", 150), encoding="utf-8")  # its entries outnumber the counts
    _new_process()
    _build(project, folder)
    _new_process()  # the same transcript, another request: its rounds are all cache hits
    driver.execute(["build_result"], project, OVERRIDES, "Another request, counted anew", cache_dir=folder)
    assert S.ROUND_MEMO.rounds_used == 0 and S.ROUND_MEMO.counted > 0
    with history.open("a", encoding="utf-8") as fh:
        fh.write("\n#### Step 13: add docs\n\nDone: docs/x.md written.\n")
    _new_process()
    _build(project, folder)
    assert S.ROUND_MEMO.parsed == 1 and S.ROUND_MEMO.summarized == 1  # the kept rounds were not dropped


def test_a_file_others_could_write_or_a_torn_one_is_not_used(grown):
    project, folder, _ = grown
    path = _rounds(project, folder)
    path.chmod(0o666)
    _build(project, folder)
    assert S.ROUND_MEMO.parsed == 13  # not read: every round parsed again
    path.write_bytes(b"ctxengine-rounds-0\nnot a round memo")
    path.chmod(0o600)
    with (project / ".aider.chat.history.md").open("a", encoding="utf-8") as fh:
        fh.write("\n#### Step 14: release\n\nTagged v1.0.\n")
    _new_process()
    out = _build(project, folder)  # no error: the torn file is dropped, then written again, whole
    assert len(out["session_history"].rounds) == 14 and S.ROUND_MEMO.parsed == 14
    assert len(_load(path)["parses"]) == 14


def test_a_grown_transcript_appends_a_frame_and_a_torn_frame_ends_the_reading(grown):
    project, folder, _ = grown
    path = _rounds(project, folder)
    size = path.stat().st_size
    _build(project, folder)  # round 13: its parse, summary and counts are appended, not the file rewritten
    assert size < path.stat().st_size < size + 4096
    assert len(_load(path)["parses"]) == 13
    with path.open("r+b") as fh:  # a crash in the middle of that append
        fh.truncate(path.stat().st_size - 5)
    with (project / ".aider.chat.history.md").open("a", encoding="utf-8") as fh:
        fh.write("\n#### Step 14: release\n\nTagged v1.0.\n")
    _new_process()
    out = _build(project, folder)
    assert S.ROUND_MEMO.parsed == 2  # rounds 13 (its frame was torn) and 14; the first frame still served
    assert len(out["session_history"].rounds) == 14
    assert len(_load(path)["parses"]) == 14  # written again whole after the torn frame
    assert round_store._ENTRIES[str(path)] is not None


def test_a_snapshot_over_a_quarter_of_the_cache_cap_is_not_written(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    bulky = "".join(f"\n#### Step {i}\n\n" + f"line {i} of a long answer\n" * 2000 for i in range(20))
    (project / ".aider.chat.history.md").write_text(bulky, encoding="utf-8")  # ~1 MB of rounds
    folder = tmp_path / "cache"
    _new_process()
    driver.execute(["build_result"], project, {"cache.maxBytes": 2 << 20}, REQUEST, cache_dir=folder)
    assert not _rounds(project, folder).exists()
    driver.execute(["build_result"], project, {"cache.maxBytes": 8 << 20}, "another request", cache_dir=folder)
    assert _rounds(project, folder).exists()  # within a quarter of this cap


def test_two_processes_keeping_rounds_in_one_folder_leave_a_whole_file(tmp_path):
    projects = []
    for name in ("a", "b"):
        project = tmp_path / name
        project.mkdir()
        (project / ".aider.chat.history.md").write_text(_aider_transcript(name, 40), encoding="utf-8")
        projects.append(project)
    folder = tmp_path / "cache"
    script = ("import sys; from ctxengine import driver\n"
              "for _ in range(3): driver.execute(['build_result'], sys.argv[1], {}, 'x', cache_dir=sys.argv[2])\n")
    project = projects[0]  # both processes keep the rounds of one project: one file
    procs = [subprocess.Popen([sys.executable, "-c", script, str(project), str(folder)], stderr=subprocess.PIPE)
             for _ in projects]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    _new_process()
    path = _rounds(project, folder)
    assert _load(path)["parses"]  # whichever won, the file loads
    assert not [n for n in os.listdir(_rounds(project, folder).parent) if n.startswith(".rounds-")]


def test_an_unchanged_rebuild_in_a_fresh_process_never_reads_the_file(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / ".aider.chat.history.md").write_text(_aider_transcript("same", 8), encoding="utf-8")
    folder = tmp_path / "cache"
    _new_process()
    first = _build(project, folder)
    path = _rounds(project, folder)
    path.write_bytes(b"junk that a read would drop")
    _new_process()
    again = _build(project, folder)  # every node a hit: no round is looked for
    assert again["build_result"].context == first["build_result"].context
    assert path.read_bytes() == b"junk that a read would drop" and S.ROUND_MEMO.parsed == 0


def test_a_real_transcript_grown_by_its_second_half_gives_the_uncached_context(tmp_path):
    from test_state_session import CORPUS_SESSIONS

    source = CORPUS_SESSIONS / "AFI-Protocol__afi-core.aider.chat.history.md"
    if not source.exists():
        pytest.skip("corpus transcript missing")
    text = source.read_text(encoding="utf-8", errors="replace")
    cut = text.index("\n#### ", len(text) // 2) + 1
    project, folder = tmp_path / "p", tmp_path / "cache"
    project.mkdir()
    history = project / ".aider.chat.history.md"
    history.write_text(text[:cut], encoding="utf-8")
    _new_process()
    first = driver.execute(["session_history"], project, {}, REQUEST, cache_dir=folder)["session_history"]
    history.write_text(text, encoding="utf-8")
    _new_process()
    grown = driver.execute(["build_result", "session_history"], project, {"budget.maxTokens": 20000}, REQUEST,
                           cache_dir=folder)
    rounds = grown["session_history"].rounds
    assert S.ROUND_MEMO.parsed == len(rounds) - len(first.rounds)  # cut at a request: only the new rounds
    _new_process()
    plain = driver.execute(["build_result"], project, {"budget.maxTokens": 20000}, REQUEST, cache=False)
    assert grown["build_result"].context == plain["build_result"].context
