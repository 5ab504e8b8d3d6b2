"""What the request names: ``@doc URL`` targets, and the documents it names by file name or path.

Layer 3 loads the documents the request names (``see FIX-PLAN.md``,
``.planning/v1.0-MILESTONE-AUDIT.md``): :func:`request_names` finds the names,
:func:`resolve_named` finds the files under ``.planning/`` they name, or else a document of the
project outside it (``docs/DESIGN.md``, ``README.md``: only the named path itself is looked at,
a bare name at the project top level; such a candidate's path is ``../docs/DESIGN.md``,
relative to ``.planning/`` like every other, and only the request can load it).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..fences import without_code
from ..quote import quoted
from ..regex import lazy_regex
from .globs import natural_key

_DOC = lazy_regex(r"(?<!\S)@doc[ \t]+(\S+)", re.I)


def request_urls(request: str) -> list[str]:
    """The targets of every ``@doc TARGET`` in the request, in order, without repeats."""
    seen: dict[str, None] = {}
    for match in _DOC.finditer(request or ""):
        seen.setdefault(match.group(1).rstrip(".,;:)]}>\"'"), None)
    return list(seen)


_URL = lazy_regex(r"[A-Za-z][A-Za-z0-9+.-]*://\S+|(?<!\S)@doc[ \t]+\S+", re.I)
_NAME = lazy_regex(r"(?<![\w./@:\\-])((?:\./)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z][A-Za-z0-9]{0,9})(?![\w/\\-])")


def request_names(request: str) -> tuple[str, ...]:
    """File names and relative paths the request names (``see FIX-PLAN.md``,
    ``.planning/v1.0-MILESTONE-AUDIT.md``, in a `code span` too), in order, once each.
    URLs, ``@doc`` targets and fenced code blocks (pasted code or logs) name nothing."""
    text = _URL.sub(" ", without_code(request or ""))
    seen: dict[str, None] = {}
    for match in _NAME.finditer(text):
        seen.setdefault(match.group(1).removeprefix("./"), None)
    return tuple(seen)


OUTSIDE = "../"  # how a candidate path relative to .planning/ starts when the file is elsewhere in the project
DOCUMENT_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".rst", ".adoc")  # what a named project file may be


def project_documents(names: Sequence[str]) -> tuple[str, ...]:
    """The names of the request that may be a document of the project outside .planning/:
    a relative path (or a bare name, looked for at the top level) with a document suffix,
    no ``..``, not under .planning/ or .git/. The loader checks just these paths."""
    out = []
    for name in names:
        parts = name.split("/")
        if (name.lower().startswith((".planning/", ".git/")) or not name.lower().endswith(DOCUMENT_SUFFIXES)
                or any(part in ("", ".", "..") for part in parts)):
            continue
        out.append(name)
    return tuple(out)


def display_of(path: str) -> str:
    """A candidate path (relative to .planning/) as the project-relative path the plan shows."""
    return posixpath.normpath(".planning/" + path) if path.startswith(OUTSIDE) else f".planning/{path}"


@dataclass(frozen=True)
class NamedFiles:
    """The files under .planning/ the request names, and the names that stayed ambiguous."""

    files: Mapping[str, str] = field(default_factory=dict)  # path (relative to .planning/) -> name as written
    warnings: tuple[str, ...] = ()


def resolve_named(names: Sequence[str], listing: Sequence[str], present: Iterable[str] = ()) -> NamedFiles:
    """The file each name of the request names under .planning/ (``listing``, relative paths).

    A name matches a file of that name, a path matches the file at that path or ending with
    it (``.planning/`` in front is dropped), ignoring case. When several match, the one at the
    top of .planning/ (or at exactly that path) wins, then the one spelled with the same case;
    a name still ambiguous loads nothing and is a warning listing the files. A name that
    matches no file under .planning/ names the project file at that path when it is in
    ``present`` (the :func:`project_documents` that exist), as ``../<path>``; else nothing (it
    may be a source file, or a file to create).
    """
    files: dict[str, str] = {}
    warnings: list[str] = []
    lowered = [(path, path.lower()) for path in listing]
    present = set(present)
    for name in names:
        found = _files_named(name.removeprefix(".planning/"), lowered)
        if len(found) == 1:
            files.setdefault(found[0], name)
        elif found:
            warnings.append(_ambiguity(name, found))
        elif name in present:
            files.setdefault(OUTSIDE + name, name)
    return NamedFiles(files, tuple(warnings))


def _files_named(wanted: str, lowered: Sequence[tuple[str, str]]) -> list[str]:
    """The files of ``lowered`` ((path, lower-case path) pairs) that ``wanted`` names, ignoring
    case: at that path or ending with it; when several, those at exactly that path, then those
    spelled with the same case (one file when the name is clear)."""
    key = wanted.lower()
    matches = [path for path, low in lowered if low == key or low.endswith("/" + key)]
    exact = [path for path in matches if path.lower() == key] or matches
    if len(exact) <= 1:
        return exact
    return [path for path in exact if path == wanted or path.endswith("/" + wanted)] or exact


def _ambiguity(name: str, found: Sequence[str]) -> str:
    """The warning of a name that matches several files: the first five, and how to pick one."""
    ordered = sorted(found, key=natural_key)
    shown = ", ".join(f".planning/{path}" for path in ordered[:5])
    return (f"the request names {quoted(name)}, which matches several files ({shown}); none loaded: "
            f"name it by its path (e.g. .planning/{ordered[0]})")
