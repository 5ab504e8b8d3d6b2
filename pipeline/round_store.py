"""The round memo between processes: a grown transcript re-uses the rounds of its unchanged beginning.

Hamilton's cache serves a node's value when its inputs are unchanged; a transcript that only
grew is a changed input, so ``session_history`` and what follows it run again. Within one
process the round memo (``nodes/lib/round_memo.py``) makes that cheap: only the new rounds
are parsed, summarized and measured. This module carries the memo's entries to the next
process (the next ``ctxengine build`` of an agent's turn): ``rounds.pickle`` in the project's
cache folder for this code version. Before a cached build a file this process has not read yet
is offered to the memo, which reads it on its first miss (an unchanged rebuild never does);
after a build that made something new, the entries it made are appended to the file as one
frame, or, when the file would then hold much that the build did not use (a third), or another
process changed it since, the file is written again with just the entries the build used. Only
a build that read the transcript's rounds judges that: one whose rounds were all cache hits
(an unchanged transcript, a new request) and that only counted new text appends.

The file is the cache's, with the cache's rules: in the private folder of this code version
(so another version never reads it, and pruning removes it with that version), read only when
it is this user's and nobody else can write it, never over a quarter of ``cache.maxBytes``.
Each frame carries its length and its HMAC-SHA256 under the user's key
(:func:`usercache.cache_key`, kept outside any project): a frame is unpickled only when its MAC
checks. A frame torn by a crash or a concurrent write (cut short at the end) ends the reading
there (what came before is used, the next build writes the file again); a whole frame whose MAC
fails (not written by this user's ctxengine) discards the file, with a warning. Two processes
appending at once each add a whole frame (one ``write`` to a file opened for appending). A
file that does not load is never an error.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
from pathlib import Path

from .cache import store_dir, stores_for
from .nodes.lib import usercache
from .nodes.lib.round_memo import ROUND_MEMO, RoundMemo

FILE = "rounds.pickle"
_MAGIC = b"ctxengine-rounds-3\n"
_HEAD = 4 + usercache.MAC_BYTES  # a frame: its length (4 bytes, big-endian), its MAC, then its pickle
_WARN = logging.getLogger("ctxengine.cache")
_LOGGER = logging.getLogger(__name__)
#: path -> (mtime_ns, size) of the file as this process last read or wrote it
_SEEN: dict[str, tuple[int, int]] = {}
#: path -> entries in the file as this process last read or wrote it (None: rewrite it)
_ENTRIES: dict[str, int | None] = {}


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
    if _SEEN.get(str(path)) == _stamp(info):
        return False
    _SEEN[str(path)] = _stamp(info)
    _ENTRIES[str(path)] = None  # unknown until it is read
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        _LOGGER.debug("round memo %s not read: not this user's, or writable by others", path)
        return False
    key = stores_for(cache_dir).key
    memo.offer(lambda: load(path, key))
    return True


def load(path: Path, key: bytes) -> dict:
    """The entries kept in ``path``, its frames merged in order, each unpickled only when its MAC
    under ``key`` checks; {} when it does not load (a file that is not a round memo, or holds a
    frame that fails its MAC, is removed)."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if not data.startswith(_MAGIC):
        _LOGGER.debug("round memo %s dropped: not a round memo file", path)
        path.unlink(missing_ok=True)
        return {}
    merged: dict = {"parses": {}, "derived": {}}
    position, entries, whole = len(_MAGIC), 0, True
    while position < len(data):
        frame = _frame_at(data, position, key)
        if frame is _FORGED:
            _WARN.warning("warning: cache: %s holds an entry without this user's MAC (written by someone else); "
                          "the file is discarded and rebuilt", path)
            path.unlink(missing_ok=True)
            _ENTRIES[str(path)] = None
            return {}
        if frame is None:
            _LOGGER.debug("round memo %s: a torn frame at byte %d; the rest is not read", path, position)
            whole = False
            break
        snapshot, position = frame
        for name in merged:
            merged[name].update(snapshot.get(name) or {})
            entries += len(snapshot.get(name) or {})
    _ENTRIES[str(path)] = entries if whole else None
    return merged


