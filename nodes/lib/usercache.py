"""The user's cache root and the trust of what is in it.

Where: a folder given by the user (``--cache-dir DIR``, ``cache_dir=``, ``$CTXENGINE_CACHE_DIR``)
is never used as it is: ctxengine works in ``DIR/ctxengine-cache/``, a folder it creates and
marks (``CACHEDIR.TAG``). Without one, ``$XDG_CACHE_HOME/ctxengine`` (``~/.cache/ctxengine``).
A relative ``$CTXENGINE_CACHE_DIR`` is an error (it would follow the working folder, which an
agent sets to the project); a relative ``$XDG_CACHE_HOME`` is ignored, as the XDG spec says.
Every folder ctxengine makes in the root is marked, entered only when it is a real folder (not
a symbolic link) of this user that no one else can write, and removed only when its name and
its marker are ctxengine's (:func:`remove_owned`).

Trust: a pickle is unpickled only when its HMAC-SHA256 under the user's key checks
(:func:`mac`). The key (:func:`cache_key`) is 32 random bytes in ``cache.key`` in the user's
cache root, made once with mode 0600 and never followed through a link; a key file that is not
this user's or that others can read is refused. Small text files (the table markers) are read
only when this user wrote them (:func:`trusted_file`).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from ..types import CtxEngineError
from .atomic import write_atomically

CACHE_ENV = "CTXENGINE_CACHE_DIR"
#: The folder ctxengine makes inside a folder the user gives.
SUBFOLDER = "ctxengine-cache"
#: The marker of every folder ctxengine makes (the Cache Directory Tagging Specification's name,
#: so backup tools skip it), with a line naming ctxengine and the folder's kind.
MARKER = "CACHEDIR.TAG"
_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55\n"
_MARKER_LINE = b"# made by ctxengine: %s (rebuilt when needed; delete it with `ctxengine cache clear`)\n"
KEY_FILE = "cache.key"
_KEY_BYTES = 32
MAC_BYTES = 32
#: How a marker or the key is opened: never through a symbolic link.
_READ_NO_LINK = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class CacheFolderError(CtxEngineError, OSError):
    """A cache folder or key ctxengine may not use (named, with how to fix it). An OSError too:
    code that builds without the cache when its folder cannot be used does so."""


# ----------------------------------------------------------------------------- where


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root (not created), the one resolver: ``cache_dir/ctxengine-cache`` for a folder
    given (``--cache-dir``, ``cache_dir=``), else ``$CTXENGINE_CACHE_DIR/ctxengine-cache``, else
    ``$XDG_CACHE_HOME/ctxengine`` (an absolute one), else ``~/.cache/ctxengine``. A folder given
    must be absolute (the CLI and the API resolve a relative --cache-dir against the working
    folder first; a relative ``$CTXENGINE_CACHE_DIR`` would follow the working folder, which an
    agent sets to the project): else a :class:`CacheFolderError` naming where it came from."""
    origin = "--cache-dir"
    if cache_dir is None and os.environ.get(CACHE_ENV, ""):
        cache_dir, origin = os.environ[CACHE_ENV], f"${CACHE_ENV}"
    if cache_dir is not None:
        text = os.fspath(cache_dir)
        if not os.path.isabs(text):
            raise CacheFolderError(f"{origin}: {text!r} is a relative path, which would follow the working folder "
                                   "(an agent's is the project); give an absolute folder")
        return Path(os.path.normpath(text)) / SUBFOLDER
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.path.normpath(base)) / "ctxengine"


def open_root(root: Path) -> Path:
    """``root`` (a path of :func:`cache_root`) created and marked,
    or entered when it is ctxengine's (see :func:`owned_folder`). The folder the user gave
    (``root``'s parent, for ``ctxengine-cache``) must not be a symbolic link."""
    if root.name == SUBFOLDER:
        refuse_link(root.parent)
    os.makedirs(root.parent, exist_ok=True)
    return owned_folder(root, "cache root", adopt=True)


def refuse_link(folder: Path) -> None:
    """A :class:`CacheFolderError` when ``folder`` is a symbolic link or not a folder (a missing one is fine)."""
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode):
            raise CacheFolderError(f"cache folder {folder} is a symbolic link; give the folder it points to "
                                   f"({os.path.realpath(folder)}) if that is meant")
        if not stat.S_ISDIR(info.st_mode):
            raise CacheFolderError(f"cache folder {folder} is not a folder; give a folder")


