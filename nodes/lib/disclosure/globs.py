"""Globs of progressive disclosure, and the natural order of paths.

Globs of documents (``load``, ``state``, phase globs) are relative to ``.planning/``: a glob
without ``/`` matches that name at the top of ``.planning/`` only (``**/NAME`` finds it at
any depth). Globs of changed files (``paths``, relative to the repository) match a name
without ``/`` at any depth, as .gitignore does. ``**`` spans folders, ``*`` and ``?`` stay
inside one path segment; matching ignores case.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable


@lru_cache(maxsize=1024)
def glob_regex(pattern: str, anywhere: bool = False) -> re.Pattern:
    """The regular expression of a glob (see the module docstring for the dialect). A glob
    without "/" matches at the top only, or at any depth when ``anywhere`` (changed files)."""
    pattern = pattern.strip().replace("\\", "/").removeprefix("./")
    anchored = "/" in pattern.rstrip("/") or not anywhere
    if pattern.endswith("/"):
        pattern += "**"
    pattern = pattern.lstrip("/")
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pattern[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(rf"\A{prefix}{body}\Z", re.I)


def glob_match(pattern: str, path: str, anywhere: bool = False) -> bool:
    """Whether ``path`` (relative, ``/``-separated) matches ``pattern``; a glob without "/"
    matches a name at the top only, or at any depth when ``anywhere``."""
    return bool(glob_regex(pattern, anywhere).match(path.replace("\\", "/").removeprefix("./")))


def first_match(patterns: Iterable[str], path: str, anywhere: bool = False) -> str | None:
    """The first pattern that matches ``path``, or None."""
    for pattern in patterns:
        if glob_match(pattern, path, anywhere):
            return pattern
    return None


def natural_key(path: str) -> list:
    """The sort key of a path in natural order (``2-PLAN.md`` before ``10-PLAN.md``), ignoring case."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path)]