_FORGED = object()


def _frame_at(data: bytes, position: int, key: bytes):
    """(the snapshot, the next position) of the frame at ``position``; None when it is torn (cut
    short), :data:`_FORGED` when it is whole but its MAC fails."""
    size = int.from_bytes(data[position:position + 4], "big")
    body = data[position + _HEAD:position + _HEAD + size]
    if len(body) != size or len(data) < position + _HEAD:
        return None
    if not usercache.mac_ok(key, data[position + 4:position + _HEAD], body):
        return _FORGED
    try:
        snapshot = pickle.loads(body)  # noqa: S301 - our own private file (see offer), MAC checked
    except Exception:  # noqa: BLE001 - a class that changed outside the nodes: as if torn
        return None
    return (snapshot, position + _HEAD + size) if isinstance(snapshot, dict) else None


def keep(cache_dir: str | os.PathLike, work_before: int, max_bytes: int, memo: RoundMemo = ROUND_MEMO) -> bool:
    """Keep what the build made (``memo.work`` grew past ``work_before``), or everything it used
    when the folder has no file: appended as a frame, or the file written again (see the module
    docstring). False when there was nothing to write, it would pass a quarter of ``max_bytes``,
    or the disk refused."""
    path = rounds_file(cache_dir)
    key = stores_for(cache_dir).key
    try:
        info = path.stat()
    except OSError:
        info = None
    if memo.work == work_before and info is not None:
        return False
    known = _ENTRIES.get(str(path))
    # Only a build that read the transcript (used its rounds) can tell the entries that are still
    # current: one that only counted new text (an unchanged transcript, a new request) appends.
    judged = memo.rounds_used > 0
    unchanged = info is not None and known is not None and _SEEN.get(str(path)) == _stamp(info)
    frame = snapshot = None
    if info is not None and (unchanged or not judged):
        snapshot = memo.snapshot(made_only=True)
        if not any(snapshot.values()):
            return False
        if not judged or known + sum(map(len, snapshot.values())) <= 1.5 * memo.used + 64:  # else: mostly unused
            frame = _frame(snapshot, key)
            if info.st_size + len(frame) > max_bytes // 4:
                if not judged:
                    return False  # nothing to tell what could go: the file stays as it is
                frame = None  # too big with it: written again with what this build used only
    if frame is not None:
        written = _append(path, frame)
    else:
        snapshot = memo.snapshot()
        if not any(snapshot.values()):
            return False
        data = _MAGIC + _frame(snapshot, key)
        if len(data) > max_bytes // 4:
            return False
        written = _replace(path, data)
        known, unchanged = 0, True
    if not written:
        return False
    _SEEN[str(path)] = _stamp(path.stat())
    _ENTRIES[str(path)] = known + sum(map(len, snapshot.values())) if unchanged else None  # None: not known
    return True


def _frame(snapshot: dict, key: bytes) -> bytes:
    body = pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
    return len(body).to_bytes(4, "big") + usercache.mac(key, body) + body


def _append(path: Path, frame: bytes) -> bool:
    """``frame`` added at the end of ``path`` in one write (another process's frame never lands inside it)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            return os.write(fd, frame) == len(frame)
        finally:
            os.close(fd)
    except OSError as exc:
        _LOGGER.debug("round memo %s not appended to: %s", path, exc)
        return False


def _replace(path: Path, data: bytes) -> bool:
    """``path`` written again atomically (a reader sees the old file or the new one, whole)."""
    temp = None
    try:
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".rounds-")
        with os.fdopen(handle, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
        return True
    except OSError as exc:  # a full disk or a folder gone: the next build makes them again
        _LOGGER.debug("round memo %s not written: %s", path, exc)
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        return False


def _stamp(info: os.stat_result) -> tuple[int, int]:
    return info.st_mtime_ns, info.st_size
