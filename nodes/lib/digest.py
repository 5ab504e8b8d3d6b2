"""Content digests: SHA-256 (hardware-accelerated on current CPUs: about twice blake2b's speed
on a 4 MB transcript here), cut to 16 bytes, for memo and cache keys.

Values that carry a digest of their content (``DIGEST_TAG`` on their type and a ``digest``
attribute: a :class:`..types.Round` and a :class:`..monitor.RoundUse`, set when made; a
:class:`..types.Section` and the :class:`..disclosure.DisclosureRules`, computed on first use and
kept on them; a transcript as read, :class:`..sessions.SessionText`; the code stage's files and
tags) enter :func:`content_digest` by it, and a long text by its :func:`text_digest` (kept on a
:class:`DigestedText`), so a value shared by many others is hashed once, never by identity.
``ctxengine.caching`` fingerprints values with :func:`content_digest`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
import types
from operator import attrgetter
from typing import Any

#: The result store keeps a tuple this long by its chunks of this many items (each chunk once,
#: by its digest): a transcript that grew by a round stores one chunk. A longer tuple of values
#: that neither carry digests nor are plain is digested by its chunks too.
CHUNK_ITEMS = 128
#: Texts longer than this (characters) enter a digest by their :func:`text_digest`.
LONG_TEXT = 1 << 16
#: Lists and dicts longer than this, and long tuples of plain values, are digested through
#: their pickle (C speed). The choice never depends on where a value sits.
_WIDE = 64
_SCALARS = (str, bytes, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)
_DIGEST_OF = attrgetter("digest")


class Unhashable(Exception):
    """Part of a value neither pickles nor is a function: it has no content digest."""


def digest16(*parts: bytes) -> bytes:
    """The 16-byte digest of ``parts``, each length-prefixed (so no two splits of one byte string
    collide)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()[:16]


def bytes_digest(data: bytes) -> bytes:
    """The 16-byte digest of ``data``."""
    return hashlib.sha256(data).digest()[:16]


def text_digest(text: str) -> bytes:
    """The 16-byte digest of a text's UTF-8 bytes (lone surrogates kept); a :class:`DigestedText`
    carries it."""
    if type(text) is DigestedText:
        return text.digest
    return bytes_digest(text.encode("utf-8", "surrogatepass"))


class DigestedText(str):
    """A text with its :func:`text_digest`, computed when it was made (:func:`long_text`: a
    section's content, the rendered context), so neither the memo's keys nor the cache's
    fingerprint hash it again. Made by copying the text (a ``str`` subclass): a text read from a
    file carries its digest beside it instead (:class:`..sessions.SessionText`). It pickles as a
    plain ``str``, and digests as one (:func:`content_digest`)."""

    digest: bytes

    def __reduce__(self):
        return (str, (str(self),))


def digested_text(text: str, digest: bytes) -> DigestedText:
    """``text`` carrying ``digest`` (its :func:`text_digest`, computed by the caller)."""
    out = DigestedText(text)
    out.digest = digest
    return out


def long_text(text: str) -> str:
    """``text``, carrying its :func:`text_digest` when it is longer than :data:`LONG_TEXT`: a
    long text (the history section's, the rendered context) is hashed once, where it is made,
    not in every value that holds it."""
    if len(text) > LONG_TEXT and type(text) is str:
        return digested_text(text, text_digest(text))
    return text


def round_digest_of(*parts: bytes) -> bytes:
    """The content digest of a round made from ``parts`` (the index included): what a parser
    gives :class:`..types.Round` (``source_digest``) when it knows them."""
    return digest16(b"round", *parts)


def chunks_of(items: tuple) -> list[tuple]:
    """``items`` in chunks of :data:`CHUNK_ITEMS` (the last one shorter): how a long tuple is
    digested and stored."""
    return [items[start:start + CHUNK_ITEMS] for start in range(0, len(items), CHUNK_ITEMS)]


