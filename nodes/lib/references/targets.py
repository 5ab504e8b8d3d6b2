"""What an @ target names and where: the kind of a token (http(s) URL, builtin:NAME, a path, a
URL of another scheme), the files a path may mean, the load-once key of a URL, how a path is
shown, and the names a missing file may have meant."""

from __future__ import annotations

import difflib
import ntpath
import posixpath
import re
from dataclasses import dataclass
from typing import Sequence
from urllib.parse import urljoin, urlsplit, urlunsplit

from ..quote import quoted
from ..regex import lazy_regex
from ..textio import TextUnavailable

_URL = lazy_regex(r"\Ahttps?://", re.I)
_SCHEME = lazy_regex(r"\A([A-Za-z][A-Za-z0-9+.\-]+):")
_DRIVE = lazy_regex(r"\A[A-Za-z]:[\\/]")
_PATH_CHARS = lazy_regex(r"\A[\w.~/\\:+\-]+\Z")
_EXTENSION = lazy_regex(r"\.[A-Za-z][A-Za-z0-9]{0,9}\Z")
_BUILTIN_NAME = lazy_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")


class ReferenceProblem(TextUnavailable):
    """A reference that cannot be located or read; the walk makes it an error or a warning."""


@dataclass(frozen=True)
class Target:
    """A located reference: kind file | url | builtin, its load-once key and its display name."""

    kind: str
    key: str  # normalised absolute path, normalised URL, or builtin:NAME: what is read
    display: str  # how warnings, sources and section keys name it (project-relative path, URL, builtin:NAME)


def is_http_url(token: str) -> bool:
    """Whether ``token`` starts with ``http://`` or ``https://`` (any case)."""
    return bool(_URL.match(token))


def is_drive_path(token: str) -> bool:
    """Whether ``token`` is a Windows drive path (``C:\\x`` or ``C:/x``)."""
    return bool(_DRIVE.match(token))


def is_reference_token(token: str) -> bool:
    """Whether the word after an @ names a document: an http(s) URL, builtin:NAME, another
    scheme's URL (refused later), or a path with a / or a file extension; not an email or an
    annotation like ``@Composable``."""
    if not token:
        return False
    if _URL.match(token):
        return True
    if "@" in token:
        return False
    if token.startswith("builtin:"):
        return bool(_BUILTIN_NAME.match(token[len("builtin:"):]))
    if "://" in token and _SCHEME.match(token):
        return True
    if not _PATH_CHARS.match(token):
        return False
    return "/" in token or "\\" in token or bool(_EXTENSION.search(token))


def target_kind(token: str) -> str:
    """url | builtin | path | scheme (a URL of a scheme other than http/https)."""
    if _URL.match(token):
        return "url"
    if token.startswith("builtin:"):
        return "builtin"
    if _DRIVE.match(token):
        return "path"
    if _SCHEME.match(token) and ("://" in token or not _looks_like_path(token)):
        return "scheme"
    return "path"


def is_absolute_path(token: str) -> bool:
    """An absolute POSIX path, a Windows drive path, or a path under ``~``."""
    return token.startswith(("/", "~")) or bool(_DRIVE.match(token))


def _looks_like_path(token: str) -> bool:
    return "/" in token or "\\" in token


def normalise_url(url: str) -> str:
    """The URL with scheme and host in lower case and no fragment: the load-once key."""
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


def builtin_name(token: str) -> str:
    """``builtin:gsd-rules`` or ``builtin:gsd-rules.md`` -> ``gsd-rules``; ReferenceProblem if odd."""
    name = token[len("builtin:"):].strip()
    if name.endswith(".md"):
        name = name[:-3]
    if not _BUILTIN_NAME.match(name) or ".." in name:
        raise ReferenceProblem(f"{quoted(token)} is not a builtin name (letters, digits, - _ .)")
    return name


def file_candidates(token: str, project_dir: str, home: str | None = None) -> list[str]:
    """Absolute paths a path reference may mean, in the order they are tried.

    Absolute (and Windows drive) paths are themselves; ``~/`` is under ``home``; a path that
    starts with ``.planning/`` is relative to the project root (GSD style); any other relative
    path is relative to ``.planning/`` first, then to the project root.
    """
    token = token.replace("\\", "/") if _DRIVE.match(token) or "\\" in token else token
    if _DRIVE.match(token):
        return [ntpath.normpath(token).replace("\\", "/")]
    if token.startswith("~/") and home:
        return [posixpath.normpath(posixpath.join(home, token[2:]))]
    if posixpath.isabs(token):
        return [posixpath.normpath(token)]
    root = posixpath.normpath(project_dir)
    relative = posixpath.normpath(token)
    if relative == ".planning" or relative.startswith(".planning/"):
        return [posixpath.join(root, relative)]
    out = [posixpath.join(root, ".planning", relative), posixpath.join(root, relative)]
    return list(dict.fromkeys(posixpath.normpath(path) for path in out))


def display_path(path: str, project_dir: str) -> str:
    """A file path as warnings and section keys show it: project-relative inside the project."""
    root = posixpath.normpath(project_dir)
    if path == root or path.startswith(root.rstrip("/") + "/"):
        return posixpath.relpath(path, root)
    return path


def url_child(token: str, parent_url: str) -> str:
    """A relative reference inside a URL document, resolved against that URL."""
    return urljoin(parent_url, token)


def closest_names(wanted: str, names: Sequence[str], n: int = 3) -> list[str]:
    """Up to n names like ``wanted``: by whole relative path, then by file name."""
    wanted = wanted.replace("\\", "/").removeprefix("./").removeprefix(".planning/")
    by_path = difflib.get_close_matches(wanted, names, n=n, cutoff=0.6)
    base = posixpath.basename(wanted)
    bases: dict[str, list[str]] = {}
    for name in names:
        bases.setdefault(posixpath.basename(name), []).append(name)
    by_base = [
        name for close in difflib.get_close_matches(base, list(bases), n=n, cutoff=0.75) for name in bases[close]
    ]
    return list(dict.fromkeys(by_path + by_base))[:n]


def suggestion_text(names: Sequence[str]) -> str:
    """``; did you mean a, b?`` or a hint that nothing similar exists."""
    if not names:
        return "; no similar file under .planning/"
    return "; did you mean " + ", ".join(names) + "?"
