"""One look at a repository: :func:`take_snapshot` runs ``git status --porcelain=v2 -z
--branch``, ``git diff <base> --numstat -z`` and, only when the changed lines stay under the
threshold, the patch itself, plus the last few commits (``git log -n``; nothing walks the whole
history), all through :func:`~.run.run_git`. Every command has a timeout and an output cap. Not a
repository, git missing, an empty repository or a detached HEAD are warnings, never errors; a
git command that fails is a warning naming its exit code (or timeout, or signal) and the first
line of its stderr (:func:`~.run.failure_reason`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

from ..programs import executable_path
from .run import NO_GIT, GitResult, failure_reason, filter_listing, overrides_from, run_git
from .scope import repository_scope
from .status import parse_numstat, parse_status


@dataclass(frozen=True)
class GitSnapshot:
    """The raw outputs of one look at a repository (what the loader node returns)."""

    project_dir: str
    available: bool = False  # a repository was read
    root: str | None = None
    status: str = ""  # git status --porcelain=v2 -z --branch --untracked-files=normal
    numstat: str = ""  # git diff <base> --numstat -z -M
    patch: str | None = None  # git diff <base> -M, only when under the threshold
    log: str = ""  # git log -n N --format=%h %ad %s
    base: str = "HEAD"  # HEAD, or the empty tree in a repository without commits
    max_lines: int = 200
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # information, not a problem: no repository, a detached HEAD
    git_dir: str | None = None  # the repository read (RepoScope.git_dir)
    #: the config that switched off the repository's filter drivers (run.overrides_from): another
    #: git command of the same build in the same repository reuses it (no second ``git config``)
    filter_overrides: tuple[tuple[str, str], ...] = ()


def take_snapshot(
    project_dir: str,
    max_lines: int = 200,
    timeout: float = 10.0,
    max_bytes: int = 2_000_000,
    log_count: int = 3,
    allowed_paths: Sequence[str] = (),
    enclosing_is_note: bool = False,
) -> GitSnapshot:
    """Read status, numstat, the patch (when small) and the last commits of ``project_dir``'s
    repository (see :func:`repository_scope` for which one, ``allowed_paths`` for what may lie outside).
    No repository and a detached HEAD are notes (information), not warnings; so is an enclosing
    repository left unread when ``enclosing_is_note`` (a bundled example inside ctxengine's clone)."""
    program = executable_path("git", project_dir)  # once for the whole snapshot
    if program is None:
        return GitSnapshot(project_dir, warnings=(NO_GIT + "; git section skipped",))
    if not os.path.isdir(project_dir):
        return GitSnapshot(project_dir, warnings=(f"git: {project_dir} is not a folder; git section skipped",))
    scope = repository_scope(project_dir, allowed_paths)
    if scope.refusal:
        said = (scope.refusal + "; git section skipped",)
        return GitSnapshot(project_dir, **{"notes" if scope.enclosing and enclosing_is_note else "warnings": said})
    if scope.git_dir is None:
        not_repo = f"git: {project_dir} is not inside a git repository; git section skipped"
        return GitSnapshot(project_dir, notes=(not_repo,))
    root = scope.work_tree or project_dir
    warnings: list[str] = []
    notes: list[str] = []

    def failed(what: str, result: GitResult) -> str:
        return f"git: {what} failed in {project_dir} ({failure_reason(result, timeout)})"

    listing = filter_listing(scope, program, timeout)  # once for the whole snapshot
    overrides = overrides_from(listing)
    if overrides is None:
        return GitSnapshot(project_dir, root=root, warnings=(
            failed("listing the filter drivers (git config --get-regexp)", listing) + "; git section skipped",))

    def git(args: list[str], cap: int = max_bytes) -> GitResult:
        return run_git(args, project_dir, timeout, cap, overrides=overrides, scope=scope, git=program)

    # status, numstat and log do not depend on each other: run them side by side.
    status_args = ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=normal", "--", "."]
    numstat_args = ["diff", "HEAD", "--numstat", "-z", "-M", "--", "."]
    log_args = ["log", "-n", str(max(1, int(log_count))), "--no-decorate", "--date=short", "--format=%h %ad %s"]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(git, status_args),
            pool.submit(git, numstat_args),
            pool.submit(git, log_args, 65536),
        ]
        status, numstat, log_result = (f.result() for f in futures)
    if status.returncode != 0:
        return GitSnapshot(project_dir, root=root, warnings=(failed("git status", status) + "; git section skipped",))
    if status.truncated:
        warnings.append(f"git: git status output over {max_bytes} bytes in {root}; the file list is cut")
    branch = parse_status(status.stdout)[0]
    base = "HEAD"
    if branch.get("oid") == "(initial)":
        empty = git(["hash-object", "-t", "tree", "--stdin"], 4096)
        base = empty.stdout.strip() or "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        warnings.append(f"git: the repository at {root} has no commits yet; changes are shown against an empty tree")
        numstat = git(numstat_args[:1] + [base] + numstat_args[2:])
    elif branch.get("head") == "(detached)":
        oid = (branch.get("oid") or "")[:7]
        notes.append(f"git: HEAD is detached at {oid} in {root}; changes are shown against that commit")

    if numstat.returncode != 0:
        warnings.append(failed(f"git diff {base} --numstat", numstat))
    elif numstat.truncated:
        warnings.append(f"git: git diff --numstat output over {max_bytes} bytes in {root}; the file list is cut")
    counted = parse_numstat(numstat.stdout)
    changed = sum((a or 0) + (r or 0) for _, a, r, _ in counted)
    patch = None
    if numstat.returncode == 0 and not numstat.truncated and counted and changed <= max_lines:
        diff = git(["diff", base, "-M", "--no-color", "--", "."])
        if diff.returncode == 0 and not diff.truncated:
            # the patch itself (with context and headers) must fit the threshold too
            patch = diff.stdout if diff.stdout.count("\n") <= max_lines else None
        elif diff.truncated:
            warnings.append(f"git: the diff is over {max_bytes} bytes in {root}; showing the summary instead")
        else:
            warnings.append(failed(f"git diff {base}", diff))

    log = log_result.stdout if base == "HEAD" and log_count > 0 and log_result.returncode == 0 else ""
    return GitSnapshot(project_dir, True, root, status.stdout, numstat.stdout, patch, log, base, max_lines,
                       tuple(warnings), tuple(notes), scope.git_dir, overrides)
