"""Hamilton's cache between runs: hits read from Hamilton's own cache logs, real files, real
processes sharing one cache folder, the CLI's cache commands."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import DEMO
import ctxengine
from ctxengine import caching, driver
from ctxengine.cli import main

REQUEST = "Fix the login endpoint: a bad password must return 401"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of the demo project (a session log of 5 rounds, references, a plan) in tmp_path."""
    return Path(shutil.copytree(DEMO, tmp_path / "demo"))


def cached_driver():
    return driver.driver_for(cached=True)


def build(project: Path, cache_dir: Path, request: str = REQUEST, overrides: dict | None = None):
    """(build_result, {node: "hit" | "run"} of the cached nodes, from Hamilton's cache logs)."""
    out = driver.execute(["build_result"], project, overrides or {}, request, cache=True, cache_dir=cache_dir)
    dr = cached_driver()
    logs = dr.cache.logs(run_id=dr.cache.last_run_id, level="info")
    what = {}
    cached = driver.cached_nodes()
    for node, events in logs.items():
        kinds = {e.event_type.value + (f":{e.msg}" if e.msg else "") for e in events}
        if node in cached:
            what[node] = "hit" if "get_result:hit" in kinds else "run"
    return out["build_result"], what


def pf(given: Path) -> Path:
    """The one project folder ctxengine made in the cache folder ``given`` (``given/ctxengine-cache/projects/<hash>``)."""
    (only,) = caching.all_cache_dirs(caching.cache_root(given))
    return only


def versions() -> dict[str, str]:
    """The data version of every node of the last cached run (Hamilton's own record)."""
    dr = cached_driver()
    return dict(dr.cache.data_versions[dr.cache.last_run_id])


def assert_exact(before: dict[str, str], after: dict[str, str], what: dict[str, str]) -> None:
    """A cached node ran exactly when one of its inputs has another data version than before."""
    graph = cached_driver().graph
    for node, happened in what.items():
        inputs = [d.name for d in graph.nodes[node].dependencies]
        changed = [d for d in inputs if before.get(d) != after.get(d)]
        assert (happened == "run") == bool(changed), (node, happened, changed)


def downstream(*names: str) -> set[str]:
    dr = driver.default_driver()
    return {n.name for n in dr.what_is_downstream_of(*names)}


def rendered(result) -> str:
    return json.dumps(result.as_json(), sort_keys=True, ensure_ascii=False)


def append_round(project: Path, index: int) -> None:
    log = project / ".planning" / "sessions" / "current" / "session.log"
    with log.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"round": index, "role": "user", "content": f"Round {index}: rename the helper."}) + "\n")
        fh.write(json.dumps({"round": index, "role": "assistant", "content": "Renamed it; 12 tests pass."}) + "\n")


# ----------------------------------------------------------------------------- hits and invalidation


def test_an_unchanged_rerun_is_all_hits_and_byte_identical(demo, tmp_path):
    first, before = build(demo, tmp_path / "c")
    second, after = build(demo, tmp_path / "c")
    assert before and set(before.values()) == {"run"}
    assert after.keys() == before.keys() and set(after.values()) == {"hit"}
    summary = driver.last_cache_run()
    assert set(summary.hits) == set(after) and not summary.misses
    assert second.context == first.context and rendered(second) == rendered(first)
    plain = driver.execute(["build_result"], demo, {}, REQUEST, cache=False)["build_result"]
    assert rendered(plain) == rendered(second)


def test_one_appended_round_reruns_only_what_depends_on_the_session(demo, tmp_path):
    build(demo, tmp_path / "c")
    before = versions()
    append_round(demo, 6)
    result, what = build(demo, tmp_path / "c")
    assert_exact(before, versions(), what)
    ran = {n for n, w in what.items() if w == "run"}
    assert {"history_section", "round_token_use"} <= ran
    assert ran <= downstream("session_reads")
    assert {"gsd_position", "plan_state", "roadmap_state", "disclosure_decisions"} <= {n for n, w in what.items() if w == "hit"}
    assert "Round 6: rename the helper." in result.context
    plain = driver.execute(["build_result"], demo, {}, REQUEST, cache=False)["build_result"]
    assert rendered(plain) == rendered(result)


def test_an_edited_reference_reruns_only_its_dependents(demo, tmp_path):
    build(demo, tmp_path / "c")
    before = versions()
    reference = demo / ".planning" / "references" / "architecture.md"
    reference.write_text(reference.read_text(encoding="utf-8") + "\nEvery handler logs its request id.\n", encoding="utf-8")
    result, what = build(demo, tmp_path / "c")
    assert_exact(before, versions(), what)
    ran = {n for n, w in what.items() if w == "run"}
    assert "budget_report" in ran and ran <= downstream("reference_documents", "planning_files")  # both read it
    assert {"history_section", "round_token_use", "plan_state"} <= {n for n, w in what.items() if w == "hit"}
    assert "Every handler logs its request id." in result.context


