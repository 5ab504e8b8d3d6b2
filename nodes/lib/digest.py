"""Content digests: SHA-256 (hardware-accelerated on current CPUs: about twice blake2b's speed
on a 4 MB transcript here), cut to 16 bytes, for memo and cache keys.

A round's digest is computed once, when it is made (:func:`digested`), and kept on the round
(``Round.digest``): the memo's keys of values made from a round and Hamilton's fingerprint of
it (``ctxengine.caching``) read it instead of hashing the round again.
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import replace

from ..types import Round


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
    """A text with its :func:`text_digest`, computed when it was made (a transcript read again
    after it grew: from the digest state of its old part and its new part only, nodes/lib/grown.py),
    so neither the memo's keys nor the cache's fingerprint hash its megabytes again. It pickles
    as a plain ``str``."""

    digest: bytes

    def __reduce__(self):
        return (str, (str(self),))


def digested_text(text: str, digest: bytes) -> DigestedText:
    """``text`` carrying ``digest`` (its :func:`text_digest`, computed by the caller)."""
    out = DigestedText(text)
    out.digest = digest
    return out


def value_digest(value: object) -> bytes:
    """The 16-byte digest of a value's pickle (plain data: its content)."""
    return digest16(b"pickle", pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def digested(round_: Round, *parts: bytes) -> Round:
    """``round_`` with its content digest set: of ``parts`` (what it was made from, the index
    included) when given, else of its pickle."""
    digest = round_digest_of(*parts) if parts else round_digest_of(value_digest(round_))
    return replace(round_, digest=digest)


def round_digest_of(*parts: bytes) -> bytes:
    """The content digest of a round made from ``parts`` (the index included): what
    :func:`digested` sets, for a caller that makes the round with it."""
    return digest16(b"round", *parts)


def round_digest(round_: Round) -> bytes:
    """The content digest of a round: the one set when it was made, else its pickle's."""
    return round_.digest or round_digest_of(value_digest(round_))
