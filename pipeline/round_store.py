"""The round memo between processes: a grown transcript re-uses the rounds of its unchanged beginning.

Hamilton's cache serves a node's value when its inputs are unchanged; a transcript that only
grew is a changed input, so ``session_history`` and what follows it run again. Within one
process the round memo (``nodes/lib/round_memo.py``) makes that cheap: only the new rounds
are parsed, summarized and measured. This module carries the memo's entries to the next
process (the next ``ctxengine build`` of an agent's turn): after a cached build that made
something new, the entries the build used are written to ``rounds.pickle`` in the project's
cache folder for this code version; before a cached build, a file this process has not read
yet is offered to the memo, which reads it on its first miss (an unchanged rebuild never does).

The file is the cache's, with the cache's rules: in the private folder of this code version
(so another version never reads it, and pruning removes it with that version), written
atomically (two processes: the last one wins, neither tears it), read only when it is this
user's and nobody else can write it, left alone when over a quarter of ``cache.maxBytes``, and
a file that does not load is removed, never an error.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
from pathlib import Path

from .cache import store_dir
from .nodes.lib.round_memo import ROUND_MEMO, RoundMemo

FILE = "rounds.pickle"
_MAGIC = b"ctxengine-rounds-1\n"
_LOGGER = logging.getLogger(__name__)
#: path -> (mtime_ns, size) of the file as this process last read or wrote it
_SEEN: dict[str, tuple[int, int]] = {}


def rounds_file(cache_dir: str | os.PathLike) -> Path:
    """Where the round memo of a project's cache folder is kept (inside this code version's folder)."""
    return store_dir(cache_dir) / FILE


def offer(cache_dir: str | os.PathLike, memo: RoundMemo = ROUND_MEMO) -> bool:
    """Offer the folder's round entries to ``memo`` unless this process has them already: they
    are read on the memo's first miss (see :meth:`RoundMemo.offer`). Whether a file was offered."""
    path = rounds_file(cache_dir)
    try:
        info = path.stat()
    except OSError:
        return False
    stamp = (info.st_mtime_ns, info.st_size)
    if _SEEN.get(str(path)) == stamp:
        return False
    _SEEN[str(path)] = stamp
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        _LOGGER.debug("round memo %s not read: not this user's, or writable by others", path)
        return False
    memo.offer(lambda: load(path))
    return True


def load(path: Path) -> dict:
    """The snapshot kept in ``path``; {} (and the file removed) when it does not load."""
    try:
        data = path.read_bytes()
        if not data.startswith(_MAGIC):
            raise ValueError("not a round memo file")
        return pickle.loads(data[len(_MAGIC):])  # noqa: S301 - our own private file (see offer)
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: rebuilt by the next build
        _LOGGER.debug("round memo %s dropped: %s", path, exc)
        path.unlink(missing_ok=True)
        return {}


def keep(cache_dir: str | os.PathLike, work_before: int, max_bytes: int, memo: RoundMemo = ROUND_MEMO) -> bool:
    """Write the entries the build used when it made something new (``memo.work`` grew past
    ``work_before``) or the folder has none; False when there was nothing to write or it was
    over a quarter of ``max_bytes``."""
    path = rounds_file(cache_dir)
    if memo.work == work_before and path.exists():
        return False
    snapshot = memo.snapshot()
    if not (snapshot["parses"] or snapshot["derived"]):
        return False
    data = _MAGIC + pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > max_bytes // 4:
        return False
    temp = None
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".rounds-")
        with os.fdopen(handle, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
        info = path.stat()
    except OSError as exc:  # a full disk or a folder gone: the next build makes them again
        _LOGGER.debug("round memo %s not written: %s", path, exc)
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        return False
    _SEEN[str(path)] = (info.st_mtime_ns, info.st_size)
    return True