def test_a_new_request_and_a_config_value_rerun_their_readers_only(demo, tmp_path):
    build(demo, tmp_path / "c")
    before = versions()
    _, what = build(demo, tmp_path / "c", request="Add a logout endpoint")
    assert_exact(before, versions(), what)
    ran = {n for n, w in what.items() if w == "run"}
    assert "budget_report" in ran and ran <= downstream("user_request")
    assert {"history_section", "round_token_use", "gsd_position", "plan_state"} <= set(what) - ran

    before = versions()
    result, what = build(demo, tmp_path / "c", request="Add a logout endpoint",
                         overrides={"truncation.keepRecentRounds": 2})
    assert_exact(before, versions(), what)  # the config changed: only what sees another value recomputes
    ran = {n for n, w in what.items() if w == "run"}
    stages = {n.name: n.tags.get("stage") for n in driver.default_driver().graph.get_nodes()}
    readers = downstream("truncation_settings")
    assert {n for n in ran if stages.get(n) != "config"} <= readers  # a truncation key changed: only what
    assert "structure_check" in set(what) - ran  # reads truncation_settings recomputes, not the quality stage
    assert {"round_token_use", "roadmap_state", "session_history"} <= set(what) - ran  # the rest: equal inputs
    plain = driver.execute(["build_result"], demo, {"truncation.keepRecentRounds": 2}, "Add a logout endpoint",
                           cache=False)["build_result"]
    assert rendered(plain) == rendered(result)


def test_the_code_version_follows_every_node_source_and_config_wherever_installed(tmp_path, monkeypatch):
    folders = caching.code_folders()
    assert (folders[0] / "state.py").is_file() and (folders[1] / "defaults.yaml").is_file()
    copies = [Path(shutil.copytree(folder, tmp_path / folder.name)) for folder in folders]
    monkeypatch.setattr(caching.folders, "code_folders", lambda: copies)
    versions = []
    for edit in (None, "nodes/lib/sessions/aider.py", "configs/defaults.yaml"):
        if edit:
            with (tmp_path / edit).open("a", encoding="utf-8") as fh:
                fh.write("\n# edited\n")
        caching.code_version.cache_clear()
        versions.append(caching.code_version())
    caching.code_version.cache_clear()
    assert len(set(versions)) == 3 and all(v.startswith(ctxengine.__version__ + "-") for v in versions)


def test_a_new_code_version_starts_an_empty_cache_and_removes_the_old(demo, tmp_path, monkeypatch):
    folder = tmp_path / "c"
    build(demo, folder)
    old = caching.store_dir(pf(folder))
    assert old.is_dir()
    monkeypatch.setattr(caching.folders, "code_version", lambda: "9.9.9-feedfacecafe")
    driver.driver_for.cache_clear()
    try:
        _, what = build(demo, folder)
    finally:
        driver.driver_for.cache_clear()
    assert set(what.values()) == {"run"}
    assert (pf(folder) / "9.9.9-feedfacecafe").is_dir() and not old.exists()


def _db(folder: Path) -> sqlite3.Connection:
    return sqlite3.connect(caching.store_dir(pf(folder)) / "metadata_store.db", timeout=30)


def test_a_torn_result_is_recomputed(demo, tmp_path):
    first, _ = build(demo, tmp_path / "c")
    with contextlib.closing(_db(tmp_path / "c")) as db:
        db.execute("UPDATE results SET payload = x'8005746f726e'")
        db.commit()
    caching.MEMORY.clear()
    second, what = build(demo, tmp_path / "c")
    assert rendered(second) == rendered(first)
    assert {"build_result", "history_section", "budget_report"} <= {n for n, w in what.items() if w == "run"}
    results = caching.stores_for(pf(tmp_path / "c")).results
    with contextlib.closing(_db(tmp_path / "c")) as db:  # every torn row was written again, with its MAC
        assert all(results.sign(v, p) == d for v, d, p in db.execute("SELECT data_version, digest, payload FROM results"))
    caching.MEMORY.clear()
    _, what = build(demo, tmp_path / "c")
    assert set(what.values()) == {"hit"}


def test_a_large_section_is_stored_once_and_its_own_parts_stay_as_recent_as_it(tmp_path):
    from ctxengine.nodes.lib.digest import round_digest_of
    from ctxengine.nodes.types import Message, Round

    rounds = tuple(Round(i, (Message("user", f"ask {i}", i),), source_digest=round_digest_of(b"%d" % i)) for i in range(130))
    section = _section(data={"rounds": rounds})
    stores = caching.stores_for(caching.project_cache_dir(tmp_path, tmp_path / "c"))
    results, db = stores.results, stores.metadata.connection
    results.set("value-1", {"state": (section, 1)})
    results.set("value-2", [section, 2])
    results.flush()
    rows = dict(db.execute("SELECT data_version, size FROM results"))
    shared = sorted(k for k in rows if k.startswith("shared-"))  # the section, once; its rounds in two chunks
    assert len(shared) == 3 and "shared-" + caching.fingerprint(section) in shared
    assert max(rows["value-1"], rows["value-2"]) < 200  # each refers to the section
    db.execute("UPDATE results SET used = 1")
    db.commit()
    results.set("value-3", (section, 3))  # a new value refers to it: the section and its chunks are touched
    results.flush()
    used = dict(db.execute("SELECT data_version, used FROM results"))
    assert {k for k, t in used.items() if t > 1} == {"value-3"} | {k for k in used if k.startswith("shared-")}
    caching.MEMORY.clear()  # another process: read back from the rows
    loaded = results.get("value-2").load()
    assert loaded == [section, 2] and loaded[0].data["rounds"] == rounds and loaded[0].digest == section.digest


