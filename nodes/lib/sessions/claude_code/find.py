"""Finding a project's Claude Code transcripts: Claude Code's folder, the project's folder in it,
the transcripts there newest first, and the folder a transcript was recorded in."""

from __future__ import annotations

import json
import os
import stat
from itertools import islice
from typing import Iterator, Mapping

from ...regex import lazy_regex

_NOT_ALNUM = lazy_regex(r"[^A-Za-z0-9]")


def config_dir(environ: Mapping[str, str] | None = None) -> str:
    """Claude Code's folder: ``$CLAUDE_CONFIG_DIR`` when set, else ``~/.claude``."""
    environ = os.environ if environ is None else environ
    named = (environ.get("CLAUDE_CONFIG_DIR") or "").strip()
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.abspath(os.path.expanduser(named)) if named else os.path.join(home, ".claude")


def folder_name(project_path: str) -> str:
    """The folder Claude Code keeps a project's transcripts in: its absolute path with every
    character other than a letter or a digit replaced by "-" (``/a/b.c`` -> ``-a-b-c``)."""
    return _NOT_ALNUM.sub("-", project_path)


def project_folders(project_dir: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Where the project's transcripts may be: ``<config dir>/projects/<folder_name>`` for the
    project's absolute path and, when it differs, its real path (symlinks resolved)."""
    base = os.path.join(config_dir(environ), "projects")
    return list(dict.fromkeys(os.path.join(base, folder_name(p)) for p in project_paths(project_dir)))


def transcripts(folder: str) -> list[str]:
    """The ``*.jsonl`` regular files directly in ``folder``, newest (last modified; by name on
    a tie) first, leaving out subagent files (``agent-*.jsonl``); [] when there is none."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    keyed: list[tuple[float, str]] = []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("agent-"):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            keyed.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
        except OSError:
            continue
    return [os.path.join(folder, name) for _, name in sorted(keyed, reverse=True)]


def newest_transcript(folder: str) -> str | None:
    """The newest of :func:`transcripts` in ``folder``; None when there is none."""
    found = transcripts(folder)
    return found[0] if found else None


def project_paths(project_dir: str) -> tuple[str, ...]:
    """The folders a transcript of the project is recorded in: its absolute path and, when it
    differs, its real path (symlinks resolved)."""
    return tuple(dict.fromkeys((os.path.abspath(project_dir), os.path.realpath(project_dir))))


def in_project(cwd: str, paths: tuple[str, ...]) -> bool:
    """Whether the folder ``cwd`` (as a transcript records it) is one of ``paths`` or inside one
    (compared as strings: nothing is looked up on disk)."""
    folder = os.path.normpath(cwd) if os.path.isabs(cwd) else None
    return folder is not None and any(folder == p or folder.startswith(p.rstrip(os.sep) + os.sep) for p in paths)


def recorded_cwd(text: str) -> str | None:
    """The folder a transcript was recorded in: the top-level ``cwd`` of its first event that
    has one (within the first 200 lines); None when none says."""
    for _, line in islice(nonblank_lines(text), 200):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("cwd"), str):
            return obj["cwd"]
    return None


_HEAD_BYTES = 1 << 18


def head_cwd(path: str) -> str | None:
    """:func:`recorded_cwd` of the complete lines in the first 256 KiB of the regular file at
    ``path`` (not followed when a symlink); None when it cannot be read or does not say there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) == _HEAD_BYTES:
        data = data[:data.rfind(b"\n") + 1]
    return recorded_cwd(data.decode("utf-8", "replace"))


def is_claude_code(text: str) -> bool:
    """Whether ``text`` reads as a Claude Code transcript: its first JSON object line has a
    ``type`` and no top-level ``role`` (the session.log format's lines have a role)."""
    for _, line in islice(nonblank_lines(text), 20):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        return isinstance(obj, dict) and isinstance(obj.get("type"), str) and "role" not in obj
    return False


def nonblank_lines(text: str, start: int = 0, number: int = 0) -> Iterator[tuple[int, str]]:
    """(number, line) of each non-blank line from ``start`` (``number`` lines before it), without
    splitting the whole text at once."""
    size = len(text)
    while start < size:
        end = text.find("\n", start)
        end = size if end < 0 else end
        number += 1
        line = text[start:end]
        if line.strip():
            yield number, line
        start = end + 1
