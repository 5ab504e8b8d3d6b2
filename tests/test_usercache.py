"""The user cache (nodes/lib/usercache.py): its root, its folders and its key."""

from __future__ import annotations

import shutil

from ctxengine.nodes.lib import usercache


# ----------------------------------------------------------------------------- the root and the key


def test_a_relative_cache_root_from_the_environment_is_refused_or_ignored(tmp_path, monkeypatch):
    import pytest

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", ".ctxcache")
    with pytest.raises(usercache.CacheFolderError, match=r"CTXENGINE_CACHE_DIR.*relative path"):
        usercache.cache_root()
    monkeypatch.delenv("CTXENGINE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel-cache")  # the XDG spec: a relative path is ignored
    assert usercache.cache_root() == tmp_path / "home" / ".cache" / "ctxengine"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert usercache.cache_root() == tmp_path / "xdg" / "ctxengine"
    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "mine"))
    assert usercache.cache_root() == tmp_path / "mine" / "ctxengine-cache"  # a folder of its own inside


def test_the_key_is_private_made_once_and_a_foreign_one_is_refused(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setenv("CTXENGINE_CACHE_DIR", str(tmp_path / "c"))
    key = usercache.cache_key()
    path = tmp_path / "c" / "ctxengine-cache" / usercache.KEY_FILE
    assert len(key) == 32 and usercache.cache_key() == key and oct(path.stat().st_mode & 0o777) == "0o600"
    assert usercache.mac_ok(key, usercache.mac(key, b"a", b"bc"), b"a", b"bc")
    assert not usercache.mac_ok(key, usercache.mac(key, b"a", b"bc"), b"ab", b"c")  # lengths are part of it
    path.chmod(0o640)  # readable by the group: anyone in it could sign a pickle
    with pytest.raises(usercache.CacheFolderError, match="not a private file"):
        usercache.cache_key()
    path.unlink()
    other = tmp_path / "planted.key"
    other.write_bytes(b"k" * 32)
    other.chmod(0o600)
    path.symlink_to(other)  # never followed
    with pytest.raises(usercache.CacheFolderError, match="symbolic link"):
        usercache.cache_key()
    path.unlink()
    assert usercache.cache_key() != key  # a new key: whatever the old one signed is rebuilt


def test_only_marked_folders_of_known_names_are_entered_or_removed(tmp_path):
    import re

    import pytest

    name = re.compile(r"[0-9a-f]{4}")
    mine = usercache.owned_folder(tmp_path / "abcd", "test")
    assert usercache.marked(mine) and oct(mine.stat().st_mode & 0o777) == "0o700"
    theirs = tmp_path / "beef"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("the user's")
    with pytest.raises(usercache.CacheFolderError, match="not made by ctxengine"):
        usercache.owned_folder(theirs, "test")
    link = tmp_path / "cafe"
    link.symlink_to(mine)
    with pytest.raises(usercache.CacheFolderError, match="symbolic link"):
        usercache.owned_folder(link, "test")
    assert not usercache.remove_owned(theirs, name) and (theirs / "keep.txt").is_file()  # no marker
    assert not usercache.remove_owned(link, name) and mine.is_dir()  # a link is never followed
    renamed = tmp_path / "marked-but-not-a-known-name"
    shutil.copytree(mine, renamed)
    assert not usercache.remove_owned(renamed, name) and renamed.is_dir()
    assert usercache.remove_owned(mine, name) and not mine.exists()