def test_a_result_that_no_longer_unpickles_never_fails_a_build(long_session, tmp_path):
    """A row whose digest matches but whose pickle does not load (a class changed outside the
    node sources): found only when a value is needed, then dropped and the build run again."""
    first, _ = build(long_session, tmp_path / "c")
    bad = pickle.dumps(_Gone())
    results = caching.stores_for(pf(tmp_path / "c")).results
    with contextlib.closing(_db(tmp_path / "c")) as db:  # signed with the user's key: only the class changed
        for (name,) in db.execute("SELECT data_version FROM results WHERE data_version LIKE 'shared-%'").fetchall():
            db.execute("UPDATE results SET payload = ?, digest = ? WHERE data_version = ?",
                       (bad, results.sign(name, bad), name))
        db.commit()
    caching.MEMORY.clear()
    _Gone.broken = True
    try:
        second, _ = build(long_session, tmp_path / "c")
    finally:
        _Gone.broken = False
    assert rendered(second) == rendered(first)


class _Gone:
    """Unpickles only while ``broken`` is False."""

    broken = False

    def __reduce__(self):
        return (_Gone._make, ())

    @staticmethod
    def _make():
        if _Gone.broken:
            raise AttributeError("this class changed")
        return _Gone()


def test_session_rounds_use_the_cache_and_cache_false_does_not(demo, tmp_path):
    from ctxengine import Session

    session = Session(demo, max_tokens=32000, cache_dir=tmp_path / "c")
    session.next_context("first request")
    session.record(10, "done")
    session.next_context("second request")
    assert driver.last_cache_run().hits  # the unchanged project parts come from the cache
    plain = Session(demo, max_tokens=32000, cache=False)
    plain.next_context("first request")
    assert driver.last_cache_run() is None


# ----------------------------------------------------------------------------- size, concurrency, CLI


def write_long_session(project: Path, word: str = "why?", rounds: int = 150) -> Path:
    log = project / ".planning" / "sessions" / "current" / "session.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for index in range(1, rounds + 1):
        lines.append(json.dumps({"round": index, "role": "user", "content": f"Question {index}: " + f"{word} " * 60}))
        lines.append(json.dumps({"round": index, "role": "assistant", "content": f"Answer {index}. " + "because. " * 40}))
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return project


@pytest.fixture
def long_session(tmp_path: Path) -> Path:
    """A project whose session log has 150 rounds (the rounds are stored once, shared)."""
    return write_long_session(tmp_path / "p")


def _rows(folder: Path) -> dict[str, int]:
    with contextlib.closing(_db(folder)) as db:
        return {**dict(db.execute("SELECT data_version, size FROM results")),
                **dict(db.execute("SELECT 'memo' || hex(digest) || kind, LENGTH(payload) FROM memo"))}


def test_the_folder_is_pruned_to_its_cap(long_session, tmp_path):
    cap = 1 << 20
    folder = tmp_path / "c"
    stored: dict[str, int] = {}
    overrides = {"cache.maxBytes": cap}
    for n in range(6):  # each build stores new results: the session log changed
        write_long_session(long_session, f"why{n}?")
        driver.execute(["build_result"], long_session, overrides, "request", cache_dir=folder)
        stored.update(_rows(folder))
        assert caching.stats(pf(folder))["bytes"] <= cap
    assert sum(stored.values()) > 2 * cap  # without pruning the folder would be over its cap
    caching.MEMORY.clear()
    driver.execute(["build_result"], long_session, overrides, "request", cache_dir=folder)
    assert "history_section" in driver.last_cache_run().hits  # the newest results were kept


def test_prune_drops_the_least_recently_used_results_and_their_metadata(tmp_path):
    folder = caching.project_cache_dir(tmp_path, tmp_path / "c")
    stores = caching.stores_for(folder)
    db = stores.metadata.connection
    for index in range(10):
        payload = os.urandom(100_000)
        db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?)",
                   (f"r{index}", hashlib.blake2b(payload, digest_size=16).digest(), payload, len(payload), 1000 + index))
        db.execute("INSERT INTO cache_metadata (cache_key, node_name, code_version, data_version) VALUES (?, ?, ?, ?)",
                   (f"k{index}", "node", "code", f"r{index}"))
    db.commit()
    cap = 600_000
    removed = caching.prune(folder, cap, stores.metadata)
    left = sorted(row[0] for row in db.execute("SELECT data_version FROM results"))
    assert removed >= 400_000 and 3 <= len(left) <= 5 and left == [f"r{i}" for i in range(10 - len(left), 10)]
    assert sorted(row[0] for row in db.execute("SELECT data_version FROM cache_metadata")) == left
    assert caching.stats(folder)["bytes"] <= cap  # the file gave the space back


