"""Git state through the real ``git`` program, run safely: one snapshot of status and diff, then pure parsing.

Projects are untrusted input, and so is their ``.git``. :func:`run_git` is the ONE place that
runs git (the file tree's ``git ls-files`` goes through it too). It makes sure git executes
nothing a repository can configure, and reads no repository outside the project:

- git itself is started by its absolute path, found on the absolute entries of PATH only and
  never inside the project (:func:`ctxengine.nodes.lib.programs.executable_path`): an empty,
  ``.`` or relative PATH entry would otherwise run a ``git`` committed to the project. The PATH
  git gets has those entries removed too. A snapshot looks git up once and passes the path on.

- Inherited ``GIT_*`` variables are dropped (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS,
  GIT_ALTERNATE_OBJECT_DIRECTORIES ...); then ``GIT_CONFIG_NOSYSTEM=1``, ``GIT_CONFIG_GLOBAL`` and
  ``GIT_CONFIG_SYSTEM`` pointed at :data:`NOWHERE` (a user's global config may define aliases,
  filters or an attributes file; ``/dev/null/ctxengine-nothing`` names no file, where
  ``/dev/null`` itself is read, and a replaced /dev/null has content), ``GIT_ATTR_NOSYSTEM=1``,
  ``GIT_NO_REPLACE_OBJECTS=1``, ``GIT_OPTIONAL_LOCKS=0``, ``GIT_TERMINAL_PROMPT=0``, empty
  ``GIT_ASKPASS`` / ``SSH_ASKPASS``, ``GIT_EDITOR=:`` (no editor), ``GIT_PAGER=cat``,
  ``GIT_ALLOW_PROTOCOL=`` (no transport at all, so a partial clone cannot fetch), LC_ALL=C.
- Settings given through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n``:
  command-line scope beats the repository's own config, and child git processes (a submodule's
  status) inherit them. See :data:`SAFE_CONFIG`: ``core.fsmonitor=false``,
  ``core.hooksPath`` and ``core.attributesFile`` at :data:`NOWHERE`, ``core.pager=cat``,
  ``core.editor=:``, ``core.askPass=``, ``core.sshCommand``, ``gpg.program``,
  ``gpg.<format>.program`` pointed at a path that does not exist, ``log.showSignature=false``,
  ``credential.helper=``, ``protocol.allow=never``, ``diff.ignoreSubmodules=all``,
  ``status.submoduleSummary=false``, ``submodule.recurse=false``, ``safe.bareRepository=explicit``.
- Filter drivers: git 2.39 has no way to ignore ``.gitattributes`` (``GIT_ATTR_SOURCE`` came in
  2.40), so every driver the repository's config names (``git config --name-only
  --get-regexp '^filter[.]'``, which reads config and runs nothing, includes followed) is
  overridden with empty ``clean`` / ``smudge`` / ``process`` and ``required=false``: git
  treats an empty command as no filter. This listing runs once per snapshot (:func:`filter_overrides`).
- Flags added after the subcommand: ``diff`` / ``log`` / ``show`` get ``--no-ext-diff``
  (``diff.external``, ``diff.<driver>.command``), ``--no-textconv`` (``diff.<driver>.textconv``;
  an empty override would make git run an empty command) and ``--ignore-submodules=all``;
  ``log`` / ``show`` also ``--no-show-signature``; ``status`` ``--ignore-submodules=all``.
- Scope (:func:`repository_scope`): the repository is the project's own ``.git`` (a folder, a
  symlink or a ``gitdir:`` file), given to git as ``GIT_DIR`` + ``GIT_WORK_TREE`` so git
  discovers nothing (``GIT_CEILING_DIRECTORIES`` is the project's parent as well; ``core.worktree``
  cannot move the work tree). A repository enclosing the project folder, a ``gitdir:`` /
  ``commondir`` / alternates / symlinked git file leading outside the project is not read unless
  the path is inside one of the user's ``trust.allowedPaths``; the refusal is a warning naming
  that setting. Without a usable repository git gets ``GIT_DIR`` = :data:`NOWHERE`. git's
  standard input is an empty pipe (``hash-object --stdin`` hashes nothing), never /dev/null.

:func:`take_snapshot` runs ``git status --porcelain=v2 -z --branch``, ``git diff <base>
--numstat -z`` and, only when the changed lines stay under the threshold, the patch itself,
plus the last few commits (``git log -n``; nothing walks the whole history). Every command has a
timeout and an output cap. Not a repository, git missing, an empty repository or a detached HEAD
are warnings, never errors; a git command that fails is a warning naming its exit code (or
timeout, or signal) and the first line of its stderr (:func:`failure_reason`).

Everything else is pure: :func:`parse_status`, :func:`parse_numstat`, :func:`git_state_from`
and :func:`render_git` turn the raw outputs into the git section.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from .programs import executable_path, safe_search_path
from .regex import lazy_regex

_NO_PROGRAM = "/nonexistent/ctxengine-disabled"  # what a program setting points at: nothing to run
#: What git's config, attributes and hooks settings point at: a path that names no file, because
#: /dev/null is not a folder (git takes ENOTDIR as "no such file"). Never /dev/null itself: git
#: would READ it, and on a machine where a program replaced /dev/null with a regular file (as
#: ``-o /dev/null`` run as root once did) it holds whatever other programs wrote into it: git
#: then failed at random ("bad config line 1 in file /dev/null", the filter listing and so the
#: git section skipped under load), or took that text as configuration.
NOWHERE = os.path.join(os.devnull, "ctxengine-nothing")
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": NOWHERE,
    "GIT_CONFIG_SYSTEM": NOWHERE,
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_OPTIONAL_LOCKS": "0",  # status must not take the index lock
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_ALLOW_PROTOCOL": "",
    "LC_ALL": "C",
    "LANG": "C",
}
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", NOWHERE),
    ("core.attributesFile", NOWHERE),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", _NO_PROGRAM),
    ("core.quotePath", "off"),
    ("color.ui", "never"),
    ("log.showSignature", "false"),
    ("gpg.program", _NO_PROGRAM),
    ("gpg.openpgp.program", _NO_PROGRAM),
    ("gpg.x509.program", _NO_PROGRAM),
    ("gpg.ssh.program", _NO_PROGRAM),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("safe.bareRepository", "explicit"),
)
_FILTER_OFF = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
_SAFE_FLAGS = {
    "diff": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=all"),
    "log": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=all", "--no-show-signature"),
    "show": ("--no-ext-diff", "--no-textconv", "--ignore-submodules=all", "--no-show-signature"),
    "status": ("--ignore-submodules=all",),
}
_ALLOW_SETTING = "trust.allowedPaths"
_NOT_STARTED = 127  # the exit code :func:`_spawn` gives when git could not be started
_NO_GIT = ("git: the git program is not on PATH (only its absolute entries are searched, and never "
           "the project itself)")

_STATUS_WORDS = {
    "M": "modified",
    "A": "added",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "typechange",
    "U": "unmerged",
}
_HUNK = lazy_regex(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
_DIFF_FILE = lazy_regex(r"^diff --git ", re.M)
_PLUS_FILE = lazy_regex(r"^\+\+\+ (?:b/)?(.*)$", re.M)


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
    notes: tuple[str, ...] = ()  # information, not a problem: no repository, a detached HEAD


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
    notes: tuple[str, ...] = ()  # information, not a problem: no repository, a detached HEAD


# ----------------------------------------------------------------------------- scope


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


# ----------------------------------------------------------------------------- running git


def _config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _base_env(scope: RepoScope) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ENV)
    env["PATH"] = safe_search_path(None, scope.project_dir)  # nothing git starts is found in the project
    env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(scope.project_dir) or os.sep
    if scope.git_dir:
        env["GIT_DIR"] = scope.git_dir
        env["GIT_WORK_TREE"] = scope.work_tree or scope.project_dir
    else:
        env["GIT_DIR"] = NOWHERE  # nothing to discover, nothing to read
    return env


def _with_safe_flags(args: Sequence[str]) -> list[str]:
    """``args`` with the safety flags of its subcommand inserted right after the subcommand."""
    out = list(args)
    i = 0
    while i < len(out) and out[i].startswith("-"):
        i += 2 if out[i] in ("-c", "-C") else 1
    if i < len(out) and out[i] in _SAFE_FLAGS:
        out[i + 1:i + 1] = _SAFE_FLAGS[out[i]]
    return out


def filter_listing(scope: RepoScope, git: str, timeout: float = 10.0) -> GitResult:
    """``git config --null --name-only --get-regexp '^filter[.]'`` in the repository of ``scope``
    (it reads config and runs nothing; exit code 1 means no such key), with the safe settings."""
    if not scope.git_dir:
        return GitResult(1, "", "")
    env = _base_env(scope)
    env.update(_config_env(SAFE_CONFIG))
    return _spawn(git, ["config", "--null", "--name-only", "--get-regexp", r"^filter\."], scope.project_dir, env,
                  timeout, 1 << 20)


def overrides_from(listing: GitResult) -> tuple[tuple[str, str], ...] | None:
    """The config that switches off every filter driver ``listing`` (:func:`filter_listing`)
    names (empty ``clean`` / ``smudge`` / ``process``, ``required=false``), or None when the
    listing failed."""
    if listing.returncode not in (0, 1) or listing.truncated:  # 1: no such key
        return None
    names = []
    for key in listing.stdout.split("\0"):
        key = key.strip()
        if key.count(".") >= 2:
            names.append(key[len("filter."):key.rindex(".")])
    return tuple((f"filter.{name}.{key}", value) for name in dict.fromkeys(names) for key, value in _FILTER_OFF)


def filter_overrides(scope: RepoScope, timeout: float = 10.0, git: str | None = None) -> tuple[tuple[str, str], ...] | None:
    """The config that switches off every filter driver the repository's config names, or None
    when git could not list them (or there is no git): :func:`overrides_from` of
    :func:`filter_listing`. A snapshot lists them once and passes the result to each command."""
    git = git or executable_path("git", scope.project_dir)
    return None if git is None else overrides_from(filter_listing(scope, git, timeout))


def failure_reason(result: GitResult, timeout: float | None = None) -> str:
    """Why a git command failed, for a warning: "timed out after N s", "killed by signal N",
    "could not start: ..." or "exit code N: <first line of its stderr>"."""
    if result.timed_out:
        return f"timed out after {timeout:g} s" if timeout is not None else "timed out"
    line = _first_line(result.stderr)
    if result.returncode == _NOT_STARTED:
        return f"could not start: {line}" if line else "could not start"
    if result.returncode < 0:
        return f"killed by signal {-result.returncode}" + (f": {line}" if line else "")
    return f"exit code {result.returncode}" + (f": {line}" if line else "")


def run_git(
    args: Sequence[str],
    cwd: str,
    timeout: float = 10.0,
    max_bytes: int = 2_000_000,
    allowed_paths: Sequence[str] = (),
    overrides: Sequence[tuple[str, str]] | None = None,
    scope: RepoScope | None = None,
    git: str | None = None,
) -> GitResult:
    """Run ``git args`` in the project folder ``cwd`` safely (see the module docstring), with a
    timeout and an output cap; never raises for git's own errors.

    At most ``max_bytes`` of standard output are read; past that the process is killed and
    the result is marked truncated. A timer kills git (and what it started) after ``timeout``
    seconds. ``allowed_paths`` are the user's ``trust.allowedPaths``. ``scope`` and
    ``overrides`` (:func:`repository_scope`, :func:`filter_overrides`) are computed here when
    not given; a caller running several commands computes them once. ``git`` is the absolute
    path of the program (:func:`executable_path`, looked up here when not given): git is never
    started by its bare name, so no ``git`` in the project or the working folder runs.
    """
    scope = repository_scope(cwd, allowed_paths) if scope is None else scope
    git = git or executable_path("git", scope.project_dir)
    if git is None:
        return GitResult(_NOT_STARTED, "", _NO_GIT)
    if overrides is None:
        listing = filter_listing(scope, git, timeout)
        overrides = overrides_from(listing)
        if overrides is None:
            return GitResult(listing.returncode or 128, "", "error: could not list the repository's filter drivers "
                             f"({failure_reason(listing, timeout)}); git not run", timed_out=listing.timed_out)
    env = _base_env(scope)
    env.update(_config_env([*SAFE_CONFIG, *overrides]))
    return _spawn(git, _with_safe_flags(args), cwd, env, timeout, max_bytes)


def git_version(git: str | None = None, timeout: float = 5.0) -> str | None:
    """The version of ``git`` (an absolute path; the git of :func:`executable_path` when None)
    ("2.39.5"), through :func:`run_git` (no repository, run in ``/``), or None."""
    git = git or executable_path("git")
    if git is None:
        return None
    result = run_git(["--version"], os.sep, timeout, 4096, scope=RepoScope(os.sep), overrides=(), git=git)
    line = _first_line(result.stdout)
    if result.returncode != 0:
        return None
    return line.removeprefix("git version ").strip() or None


def _spawn(git: str, args: Sequence[str], cwd: str, env: dict[str, str], timeout: float, max_bytes: int) -> GitResult:
    """``git --no-pager args`` (``git`` an absolute path) in ``cwd``: its exit code, output (at
    most ``max_bytes``) and stderr; killed with what it started after ``timeout`` seconds."""
    try:
        proc = subprocess.Popen(
            [git, "--no-pager", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,  # closed at once: git reads an empty input, never /dev/null's content
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a timeout kills git and anything it started
        )
    except OSError as exc:
        return GitResult(_NOT_STARTED, "", str(exc))
    proc.stdin.close()
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
    allowed_paths: Sequence[str] = (),
    enclosing_is_note: bool = False,
) -> GitSnapshot:
    """Read status, numstat, the patch (when small) and the last commits of ``project_dir``'s
    repository (see :func:`repository_scope` for which one, ``allowed_paths`` for what may lie outside).
    No repository and a detached HEAD are notes (information), not warnings; so is an enclosing
    repository left unread when ``enclosing_is_note`` (a bundled example inside ctxengine's clone)."""
    program = executable_path("git", project_dir)  # once for the whole snapshot
    if program is None:
        return GitSnapshot(project_dir, warnings=(_NO_GIT + "; git section skipped",))
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
                       tuple(warnings), tuple(notes))


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
        notes=snapshot.notes,
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
            out.append(f"Diff summary mode: {_summary_mode_why(state)}; hunks are omitted.")
        elif state.patch:
            fence = _fence_for(state.patch)
            out.append(f"Diff (git diff {'HEAD' if state.base == 'HEAD' else '<empty tree>'}):")
            out.append(f"{fence}diff")
            out.append(state.patch.rstrip("\n"))
            out.append(fence)
    return "\n".join(out)
