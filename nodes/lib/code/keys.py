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
import sys
from array import array
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

#: Byte order and width of a packed key, of a packed use count.
KEY_DTYPE = "<u8"
USES_DTYPE = "<u4"
#: The array type code of 4-byte unsigned ints on this platform (a use count packed).
_U32 = next(code for code in "IL" if array(code).itemsize == 4)


def name_key(name: str) -> bytes:
    """The 8-byte key of ``name`` (see the module docstring)."""
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def key_array(packed: bytes):
    """The keys packed in ``packed`` as a numpy uint64 array (a view: no copy)."""
    return np.frombuffer(packed, dtype=KEY_DTYPE)


def keys_of(names: Iterable[str], known: dict[str, bytes] | None = None) -> bytes:
    """The keys of ``names``, packed (in order). ``known``: name -> key of the names met so far
    in this build (one build parses thousands of files that use the same names: each is
    digested once), filled with the new ones."""
    if known is None:
        return b"".join(name_key(name) for name in names)
    names = list(names)
    for name in set(names).difference(known):
        known[name] = name_key(name)
    return b"".join(map(known.__getitem__, names))


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


def name_keys(defined: Iterable[str], references: Sequence[tuple[str, int]],
              known: dict[str, bytes] | None = None) -> NameKeys:
    """The :class:`NameKeys` of a file defining ``defined`` and using ``references`` ((name,
    uses) pairs); ``known`` as for :func:`keys_of`."""
    names = [name for name, _ in references]
    uses = array(_U32, [n for _, n in references])  # a file of 4 billion uses is not read
    if sys.byteorder != "little":
        uses.byteswap()
    return NameKeys(
        defined=keys_of(sorted(set(defined)), known),
        referenced=keys_of(names, known),
        uses=uses.tobytes(),
        private=bytes([name[:1] == "_" for name in names]),
    )
