"""The files and identifiers the work names: the current task, the plan, the request, the diff.

A mention is a path-like word (``src/app/models.py``, ``models.py``, ``./lib/x.ts``) or an
identifier-like word (``parse_plan``, ``ContextConfig``, `` `render` ``, ``build()``). Paths are
matched against the project's file list: an exact relative path, else every listed path ending
in ``/<mention>`` (a bare file name: at most :data:`MAX_SUFFIX_MATCHES` of them). A path that
leaves the project (``../outside.py``, an absolute path elsewhere) is a warning and nothing more.
Identifiers are kept as words; the rank finds the files defining them.

Where a name comes from sets its order (:data:`ORIGINS`): the current task's files are shrunk
last, then the request's, the diff's and the rest of the plan's.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..regex import lazy_regex


#: Where a named file comes from, most important first (kept longest when the pool is tight).
ORIGINS = ("task", "request", "diff", "plan")
MAX_SUFFIX_MATCHES = 3

_PATH = lazy_regex(r"(?<![\w@$%&*+=/\\.-])((?:~|\.{1,2})?/?(?:[\w@.+-]+/)*[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/(])")
_BACKTICK = lazy_regex(r"`([A-Za-z_][\w.:]*?)(?:\(\))?`")
_CALL = lazy_regex(r"(?<![\w.])([A-Za-z_]\w{2,})\(\)")
_SNAKE = lazy_regex(r"(?<![\w.])([a-z_][a-z0-9]*_[a-z0-9_]*[a-z0-9])(?![\w(])")
_CAMEL = lazy_regex(r"(?<![\w.])([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z0-9]*)+)(?!\w)")
_TASK = lazy_regex(r"<task\b.*?</task>", re.S)
_EXTENSIONS_NOT_FILES = frozenset({"e.g", "i.e", "etc"})


@dataclass(frozen=True)
class NamedFile:
    """A project file the work names: its path relative to the project, where it was named
    (one of :data:`ORIGINS`) and the word that named it."""

    path: str
    origin: str
    mention: str


@dataclass(frozen=True)
class CodeNames:
    """The named files (each once, most important origin first), the identifiers named, and the
    warnings (names that lead outside the project)."""

    files: tuple[NamedFile, ...] = ()
    identifiers: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def path_mentions(text: str) -> list[str]:
    """The path-like words of ``text`` in order, each once."""
    found = []
    for match in _PATH.finditer(text or ""):
        word = match.group(1).rstrip(".")
        if word.lower() in _EXTENSIONS_NOT_FILES or "://" in text[max(0, match.start() - 3):match.start()]:
            continue
        if word not in found:
            found.append(word)
    return found


def identifier_mentions(text: str) -> list[str]:
    """The identifier-like words of ``text`` (backticked, called ``name()``, snake_case, CamelCase),
    in order, each once; dotted names give their last part."""
    found: list[str] = []
    for pattern in (_BACKTICK, _CALL, _SNAKE, _CAMEL):
        for match in pattern.finditer(text or ""):
            word = re.split(r"[.:]+", match.group(1))[-1]
            if len(word) >= 3 and word not in found:
                found.append(word)
    return found


def current_task_text(plan_texts: Mapping[str, str], task_lines: tuple[int, int] | None, plan_path: str | None) -> str:
    """The text of the current task: the lines ``task_lines`` of ``plan_path`` (an article plan's
    in-progress task), else the first ``<task>`` block of ``plan_path`` (a GSD plan's next task)."""
    text = plan_texts.get(plan_path or "", "")
    if not text:
        return ""
    if task_lines:
        lines = text.split("\n")
        return "\n".join(lines[task_lines[0] - 1:task_lines[1]])
    match = _TASK.search(text)
    return match.group(0) if match else ""


def resolve_mention(mention: str, listed: frozenset[str], by_name: Mapping[str, Sequence[str]],
                    project_root: str) -> tuple[list[str], str | None]:
    """The listed files ``mention`` names, and a warning when it leads outside the project
    (``project_root`` real). Absolute and ``..`` paths are judged by their real path."""
    if mention.startswith("~"):
        return [], f"names {mention}, outside the project; not read"
    if os.path.isabs(mention) or mention.startswith("../") or "/../" in mention:
        full = mention if os.path.isabs(mention) else os.path.join(project_root, mention)
        real = os.path.realpath(full)
        if real != project_root and not real.startswith(project_root.rstrip(os.sep) + os.sep):
            return [], f"names {mention}, outside the project; not read"
        relative = os.path.relpath(real, project_root).replace(os.sep, "/")
        return ([relative] if relative in listed else []), None
    clean = posixpath.normpath(mention[2:] if mention.startswith("./") else mention)
    if clean in listed:
        return [clean], None
    matches = [p for p in by_name.get(posixpath.basename(clean), ()) if p.endswith("/" + clean)]
    return (matches if len(matches) <= MAX_SUFFIX_MATCHES else []), None


def named_code(texts: Iterable[tuple[str, str]], listed_paths: Sequence[str], project_root: str,
               identifier_texts: Iterable[str] = ()) -> CodeNames:
    """The files and identifiers named by ``texts`` ((origin, text) pairs, most important origin
    first; an origin "diff" text is one changed path per line), against ``listed_paths`` (the
    project's files, relative). Identifiers come from ``identifier_texts`` (the task and request)."""
    listed = frozenset(listed_paths)
    by_name: dict[str, list[str]] = {}
    for path in listed_paths:
        by_name.setdefault(posixpath.basename(path), []).append(path)
    files: dict[str, NamedFile] = {}
    warnings: dict[str, str] = {}  # mention -> warning: each named once, by its first origin
    for origin, text in texts:
        mentions = [line.strip() for line in text.split("\n") if line.strip()] if origin == "diff" else path_mentions(text)
        for mention in mentions:
            paths, warning = resolve_mention(mention, listed, by_name, project_root)
            if warning:
                warnings.setdefault(mention, f"code: the {origin} {warning}")
            for path in paths:
                files.setdefault(path, NamedFile(path, origin, mention))
    identifiers: list[str] = []
    for text in identifier_texts:
        for word in identifier_mentions(text):
            if word not in identifiers and "." not in word:
                identifiers.append(word)
    ordered = sorted(files.values(), key=lambda f: ORIGINS.index(f.origin))
    return CodeNames(tuple(ordered), tuple(identifiers), tuple(warnings.values()))
