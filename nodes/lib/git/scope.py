"""Which repository git may read for a project (:func:`repository_scope`): reads a few small
files, runs nothing.

The repository is the project's own ``.git`` (a folder, a symlink or a ``gitdir:`` file). A
repository enclosing the project folder, a ``gitdir:`` / ``commondir`` / alternates / symlinked
git file leading outside the project is not read unless the path is inside one of the user's
``trust.allowedPaths``; the refusal is a warning naming that setting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

_ALLOW_SETTING = "trust.allowedPaths"


@dataclass(frozen=True)
class RepoScope:
    """Which repository git may read for a project: its git dir and work tree, or why none."""

    project_dir: str  # resolved
    git_dir: str | None = None  # None: git runs with GIT_DIR=NOWHERE
    work_tree: str | None = None
    refusal: str | None = None  # the warning when a repository exists but lies outside
    enclosing: bool = False  # the refusal is of a repository the project folder merely sits in


def _within(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _allowed_roots(project: str, allowed_paths: Sequence[str]) -> list[str]:
    roots = [project]
    for entry in allowed_paths:
        if isinstance(entry, str) and entry.strip():
            roots.append(os.path.realpath(os.path.join(project, os.path.expanduser(entry.strip()))))
    return roots


def _read_small(path: str, limit: int = 65536) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _git_dir_of(dot_git: str) -> str | None:
    """The git dir a ``.git`` entry stands for (following a symlink or a ``gitdir:`` file)."""
    if os.path.isdir(dot_git):
        return os.path.realpath(dot_git)
    lines = (_read_small(dot_git, 4096) or "").splitlines()
    if not lines or not lines[0].startswith("gitdir:") or not lines[0][7:].strip():
        return None
    target = lines[0][7:].strip()
    return os.path.realpath(os.path.join(os.path.dirname(dot_git), target))


def _outside_paths(git_dir: str) -> list[str]:
    """Paths git would read for ``git_dir``: itself, its common dir, its object alternates and the
    targets of symlinked entries (a git dir inside the project can still point elsewhere)."""
    paths = [git_dir]
    common = git_dir
    text = _read_small(os.path.join(git_dir, "commondir"), 4096)
    if text and text.strip():
        common = os.path.realpath(os.path.join(git_dir, text.strip().splitlines()[0]))
        paths.append(common)
    for base in dict.fromkeys((git_dir, common)):
        for name in ("config", "config.worktree", "objects", "refs", "HEAD", "index", "packed-refs", "info"):
            entry = os.path.join(base, name)
            if os.path.islink(entry):
                paths.append(os.path.realpath(entry))
    objects = os.path.join(common, "objects")
    for line in (_read_small(os.path.join(objects, "info", "alternates")) or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            paths.append(os.path.realpath(os.path.join(objects, line.strip('"'))))
    return paths


def repository_scope(project_dir: str, allowed_paths: Sequence[str] = ()) -> RepoScope:
    """The repository git may read for ``project_dir``: the project's own ``.git`` when everything
    it leads to lies inside the project or one of ``allowed_paths`` (the user's
    ``trust.allowedPaths``); an enclosing repository only when its root is allowed. Reads a few
    small files, runs nothing."""
    project = os.path.realpath(project_dir)
    roots = _allowed_roots(project, allowed_paths)
    folder = project
    while True:
        dot_git = os.path.join(folder, ".git")
        if os.path.lexists(dot_git):
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            return RepoScope(project)
        folder = parent
    if folder != project and not _within(folder, roots[1:]):
        return RepoScope(project, enclosing=True, refusal=(
            f"git: {project_dir} is inside the repository at {folder}, which is outside the project; "
            f"it is not read (add {folder} to {_ALLOW_SETTING} to allow it)"))
    git_dir = _git_dir_of(dot_git)
    if git_dir is None:
        return RepoScope(project, refusal=(
            f"git: {dot_git} is neither a folder nor a 'gitdir:' file; the repository is not read"))
    for path in _outside_paths(git_dir):
        if not _within(path, roots):
            return RepoScope(project, refusal=(
                f"git: the repository of {project_dir} ({dot_git}) leads to {path}, outside the project; "
                f"it is not read (add {path} to {_ALLOW_SETTING} to allow it)"))
    return RepoScope(project, git_dir, folder)
