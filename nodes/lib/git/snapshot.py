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
from dataclasses import dataclass, replace
from typing import Sequence

from ..programs import executable_path
from .run import NO_GIT, GitResult, failure_reason, filter_listing, overrides_from, run_git
from .scope import RepoScope, repository_scope
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


_STATUS_ARGS = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=normal", "--", ".")
_NUMSTAT_ARGS = ("diff", "HEAD", "--numstat", "-z", "-M", "--", ".")
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree, when hash-object says nothing


@dataclass(frozen=True)
class _Look:
    """What every git command of one snapshot shares: where it runs, its limits, the git program,
    the repository scope and the filter-driver overrides."""

    project_dir: str
    root: str
    timeout: float
    max_bytes: int
    program: str
    scope: RepoScope
    overrides: tuple[tuple[str, str], ...] = ()

    def git(self, args: Sequence[str], cap: int | None = None) -> GitResult:
        """The result of one git command in the project (output capped at ``cap``, default max_bytes)."""
        return run_git(list(args), self.project_dir, self.timeout, self.max_bytes if cap is None else cap,
                       overrides=self.overrides, scope=self.scope, git=self.program)

    def failed(self, what: str, result: GitResult) -> str:
        """The warning for a git command that failed: what ran, where, and why."""
        return f"git: {what} failed in {self.project_dir} ({failure_reason(result, self.timeout)})"

    def skipped(self, warning: str) -> GitSnapshot:
        """The snapshot of a repository whose git section is skipped, with the reason as its warning."""
        return GitSnapshot(self.project_dir, root=self.root, warnings=(warning + "; git section skipped",))


def _unreadable_snapshot(project_dir: str, program: str | None) -> GitSnapshot | None:
    """The snapshot of a project git cannot look at (no git program, not a folder), else None."""
    if program is None:
        return GitSnapshot(project_dir, warnings=(NO_GIT + "; git section skipped",))
    if not os.path.isdir(project_dir):
        return GitSnapshot(project_dir, warnings=(f"git: {project_dir} is not a folder; git section skipped",))
    return None


def _out_of_scope_snapshot(project_dir: str, scope: RepoScope, enclosing_is_note: bool) -> GitSnapshot | None:
    """The snapshot of a project with no repository to read (refused, or none at all), else None.
    A refused enclosing repository is a note when ``enclosing_is_note``, other refusals warnings;
    no repository is a note."""
    if scope.refusal:
        said = (scope.refusal + "; git section skipped",)
        return GitSnapshot(project_dir, **{"notes" if scope.enclosing and enclosing_is_note else "warnings": said})
    if scope.git_dir is None:
        not_repo = f"git: {project_dir} is not inside a git repository; git section skipped"
        return GitSnapshot(project_dir, notes=(not_repo,))
    return None


def _log_args(log_count: int) -> list[str]:
    """The ``git log`` arguments for the last ``log_count`` commits (at least one)."""
    return ["log", "-n", str(max(1, int(log_count))), "--no-decorate", "--date=short", "--format=%h %ad %s"]


def _first_results(look: _Look, log_count: int) -> tuple[GitResult, GitResult, GitResult]:
    """status, numstat (against HEAD) and log, run side by side: they do not depend on each other."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(look.git, _STATUS_ARGS),
            pool.submit(look.git, _NUMSTAT_ARGS),
            pool.submit(look.git, _log_args(log_count), 65536),
        ]
        return tuple(f.result() for f in futures)  # type: ignore[return-value]


def _status_warnings(look: _Look, status: GitResult) -> list[str]:
    """A warning when git status's output was cut at the cap, else none."""
    if status.truncated:
        return [f"git: git status output over {look.max_bytes} bytes in {look.root}; the file list is cut"]
    return []


