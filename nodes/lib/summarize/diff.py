"""The diff summary: a total line and one status/path/+n-m line per changed file."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from ..tokens import TokenCounter, estimate_tokens
from ..fences import fence_line
from .fit import Problem, fit_tokens, fits_quickly, solve
from .headtail import head_summary

_DIFF_HEADER = re.compile(r"^diff --git (?:\"?a/(.+?)\"? \"?b/(.+?)\"?|(\S+) (\S+))$")
_STATUS_LETTER = {
    "added": "A", "new": "A", "modified": "M", "deleted": "D", "removed": "D", "renamed": "R",
    "copied": "C", "untracked": "?", "unmerged": "U", "type changed": "T", "typechange": "T",
}
_STAT_ROW = re.compile(r"^\s*(?:\+\d+/-\d+|binary)\s+\S")  # a "+n/-m status path" row of the git section


def diff_file_stats(diff: str) -> tuple[list[str], list[tuple[str, int, int, str]]]:
    """(lines before the first ``diff --git`` header, [(path, added, removed, status), ...])
    of a git diff; status is A, M, D, R (path "old -> new"), or B for a binary change.
    A diff without ``diff --git`` headers is read by its ``--- a/`` / ``+++ b/`` lines."""
    lines = diff.replace("\r\n", "\n").split("\n")
    preamble: list[str] = []
    files: list[list] = []
    cur: list | None = None
    in_hunk = False
    has_git_headers = any(line.startswith("diff --git ") for line in lines)
    for i, line in enumerate(lines):
        if line.startswith("diff --git "):
            m = _DIFF_HEADER.match(line)
            if m and m.group(1):
                a, b = m.group(1), m.group(2)
            elif m:
                a, b = m.group(3), m.group(4)
            else:
                a = b = line[11:]
            cur = [b, 0, 0, "M", a]
            files.append(cur)
            in_hunk = False
            continue
        if not has_git_headers and line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = line[4:].split("\t")[0]
            new = lines[i + 1][4:].split("\t")[0]
            path = new[2:] if new.startswith("b/") else new
            if new == "/dev/null":
                path = old[2:] if old.startswith("a/") else old
            cur = [path, 0, 0, "A" if old == "/dev/null" else "D" if new == "/dev/null" else "M", path]
            files.append(cur)
            in_hunk = False
            continue
        if cur is None:
            preamble.append(line)
            continue
        if line.startswith("@@"):
            in_hunk = True
            continue
        if in_hunk:
            if line.startswith("+"):
                cur[1] += 1
            elif line.startswith("-"):
                cur[2] += 1
            continue
        if line.startswith("new file mode"):
            cur[3] = "A"
        elif line.startswith("deleted file mode"):
            cur[3] = "D"
        elif line.startswith("rename from "):
            cur[4] = line[12:]
            cur[3] = "R"
        elif line.startswith("rename to "):
            cur[0] = line[10:]
            cur[3] = "R"
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            if cur[3] == "M":
                cur[3] = "B"
    out = []
    for path, added, removed, status, old in files:
        shown = f"{old} -> {path}" if status == "R" and old != path else path
        out.append((shown, added, removed, status))
    while preamble and not preamble[-1].strip():
        preamble.pop()
    return preamble, out


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
    preamble, parsed = diff_file_stats(text or "")
    stats = _normalise_files(files, renames) if files else [
        (p, None, None, "B") if st == "B" else (p, a, r, st) for p, a, r, st in parsed
    ]
    if not stats:
        return head_summary(text, max_tokens, counter)
    context = _context_lines(preamble)
    tracked = [s for s in stats if s[3] != "?"]
    total_add = sum(s[1] or 0 for s in tracked)
    total_del = sum(s[2] or 0 for s in tracked)
    untracked = len(stats) - len(tracked)
    header = f"{len(tracked)} file{'s' if len(tracked) != 1 else ''} changed, +{total_add}/-{total_del}"
    if untracked:
        header += f"; {untracked} untracked"
    file_lines = [_file_line(*s) for s in stats]
    texts = [header] + file_lines + context
    nf = len(file_lines)
    pre_ids = list(range(1 + nf, len(texts)))

    def render(sel: set[int]) -> str:
        out = [texts[u] for u in pre_ids if u in sel]
        if out:
            out.append("")
        out.append(header)
        shown = [u for u in range(1, 1 + nf) if u in sel]
        out.extend(texts[u] for u in shown)
        missing = nf - len(shown)
        if missing and shown:
            rest = [stats[u - 1] for u in range(1, 1 + nf) if u not in sel]
            rest_add = sum(s[1] or 0 for s in rest)
            rest_del = sum(s[2] or 0 for s in rest)
            out.append(f"… {missing} more file{'s' if missing != 1 else ''} (+{rest_add}/-{rest_del})")
        return "\n".join(out)

    costs = [estimate_tokens(t) + 1 for t in texts]
    costs[0] += 12  # room for the "… n more files" line
    order = [0] + pre_ids[:1] + list(range(1, 1 + nf)) + pre_ids[1:]
    problem = Problem(costs, [()] * len(texts), order, render, blocking=frozenset(range(1 + nf)))
    solved = solve(problem, max_tokens, counter)
    if solved is None:
        return fit_tokens(header, max_tokens, counter)
    return solved[0]
