"""Hamilton's cache between runs: hits read from Hamilton's own cache logs, real files, real
processes sharing one cache folder, the CLI's cache commands."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEMO
from ctxengine import cache, driver
from ctxengine.cli import main

REQUEST = "Fix the login endpoint: a bad password must return 401"


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of the demo project (a session log of 5 rounds, references, a plan) in tmp_path."""
    return Path(shutil.copytree(DEMO, tmp_path / "demo"))


def build(project: Path, cache_dir: Path, request: str = REQUEST, overrides: dict | None = None):
    """(build_result, {node: "hit" | "run"} of the cached nodes, from Hamilton's cache logs)."""
    out = driver.execute(["build_result"], project, overrides or {}, request, cache=True, cache_dir=cache_dir)
    dr = driver.driver_for(driver._default_variants(), str(cache_dir))
    logs = dr.cache.logs(run_id=dr.cache.last_run_id, level="info")
    what = {}
    for node, events in logs.items():
        kinds = {e.event_type.value + (f":{e.msg}" if e.msg else "") for e in events}
        if node in driver.CACHED_NODES:
            what[node] = "hit" if "get_result:hit" in kinds else "run"
    return out["build_result"], what


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
    append_round(demo, 6)
    result, what = build(demo, tmp_path / "c")
    ran = {n for n, w in what.items() if w == "run"}
    assert {"history_section", "round_token_use"} <= ran
    assert ran <= downstream("session_reads")
    assert {"gsd_position", "plan_state", "roadmap_state", "disclosure_decisions"} <= {n for n, w in what.items() if w == "hit"}
    assert "Round 6: rename the helper." in result.context
    plain = driver.execute(["build_result"], demo, {}, REQUEST, cache=False)["build_result"]
    assert rendered(plain) == rendered(result)


def test_an_edited_reference_reruns_only_its_dependents(demo, tmp_path):
    build(demo, tmp_path / "c")
    reference = demo / ".planning" / "references" / "architecture.md"
    reference.write_text(reference.read_text(encoding="utf-8") + "\nEvery handler logs its request id.\n", encoding="utf-8")
    result, what = build(demo, tmp_path / "c")
    ran = {n for n, w in what.items() if w == "run"}
    assert "budget_report" in ran and ran <= downstream("reference_documents")
    assert {"history_section", "round_token_use", "plan_state"} <= {n for n, w in what.items() if w == "hit"}
    assert "Every handler logs its request id." in result.context


def test_a_new_request_and_a_config_value_rerun_their_readers_only(demo, tmp_path):
    build(demo, tmp_path / "c")
    _, what = build(demo, tmp_path / "c", request="Add a logout endpoint")
    ran = {n for n, w in what.items() if w == "run"}
    assert "budget_report" in ran and ran <= downstream("user_request")
    assert {"history_section", "round_token_use", "gsd_position", "plan_state"} <= set(what) - ran

    result, what = build(demo, tmp_path / "c", request="Add a logout endpoint",
                         overrides={"truncation.keepRecentRounds": 2})
    ran = {n for n, w in what.items() if w == "run"}
    readers = {n for n in driver.CACHED_NODES if "truncation_settings" in _inputs(n)}
    assert ran <= readers  # a truncation key changed: only nodes reading truncation_settings recompute ...
    assert "structure_check" in set(what) - ran  # ... not those reading another stage's settings
    assert {"round_token_use", "roadmap_state"} <= set(what) - ran  # ... the rest see equal inputs
    plain = driver.execute(["build_result"], demo, {"truncation.keepRecentRounds": 2}, "Add a logout endpoint",
                           cache=False)["build_result"]
    assert rendered(plain) == rendered(result)


def _inputs(node: str) -> set[str]:
    return {d.name for d in driver.default_driver().graph.nodes[node].dependencies}


def test_a_new_code_version_starts_an_empty_cache_and_removes_the_old(demo, tmp_path, monkeypatch):
    folder = tmp_path / "c"
    build(demo, folder)
    old = cache.store_dir(folder)
    assert old.is_dir()
    monkeypatch.setattr(cache, "code_version", lambda: "9.9.9-feedfacecafe")
    driver.driver_for.cache_clear()
    try:
        _, what = build(demo, folder)
    finally:
        driver.driver_for.cache_clear()
    assert set(what.values()) == {"run"}
    assert (folder / "9.9.9-feedfacecafe").is_dir() and not old.exists()


