"""Fingerprints of values: the data versions of Hamilton's cache, computed from content.

A value is fingerprinted by its content digest (:func:`..nodes.lib.digest.content_digest`):
values carrying a digest (a :class:`Round` and a :class:`Section` by the one set when they were
made or first used, a :class:`DigestedText`, a :class:`SessionText`, the code stage's files and
tags) enter by it, here and through Hamilton's public hook
(``hamilton.caching.fingerprinting.hash_value``).
No fingerprint is remembered by identity: a value shared by many others carries its digest.
"""

from __future__ import annotations

from typing import Any

from hamilton.caching import fingerprinting as _hamilton_fingerprints

from ..nodes.lib.code.files import CodeFiles
from ..nodes.lib.code.tags import CodeTags
from ..nodes.lib.digest import DigestedText, Unhashable, content_digest
from ..nodes.lib.memo import Memo
from ..nodes.lib.monitor import RoundUse
from ..nodes.lib.sessions import SessionText
from ..nodes.types import Round, Section


def fingerprint(value: Any) -> str | None:
    """The hex content digest of ``value`` (see :func:`content_digest`), or None when part of
    it neither pickles nor is a function. The memo's is always the same (it pickles as
    ``NO_MEMO``): what it holds never changes a node's value."""
    try:
        return content_digest(value).hex()
    except Unhashable:
        return None


def _hamilton_fingerprint(value: Any, *args: Any, **kwargs: Any) -> str:
    """Hamilton's fingerprint of one of our types: :func:`fingerprint`, or Hamilton's
    ``UNHASHABLE`` (never a hit) for a value that has none (a section holding a lock)."""
    return fingerprint(value) or _hamilton_fingerprints.UNHASHABLE


for _type in (Round, Section, RoundUse, DigestedText, SessionText, CodeFiles, CodeTags, Memo):
    _hamilton_fingerprints.hash_value.register(_type)(_hamilton_fingerprint)
