"""The diff summary: a total line and one status/path/+n-m line per changed file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..regex import lazy_regex
from ..tokens import TokenCounter, estimate_tokens
from ..fences import fence_line
from .fit import Problem, fit_tokens, fits_quickly, solve
from .headtail import head_summary

_DIFF_HEADER = lazy_regex(r"^diff --git (?:\"?a/(.+?)\"? \"?b/(.+?)\"?|(\S+) (\S+))$")
_STATUS_LETTER = {
    "added": "A", "new": "A", "modified": "M", "deleted": "D", "removed": "D", "renamed": "R",
    "copied": "C", "untracked": "?", "unmerged": "U", "type changed": "T", "typechange": "T",
}
_STAT_ROW = lazy_regex(r"^\s*(?:\+\d+/-\d+|binary)\s+\S")  # a "+n/-m status path" row of the git section


def diff_file_stats(diff: str) -> tuple[list[str], list[tuple[str, int, int, str]]]:
    """(lines before the first ``diff --git`` header, [(path, added, removed, status), ...])
    of a git diff; status is A, M, D, R (path "old -> new"), or B for a binary change.
    A diff without ``diff --git`` headers is read by its ``--- a/`` / ``+++ b/`` lines."""
    lines = diff.replace("\r\n", "\n").split("\n")
    preamble: list[str] = []
    files: list[_FileStat] = []
    in_hunk = False
    has_git_headers = any(line.startswith("diff --git ") for line in lines)
    for i, line in enumerate(lines):
        opened = _opened_file(lines, i, has_git_headers) if line.startswith(("diff --git ", "--- ")) else None
        if opened is not None:
            files.append(opened)
            in_hunk = False
        elif not files:
            preamble.append(line)
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk:  # a hunk line counted: + added, - removed (context lines are not)
            if line.startswith("+"):
                files[-1].added += 1
            elif line.startswith("-"):
                files[-1].removed += 1
        else:
            _read_header_line(files[-1], line)
    while preamble and not preamble[-1].strip():
        preamble.pop()
    return preamble, [(f.shown, f.added, f.removed, f.status) for f in files]


@dataclass
class _FileStat:
    """One file of a diff as its lines are read: its path (the new one), the lines added and
    removed, its status letter and its old path (a rename)."""

    path: str
    status: str
    old: str
    added: int = 0
    removed: int = 0

    @property
    def shown(self) -> str:
        return f"{self.old} -> {self.path}" if self.status == "R" and self.old != self.path else self.path


def _opened_file(lines: list[str], i: int, has_git_headers: bool) -> _FileStat | None:
    """The file the line at ``i`` opens: a ``diff --git a/X b/Y`` header, or (in a diff without
    them) a ``--- a/X`` line followed by ``+++ b/Y``; None for any other line."""
    line = lines[i]
    if line.startswith("diff --git "):
        return _git_header_file(line)
    if has_git_headers or not line.startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
        return None
    old = line[4:].split("\t")[0]
    new = lines[i + 1][4:].split("\t")[0]
    path = new[2:] if new.startswith("b/") else new
    if new == "/dev/null":
        path = old[2:] if old.startswith("a/") else old
    return _FileStat(path, "A" if old == "/dev/null" else "D" if new == "/dev/null" else "M", path)


def _git_header_file(line: str) -> _FileStat:
    """The file a ``diff --git a/X b/Y`` header opens (quoted paths too; a header it cannot split
    names the file by all of its rest)."""
    m = _DIFF_HEADER.match(line)
    if m is None:
        return _FileStat(line[11:], "M", line[11:])
    old, new = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return _FileStat(new, "M", old)


def _read_header_line(stat: _FileStat, line: str) -> None:
    """A line of a file's header (between ``diff --git`` and its first hunk): a new or deleted
    file, a rename's old or new path, a binary change (a plain modification becomes B)."""
    if line.startswith("new file mode"):
        stat.status = "A"
    elif line.startswith("deleted file mode"):
        stat.status = "D"
    elif line.startswith("rename from "):
        stat.old, stat.status = line[12:], "R"
    elif line.startswith("rename to "):
        stat.path, stat.status = line[10:], "R"
    elif (line.startswith("Binary files ") or line == "GIT binary patch") and stat.status == "M":
        stat.status = "B"


def _normalise_files(
    files: Iterable[Any], renames: Mapping[str, str] | None
) -> list[tuple[str, int | None, int | None, str]]:
    out = []
    for item in files:
        if isinstance(item, Mapping):
            path = str(item.get("path", "?"))
            added, removed, status = item.get("added"), item.get("removed"), item.get("status")
        else:
            item = list(item) + [None, None, None]
            path, added, removed, status = str(item[0]), item[1], item[2], item[3]
        status = str(status or "modified")
        letter = _STATUS_LETTER.get(status.lower(), status[:1].upper() or "M")
        if renames and path in renames and renames[path] != path:
            letter, path = "R", f"{renames[path]} -> {path}"
        if letter == "?":
            added = removed = None
        elif added is None or removed is None:
            letter = "B" if letter == "M" else letter
        out.append((path, None if added is None else int(added), None if removed is None else int(removed), letter))
    return out


