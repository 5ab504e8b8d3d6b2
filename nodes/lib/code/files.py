"""The project files the code stage read: texts, content digests, what was left out and why.

Each text's digest is computed once, as it is read: it keys the file's tags in the memo
(tags.py ``tags_digest``), and the digest of them all is the value's fingerprint for
Hamilton's cache (pipeline/caching/), so thousands of texts are never hashed twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from ..digest import digest16


@dataclass(frozen=True)
class CodeFiles:
    """Relative path -> text of the files read, path -> content digest (the tags' memo key),
    the files left out with the reason (path, reason), and the warnings owed (named files
    refused or skipped). ``digest``: of all of it."""

    texts: Mapping[str, str] = field(default_factory=dict)
    digests: Mapping[str, bytes] = field(default_factory=dict)
    skipped: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    digest: bytes = field(default=b"", compare=False, repr=False)

    DIGEST_TAG = b"cf"  # carries a content digest (nodes/lib/digest.py)


def code_files_of(texts: Mapping[str, str], digests: Mapping[str, bytes], skipped: tuple, warnings: tuple) -> CodeFiles:
    """A :class:`CodeFiles` with its digest."""
    parts = [path.encode("utf-8", "surrogatepass") + b"\0" + digests[path] for path in sorted(texts)]
    digest = digest16(b"code-files", *parts, repr(skipped).encode(), repr(warnings).encode())
    return CodeFiles(dict(texts), dict(digests), tuple(skipped), tuple(warnings), digest)


def real_path(path: str, real_folders: dict[str, str]) -> str | None:
    """The real path of ``path`` from its folder's real path (resolved once per folder in
    ``real_folders``), or None when the file itself is a symlink or cannot be looked at (the
    reader resolves it then)."""
    try:
        if os.path.islink(path):
            return None
    except OSError:
        return None
    folder, name = os.path.split(path)
    if folder not in real_folders:
        real_folders[folder] = os.path.realpath(folder)
    return os.path.join(real_folders[folder], name)
