"""Reading local files: a configuration or request file whole (:func:`read_text_file`), project
files under the trust rules (:func:`read_local_text`: symlinks resolved and checked, regular
files only, stat before open, opened O_NONBLOCK so a FIFO swapped in cannot block, read in chunks
up to the cap, the cap never allocated), and listing a folder (:func:`list_files`)."""

from __future__ import annotations

import errno
import os
import stat

from ...types import ConfigError
from .clean import BINARY_PROBE, LoadedText, loaded_text
from .trust import Refused, TextUnavailable, Trust, is_under, outside_refusal, trusted_path

CONFIG_MAX_BYTES = 1 << 20  # a configuration file (user config, .planning/config.json) larger than this is refused


def read_config_text(path: str, max_bytes: int = CONFIG_MAX_BYTES) -> str:
    """The text of a configuration file, read with :func:`read_text_file` (a ConfigError naming it)."""
    return read_text_file(path, max_bytes, "a configuration file")


def read_text_file(
    path: str,
    max_bytes: int,
    what: str,
    error: type[Exception] = ConfigError,
    shown: str | None = None,
    hint: str = "point the setting at a file",
) -> str:
    """The whole UTF-8 text of the regular file at ``path`` (a configuration file, a request file).

    One that is not a regular file (opened O_NONBLOCK, so a FIFO never blocks), is over
    ``max_bytes`` (checked before reading: a 1 GB file or a device is never loaded), is binary,
    is not UTF-8 or cannot be read raises ``error`` naming it as ``shown`` (default ``path``),
    ``what`` it is, and how to fix it (``hint`` for a FIFO, device or folder)."""
    shown = shown or path
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise error(f"{shown}: cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind:
            raise error(f"{shown} is {kind}, not a regular file; {hint}")
        if info.st_size > max_bytes:
            raise error(f"{shown} is {info.st_size} bytes, over the {max_bytes}-byte cap of {what}; shorten it")
        data = _read_fd(fd, max_bytes, shown, f"the {max_bytes}-byte cap of {what}", info.st_size)
    except TextUnavailable as exc:
        raise error(f"{exc}; fix the file") from None
    except OSError as exc:
        raise error(f"{shown}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{shown}: not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8") from None


DEFAULT_MAX_FILE_BYTES = 4 << 20
READ_CHUNK = 1 << 16
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def resolved_path(path: str, trust: Trust, shown: str | None = None) -> str:
    """The real path of ``path`` when the trust rules let it be read; Refused outside the project
    and allowed folders (judged first, on the path with its symlinks resolved as far as they
    exist, so the refusal is the same for a file that is there and one that is not), then
    TextUnavailable for a missing file or a symlink loop."""
    shown = shown or path
    real = os.path.realpath(path)  # a missing part or a symlink loop is left as it is, then found by the stat
    if not (is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)):
        raise outside_refusal(shown, path, trust)
    try:
        os.stat(real)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TextUnavailable(f"{shown} is a symlink loop (it links back to itself); fix or remove the link") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TextUnavailable(f"{shown}: file not found") from None
        raise TextUnavailable(f"cannot read {shown}: {exc.strerror or exc}") from None
    return real


def file_kind(mode: int) -> str | None:
    return next((name for test, name in _KINDS if test(mode)), None if stat.S_ISREG(mode) else "not a regular file")


def read_local_text(
    path: str,
    trust: Trust,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    cap_key: str = "the size cap",
    shown: str | None = None,
    keep_tail: bool = False,
    crlf: bool = False,
    grows: bool = False,
    real: str | None = None,
) -> LoadedText:
    """The cleaned text of a local file under the trust rules: symlinks resolved and checked,
    regular files only, read in chunks up to ``max_bytes`` (``cap_key`` names the setting). Over
    the cap: refused, or with ``keep_tail`` its last ``max_bytes`` kept (from a line start).
    ``crlf``: CRLF as LF. ``grows``: a file read again and again as it grows (a transcript):
    when it only grew since this process last read it, only its new bytes are cleaned. ``real``:
    the path's real path when the caller has resolved it (each folder once, for thousands of
    files); it is checked against the trust rules all the same, and opened without following a
    symlink."""
    shown = shown or path
    real = _trusted_real(path, trust, shown, real)
    max_bytes = max(0, int(max_bytes))
    data, size, tail = _read_regular(real, shown, max_bytes, cap_key, keep_tail)
    if tail:
        return loaded_text(_from_line_start(data), shown, crlf=crlf, kept_tail=max_bytes, size=size)
    return loaded_text(data, shown, crlf=crlf, grown=real if grows else None, size=len(data))


