"""The git section's text (:func:`render_git`): pure."""

from __future__ import annotations

import re

from .state import GitState
from .status import StatusEntry, status_word

_MAX_LISTED = 200


def _entry_line(entry: StatusEntry, letter: str) -> str:
    word = status_word(entry, letter)
    if entry.orig and letter in "RC":
        return f"  {word:<10} {entry.orig} -> {entry.path}"
    return f"  {word:<10} {entry.path}"


def _fence_for(text: str) -> str:
    longest = max((len(m.group(0)) for m in re.finditer(r"`{3,}", text)), default=2)
    return "`" * max(3, longest + 1)


def _listed(lines: list[str], total: int, what: str) -> list[str]:
    if total > _MAX_LISTED:
        return lines[:_MAX_LISTED] + [f"  ... and {total - _MAX_LISTED} more {what}"]
    return lines


def _summary_mode_why(state: GitState) -> str:
    """Why the diff is summarised: its changed lines over state.gitDiffMaxLines, or (within it)
    the patch itself, with its context lines and headers, over it (or not read whole)."""
    if state.total_lines > state.max_lines:
        return f"{state.total_lines} changed lines exceed state.gitDiffMaxLines ({state.max_lines})"
    return (f"{state.total_lines} changed lines, but the patch with its context lines and headers is over "
            f"state.gitDiffMaxLines ({state.max_lines}) lines or could not be read whole")


def render_git(state: GitState) -> str:
    """The git section: branch and recent commits, staged / unstaged / untracked, then the diff
    (or, in summary mode, the changed files with +n/-m and no hunks)."""
    out = [_where_line(state)]
    if state.commits:
        out.append("Recent commits:")
        out.extend(f"  {c}" for c in state.commits)
    if not state.staged and not state.unstaged and not state.untracked:
        out.append("Working tree clean.")
        return "\n".join(out)
    out += _status_block("Staged", [_entry_line(e, e.x) for e in state.staged], "staged")
    out += _status_block("Unstaged", [_entry_line(e, e.y) for e in state.unstaged], "unstaged")
    out += _status_block("Untracked", [f"  {p}" for p in state.untracked], "untracked")
    out += _changes_block(state)
    return "\n".join(out)


def _where_line(state: GitState) -> str:
    """Where the work is: the branch and commit (unborn, detached), with its upstream and how far
    ahead and behind it is."""
    if state.initial:
        where = f"Branch: {state.branch or '(unborn)'} (no commits yet)"
    elif state.detached:
        where = f"HEAD detached at {(state.head or '')[:7]}"
    else:
        where = f"Branch: {state.branch}" + (f" at {(state.head or '')[:7]}" if state.head else "")
    if state.upstream:
        where += f"; upstream {state.upstream}"
        if state.ahead_behind:
            where += f" (ahead {state.ahead_behind[0]}, behind {state.ahead_behind[1]})"
    return where


def _status_block(title: str, lines: list[str], what: str) -> list[str]:
    """``Title (n):`` and its lines (at most _MAX_LISTED, then how many more); nothing when empty."""
    return [f"{title} ({len(lines)}):", *_listed(lines, len(lines), what)] if lines else []


def _changes_block(state: GitState) -> list[str]:
    """The changed files against the base (+n/-m, status, path) and then the patch in a fence, or
    why the diff is summarised; nothing when only untracked files changed."""
    changed = [f for f in state.files if f[3] != "untracked"]
    if not changed:
        return []
    base = "HEAD" if state.base == "HEAD" else "an empty tree"
    out = [f"Changes against {base}: {len(changed)} file{'s' if len(changed) != 1 else ''}, "
           f"{state.total_lines} changed lines"]
    rows = []
    for path, added, removed, status in changed:
        counts = "binary" if added is None else f"+{added}/-{removed}"
        name = f"{state.renames[path]} -> {path}" if path in state.renames else path
        rows.append(f"  {counts:<12} {status:<10} {name}")
    out.extend(_listed(rows, len(rows), "files"))
    if state.summary_mode:
        out.append(f"Diff summary mode: {_summary_mode_why(state)}; hunks are omitted.")
    elif state.patch:
        fence = _fence_for(state.patch)
        out += [f"Diff (git diff {'HEAD' if state.base == 'HEAD' else '<empty tree>'}):", f"{fence}diff",
                state.patch.rstrip("\n"), fence]
    return out
