"""Git state through the real ``git`` program: one snapshot of status and diff, then pure parsing.

:func:`take_snapshot` is the only function here that runs anything: ``git status
--porcelain=v2 -z --branch``, ``git diff <base> --numstat -z`` and, only when the changed
lines stay under the threshold, the patch itself, plus the last few commits (``git log -n``;
nothing walks the whole history). Every command has a timeout and an output cap. Not a
repository, git missing, an empty repository or a detached HEAD are warnings, never errors.

Everything else is pure: :func:`parse_status`, :func:`parse_numstat`, :func:`git_state_from`
and :func:`render_git` turn the raw outputs into the git section.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Mapping, Sequence

_GIT_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",  # status must not take the index lock
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C",
    "LANG": "C",
}
_GIT_PREFIX = ("-c", "core.quotepath=off", "-c", "color.ui=never", "--no-pager")

_STATUS_WORDS = {
    "M": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "typechange",
    "U": "unmerged",
}
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
_DIFF_FILE = re.compile(r"^diff --git ", re.M)
_PLUS_FILE = re.compile(r"^\+\+\+ (?:b/)?(.*)$", re.M)


@dataclass(frozen=True)
class GitResult:
    """One git command: exit code, decoded output, stderr, and whether the output was cut."""

    returncode: int
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False


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


@dataclass(frozen=True)
class StatusEntry:
    """One path of ``git status``: index (X) and worktree (Y) letters, and the old path of a rename."""

    path: str
    x: str = "."
    y: str = "."
    orig: str | None = None
    kind: str = "changed"  # changed | renamed | unmerged | untracked | ignored


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


# ----------------------------------------------------------------------------- running git


def run_git(args: Sequence[str], cwd: str, timeout: float = 10.0, max_bytes: int = 2_000_000) -> GitResult:
    """Run ``git args`` in ``cwd`` with a timeout and an output cap (never raises for git's own errors).

    At most ``max_bytes`` of standard output are read; past that the process is killed and
    the result is marked truncated. A timer kills git after ``timeout`` seconds.
    """
    env = dict(os.environ)
    env.update(_GIT_ENV)
    try:
        proc = subprocess.Popen(
            ["git", *_GIT_PREFIX, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a timeout kills git and anything it started
        )
    except OSError as exc:
        return GitResult(127, "", str(exc))
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, kill)
    timer.daemon = True
    timer.start()
    try:
        data = proc.stdout.read(max_bytes + 1)
        truncated = len(data) > max_bytes
        if truncated:
            data = data[:max_bytes]
            _kill_group(proc)
        stderr = proc.stderr.read(65536)
        proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()
        proc.stderr.close()
    code = 0 if truncated else proc.returncode
    return GitResult(code, data.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), truncated,
                     timed_out.is_set())


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (OSError, AttributeError):
        try:
            proc.kill()
        except OSError:
            pass


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def take_snapshot(
    project_dir: str,
    max_lines: int = 200,
    timeout: float = 10.0,
    max_bytes: int = 2_000_000,
    log_count: int = 3,
) -> GitSnapshot:
    """Read status, numstat, the patch (when small) and the last commits of ``project_dir``'s repository."""
    if shutil.which("git") is None:
        return GitSnapshot(project_dir, warnings=("git: the git program is not on PATH; git section skipped",))
    if not os.path.isdir(project_dir):
        return GitSnapshot(project_dir, warnings=(f"git: {project_dir} is not a folder; git section skipped",))
    warnings: list[str] = []

    def failed(what: str, result: GitResult) -> str:
        why = "timed out" if result.timed_out else (_first_line(result.stderr) or f"exit code {result.returncode}")
        return f"git: {what} failed in {project_dir} ({why})"

    top = run_git(["rev-parse", "--show-toplevel"], project_dir, timeout, 65536)
    if top.returncode != 0:
        if "not a git repository" in top.stderr.lower():
            return GitSnapshot(
                project_dir, warnings=(f"git: {project_dir} is not inside a git repository; git section skipped",)
            )
        return GitSnapshot(project_dir, warnings=(failed("git rev-parse", top) + "; git section skipped",))
    root = top.stdout.strip() or project_dir

    # status, numstat and log do not depend on each other: run them side by side.
    status_args = ["status", "--porcelain=v2", "-z", "--branch", "--untracked-files=normal", "--", "."]
    numstat_args = ["diff", "HEAD", "--numstat", "-z", "-M", "--no-ext-diff", "--", "."]
    log_args = ["log", "-n", str(max(1, int(log_count))), "--no-decorate", "--date=short", "--format=%h %ad %s"]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [
            pool.submit(run_git, status_args, project_dir, timeout, max_bytes),
            pool.submit(run_git, numstat_args, project_dir, timeout, max_bytes),
            pool.submit(run_git, log_args, project_dir, timeout, 65536),
        ]
        status, numstat, log_result = (f.result() for f in futures)
    if status.returncode != 0:
        return GitSnapshot(project_dir, root=root, warnings=(failed("git status", status) + "; git section skipped",))
    if status.truncated:
        warnings.append(f"git: git status output over {max_bytes} bytes in {root}; the file list is cut")
    branch = parse_status(status.stdout)[0]
    base = "HEAD"
    if branch.get("oid") == "(initial)":
        empty = run_git(["hash-object", "-t", "tree", "--stdin"], project_dir, timeout, 4096)
        base = empty.stdout.strip() or "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        warnings.append(f"git: the repository at {root} has no commits yet; changes are shown against an empty tree")
        numstat = run_git(numstat_args[:1] + [base] + numstat_args[2:], project_dir, timeout, max_bytes)
    elif branch.get("head") == "(detached)":
        oid = (branch.get("oid") or "")[:7]
        warnings.append(f"git: HEAD is detached at {oid} in {root}; changes are shown against that commit")

    if numstat.returncode != 0:
        warnings.append(failed(f"git diff {base} --numstat", numstat))
    elif numstat.truncated:
        warnings.append(f"git: git diff --numstat output over {max_bytes} bytes in {root}; the file list is cut")
    counted = parse_numstat(numstat.stdout)
    changed = sum((a or 0) + (r or 0) for _, a, r, _ in counted)
    patch = None
    if numstat.returncode == 0 and not numstat.truncated and counted and changed <= max_lines:
        diff = run_git(
            ["diff", base, "-M", "--no-ext-diff", "--no-color", "--", "."], project_dir, timeout, max_bytes
        )
        if diff.returncode == 0 and not diff.truncated:
            # the patch itself (with context and headers) must fit the threshold too
            patch = diff.stdout if diff.stdout.count("\n") <= max_lines else None
        elif diff.truncated:
            warnings.append(f"git: the diff is over {max_bytes} bytes in {root}; showing the summary instead")
        else:
            warnings.append(failed(f"git diff {base}", diff))

    log = log_result.stdout if base == "HEAD" and log_count > 0 and log_result.returncode == 0 else ""
    return GitSnapshot(project_dir, True, root, status.stdout, numstat.stdout, patch, log, base, max_lines, tuple(warnings))


# ----------------------------------------------------------------------------- parsing


def parse_status(raw: str) -> tuple[dict[str, str], list[StatusEntry]]:
    """``git status --porcelain=v2 -z --branch`` -> (branch headers, entries)."""
    branch: dict[str, str] = {}
    entries: list[StatusEntry] = []
    fields = raw.split("\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        kind = record[0]
        if kind == "#":
            parts = record.split(" ", 2)
            if len(parts) == 3:
                branch[parts[1].removeprefix("branch.")] = parts[2]
        elif kind == "1":
            parts = record.split(" ", 8)
            if len(parts) == 9:
                entries.append(StatusEntry(parts[8], parts[1][0], parts[1][1]))
        elif kind == "2":
            parts = record.split(" ", 9)
            orig = fields[i] if i < len(fields) else None
            i += 1
            if len(parts) == 10:
                entries.append(StatusEntry(parts[9], parts[1][0], parts[1][1], orig, "renamed"))
        elif kind == "u":
            parts = record.split(" ", 10)
            if len(parts) == 11:
                entries.append(StatusEntry(parts[10], parts[1][0], parts[1][1], None, "unmerged"))
        elif kind == "?":
            entries.append(StatusEntry(record[2:], "?", "?", None, "untracked"))
        elif kind == "!":
            entries.append(StatusEntry(record[2:], "!", "!", None, "ignored"))
    return branch, entries


def parse_numstat(raw: str) -> list[tuple[str, int | None, int | None, str | None]]:
    """``git diff --numstat -z`` -> [(path, added, removed, old path of a rename)]; binary: None counts."""
    out = []
    fields = raw.split("\0")
    i = 0
    while i < len(fields):
        record = fields[i]
        i += 1
        if not record:
            continue
        parts = record.split("\t", 2)
        if len(parts) != 3:
            continue
        added = None if parts[0] == "-" else int(parts[0])
        removed = None if parts[1] == "-" else int(parts[1])
        if parts[2] == "":  # a rename: old and new path follow as their own fields
            old = fields[i] if i < len(fields) else ""
            new = fields[i + 1] if i + 1 < len(fields) else ""
            i += 2
            out.append((new, added, removed, old))
        else:
            out.append((parts[2], added, removed, None))
    return out


def hunk_ranges(patch: str) -> dict[str, tuple[int, int]]:
    """path -> (first, last) line of the new file that the patch's hunks touch."""
    ranges: dict[str, tuple[int, int]] = {}
    starts = [m.start() for m in _DIFF_FILE.finditer(patch)] + [len(patch)]
    for a, b in zip(starts, starts[1:]):
        chunk = patch[a:b]
        target = _PLUS_FILE.search(chunk)
        if not target or target.group(1) == "/dev/null":
            continue
        path = target.group(1)
        for hunk in _HUNK.finditer(chunk):
            first = int(hunk.group(1))
            count = int(hunk.group(2)) if hunk.group(2) is not None else 1
            if count == 0:
                continue
            last = first + count - 1
            old = ranges.get(path)
            ranges[path] = (min(old[0], first), max(old[1], last)) if old else (first, last)
    return ranges


def _word(entry: StatusEntry, letter: str) -> str:
    if entry.kind == "renamed" and letter in "RC":
        return _STATUS_WORDS[letter]
    return _STATUS_WORDS.get(letter, letter)


def git_state_from(snapshot: GitSnapshot) -> GitState:
    """The parsed state of a snapshot: branch, staged / unstaged / untracked, per-file counts, patch."""
    if not snapshot.available:
        return GitState(False, snapshot.root, warnings=snapshot.warnings)
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
            status = _word(entry, letter)
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
    )


# ----------------------------------------------------------------------------- rendering

_MAX_LISTED = 200


def _entry_line(entry: StatusEntry, letter: str) -> str:
    word = _word(entry, letter)
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


def render_git(state: GitState) -> str:
    """The git section: branch and recent commits, staged / unstaged / untracked, then the diff
    (or, in summary mode, the changed files with +n/-m and no hunks)."""
    out = []
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
    out.append(where)
    if state.commits:
        out.append("Recent commits:")
        out.extend(f"  {c}" for c in state.commits)
    if not state.staged and not state.unstaged and not state.untracked:
        out.append("Working tree clean.")
        return "\n".join(out)
    if state.staged:
        out.append(f"Staged ({len(state.staged)}):")
        out.extend(_listed([_entry_line(e, e.x) for e in state.staged], len(state.staged), "staged"))
    if state.unstaged:
        out.append(f"Unstaged ({len(state.unstaged)}):")
        out.extend(_listed([_entry_line(e, e.y) for e in state.unstaged], len(state.unstaged), "unstaged"))
    if state.untracked:
        out.append(f"Untracked ({len(state.untracked)}):")
        out.extend(_listed([f"  {p}" for p in state.untracked], len(state.untracked), "untracked"))
    changed = [f for f in state.files if f[3] != "untracked"]
    if changed:
        base = "HEAD" if state.base == "HEAD" else "an empty tree"
        out.append(
            f"Changes against {base}: {len(changed)} file{'s' if len(changed) != 1 else ''}, "
            f"{state.total_lines} changed lines"
        )
        rows = []
        for path, added, removed, status in changed:
            counts = "binary" if added is None else f"+{added}/-{removed}"
            name = f"{state.renames[path]} -> {path}" if path in state.renames else path
            rows.append(f"  {counts:<12} {status:<10} {name}")
        out.extend(_listed(rows, len(rows), "files"))
        if state.summary_mode:
            out.append(
                f"Diff summary mode: {state.total_lines} changed lines exceed state.gitDiffMaxLines "
                f"({state.max_lines}); hunks are omitted."
            )
        elif state.patch:
            fence = _fence_for(state.patch)
            out.append(f"Diff (git diff {'HEAD' if state.base == 'HEAD' else '<empty tree>'}):")
            out.append(f"{fence}diff")
            out.append(state.patch.rstrip("\n"))
            out.append(fence)
    return "\n".join(out)
