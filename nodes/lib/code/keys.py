"""A file's names as 64-bit keys, packed so the repo map's graph is assembled without a Python
loop over the names of every file.

Each name becomes the first 8 bytes of its blake2b digest (:func:`name_key`): a key that depends
on the name alone, so a file's keys are computed once, when the file is parsed, and memoised with
its tags by its content (tags.py). A build joins the packed byte strings of all files
(``b"".join``) and reads them as one numpy array each (:func:`key_array`): that is the whole
per-file cost of the graph (rank.py ``reference_edges``). Two names of one project sharing a key
is a 2**-64-per-pair accident: an extra edge at worst.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Sequence

#: Byte order and width of a packed key, of a packed use count.
KEY_DTYPE = "<u8"
USES_DTYPE = "<u4"


def name_key(name: str) -> bytes:
    """The 8-byte key of ``name`` (see the module docstring)."""
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def key_array(packed: bytes):
    """The keys packed in ``packed`` as a numpy uint64 array (a view: no copy)."""
    import numpy as np

    return np.frombuffer(packed, dtype=KEY_DTYPE)


def keys_of(names: Iterable[str]) -> bytes:
    """The keys of ``names``, packed (in order)."""
    return b"".join(name_key(name) for name in names)


@dataclass(frozen=True)
class NameKeys:
    """One file's names packed: ``defined`` the keys of the distinct names it defines (in name
    order); ``referenced`` the keys of the names it uses, ``uses`` how often (uint32), and
    ``private`` 1 for a name starting with ``_`` else 0 (one byte each), all three in the order
    of its ``references``."""

    defined: bytes = b""
    referenced: bytes = b""
    uses: bytes = b""
    private: bytes = b""


def name_keys(defined: Iterable[str], references: Sequence[tuple[str, int]]) -> NameKeys:
    """The :class:`NameKeys` of a file defining ``defined`` and using ``references`` ((name,
    uses) pairs)."""
    return NameKeys(
        defined=keys_of(sorted(set(defined))),
        referenced=keys_of(name for name, _ in references),
        uses=b"".join(min(uses, 0xFFFFFFFF).to_bytes(4, "little") for _, uses in references),
        private=bytes(name.startswith("_") for name, _ in references),
    )
