"""The project's file tree: ``git ls-files`` inside a repository, else a bounded folder walk.

Inside a repository the listing is ``git ls-files --cached --others --exclude-standard``, so
.gitignore holds. Elsewhere :func:`walk_files` walks with sensible excludes (.git,
node_modules, virtualenvs, caches, build output), never follows symbolic links (a symlink
loop cannot hang it) and stops after a hard limit. :func:`render_tree` shows at most N
entries, the shallow ones first so the top of the tree stays visible, then "... and N more".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import git as _git
from .programs import executable_path

EXCLUDED_DIRS = frozenset(
    {
        ".git", ".hg", ".svn", "node_modules", "bower_components", ".venv", "venv", "virtualenv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis",
        ".tox", ".nox", ".cache", ".parcel-cache", ".next", ".nuxt", ".svelte-kit", ".turbo",
        "dist", "build", "target", "out", "_build", ".gradle", ".idea", "coverage", "htmlcov",
        ".terraform", ".eggs", ".ipynb_checkpoints", ".DS_Store", "Pods", "DerivedData",
    }
)
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".DS_Store", ".swp")
WALK_LIMIT = 50_000  # entries a walk looks at before it stops counting


@dataclass(frozen=True)
class FileListing:
    """Relative paths of the project's files, how they were found, and how many there are."""

    root: str
    method: str  # git | walk | off
    paths: tuple[str, ...] = ()  # every path found (a walk stops at WALK_LIMIT)
    complete: bool = True  # False when a walk stopped at its limit
    warnings: tuple[str, ...] = ()


def _excluded_dir(name: str) -> bool:
    return name in EXCLUDED_DIRS or name.endswith(".egg-info")


def walk_files(root: str, limit: int = WALK_LIMIT) -> tuple[list[str], bool]:
    """Relative file paths under ``root`` (sorted walk, no symlink following, excludes applied).

    Returns (paths, complete); ``complete`` is False when the walk stopped at ``limit``.
    A symbolic link (to a file or a folder) is listed as an entry and never entered.
    """
    paths: list[str] = []
    for folder, dirs, files in os.walk(root, topdown=True, followlinks=False):
        rel = os.path.relpath(folder, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        keep = []
        for name in sorted(dirs):
            if _excluded_dir(name):
                continue
            full = os.path.join(folder, name)
            if os.path.islink(full):
                paths.append(prefix + name)  # listed, not followed
                continue
            if os.path.isfile(os.path.join(full, "pyvenv.cfg")):
                continue  # a virtualenv under any name
            keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            if name.endswith(EXCLUDED_SUFFIXES):
                continue
            paths.append(prefix + name)
        if len(paths) >= limit:
            return sorted(paths[:limit]), False
    return sorted(paths), True


def list_files(project_dir: str, timeout: float = 10.0, max_bytes: int = 8_000_000,
               snapshot: _git.GitSnapshot | None = None) -> FileListing:
    """The project's files: ``git ls-files`` when it is in a repository git may read, else a
    walk (without a repository git is not started: it could only say so, at every build).
    ``snapshot``: the build's look at the repository; when it read this same repository, the
    filter drivers it switched off are reused (one ``git config`` a build, not two)."""
    if not os.path.isdir(project_dir):
        return FileListing(project_dir, "walk", (), True, (f"file tree: {project_dir} is not a folder",))
    warnings: list[str] = []
    scope = _git.repository_scope(project_dir)  # reads a few small files, runs nothing
    program = None if scope.git_dir is None else executable_path("git", project_dir)  # never the project's own
    if program is not None:
        same = snapshot is not None and snapshot.available and snapshot.git_dir == scope.git_dir
        result = _git.run_git(
            ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], project_dir, timeout, max_bytes,
            scope=scope, git=program, overrides=snapshot.filter_overrides if same else None,
        )
        if result.returncode == 0:
            paths = sorted({p for p in result.stdout.split("\0") if p})
            if result.truncated:
                warnings.append(f"file tree: git ls-files output over {max_bytes} bytes in {project_dir}; list cut")
                paths = paths[:-1]  # the last one may be cut in the middle
            return FileListing(project_dir, "git", tuple(paths), not result.truncated, tuple(warnings))
        if "not a git repository" not in result.stderr.lower():
            why = _git.failure_reason(result, timeout)
            warnings.append(f"file tree: git ls-files failed in {project_dir} ({why}); walking the folder instead")
    paths, complete = walk_files(project_dir)
    if not complete:
        warnings.append(f"file tree: {project_dir} has more than {WALK_LIMIT} entries; the count is a lower bound")
    return FileListing(project_dir, "walk", tuple(paths), complete, tuple(warnings))


def choose_entries(paths: tuple[str, ...] | list[str], max_entries: int) -> list[str]:
    """At most ``max_entries`` paths, shallow ones first (then by name), returned in path order."""
    if len(paths) <= max_entries:
        return sorted(paths)
    ranked = sorted(paths, key=lambda p: (p.count("/"), p))
    return sorted(ranked[: max(0, max_entries)])


def render_tree(listing: FileListing, max_entries: int) -> str:
    """An indented tree of at most ``max_entries`` files, with "... and N more" for the rest."""
    chosen = choose_entries(listing.paths, max_entries)
    out: list[str] = []
    open_dirs: list[str] = []
    for path in chosen:
        parts = path.split("/")
        dirs = parts[:-1]
        common = 0
        while common < len(open_dirs) and common < len(dirs) and open_dirs[common] == dirs[common]:
            common += 1
        open_dirs = open_dirs[:common]
        for depth in range(common, len(dirs)):
            out.append("  " * depth + dirs[depth] + "/")
            open_dirs.append(dirs[depth])
        out.append("  " * len(dirs) + parts[-1])
    rest = len(listing.paths) - len(chosen)
    if rest > 0:
        more = f"{rest}+" if not listing.complete else str(rest)
        out.append(f"... and {more} more")
    if not out:
        out.append("(no files)")
    return "\n".join(out)
