"""Pure parsing of git's raw outputs: ``git status --porcelain=v2 -z``, ``git diff --numstat
-z`` and the hunks of a patch."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from ..regex import lazy_regex

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
class StatusEntry:
    """One path of ``git status``: index (X) and worktree (Y) letters, and the old path of a rename."""

    path: str
    x: str = "."
    y: str = "."
    orig: str | None = None
    kind: str = "changed"  # changed | renamed | unmerged | untracked | ignored



def _records(raw: str) -> Iterator[tuple[str, Iterator[str]]]:
    """The non-empty NUL-separated records of a ``-z`` output, each with the fields after it (a
    record that carries more fields, such as a rename's old path, takes them with ``next``)."""
    fields = iter(raw.split("\0"))
    for record in fields:
        if record:
            yield record, fields


def parse_status(raw: str) -> tuple[dict[str, str], list[StatusEntry]]:
    """``git status --porcelain=v2 -z --branch`` -> (branch headers, entries)."""
    branch: dict[str, str] = {}
    entries: list[StatusEntry] = []
    for record, rest in _records(raw):
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
            orig = next(rest, None)
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
    for record, rest in _records(raw):
        parts = record.split("\t", 2)
        if len(parts) != 3:
            continue
        added = None if parts[0] == "-" else int(parts[0])
        removed = None if parts[1] == "-" else int(parts[1])
        if parts[2] == "":  # a rename: old and new path follow as their own fields
            old, new = next(rest, ""), next(rest, "")
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


def status_word(entry: StatusEntry, letter: str) -> str:
    """The word for a status letter of ``entry`` ("M": "modified"; a rename's "R" or "C" as such)."""
    if entry.kind == "renamed" and letter in "RC":
        return _STATUS_WORDS[letter]
    return _STATUS_WORDS.get(letter, letter)

