"""The one atomic writer (ctxengine.nodes.lib.atomic) and the one cache root resolver
(usercache.cache_root): every whole-file write of ctxengine goes through the first, every
cache folder is found by the second. FIFOs and links are made under tmp_path only."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from ctxengine import caching
from ctxengine.nodes.lib import atomic, usercache

REPO = Path(__file__).resolve().parents[1]


def _leftovers(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def test_a_regular_file_is_replaced_whole_and_keeps_its_mode(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    atomic.write_atomically(target, "new é")
    assert target.read_text(encoding="utf-8") == "new é" and stat.S_IMODE(target.stat().st_mode) == 0o640
    atomic.write_atomically(tmp_path / "made.bin", b"\x00\x01", mode=0o600)  # a new file: the mode asked
    assert stat.S_IMODE((tmp_path / "made.bin").stat().st_mode) == 0o600
    assert _leftovers(tmp_path) == []


def test_a_failure_in_the_block_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic.replacing(target, binary=False) as fh:
            fh.write("half")
            raise RuntimeError("stopped")
    assert target.read_text() == "old" and _leftovers(tmp_path) == []


def test_only_a_regular_file_is_replaced_never_a_fifo_a_link_or_a_folder(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    real = tmp_path / "real.txt"
    real.write_text("kept")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    (tmp_path / "folder").mkdir()
    for path in (fifo, link, tmp_path / "folder"):
        with pytest.raises(OSError, match="not a regular file"):
            atomic.write_atomically(path, b"x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink() and real.read_text() == "kept"
    assert _leftovers(tmp_path) == []


def test_the_user_caches_files_are_written_whole_and_private(tmp_path):
    usercache.write_private(tmp_path / "marker.txt", "{}")
    assert stat.S_IMODE((tmp_path / "marker.txt").stat().st_mode) == 0o600 and _leftovers(tmp_path) == []


def test_there_is_one_atomic_writer_and_one_cache_root_resolver():
    """os.replace is called in nodes/lib/atomic.py only; the cache's root is usercache's."""
    callers = sorted(str(path.relative_to(REPO)) for folder in ("pipeline", "nodes", "viz")
                     for path in (REPO / folder).rglob("*.py") if re.search(r"\bos\.(replace|rename)\(", path.read_text()))
    assert callers == ["nodes/lib/atomic.py"]
    assert caching.cache_root is usercache.cache_root
    assert not hasattr(usercache, "user_cache_root") and not hasattr(usercache, "cache_root_in")


def test_a_folder_given_is_used_inside_and_must_be_absolute(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXENGINE_CACHE_DIR", raising=False)
    assert usercache.cache_root(tmp_path / "given") == tmp_path / "given" / "ctxengine-cache"
    with pytest.raises(usercache.CacheFolderError, match=r"--cache-dir: 'rel' is a relative path"):
        usercache.cache_root("rel")