def test_prune_keeps_the_history_of_the_last_runs_only(tmp_path):
    folder = caching.project_cache_dir(tmp_path, tmp_path / "c")
    stores = caching.stores_for(folder)
    db = stores.metadata.connection
    for index in range(50):
        stores.metadata.initialize(f"run{index}")
        db.execute("INSERT INTO history (cache_key, run_id) VALUES (?, ?)", (f"k{index}", f"run{index}"))
    db.commit()
    caching.prune(folder, 1 << 30, stores.metadata)
    kept = [f"run{index}" for index in range(50 - caching.store.KEEP_RUNS, 50)]
    assert [row[0] for row in db.execute("SELECT run_id FROM run_ids ORDER BY id")] == kept
    assert [row[0] for row in db.execute("SELECT run_id FROM history ORDER BY id")] == kept


def test_prune_never_drops_a_shared_part_before_a_value_of_the_same_time(tmp_path):
    folder = caching.project_cache_dir(tmp_path, tmp_path / "c")
    stores = caching.stores_for(folder)
    db = stores.metadata.connection
    for name in ("shared-a", "value-a", "shared-b", "value-b"):  # one build: the same time for all
        payload = os.urandom(150_000)
        db.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?)",
                   (name, hashlib.sha256(payload).digest()[:16], payload, len(payload), 1000))
    db.commit()
    caching.prune(folder, 450_000, stores.metadata)
    left = {row[0] for row in db.execute("SELECT data_version FROM results")}
    assert left and left <= {"shared-a", "shared-b"}  # the values went first: nothing kept refers to a lost part


def test_long_tuples_are_stored_once_and_an_unchanged_rebuild_does_not_unpickle_them(long_session, tmp_path):
    folder = tmp_path / "c"
    first, _ = build(long_session, folder)
    rows = _rows(folder)
    shared = {k: v for k, v in rows.items() if k.startswith("shared-")}
    history = next(s for s in first.sections if s.key == "history")
    rounds = len(pickle.dumps(history.data["rounds"], protocol=pickle.HIGHEST_PROTOCOL))
    assert len(history.data["rounds"]) == 150  # in two chunks (128 + 22 rounds), each stored once, on its own
    assert len(shared) >= 2 and rounds * 0.9 <= sum(shared.values()) < 2 * rounds
    holders = {"session_history", "history_section", "state_sections", "sections", "final_sections", "build_result"}
    assert holders <= driver.cached_nodes()
    for node in holders:  # each holder's row refers to it
        assert rows[versions()[node]] < rounds, node
    assert rows["shared-" + caching.fingerprint(history)] < rounds  # the history section, once, its rounds by chunk
    caching.MEMORY.clear()  # a fresh process: every hit comes from the file
    second, what = build(long_session, folder)
    assert set(what.values()) == {"hit"} and rendered(second) == rendered(first)
    history = versions()["session_history"]
    kept = caching.MEMORY.value(history)  # a hit no node needed: kept as the row read, never unpickled
    assert type(kept) is caching.store.Lazy and kept._payload
    assert versions()["build_result"] in caching.MEMORY


def test_a_warm_process_serves_hits_from_memory(demo, tmp_path):
    build(demo, tmp_path / "c")
    with contextlib.closing(_db(tmp_path / "c")) as db:
        db.execute("DELETE FROM results")  # another process pruned everything
        db.commit()
    _, what = build(demo, tmp_path / "c")
    assert set(what.values()) == {"hit"}


CONCURRENT = """
import sys
from ctxengine import driver
project, folder, tag = sys.argv[1:4]
for n in range(4):
    out = driver.execute(["build_result"], project, {}, f"request {n % 2}", cache_dir=folder)
    with open(f"{folder}-{tag}-{n}.txt", "w", encoding="utf-8") as fh:
        fh.write(out["build_result"].context)
"""