def owned_folder(path: Path, kind: str, adopt: bool = False) -> Path:
    """``path`` made (mode 0700, marked as ctxengine's ``kind``) when it is missing, else
    entered: a real folder (never a symbolic link) of this user that no one else can write,
    with ctxengine's marker (``adopt``: a folder whose name is ctxengine's, a root made by an
    older version, is marked). A :class:`CacheFolderError` otherwise; the parent must exist."""
    made = False
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
        made = True
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise CacheFolderError(f"cache folder {path} is a symbolic link or not a folder; ctxengine works only in "
                               "folders it made: remove it or pass another --cache-dir")
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise CacheFolderError(f"cache folder {path} is writable by other users or not yours; "
                               "fix its permissions (chmod 700) or pass another --cache-dir")
    if made or (adopt and not marked(path)):
        write_private(path / MARKER, _SIGNATURE + _MARKER_LINE % kind.encode())
    elif not marked(path):
        raise CacheFolderError(f"cache folder {path} was not made by ctxengine (it has no {MARKER}); "
                               "remove it or pass another --cache-dir")
    return path


def marked(folder: Path) -> bool:
    """Whether ``folder`` carries ctxengine's marker (a regular file, read without following a link)."""
    with contextlib.suppress(OSError), os.fdopen(os.open(folder / MARKER, _READ_NO_LINK), "rb") as fh:
        head = fh.read(512)
        return head.startswith(_SIGNATURE) and b"# made by ctxengine: " in head
    return False


def remove_owned(folder: Path, name: re.Pattern[str]) -> bool:
    """Delete ``folder`` when it is ctxengine's: a real folder (not a link) whose name matches
    ``name`` and that carries the marker. Whether it was deleted; anything else is left alone."""
    with contextlib.suppress(OSError):
        if stat.S_ISDIR(os.lstat(folder).st_mode) and name.fullmatch(folder.name) and marked(folder):
            shutil.rmtree(folder, ignore_errors=True)  # fd-based: never follows a link inside
            return True
    return False


def user_cache_dir() -> str:
    """The user's ctxengine cache root (created and marked; see :func:`cache_root`)."""
    return str(open_root(cache_root()))


# ----------------------------------------------------------------------------- trust


def cache_key() -> bytes:
    """The user's key for the MACs of cached pickles: ``cache.key`` in the user's cache root
    (never a folder given with --cache-dir), made once (mode 0600, O_EXCL: two processes agree
    on one). A :class:`CacheFolderError` for a key file that is a link, not this user's,
    readable by others or not a key."""
    path = Path(user_cache_dir()) / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".key-")  # mode 0600
    try:
        with os.fdopen(handle, "wb") as fh:
            fh.write(os.urandom(_KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)  # whole or not at all; another process's key wins
    finally:
        os.unlink(temp)
    return _read_key(path)


def existing_cache_key() -> bytes | None:
    """The user's key (see :func:`cache_key`) when it exists; None when it does not or cannot be
    used. Nothing is created: for readers that run inside the graph."""
    with contextlib.suppress(OSError):  # missing, refused (CacheFolderError is one) or unreadable
        return _read_key(cache_root() / KEY_FILE)
    return None


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, _READ_NO_LINK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CacheFolderError(f"cache key {path} cannot be read ({exc.strerror or exc}; a symbolic link is "
                               "refused): remove it, and a new one is made") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise CacheFolderError(f"cache key {path} is not a private file of yours (mode 0600); "
                                   "remove it, and a new one is made")
        key = fh.read(_KEY_BYTES + 1)
    if len(key) != _KEY_BYTES:
        raise CacheFolderError(f"cache key {path} is not a key ({len(key)} bytes); remove it, and a new one is made")
    return key


def mac(key: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 under ``key`` of ``parts`` (each with its length: no two splits agree)."""
    message = b"".join([piece for part in parts for piece in (len(part).to_bytes(8, "big"), part)])
    return hmac.digest(key, message, "sha256")  # one call: the memo checks thousands of rows


def mac_ok(key: bytes, expected: bytes, *parts: bytes) -> bool:
    """Whether ``expected`` is the MAC of ``parts`` (compared in constant time)."""
    return hmac.compare_digest(mac(key, *parts), expected)


def trusted_file(path: str) -> bool:
    """A cache file only this user could have written: owned by them, writable by no one else."""
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        return (stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
                and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
    return False


def write_private(path: str | os.PathLike, data: bytes | str) -> None:
    """``data`` as the whole content of the cache file ``path`` (:func:`.atomic.write_atomically`),
    readable by this user only when it is new (mode 0600)."""
    write_atomically(path, data, mode=0o600)
