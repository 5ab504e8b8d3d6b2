"""File tree: git ls-files in a repository (.gitignore holds), a bounded walk elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import write_project
from ctxengine.nodes.lib import filetree as F


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_listing_honours_gitignore(tmp_path: Path):
    repo = write_project(tmp_path / "r", {
        ".gitignore": "secret.env\nbuild/\n",
        "src/app.py": "x", "src/lib/util.py": "y", "README.md": "z",
        "secret.env": "k", "build/out.js": "o", "new_untracked.txt": "u",
    })
    _git(repo, "init", "-q")
    _git(repo, "add", "src", "README.md", ".gitignore")
    listing = F.list_files(str(repo))
    assert listing.method == "git" and listing.complete
    assert listing.paths == (".gitignore", "README.md", "new_untracked.txt", "src/app.py", "src/lib/util.py")


def test_walk_skips_caches_virtualenvs_and_build_output(tmp_path: Path):
    root = write_project(tmp_path / "w", {
        "app.py": "", "pkg/mod.py": "", "pkg/__pycache__/mod.cpython-311.pyc": "",
        "node_modules/left-pad/index.js": "", ".git/HEAD": "", "dist/bundle.js": "",
        "myenv/pyvenv.cfg": "", "myenv/lib/site.py": "", ".venv/x.py": "", ".pytest_cache/v": "",
        "pkg.egg-info/PKG-INFO": "", "docs/index.md": "",
    })
    listing = F.list_files(str(root))
    assert listing.method == "walk"
    assert listing.paths == ("app.py", "docs/index.md", "pkg/mod.py")


def test_outside_a_repository_the_walk_starts_no_git(tmp_path: Path, monkeypatch):
    root = write_project(tmp_path / "plain", {"app.py": "", "docs/index.md": ""})
    monkeypatch.setattr(F._git, "run_git", lambda *a, **k: pytest.fail("git started outside a repository"))
    listing = F.list_files(str(root))  # a transcript's folder, at every build: no process to learn there is no repo
    assert listing.method == "walk" and listing.paths == ("app.py", "docs/index.md") and not listing.warnings


def test_symlink_loops_cannot_hang_the_walk(tmp_path: Path):
    root = write_project(tmp_path / "loop", {"a/file.txt": "x"})
    os.symlink("..", root / "a" / "up")  # a/up -> the root: a loop if followed
    os.symlink(root / "a", root / "a" / "self")
    paths, complete = F.walk_files(str(root))
    assert complete and paths == ["a/file.txt", "a/self", "a/up"]


def test_cap_shows_shallow_entries_first_and_counts_the_rest(tmp_path: Path):
    files = {f"deep/nested/f{i:02}.py": "" for i in range(30)}
    files.update({"README.md": "", "setup.py": "", "src/main.py": ""})
    root = write_project(tmp_path / "cap", files)
    listing = F.list_files(str(root))
    text = F.render_tree(listing, 5)
    assert text.splitlines() == [
        "README.md", "deep/", "  nested/", "    f00.py", "    f01.py", "setup.py", "src/", "  main.py", "... and 28 more"]
    assert F.render_tree(listing, 100).count(".py") == 32


def test_walk_limit_makes_the_count_a_lower_bound(tmp_path: Path):
    root = write_project(tmp_path / "many", {f"f{i}.txt": "" for i in range(12)})
    paths, complete = F.walk_files(str(root), limit=10)
    assert len(paths) == 10 and not complete
    text = F.render_tree(F.FileListing(str(root), "walk", tuple(paths), False), 4)
    assert text.endswith("... and 6+ more")