def test_two_processes_share_one_cache_folder(demo, tmp_path):
    folder = tmp_path / "shared-cache"
    env = dict(os.environ, HAMILTON_AUTOLOAD_EXTENSIONS="0")
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT, str(demo), str(folder), tag], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    expected = {n: driver.execute(["build_result"], demo, {}, f"request {n}", cache=False)["build_result"].context
                for n in (0, 1)}
    for tag in ("a", "b"):
        for n in range(4):
            assert Path(f"{folder}-{tag}-{n}.txt").read_text(encoding="utf-8") == expected[n % 2]
    with sqlite3.connect(caching.store_dir(pf(folder)) / "metadata_store.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    _, what = build(demo, folder, request="request 1")
    assert set(what.values()) == {"hit"}


def test_cli_flags_stats_and_clear(demo, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "root"))
    try:
        assert main(["build", str(demo), "--request", "x", "--no-cache"]) == 0
        assert main(["build", str(demo), "--request", "x", "--cache", "--no-cache"]) == 0  # --no-cache wins
        assert not (tmp_path / "root" / "ctxengine-cache" / "projects").exists()
        assert main(["build", str(demo), "--request", "x"]) == 0  # cached by default
        assert main(["build", str(demo), "--request", "x"]) == 0
        folder = caching.project_cache_dir(demo)
        assert folder.parent == tmp_path / "root" / "ctxengine-cache" / "projects" and folder.is_dir()
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        capsys.readouterr()
        assert main(["cache", "stats", str(demo), "--format", "json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        (row,) = shown["folders"]
        assert shown["total_bytes"] >= row["bytes"] and shown["max_total_bytes"] == 1 << 30
        assert row["project"] == os.path.realpath(demo) and row["bytes"] > 0 and row["entries"] > 0
        assert row["last_run"]["hits"] > 0 and row["last_run"]["misses"] == 0
        assert main(["cache", "stats"]) == 0
        assert os.path.realpath(demo) in capsys.readouterr().out
        assert main(["build", str(demo), "--request", "x", "--cache-dir", str(tmp_path / "mine")]) == 0
        assert caching.store_dir(pf(tmp_path / "mine")).is_dir()
        assert main(["cache", "clear"]) == 2
        assert main(["cache", "clear", str(demo)]) == 0 and not folder.exists()
        assert main(["cache", "clear", "--cache-dir", str(tmp_path / "mine")]) == 0
        assert caching.all_cache_dirs(caching.cache_root(tmp_path / "mine")) == [] and (tmp_path / "mine").is_dir()
        assert main(["build", str(demo), "--request", "x"]) == 0  # a cleared folder is made again
        assert main(["cache", "clear", "--all"]) == 0 and caching.all_cache_dirs() == []
    finally:
        driver.set_cache_defaults()


def test_the_api_builds_with_the_cache_unless_told_not_to(demo, tmp_path, monkeypatch):
    import ctxengine

    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "root"))
    ctxengine.build_context(demo, REQUEST)
    assert driver.last_cache_run() is not None and caching.project_cache_dir(demo).is_dir()
    ctxengine.build_context(demo, REQUEST, cache=False)
    assert driver.last_cache_run() is None


def test_an_unusable_cache_folder_never_fails_a_build(demo, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    result = driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=blocker / "c")["build_result"]
    assert REQUEST in result.context and driver.last_cache_run() is None


# ----------------------------------------------------------------------------- what is cached


def test_loaders_always_run_and_are_never_in_the_cached_table():
    dr = driver.default_driver()
    nodes = {n.name: n for n in dr.list_available_variables() if not n.is_external_input}
    must_recompute = {"gsd_planning", "plan_reads", "session_reads", "fetch_deadline", "context_template_file",
                      "reference_documents", "requested_documents", "planning_files", "git_snapshot",
                      "file_listing", "environment_facts", "project_config", "user_config", "user_config_path"}
    loaders = {name for name, n in nodes.items() if n.tags.get("loader")}
    assert must_recompute <= loaders
    for name in loaders:
        assert nodes[name].tags.get("cache.behavior") == "recompute", name
    assert not loaders & driver.cached_nodes()
    holding_the_memo = {"exact_counter", "tail_strategy", "head_strategy", "middle_strategy"}  # a stored value would lose it
    holding_the_memo |= {"code_tags"}  # every file's tags come from the memo: cheaper than storing a pickle of them all
    assert {name for name, n in nodes.items() if n.tags.get("cache.behavior") == "recompute"} == loaders | holding_the_memo
    assert driver.cached_nodes() == set(nodes) - loaders - holding_the_memo


FINGERPRINT = """
import sys
from ctxengine.caching import fingerprint
from ctxengine.nodes.types import Section, Source
value = {"exact": frozenset({"plan", "history", "git", "rules"}), "sections": [Section(key="k", title="T", kind="plan",
         content="x" * 10, priority=80, pool="state", sources=(Source("file", "a.md", (1, 2)),))]}
print(fingerprint(value))
"""


def test_fingerprints_are_equal_across_processes_and_differ_for_other_values():
    prints = set()
    for seed in ("1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", FINGERPRINT], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONHASHSEED=seed, HAMILTON_AUTOLOAD_EXTENSIONS="0"))
        assert done.returncode == 0, done.stderr
        prints.add(done.stdout.strip())
    assert len(prints) == 1
    assert caching.fingerprint((1, "a")) != caching.fingerprint((1, "b")) != caching.fingerprint([1, "b"])
    assert caching.fingerprint({"a": 1}) != caching.fingerprint({"a": True})

    def closure(n):
        return lambda: n

    assert caching.fingerprint(closure(1)) != caching.fingerprint(closure(2))
    assert caching.fingerprint(closure(1)) == caching.fingerprint(closure(1))


LOADED = """
import pickle, sys
from ctxengine.caching import fingerprint
print(fingerprint(pickle.load(sys.stdin.buffer)))
"""


def test_a_pickled_value_loaded_in_another_process_keeps_its_fingerprint():
    from ctxengine.nodes.lib.digest import round_digest_of
    from ctxengine.nodes.lib.monitor import RoundUse
    from ctxengine.nodes.types import Message, Round

    rounds = tuple(Round(i, (Message("user", f"ask {i}", i),), source_digest=round_digest_of(b"%d" % i)) for i in range(150))
    value = {"history": _section(content="a line of the history\n" * 4000, data={"rounds": rounds}),
             "uses": tuple(RoundUse(i, 10 + i, 10 + i, 0) for i in range(200)), "rounds": rounds[:3]}
    here = caching.fingerprint(value)  # the section's digest is computed now and kept on it (not pickled)
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", LOADED], input=pickle.dumps(value), capture_output=True, timeout=60,
                              env=dict(os.environ, PYTHONHASHSEED=seed, HAMILTON_AUTOLOAD_EXTENSIONS="0"))
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().strip() == here


