"""Running the real ``git`` program safely: the one subprocess layer of the git package.

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

The scope (which repository, :mod:`.scope`) is computed before git runs; the snapshot
(:mod:`.snapshot`) runs its commands through :func:`run_git`; parsing (:mod:`.status`,
:mod:`.state`) and rendering (:mod:`.render`) are pure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from typing import Sequence

from ..programs import executable_path, safe_search_path
from .scope import RepoScope, repository_scope

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
_NOT_STARTED = 127  # the exit code :func:`_spawn` gives when git could not be started
NO_GIT = ("git: the git program is not on PATH (only its absolute entries are searched, and never "
          "the project itself)")


@dataclass(frozen=True)
class GitResult:
    """One git command: exit code, decoded output, stderr, and whether the output was cut."""

    returncode: int
    stdout: str
    stderr: str
    truncated: bool = False
    timed_out: bool = False



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
        return GitResult(_NOT_STARTED, "", NO_GIT)
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
