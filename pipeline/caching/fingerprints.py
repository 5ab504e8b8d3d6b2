"""Fingerprints of values: the data versions of Hamilton's cache, computed from content.

Values carrying a digest set when they were made (a :class:`Round`, a :class:`DigestedText`, the
code stage's files and tags) are fingerprinted by it, here and through Hamilton's public hook
(``hamilton.caching.fingerprinting.hash_value.register``); other values are walked (see
:func:`fingerprint`).
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import types
from typing import Any

from hamilton.caching import fingerprinting as _hamilton_fingerprints

from ..nodes.lib.code.files import CodeFiles
from ..nodes.lib.code.tags import CodeTags
from ..nodes.lib.digest import DigestedText, digest16, round_digest, text_digest
from ..nodes.lib.memo import Memo
from ..nodes.lib.monitor import RoundUse
from ..nodes.types import Round

#: A tuple this long inside a stored value is stored once, in chunks of this many items, each
#: by its fingerprint, and referred to by every value holding it (the transcript's rounds sit
#: in some twenty values): a transcript that grew by one round stores one new chunk.
SHARED_MIN_ITEMS = 128



#: Containers longer than this are hashed through their pickle (C speed). The choice never
#: depends on where a value sits, so a value hashes the same inside any other.
_WIDE = 64
_SCALARS = (str, bytes, int, float, bool, type(None))


def fingerprint(value: Any, memo: dict | None = None) -> str | None:
    """A content hash of ``value``, or None when part of it neither pickles nor is a function.

    Lists, tuples and dicts (up to 64 items), sets and dataclasses are walked, and each one's
    hash is remembered by identity in ``memo`` (one run: a node's value shares its sections with its
    inputs, so the 4 MB history section is hashed once a run, not once a node); a tuple of more
    than :data:`SHARED_MIN_ITEMS` items is hashed by its chunks of that many, as the result store
    keeps it (each chunk by its own fingerprint, remembered for the run); wider containers and other objects are hashed through their pickle; sets are
    walked in sorted order. Equal hashes mean equal values (types
    and field names included), so a fingerprint never serves a stale result; two equal values
    may hash apart (shared references, or a set deep inside a pickle, whose order follows the
    process's string hashing), which only costs a recomputation.
    """
    try:
        return _fp(value, {} if memo is None else memo)
    except _Unhashable:
        return None


class _Unhashable(Exception):
    pass


def _digest(*parts: bytes) -> str:
    return digest16(*parts).hex()


def _fp(value: Any, memo: dict) -> str:
    kind = type(value)
    if kind in _SCALARS:
        return _digest(_part(value, memo))
    by_content = _BY_CONTENT.get(kind)
    if by_content is not None:  # a digest computed when the value was made
        return by_content(value)
    known = memo.get(id(value))
    if known is not None and known[0] is value:
        return known[1]
    if isinstance(value, types.FunctionType):
        cells = tuple(cell.cell_contents for cell in (value.__closure__ or ()))
        result = _digest(b"fn", value.__module__.encode(), value.__qualname__.encode(),
                         _fp(cells, memo).encode(), _fp(value.__defaults__, memo).encode())
    elif kind is tuple and len(value) > SHARED_MIN_ITEMS:  # by its chunks, as the result store keeps it
        result = _digest(b"chunks", *[_fp(part, memo).encode() for part in chunks_of(value)])
    elif kind is tuple and value and (rounds := _rounds_fingerprint(value)) is not None:
        result = rounds  # by the digests the rounds were made with
    elif kind is tuple and len(value) > _WIDE and all(type(item) in _PLAIN for item in value):
        result = _pickled(value)  # a long tuple of plain values (a round's token uses): one pickle, C speed
    elif kind is tuple or (kind is list and len(value) <= _WIDE):  # a tuple never changes: walked at any length
        result = _digest(kind.__name__.encode(), *[_part(item, memo) for item in value])
    elif kind in (set, frozenset):  # the pickle of a set follows the per-process string hash order
        result = _digest(kind.__name__.encode(), *sorted(_part(item, memo) for item in value))
    elif kind is dict and len(value) <= _WIDE:
        result = _digest(b"dict", *[b"%d:%s=%s" % (len(key), key, _part(v, memo))
                                    for key, v in ((_part(k, memo), v) for k, v in value.items())])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        result = _digest(f"{kind.__module__}.{kind.__qualname__}".encode(),
                         *[b"%s=%s" % (f.name.encode(), _part(getattr(value, f.name), memo)) for f in dataclasses.fields(value)])
    else:
        result = _pickled(value)
    memo[id(value)] = (value, result)
    return result


def _round_fingerprint(value: Round, *args: Any, **kwargs: Any) -> str:
    """A round's fingerprint: its content digest, set when it was made (``Round.digest``)."""
    return "r" + round_digest(value).hex()


def _text_fingerprint(value: DigestedText, *args: Any, **kwargs: Any) -> str:
    """A long text's fingerprint: its content digest, computed when it was read."""
    return "t" + value.digest.hex()


def _memo_fingerprint(value: Memo, *args: Any, **kwargs: Any) -> str:
    """The memo's fingerprint: always the same (what it holds never changes a node's value)."""
    return "memo"


def _code_fingerprint(value: CodeFiles | CodeTags, *args: Any, **kwargs: Any) -> str:
    """The code stage's files or tags: the digest of the files' contents, computed as they were read."""
    return ("cf" if isinstance(value, CodeFiles) else "ct") + value.digest.hex()


#: Types fingerprinted by a digest of their content computed when the value was made, here and
#: through Hamilton's public hook (``fingerprinting.hash_value``) for Hamilton's own hashing.
_BY_CONTENT = {Round: _round_fingerprint, DigestedText: _text_fingerprint, Memo: _memo_fingerprint,
               CodeFiles: _code_fingerprint, CodeTags: _code_fingerprint}
for _type, _function in _BY_CONTENT.items():
    _hamilton_fingerprints.hash_value.register(_type)(_function)


def _rounds_fingerprint(items: tuple) -> str | None:
    """The fingerprint of a tuple of rounds, from the digests they were made with (one hash of
    their concatenation: each is 16 bytes); None when an item is not a round."""
    if set(map(type, items)) != {Round}:
        return None
    return _digest(b"rounds", b"".join(map(round_digest, items)))


def chunks_of(items: tuple) -> list[tuple]:
    """``items`` in chunks of :data:`SHARED_MIN_ITEMS` (the last one shorter): how a long tuple
    is fingerprinted and stored."""
    return [items[start:start + SHARED_MIN_ITEMS] for start in range(0, len(items), SHARED_MIN_ITEMS)]


#: Texts longer than this (characters) enter a hash by their own digest (nodes/lib/digest.py).
_LONG_TEXT = 1 << 16

#: Values whose pickle is their content: a long tuple of these is hashed through one pickle.
_PLAIN = frozenset({*_SCALARS, RoundUse})

def _part(value: Any, memo: dict) -> bytes:
    """How ``value`` enters the hash of what holds it: a scalar by its bytes (tagged with its
    type, so "1" and 1 differ), anything else by its own fingerprint."""
    kind = type(value)
    if kind is str:
        if len(value) > _LONG_TEXT:  # by its digest, computed once a run
            return b"S" + long_text_digest(value, memo)
        return b"s" + value.encode("utf-8", "surrogatepass")
    if kind in _SCALARS:
        return kind.__name__.encode() + b":" + repr(value).encode()
    return b"#" + _fp(value, memo).encode()


def long_text_digest(text: str, memo: dict) -> bytes:
    """The digest of a long text, computed once a run (``memo``: the run's fingerprints; the
    fitted context and the transcript sit in several values of a build)."""
    known = memo.get(id(text))
    if known is not None and known[0] is text:
        return known[1]
    digest = text_digest(text)
    memo[id(text)] = (text, digest)
    return digest


def _pickled(value: Any) -> str:
    buffer = io.BytesIO()
    try:
        pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception as exc:  # noqa: BLE001 - closures, locks: not ours to hash
        raise _Unhashable(str(exc)) from None
    return "p" + _digest(buffer.getvalue())[1:]