def test_a_long_tuple_is_fingerprinted_by_its_chunks():
    from ctxengine.nodes.lib.monitor import RoundUse

    uses = tuple(RoundUse(i, 10 + i, 10 + i, 0) for i in range(300))  # three chunks: 128, 128, 44
    first = caching.fingerprint(uses)
    assert first == caching.fingerprint(tuple(RoundUse(i, 10 + i, 10 + i, 0) for i in range(300)))  # by content
    grown = uses + (RoundUse(300, 7, 7, 0),)
    assert caching.fingerprint(grown) not in (first, caching.fingerprint(uses[:-1] + (RoundUse(299, 1, 1, 0),)))


def test_a_round_is_fingerprinted_by_the_digest_set_when_it_was_made_here_and_in_hamilton():
    from hamilton.caching import fingerprinting

    from ctxengine.nodes.lib.digest import round_digest_of
    from ctxengine.nodes.types import Message, Round

    made = Round(1, (Message("user", "hi", 1),), source_digest=round_digest_of(b"its stretch"))
    assert made.digest == round_digest_of(b"its stretch")
    assert caching.fingerprint(made) == (b"r" + made.digest).hex() == fingerprinting.hash_value(made)
    other = Round(1, (Message("user", "hi", 1),), source_digest=round_digest_of(b"another stretch"))
    assert caching.fingerprint(other) != caching.fingerprint(made)
    plain = Round(1, (Message("user", "hi", 1),))  # made without a source digest: by its content
    assert plain.digest and caching.fingerprint(plain) == caching.fingerprint(Round(1, (Message("user", "hi", 1),)))
    assert caching.fingerprint(plain) != caching.fingerprint(Round(1, (Message("user", "ho", 1),)))
    # a tuple of rounds: by their digests, one hash
    assert caching.fingerprint((made, made)) != caching.fingerprint((made, other))
    assert caching.fingerprint((plain, plain)) != caching.fingerprint((plain, Round(1, (Message("user", "ho", 1),))))
    long = tuple(Round(i, (Message("user", "hi", i),), source_digest=round_digest_of(str(i).encode())) for i in range(300))
    assert caching.fingerprint(long) != caching.fingerprint(long[:-1] + (plain,))


def test_a_changed_round_gets_its_own_digest_and_a_loaded_one_keeps_its_own():
    from dataclasses import replace

    from ctxengine.nodes.lib.digest import round_digest_of
    from ctxengine.nodes.types import Message, Round

    made = Round(1, (Message("user", "hi", 1), Message("assistant", "done", 2)), source_digest=round_digest_of(b"x"))
    trimmed = replace(made, messages=made.messages[:1])  # as the history fit trims a round
    assert trimmed.digest not in (b"", made.digest)
    assert trimmed.digest == Round(1, (Message("user", "hi", 1),)).digest  # by its content
    assert caching.fingerprint(trimmed) != caching.fingerprint(made)
    loaded = pickle.loads(pickle.dumps(made))
    assert loaded.digest == made.digest and caching.fingerprint(loaded) == caching.fingerprint(made)


def _section(**changes):
    from ctxengine.nodes.types import Message, Round, Section, Source

    fields = dict(key="history", title="History", kind="history", content="x" * 10, priority=60, pool="state",
                  sources=(Source("file", "a.md", (1, 2)),),
                  data={"rounds": (Round(1, (Message("user", "hi", 1),)),), "verbatim_from": 0})
    return Section(**{**fields, **changes})


def test_sections_differing_only_in_data_sources_or_priority_fingerprint_apart():
    from ctxengine.nodes.types import Message, Round, Source

    base = caching.fingerprint(_section())
    assert caching.fingerprint(_section()) == base  # equal content, other objects
    others = [_section(data={"rounds": (Round(1, (Message("user", "ho", 1),)),), "verbatim_from": 0}),
              _section(data={"rounds": (Round(1, (Message("user", "hi", 1),)),), "verbatim_from": 1}),
              _section(sources=(Source("file", "a.md", (1, 3)),)), _section(priority=61),
              _section(deprecated=True), _section(content="x" * 11)]
    prints = {caching.fingerprint(s) for s in others}
    assert base not in prints and len(prints) == len(others)
    # inside other values, by the same digest: a tuple of sections, a dataclass holding them
    assert caching.fingerprint((_section(),)) == caching.fingerprint((_section(),))
    assert caching.fingerprint((_section(),)) != caching.fingerprint((_section(priority=61),))
    assert caching.fingerprint({"s": [_section()]}) != caching.fingerprint({"s": [_section(priority=61)]})


def test_a_replaced_section_gets_a_new_digest_and_a_pickled_one_the_same():
    section = _section()
    assert "digest" not in vars(section)  # computed on first use only
    first = section.digest
    changed = section.with_content("y" * 10)
    assert "digest" not in vars(changed) and changed.digest != first
    payload = pickle.dumps(section)
    assert b"digest" not in pickle.dumps(_section(data={}))  # a section's pickle is its content only
    loaded = pickle.loads(payload)
    assert "digest" not in vars(loaded) and loaded.digest == first and loaded == section