def _file_line(path: str, added: int | None, removed: int | None, status: str) -> str:
    if status == "?":
        return f"? {path} (untracked)"
    if added is None or removed is None:
        return f"{status} {path} (binary)"
    return f"{status} {path} +{added}/-{removed}"


def _context_lines(preamble: list[str]) -> list[str]:
    """The lines before the diff without what the file list replaces: +n/-m rows, the fence
    that opens the patch and the line introducing it."""
    out: list[str] = []
    for line in preamble:
        if fence_line(line, strict=True) is not None:
            if out and out[-1].rstrip().endswith(":"):
                out.pop()
            continue
        if _STAT_ROW.match(line):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def diff_summary(
    text: str,
    max_tokens: int,
    counter: TokenCounter,
    files: Iterable[Any] | None = None,
    renames: Mapping[str, str] | None = None,
) -> str:
    """A git diff (or the git section) as its file list within ``max_tokens``: a total line,
    then ``<status> <path> +n/-m`` per file (A added, M modified, D deleted, R renamed
    "old -> new", B binary, ? untracked). ``files`` ((path, added, removed, status) tuples or
    mappings, as the git section's data) is used instead of parsing when given; ``renames``
    maps new path -> old. The lines before the diff (branch, commits, status lists) follow
    the first one when there is room; +n/-m rows and the patch fence there are dropped. Text
    that is no diff and comes without ``files`` gets its first lines."""
    if max_tokens <= 0 or (not text and not files):
        return ""
    if text and fits_quickly(text, max_tokens, counter):
        return text
    preamble, stats = _preamble_and_stats(text, files, renames)
    if not stats:
        return head_summary(text, max_tokens, counter)
    listing = _FileList(_total_line(stats), stats, _context_lines(preamble))
    solved = solve(listing.problem(), max_tokens, counter)
    if solved is None:
        return fit_tokens(listing.header, max_tokens, counter)
    return solved[0]


_Stat = tuple[str, int | None, int | None, str]  # one file: (path, added, removed, status letter)


def _preamble_and_stats(text: str, files: Iterable[Any] | None,
                        renames: Mapping[str, str] | None) -> tuple[list[str], list[_Stat]]:
    """(the lines before the diff, (path, added, removed, status) per file): from ``files`` when
    given, else parsed from the diff (a binary change counts no lines)."""
    preamble, parsed = diff_file_stats(text or "")
    if files:
        return preamble, _normalise_files(files, renames)
    return preamble, [(p, None, None, "B") if st == "B" else (p, a, r, st) for p, a, r, st in parsed]


def _total_line(stats: list[_Stat]) -> str:
    """The diff's total line: tracked files changed, lines added and removed, untracked files."""
    tracked = [s for s in stats if s[3] != "?"]
    total_add = sum(s[1] or 0 for s in tracked)
    total_del = sum(s[2] or 0 for s in tracked)
    untracked = len(stats) - len(tracked)
    header = f"{len(tracked)} file{'s' if len(tracked) != 1 else ''} changed, +{total_add}/-{total_del}"
    return header + (f"; {untracked} untracked" if untracked else "")


@dataclass
class _FileList:
    """The diff summary's units: 0 the total line, 1..nf one line per file, then the context
    lines (what came before the diff)."""

    header: str
    stats: list[_Stat]
    context: list[str]

    def __post_init__(self) -> None:
        self.texts = [self.header] + [_file_line(*s) for s in self.stats] + self.context
        self.nf = len(self.stats)
        self.pre_ids = list(range(1 + self.nf, len(self.texts)))

    def problem(self) -> Problem:
        """The selection problem: the total line (with room for the "… n more files" line) and
        the files block the pass; the first context line comes right after the total line."""
        nf, pre_ids = self.nf, self.pre_ids
        costs = [estimate_tokens(t) + 1 for t in self.texts]
        costs[0] += 12  # room for the "… n more files" line
        order = [0] + pre_ids[:1] + list(range(1, 1 + nf)) + pre_ids[1:]
        return Problem(costs, [()] * len(self.texts), order, self.render, blocking=frozenset(range(1 + nf)))

    def render(self, sel: set[int]) -> str:
        """The selected context lines, a blank line, the total line, the selected files and a
        line for the files left out."""
        out = [self.texts[u] for u in self.pre_ids if u in sel]
        if out:
            out.append("")
        out.append(self.header)
        shown = [u for u in range(1, 1 + self.nf) if u in sel]
        out.extend(self.texts[u] for u in shown)
        return "\n".join(out + self._more_files(sel, len(shown)))

    def _more_files(self, sel: set[int], shown: int) -> list[str]:
        """The line for the files left out (their count and lines), when some are shown and some not."""
        missing = self.nf - shown
        if not (missing and shown):
            return []
        rest = [self.stats[u - 1] for u in range(1, 1 + self.nf) if u not in sel]
        rest_add = sum(s[1] or 0 for s in rest)
        rest_del = sum(s[2] or 0 for s in rest)
        return [f"… {missing} more file{'s' if missing != 1 else ''} (+{rest_add}/-{rest_del})"]
