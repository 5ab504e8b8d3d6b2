"""The parsed state of a snapshot (:func:`git_state_from`): pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

from .snapshot import GitSnapshot
from .status import StatusEntry, hunk_ranges, parse_numstat, parse_status, status_word


@dataclass(frozen=True)
class GitState:
    """The parsed repository state the git section shows."""

    available: bool
    root: str | None = None
    branch: str | None = None
    head: str | None = None  # commit id
    detached: bool = False
    initial: bool = False  # no commit yet
    upstream: str | None = None
    ahead_behind: tuple[int, int] | None = None
    staged: tuple[StatusEntry, ...] = ()
    unstaged: tuple[StatusEntry, ...] = ()
    untracked: tuple[str, ...] = ()
    files: tuple[tuple[str, int | None, int | None, str], ...] = ()  # (path, added, removed, status)
    renames: Mapping[str, str] = field(default_factory=dict)  # new path -> old path
    total_lines: int = 0  # added + removed over all files
    summary_mode: bool = False
    patch: str | None = None
    hunks: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # path -> new-file line range
    commits: tuple[str, ...] = ()
    base: str = "HEAD"
    max_lines: int = 200
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # information, not a problem: no repository, a detached HEAD


def git_state_from(snapshot: GitSnapshot) -> GitState:
    """The parsed state of a snapshot: branch, staged / unstaged / untracked, per-file counts, patch."""
    if not snapshot.available:
        return GitState(False, snapshot.root, warnings=snapshot.warnings, notes=snapshot.notes)
    branch, entries = parse_status(snapshot.status)
    staged, unstaged, untracked = _status_lists(entries)
    files, renames = _changed_files(snapshot.numstat, entries)
    total = sum((added or 0) + (removed or 0) for _, added, removed, _ in files)
    files += [(path, None, None, "untracked") for path in untracked]
    summary = snapshot.patch is None and any(f[3] != "untracked" for f in files)
    patch = snapshot.patch if not summary else None
    return GitState(
        available=True,
        root=snapshot.root,
        **_branch_fields(branch),
        staged=staged,
        unstaged=unstaged,
        untracked=untracked,
        files=tuple(files),
        renames=renames,
        total_lines=total,
        summary_mode=summary,
        patch=patch,
        hunks=hunk_ranges(patch) if patch else {},
        commits=tuple(line for line in snapshot.log.splitlines() if line.strip()),
        base=snapshot.base,
        max_lines=snapshot.max_lines,
        warnings=snapshot.warnings,
        notes=snapshot.notes,
    )


def _status_lists(entries: list[StatusEntry]) -> tuple[tuple[StatusEntry, ...], tuple[StatusEntry, ...],
                                                        tuple[str, ...]]:
    """(staged, unstaged, untracked paths) of git status's entries: a tracked entry (changed,
    renamed, unmerged) is staged when its index column says so, unstaged when its work tree's does."""
    tracked = [e for e in entries if e.kind in ("changed", "renamed", "unmerged")]
    return (tuple(e for e in tracked if e.x not in ".?!"), tuple(e for e in tracked if e.y not in ".?!"),
            tuple(e.path for e in entries if e.kind == "untracked"))


def _changed_files(numstat: str, entries: list[StatusEntry]) -> tuple[list[tuple], dict[str, str]]:
    """([(path, added, removed, status)] of the diff's files, {new path: old path} of the renames):
    a file's status word from git status (renamed when the diff paired it; modified when git
    status does not list it), and the renames git status saw that the diff did not pair (e.g. a
    staged rename, then edits)."""
    by_path = {e.path: e for e in entries}
    files = []
    renames: dict[str, str] = {}
    for path, added, removed, old in parse_numstat(numstat):
        entry = by_path.get(path)
        if old:
            renames[path] = old
            status = "renamed"
        elif entry is not None:
            status = status_word(entry, entry.x if entry.x not in ".?!" else entry.y)
        else:
            status = "modified"
        files.append((path, added, removed, status))
    for entry in entries:
        if entry.kind == "renamed" and entry.orig and entry.path not in renames:
            renames[entry.path] = entry.orig
    return files, renames


def _branch_fields(branch: Mapping[str, str]) -> dict:
    """The GitState fields of git status's branch headers: the branch (None when detached), the
    commit (None before the first), upstream, and ahead/behind."""
    head = branch.get("head")
    oid = branch.get("oid")
    return {"branch": None if head == "(detached)" else head, "head": None if oid == "(initial)" else oid,
            "detached": head == "(detached)", "initial": oid == "(initial)", "upstream": branch.get("upstream"),
            "ahead_behind": _ahead_behind(branch.get("ab"))}


def _ahead_behind(ab: str | None) -> tuple[int, int] | None:
    """(ahead, behind) of git status's ``# branch.ab +A -B`` value; None without one."""
    match = re.match(r"\+(\d+) -(\d+)", ab) if ab is not None else None
    return (int(match.group(1)), int(match.group(2))) if match else None