def test_a_long_section_text_carries_its_digest_from_when_it_was_made(monkeypatch):
    from ctxengine.nodes.lib import digest

    long_content = "a line of the history, é\n" * 4000
    section = _section(content=long_content)
    assert type(section.content) is digest.DigestedText and section.content == long_content
    assert section.content.digest == hashlib.sha256(long_content.encode("utf-8")).digest()[:16]
    hashed = []
    monkeypatch.setattr(digest, "bytes_digest", lambda data: hashed.append(len(data)) or b"0" * 16)
    moved = section.with_content(section.content, priority=70)  # another section, the same text
    assert caching.fingerprint((section, moved)) and hashed == []
    assert type(pickle.loads(pickle.dumps(section)).content) is str  # pickled as a plain text
    assert type(_section(content="short").content) is str


def test_a_tuple_of_values_carrying_digests_of_other_lengths_is_walked():
    from ctxengine.nodes.lib.code.files import CodeFiles, code_files_of

    empty, some = CodeFiles(), code_files_of({"a.py": "x"}, {"a.py": b"1" * 16}, (), ())
    assert empty.digest == b"" and len(some.digest) == 16  # joined, (empty, some) and (some, empty) would collide
    assert caching.fingerprint((empty, some)) != caching.fingerprint((some, empty))


def test_a_long_tuple_of_rounds_is_fingerprinted_by_one_hash_of_their_digests(monkeypatch):
    from ctxengine.nodes.lib import digest
    from ctxengine.nodes.types import Message, Round

    rounds = tuple(Round(i, (Message("user", f"step {i}", i),)) for i in range(1, 301))  # over CHUNK_ITEMS
    before = caching.fingerprint(rounds)
    changed = rounds[:-1] + (Round(300, (Message("user", "step 300, edited", 300),)),)
    assert caching.fingerprint(changed) not in (before, caching.fingerprint(rounds[:-1]))
    hashed = []
    monkeypatch.setattr(digest, "digest16", lambda *parts: hashed.append(parts) or b"0" * 16)
    caching.fingerprint(rounds)
    assert len(hashed) == 1 and hashed[0][:2] == (b"tuple-of", Round.DIGEST_TAG) and len(hashed[0][2]) == 16 * 300


def test_disclosure_rules_are_fingerprinted_by_the_digest_they_keep(monkeypatch):
    from dataclasses import replace

    from ctxengine.nodes.lib.disclosure import rules as R

    made = R.DisclosureRules(state=("plan",), modes={"write": (R.ModeRule("write", ("PLAN.md",)),)})
    first = caching.fingerprint(made)
    walked = []
    monkeypatch.setattr(R, "fields_digest", lambda value: walked.append(value) or b"0" * 16)
    assert caching.fingerprint(made) == first and walked == []  # kept on the rules: not walked again
    loaded = pickle.loads(pickle.dumps(made))  # the digest is not pickled: a loaded value makes its own
    assert "digest" not in loaded.__dict__ and caching.fingerprint(loaded) != first and walked == [loaded]
    monkeypatch.undo()
    assert caching.fingerprint(pickle.loads(pickle.dumps(made))) == first
    assert caching.fingerprint(replace(made, state=("execute",))) != first


def test_small_containers_of_plain_values_digest_by_their_pickle_and_keep_every_distinction(monkeypatch):
    from dataclasses import make_dataclass

    from ctxengine.nodes.lib import digest

    pickled = []
    real = digest.pickle.dumps
    monkeypatch.setattr(digest.pickle, "dumps", lambda value, **kw: pickled.append(value) or real(value, **kw))
    plain = {"tail": 3, "head": None, "ratio": 0.5, "on": True, "name": "x"}
    first = caching.fingerprint(plain)
    assert pickled == [plain]  # one pickle, no walk of its items
    assert caching.fingerprint(dict(plain)) == first  # another dict, the same content
    for changed in ({**plain, "tail": 4}, {**plain, "tail": 3.0}, {**plain, "tail": "3"}, {**plain, "on": 1},
                    {**plain, "extra": None}, dict(reversed(plain.items()))):
        assert caching.fingerprint(changed) != first
    assert len({caching.fingerprint(v) for v in ([1, "a"], (1, "a"), {1: "a"}, [1, "a", None])}) == 4
    Pair, Other = make_dataclass("Pair", ["a", "b"]), make_dataclass("Other", ["a", "b"])
    assert caching.fingerprint(Pair(1, "b")) != caching.fingerprint(Other(1, "b"))
    assert caching.fingerprint(Pair(1, "b")) != caching.fingerprint(make_dataclass("Pair", ["a", "c"])(1, "b"))
    assert caching.fingerprint(Pair(1, "b")) == caching.fingerprint(Pair(1, "b"))


@dataclass(frozen=True)
class _Option:
    mode: str
    n: int


