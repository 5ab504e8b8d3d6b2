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
    staged = tuple(e for e in entries if e.kind in ("changed", "renamed", "unmerged") and e.x not in ".?!")
    unstaged = tuple(e for e in entries if e.kind in ("changed", "renamed", "unmerged") and e.y not in ".?!")
    untracked = tuple(e.path for e in entries if e.kind == "untracked")
    by_path = {e.path: e for e in entries}
    files = []
    renames: dict[str, str] = {}
    total = 0
    for path, added, removed, old in parse_numstat(snapshot.numstat):
        entry = by_path.get(path)
        if old:
            renames[path] = old
            status = "renamed"
        elif entry is not None:
            letter = entry.x if entry.x not in ".?!" else entry.y
            status = status_word(entry, letter)
        else:
            status = "modified"
        total += (added or 0) + (removed or 0)
        files.append((path, added, removed, status))
    for entry in entries:  # renames git status saw but the diff did not pair (e.g. a staged rename, then edits)
        if entry.kind == "renamed" and entry.orig and entry.path not in renames:
            renames[entry.path] = entry.orig
    for path in untracked:
        files.append((path, None, None, "untracked"))
    summary = snapshot.patch is None and any(f[3] != "untracked" for f in files)
    patch = snapshot.patch if not summary else None
    ahead_behind = None
    if "ab" in branch:
        match = re.match(r"\+(\d+) -(\d+)", branch["ab"])
        if match:
            ahead_behind = (int(match.group(1)), int(match.group(2)))
    head = branch.get("head")
    oid = branch.get("oid")
    return GitState(
        available=True,
        root=snapshot.root,
        branch=None if head == "(detached)" else head,
        head=None if oid == "(initial)" else oid,
        detached=head == "(detached)",
        initial=oid == "(initial)",
        upstream=branch.get("upstream"),
        ahead_behind=ahead_behind,
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