def content_digest(value: Any) -> bytes:
    """A digest of ``value``'s content; :class:`Unhashable` when part of it neither pickles nor
    is a function.

    A value carrying its digest enters by it (with its type's tag); a small list, tuple, dict or
    dataclass of plain values only (:func:`_plain_digest`) goes by its pickle; other lists, tuples
    and dicts (up to 64 items), sets, dataclasses and functions (name, closure, defaults) are
    walked; a tuple of values of one type carrying digests goes by one hash of them joined
    (however long), a tuple of more than 64 plain values by its pickle, another tuple of more
    than :data:`CHUNK_ITEMS` items by its chunks; wider containers and other objects through
    their pickle.
    Equal digests mean equal values (types and field names included), so a fingerprint never
    serves a stale result; two equal values may digest apart (shared references inside a pickle,
    a set deep inside one), which only costs a recomputation."""
    kind = type(value)
    if kind in _SCALARS or kind is DigestedText:
        return digest16(_part(value))
    tag = getattr(kind, "DIGEST_TAG", None)
    if tag is not None:
        return tag + value.digest
    if kind is tuple:
        return _tuple_digest(value)
    if kind is list and len(value) <= _WIDE:
        return _plain_digest(value, value) or digest16(b"list", *map(_part, value))
    if kind is set or kind is frozenset:  # the pickle of a set follows the per-process string hash order
        return digest16(kind.__name__.encode(), *sorted(map(_part, value)))
    if kind is dict and len(value) <= _WIDE:
        return _plain_digest(value, value.values(), value) or digest16(
            b"dict", *[b"%d:%s=%s" % (len(key), key, _part(item)) for key, item in ((_part(k), v) for k, v in value.items())])
    if kind is types.FunctionType:
        return _function_digest(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_digest(value)
    return value_digest(value)


def fields_digest(value: Any) -> bytes:
    """The digest of a dataclass instance: its type's name and each field's name and content
    (fields of plain values only: by the pickle of them all, :func:`_plain_digest`)."""
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}".encode()
    names = [f.name for f in dataclasses.fields(value)]
    items = [getattr(value, field) for field in names]
    if (plain := _plain_digest(items, items)) is not None:  # the names apart: a pickle shares a value that is one
        return digest16(b"fields", name, ",".join(names).encode(), plain)
    return digest16(name, *[b"%s=%s" % (field.encode(), _part(item)) for field, item in zip(names, items)])


def _function_digest(function: types.FunctionType) -> bytes:
    """A function by its module, name, and the contents of its closure, defaults and keyword-only
    defaults (those it has)."""
    parts = [b"fn", function.__module__.encode(), function.__qualname__.encode()]
    if function.__closure__:
        parts.append(b"c" + content_digest(tuple(cell.cell_contents for cell in function.__closure__)))
    for tag, defaults in ((b"d", function.__defaults__), (b"k", function.__kwdefaults__)):
        if defaults:
            parts.append(tag + content_digest(defaults))
    return digest16(*parts)


def _plain_digest(value: Any, *parts: Any) -> bytes | None:
    """The digest of ``value``'s pickle when each of ``parts`` holds only values of
    :data:`_SCALARS` (no :class:`DigestedText`), none a text longer than :data:`LONG_TEXT` (a
    long text enters by its :func:`text_digest`, as the same text carrying its digest does);
    else None, and the caller walks it. One pickle and one hash at C speed instead of a hash per
    item; the texts' lengths are looked at only when the pickle is longer than a long text."""
    for part in parts:
        if not _SCALAR_TYPES.issuperset(map(type, part)):
            return None
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > LONG_TEXT and any(type(item) is str and len(item) > LONG_TEXT for part in parts for item in part):
        return None
    return digest16(b"plain", data)


def _tuple_digest(items: tuple) -> bytes:
    kinds = set(map(type, items))
    if len(kinds) == 1 and (tag := getattr(next(iter(kinds)), "DIGEST_TAG", None)) is not None:
        joined = b"".join(map(_DIGEST_OF, items))
        if len(joined) == 16 * len(items):  # each by the 16 bytes it carries: one hash of them joined
            return digest16(b"tuple-of", tag, joined)
    if len(items) > _WIDE and kinds.issubset(_SCALARS):
        return value_digest(items)
    if len(items) <= _WIDE and (plain := _plain_digest(items, items)) is not None:
        return plain
    if len(items) > CHUNK_ITEMS:
        return digest16(b"chunks", *map(content_digest, chunks_of(items)))
    return digest16(b"tuple", *map(_part, items))


def value_digest(value: Any) -> bytes:
    """The 16-byte digest of ``value``'s pickle (plain data: its content); :class:`Unhashable`
    when it does not pickle."""
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - closures, locks: not ours to hash
        raise Unhashable(str(exc)) from None
    return digest16(b"pickle", data)


def _part(value: Any) -> bytes:
    """How ``value`` enters the digest of what holds it: a scalar by its bytes (tagged with its
    type, so "1" and 1 differ), a long text by its :func:`text_digest`, anything else by its
    own :func:`content_digest`."""
    kind = type(value)
    if kind is str or kind is DigestedText:  # the same text, loaded (a plain str) or not
        if len(value) > LONG_TEXT:
            return b"S" + text_digest(value)
        return b"s" + value.encode("utf-8", "surrogatepass")
    if kind in _SCALARS:
        return kind.__name__.encode() + b":" + repr(value).encode()
    return b"#" + content_digest(value)