def test_a_torn_result_is_recomputed(demo, tmp_path):
    first, _ = build(demo, tmp_path / "c")
    for path in (cache.store_dir(tmp_path / "c") / cache.RESULTS).iterdir():
        path.write_bytes(b"\x80\x05torn")
    second, what = build(demo, tmp_path / "c")
    assert set(what.values()) == {"run"} and rendered(second) == rendered(first)
    _, what = build(demo, tmp_path / "c")
    assert set(what.values()) == {"hit"}


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


def test_the_folder_is_pruned_to_its_cap(tmp_path):
    project = tmp_path / "p"
    log = project / ".planning" / "sessions" / "current" / "session.log"
    log.parent.mkdir(parents=True)
    lines = []
    for index in range(1, 151):
        lines.append(json.dumps({"round": index, "role": "user", "content": f"Question {index}: " + "why? " * 60}))
        lines.append(json.dumps({"round": index, "role": "assistant", "content": f"Answer {index}. " + "because. " * 40}))
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cap = 1 << 20
    folder = tmp_path / "c"
    stored = 0
    for n in range(6):  # each build stores new results (another history cut)
        overrides = {"cache.maxBytes": cap, "state.maxHistoryRounds": 2 + n, "state.summaryBlock": 1}
        driver.execute(["build_result"], project, overrides, "request", cache_dir=folder)
        stored += sum(os.path.getsize(cache.store_dir(folder) / cache.RESULTS / name)
                      for name in os.listdir(cache.store_dir(folder) / cache.RESULTS))
        assert cache.stats(folder)["bytes"] <= cap
    assert stored > 2 * cap  # without pruning the folder would be over its cap
    driver.execute(["build_result"], project, overrides, "request", cache_dir=folder)
    assert "history_section" in driver.last_cache_run().hits  # the newest results were kept


def test_prune_keeps_recent_results_and_their_metadata(tmp_path):
    root = cache.store_dir(tmp_path)
    (root / cache.RESULTS).mkdir(parents=True)
    for index in range(10):
        path = root / cache.RESULTS / f"r{index}"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1000 + index, 1000 + index))
    removed = cache.prune(tmp_path, 5000)
    left = sorted(p.name for p in (root / cache.RESULTS).iterdir())
    assert removed >= 5000 and left == [f"r{i}" for i in range(10 - len(left), 10)] and len(left) == 4


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
    with sqlite3.connect(cache.store_dir(folder) / "metadata_store.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    _, what = build(demo, folder, request="request 1")
    assert set(what.values()) == {"hit"}


def test_cli_flags_stats_and_clear(demo, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "root"))
    try:
        assert main(["build", str(demo), "--request", "x"]) == 0  # uncached by default
        assert main(["build", str(demo), "--request", "x", "--cache", "--no-cache"]) == 0
        assert not (tmp_path / "root" / "graph").exists()
        assert main(["build", str(demo), "--request", "x", "--cache"]) == 0
        assert main(["build", str(demo), "--request", "x", "--cache"]) == 0
        folder = cache.project_cache_dir(demo)
        assert folder.parent == tmp_path / "root" / "graph" and folder.is_dir()
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        capsys.readouterr()
        assert main(["cache", "stats", str(demo), "--format", "json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert row["project"] == os.path.realpath(demo) and row["bytes"] > 0 and row["entries"] > 0
        assert row["last_run"]["hits"] > 0 and row["last_run"]["misses"] == 0
        assert main(["cache", "stats"]) == 0
        assert os.path.realpath(demo) in capsys.readouterr().out
        assert main(["build", str(demo), "--request", "x", "--cache-dir", str(tmp_path / "mine")]) == 0
        assert cache.store_dir(tmp_path / "mine").is_dir()
        assert main(["cache", "clear"]) == 2
        assert main(["cache", "clear", str(demo)]) == 0 and not folder.exists()
        assert main(["cache", "clear", "--cache-dir", str(tmp_path / "mine")]) == 0 and not (tmp_path / "mine").exists()
        assert main(["build", str(demo), "--request", "x", "--cache"]) == 0
        assert main(["cache", "clear", "--all"]) == 0 and cache.all_cache_dirs() == []
    finally:
        driver.set_cache_defaults()


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
    assert not loaders & driver.CACHED_NODES
    assert driver.CACHED_NODES <= set(nodes)


FINGERPRINT = """
import sys
from ctxengine.cache import fingerprint
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
    assert cache.fingerprint((1, "a")) != cache.fingerprint((1, "b")) != cache.fingerprint([1, "b"])
    assert cache.fingerprint({"a": 1}) != cache.fingerprint({"a": True})

    def closure(n):
        return lambda: n

    assert cache.fingerprint(closure(1)) != cache.fingerprint(closure(2))
    assert cache.fingerprint(closure(1)) == cache.fingerprint(closure(1))