def _trusted_real(path: str, trust: Trust, shown: str, real: str | None) -> str:
    """The real path to read: ``path`` resolved and checked (:func:`resolved_path`), or the
    ``real`` path the caller resolved, checked against the trust rules (Refused outside them)."""
    if real is None:
        return resolved_path(path, trust, shown)
    if not (is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)):
        raise outside_refusal(shown, real, trust)
    return real


def _read_regular(real: str, shown: str, max_bytes: int, cap_key: str, keep_tail: bool) -> tuple[bytes, int, bool]:
    """(the bytes read, the file's size, whether only its last ``max_bytes`` were read) of the
    regular file ``real``: stat before open, opened O_NONBLOCK without following a symlink, the
    same file checked after open. Refused for what is no regular file or was swapped meanwhile;
    TextUnavailable over the cap (unless ``keep_tail``) or when it cannot be read."""
    try:
        before = _regular_stat(real, shown, max_bytes, cap_key, keep_tail)
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            after = _same_file_stat(fd, before, shown)
            tail = keep_tail and after.st_size > max_bytes
            if tail:
                os.lseek(fd, after.st_size - max_bytes, os.SEEK_SET)
            return _read_fd(fd, max_bytes, shown, cap_key, min(after.st_size, max_bytes)), after.st_size, tail
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{shown} was swapped for a symlink while it was read; skipped") from None
        raise TextUnavailable(f"cannot read {shown}: {exc.strerror or exc}") from None


def _regular_stat(real: str, shown: str, max_bytes: int, cap_key: str, keep_tail: bool) -> os.stat_result:
    """The stat of ``real`` before it is opened: Refused when it is no regular file,
    TextUnavailable when it is over ``max_bytes`` and its tail is not wanted."""
    before = os.stat(real)
    kind = file_kind(before.st_mode)
    if kind:
        raise Refused(f"{shown} is {kind}, not a regular file; skipped")
    if before.st_size > max_bytes and not keep_tail:
        raise TextUnavailable(f"{shown} is {before.st_size} bytes, over {cap_key} ({max_bytes}); not loaded")
    return before


def _same_file_stat(fd: int, before: os.stat_result, shown: str) -> os.stat_result:
    """The stat of the opened ``fd``: Refused when it is no regular file or not the file
    ``before`` was taken of (swapped between the stat and the open)."""
    after = os.fstat(fd)
    if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        raise Refused(f"{shown} changed while it was opened (now {file_kind(after.st_mode) or 'another file'}); skipped")
    return after


def _from_line_start(data: bytes) -> bytes:
    """A tail read from the middle of a file, from its first line start (whole when its only
    newline ends it, or it has none)."""
    newline = data.find(b"\n")
    return data[newline + 1:] if 0 <= newline < len(data) - 1 else data


def _read_fd(fd: int, max_bytes: int, shown: str, cap_key: str, size: int = 0) -> bytes:
    """At most ``max_bytes`` of ``fd``: the ``size`` its fstat gave in one read (one copy of a
    4 MB transcript, not sixty), then in chunks to the end (a file that grew meanwhile, or one
    whose size was not given), never the cap allocated; a binary start is refused as soon as
    its first bytes are in."""
    parts: list[bytes] = []
    total, probed = 0, False
    want = min(size, max_bytes) + 1 if size > 0 else READ_CHUNK
    while True:
        chunk = os.read(fd, min(want, max_bytes + 1 - total))
        want = READ_CHUNK
        if chunk:
            parts.append(chunk)
            total += len(chunk)
        if not probed and (not chunk or total >= BINARY_PROBE):
            probed = True
            head = parts[0] if len(parts) == 1 else b"".join(parts)
            if b"\0" in head[:BINARY_PROBE]:
                raise TextUnavailable(f"{shown} is binary, not a text document")
        if not chunk:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if total > max_bytes:
            raise TextUnavailable(f"{shown} is more than {max_bytes} bytes, over {cap_key}; not loaded")


def list_files(base: str, trust: Trust, limit: int, hidden_files: bool = True) -> tuple[list[str], list[str]]:
    """Files under ``base`` relative to it ("/"-separated, sorted, at most ``limit``) and
    warnings. Hidden folders are skipped (and hidden files unless ``hidden_files``); symlinked
    folders are never followed; a ``base`` that resolves outside the trusted folders is not listed."""
    if not os.path.isdir(base):
        return [], []
    if not trusted_path(base, trust):
        return [], [str(outside_refusal(base, base, trust)).replace("not read", "not listed")]
    names: list[str] = []
    for folder, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(folder, base).replace(os.sep, "/")
        for name in sorted(files):
            if hidden_files or not name.startswith("."):
                names.append(name if rel == "." else f"{rel}/{name}")
        if len(names) >= limit:
            break
    return names[:limit], []