def _base_numstat_and_said(look: _Look, branch: dict, numstat: GitResult) -> tuple[str, GitResult, list[str], list[str]]:
    """The base the changes are read against, the numstat against it, and the (warnings, notes) of
    the branch: a repository without commits diffs against the empty tree (numstat run again),
    a detached HEAD is a note."""
    if branch.get("oid") == "(initial)":
        empty = look.git(["hash-object", "-t", "tree", "--stdin"], 4096)
        base = empty.stdout.strip() or _EMPTY_TREE
        again = look.git([_NUMSTAT_ARGS[0], base, *_NUMSTAT_ARGS[2:]])
        unborn = f"git: the repository at {look.root} has no commits yet; changes are shown against an empty tree"
        return base, again, [unborn], []
    if branch.get("head") == "(detached)":
        oid = (branch.get("oid") or "")[:7]
        detached = f"git: HEAD is detached at {oid} in {look.root}; changes are shown against that commit"
        return "HEAD", numstat, [], [detached]
    return "HEAD", numstat, [], []


def _numstat_warnings(look: _Look, numstat: GitResult, base: str) -> list[str]:
    """A warning when the numstat failed or was cut at the cap, else none."""
    if numstat.returncode != 0:
        return [look.failed(f"git diff {base} --numstat", numstat)]
    if numstat.truncated:
        return [f"git: git diff --numstat output over {look.max_bytes} bytes in {look.root}; the file list is cut"]
    return []


def _wants_patch(numstat: GitResult, max_lines: int) -> bool:
    """Whether the patch is worth reading: a complete numstat with changes of at most ``max_lines`` lines."""
    if numstat.returncode != 0 or numstat.truncated:
        return False
    counted = parse_numstat(numstat.stdout)
    return bool(counted) and sum((a or 0) + (r or 0) for _, a, r, _ in counted) <= max_lines


def _patch_and_warnings(look: _Look, base: str, max_lines: int) -> tuple[str | None, list[str]]:
    """The patch against ``base`` when it ran whole and has at most ``max_lines`` lines (with context
    and headers), else None; and a warning when it was cut at the cap or failed."""
    diff = look.git(["diff", base, "-M", "--no-color", "--", "."])
    if diff.returncode == 0 and not diff.truncated:
        return (diff.stdout if diff.stdout.count("\n") <= max_lines else None), []
    if diff.truncated:
        return None, [f"git: the diff is over {look.max_bytes} bytes in {look.root}; showing the summary instead"]
    return None, [look.failed(f"git diff {base}", diff)]


def _recent_log(log_result: GitResult, base: str, log_count: int) -> str:
    """The last commits, when there are commits (base HEAD), any were asked for and git log ran."""
    return log_result.stdout if base == "HEAD" and log_count > 0 and log_result.returncode == 0 else ""


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
    unreadable = _unreadable_snapshot(project_dir, program)
    if unreadable is not None:
        return unreadable
    scope = repository_scope(project_dir, allowed_paths)
    out_of_scope = _out_of_scope_snapshot(project_dir, scope, enclosing_is_note)
    if out_of_scope is not None:
        return out_of_scope
    look = _Look(project_dir, scope.work_tree or project_dir, timeout, max_bytes, program, scope)
    listing = filter_listing(scope, program, timeout)  # once for the whole snapshot
    overrides = overrides_from(listing)
    if overrides is None:
        return look.skipped(look.failed("listing the filter drivers (git config --get-regexp)", listing))
    look = replace(look, overrides=overrides)
    status, numstat, log_result = _first_results(look, log_count)
    if status.returncode != 0:
        return look.skipped(look.failed("git status", status))
    base, numstat, warnings, notes = _base_numstat_and_said(look, parse_status(status.stdout)[0], numstat)
    warnings = _status_warnings(look, status) + warnings + _numstat_warnings(look, numstat, base)
    wanted = _wants_patch(numstat, max_lines)
    patch, patch_warnings = _patch_and_warnings(look, base, max_lines) if wanted else (None, [])
    return GitSnapshot(project_dir, True, look.root, status.stdout, numstat.stdout, patch,
                       _recent_log(log_result, base, log_count), base, max_lines,
                       tuple(warnings + patch_warnings), tuple(notes), scope.git_dir, overrides)