def test_a_plain_dataclass_digests_alike_made_or_loaded_and_keyword_defaults_count():
    made = _Option("mode", 1)  # a value that is the same str object as a field's name
    assert caching.fingerprint(pickle.loads(pickle.dumps(made))) == caching.fingerprint(made)

    def limited(*, limit=1):
        return limit

    first = caching.fingerprint(limited)
    limited.__kwdefaults__ = {"limit": 2}  # the same function with another keyword-only default
    assert caching.fingerprint(limited) != first


def test_a_long_text_in_a_small_container_digests_alike_carried_or_loaded_and_by_its_digest(monkeypatch):
    from ctxengine.nodes.lib import digest

    text = "a fitted context line, é\n" * 4000
    carried = digest.long_text(text)
    for wrap in (lambda t: {"context": t, "n": 1}, lambda t: [t, 1], lambda t: (t, "x")):
        assert caching.fingerprint(wrap(carried)) == caching.fingerprint(wrap(text))
    many = {f"file{i}.md": f"line {i}\n" * 900 for i in range(12)}  # short texts, a long pickle
    assert caching.fingerprint(many) != caching.fingerprint({**many, "file0.md": "edited"})
    hashed = []
    monkeypatch.setattr(digest, "bytes_digest", lambda data: hashed.append(len(data)) or b"0" * 16)
    caching.fingerprint({"context": carried, "n": 1})
    assert hashed == []  # the carried digest, not the text hashed again


def test_a_chunk_of_values_that_can_change_is_never_known_by_identity():
    rows = tuple({"n": i} for i in range(200))
    before = caching.fingerprint(rows)
    rows[3]["n"] = -1  # the same objects, changed in place
    assert caching.fingerprint(rows) != before
    assert caching.fingerprint(tuple(f"text {i}" for i in range(200))) == caching.fingerprint(
        tuple("".join(["text ", str(i)]) for i in range(200)))  # other str objects, same content


def test_a_large_text_made_long_carries_its_sha256_and_is_not_hashed_again(monkeypatch):
    from ctxengine.nodes.lib import digest

    text = "a fitted context line, é\n" * 4000
    assert digest.text_digest(text) == hashlib.sha256(text.encode("utf-8")).digest()[:16]
    carried = digest.long_text(text)  # as the rendered context is made
    assert type(carried) is digest.DigestedText and carried.digest == digest.text_digest(text)
    assert digest.long_text("short") == "short" and type(digest.long_text("short")) is str
    assert caching.fingerprint([carried]) == caching.fingerprint([text])  # the same text, loaded (a str) or not
    hashed = []
    monkeypatch.setattr(digest, "bytes_digest", lambda data: hashed.append(len(data)) or b"0" * 16)
    first = caching.fingerprint((carried, [carried]))
    assert first == caching.fingerprint((carried, [carried])) and hashed == []
    caching.fingerprint(text)  # a long plain text: hashed where it is met
    assert len(hashed) == 1


def test_a_warm_process_reads_a_stored_hit_s_row_once(demo, tmp_path):
    cache = tmp_path / "c"
    build(demo, cache)
    caching.MEMORY.clear()  # as a new process: every hit comes from the database
    reads: list[str] = []
    connection = caching.stores_for(pf(cache)).metadata.connection
    connection.set_trace_callback(lambda sql: reads.append(sql) if "FROM results" in sql else None)
    try:
        first, _ = build(demo, cache)
        from_rows = len(reads)
        reads.clear()
        again, what = build(demo, cache)
    finally:
        connection.set_trace_callback(None)
    assert from_rows > 0 and reads == []  # the rows read once, never unpickled, are kept as they are
    assert set(what.values()) == {"hit"} and again.context == first.context


def test_a_section_holding_what_cannot_be_hashed_fingerprints_as_hamilton_s_unhashable():
    import threading

    from hamilton.caching import fingerprinting

    from ctxengine.nodes.types import Section

    section = Section(key="k", title="t", kind="x", content="c", priority=1, pool="p", data={"lock": threading.Lock()})
    assert fingerprinting.hash_value(section) == fingerprinting.UNHASHABLE  # never a hit, never a crash
    assert isinstance(fingerprinting.hash_value([section, 1]), str)


def test_a_shared_part_that_does_not_pickle_leaves_no_reference_to_it(tmp_path):
    from ctxengine.nodes.types import Section

    store = caching.stores_for(caching.project_cache_dir(tmp_path / "p", tmp_path / "c")).results
    bad = Section(key="k", title="t", kind="x", content="a" * 70_000, priority=1, pool="p", data={"fn": lambda: 1})
    store.set("v1", bad)
    store.set("v2", [bad])
    assert not store.stored("v1") and not store.stored("v2")  # not cached: nothing points at a missing part
    store.flush()


def test_a_value_stored_after_the_results_are_forgotten_stores_its_shared_parts_again(tmp_path):
    stores = caching.stores_for(caching.project_cache_dir(tmp_path / "p", tmp_path / "c"))
    long = "x" * 70_000  # a long text: stored once, as a shared part
    stores.results.set("v1", [long])
    stores.forget_results()  # a stale pickle met mid-build: every row goes, the build runs again
    stores.results.set("v2", [long])
    stores.results.flush()
    caching.MEMORY.clear()
    assert stores.results.get("v2").load() == [long]  # its shared part was stored with it
