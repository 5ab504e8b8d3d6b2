"""Reading the user's text (files and URLs) with caps, the trust rules and errors that name
what failed and how to fix it.

Every read of project content goes through ``read_local_text`` (files) or ``fetch_url``
(http/https). The trust rules (``Trust``, from the ``trust.*`` keys):

- a file is read only when its real path (symlinks resolved) is inside the project folder,
  under one of ``trust.allowedPaths`` or under the installed ctxengine configs; only regular
  files are read (stat before open, opened O_NONBLOCK so a FIFO swapped in cannot block), in
  chunks up to the cap (the cap is never allocated);
- a URL is fetched only over http/https from a host whose every address is public (unless
  ``trust.allowPrivateUrls``), never from a cloud-metadata name or address (unless the host is
  listed in ``trust.allowedHosts``), only from ``trust.allowedHosts`` when that list is set;
  the connection goes to the address that was checked; redirects are followed by hand, each
  checked again, at most ``trust.maxRedirects``; connect and headers within
  ``trust.urlConnectTimeout``, the body within ``references.urlTimeout``, every fetch of a
  build before the build's deadline (``trust.buildDeadline``); environment proxies are ignored;
- text loaded is cleaned: NUL, control characters (other than newline, tab and CR) and ANSI
  escape sequences are removed and counted.

A refusal raises ``Refused`` (a TextUnavailable) whose message says what was left out and then,
in parentheses, the setting that would allow the read (for the user at the command line;
:func:`without_widening_hints` takes those hints out where the reader is an agent, as
``ctxengine serve`` does); callers make it a warning and leave the document out. A path outside
the project is refused before it is looked up, so the refusal reads the same whether or not
anything is there.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import ssl
import stat
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urljoin, urlsplit

from ..types import ConfigError
from .grown import GROWN
from .regex import lazy_regex

if TYPE_CHECKING:  # http.client (and the email parser it brings) loads when a URL is fetched
    import http.client


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
        kind = _kind(info.st_mode)
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


class TextUnavailable(Exception):
    """A file or URL whose text cannot be had: missing, unreadable, binary, too large, too slow."""


class Refused(TextUnavailable):
    """A read the trust rules refuse (outside the project, not a regular file, a private
    address, a bad redirect, the build deadline spent); the message names the setting."""


BINARY_PROBE = 8192  # bytes looked at for a NUL that marks a binary file
DEFAULT_MAX_FILE_BYTES = 4 << 20
_CHUNK = 1 << 16
METADATA_HOSTS = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal",
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "metadata.azure.com",
    "192.0.0.192",  # Oracle Cloud's
})
_REDIRECTS = (301, 302, 303, 307, 308)
_SETTINGS_HINT = "in your user config or --set"
#: The hints that tell how to widen trust, in every form the refusals (here, in git.py, state.py
#: and config.py) write them: "... (add X to trust.allowedPaths ... to allow it)", "(raise it ...
#: --set)", "; set it in ~/.config/ctxengine/config.yaml or with --set".
_WIDENING_HINTS = lazy_regex(
    r" \((?:add|list|set|raise) .*?(?:to allow it|to allow private addresses|to follow more|--set"
    r"|to read one elsewhere)\)"
    r"|; set it in \S+ or with --set")


def without_widening_hints(text: str) -> str:
    """``text`` (a warning or an error) without the hints that tell how to widen trust: what was
    left out stays, which setting would let it in does not (for an agent, which reads untrusted
    project text and is not the one to widen what ctxengine reads)."""
    return _WIDENING_HINTS.sub("", text)


# ----------------------------------------------------------------------------- the trust rules


@dataclass(frozen=True)
class Trust:
    """What a build may read or fetch (from the ``trust.*`` keys) and for which project."""

    root: str  # the project folder, symlinks resolved
    allowed_paths: tuple[str, ...] = ()  # folders outside the project that may be read (resolved)
    allow_private_urls: bool = False
    allowed_hosts: tuple[str, ...] = ()  # lower case; empty: any public host
    max_redirects: int = 3
    connect_timeout: float = 5.0
    build_deadline: float = 20.0


def trust_from(context_config: Mapping[str, Any], project_dir: str) -> Trust:
    """The trust rules of a build from ``context_config["trust"]``; the installed ctxengine
    configs folder is always allowed (built-in templates and references)."""
    settings = _trust_settings(context_config)
    allowed = [*allowed_paths(context_config), os.path.realpath(_configs_folder())]
    return Trust(
        root=os.path.realpath(project_dir),
        allowed_paths=tuple(dict.fromkeys(allowed)),
        allow_private_urls=bool(settings.get("allowPrivateUrls", False)),
        allowed_hosts=tuple(str(h).strip().lower().strip("[]") for h in _as_list(settings.get("allowedHosts"))),
        max_redirects=max(0, int(settings.get("maxRedirects", 3))),
        connect_timeout=float(settings.get("urlConnectTimeout", 5.0)),
        build_deadline=float(settings.get("buildDeadline", 20.0)),
    )


def allowed_paths(context_config: Mapping[str, Any]) -> tuple[str, ...]:
    """The user's ``trust.allowedPaths`` with symlinks resolved: the one source of the folders
    outside the project that files (``trust_from``) and git (``take_snapshot``) may read. The
    configuration stage has already made them absolute and checked they are strings."""
    paths = _as_list(_trust_settings(context_config).get("allowedPaths"))
    return tuple(dict.fromkeys(os.path.realpath(os.path.expanduser(str(p))) for p in paths))


def _trust_settings(context_config: Mapping[str, Any]) -> Mapping[str, Any]:
    settings = context_config.get("trust") if isinstance(context_config, Mapping) else None
    return settings if isinstance(settings, Mapping) else {}


def _as_list(value: Any) -> list:
    if value in (None, ""):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


@lru_cache(maxsize=1)
def _configs_folder() -> str:
    """The installed ctxengine configs folder (built-in templates, modes and references), looked up once."""
    try:
        return str(resources.files("ctxengine.configs"))
    except (ModuleNotFoundError, TypeError):
        return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs")


def is_under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both absolute and normalised)."""
    folder = folder.rstrip(os.sep) or os.sep
    return path == folder or path.startswith(folder if folder == os.sep else folder + os.sep)


def trusted_path(path: str, trust: Trust) -> bool:
    """Whether the real path of ``path`` may be read: inside the project or an allowed folder."""
    real = os.path.realpath(path)
    return is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)


def _outside(shown: str, path: str, trust: Trust) -> Refused:
    """The refusal of ``path`` (named ``shown``), which leads outside the trusted folders: it names
    where the path leaves them (:func:`exit_point`), never what lies beyond, so it reads the
    same whether the file outside exists or not, and whatever links are there."""
    real = exit_point(path, trust)
    folder = os.path.dirname(real) or real
    where = f"{shown} is" if shown == real else f"{shown} resolves to {real},"
    return Refused(f"{where} outside the project; not read (add {folder} to "
                   f"trust.allowedPaths {_SETTINGS_HINT} to allow it)")


_MAX_LINKS = 40


def exit_point(path: str, trust: Trust) -> str:
    """Where ``path`` leaves the trusted folders (the project and ``trust.allowedPaths``): its
    symbolic links followed only while they are inside a trusted folder (the project's own) or
    on the way to one, the rest of the path as written. Nothing outside is looked at, so a
    refusal naming it says nothing of what exists there (a link outside, a folder, a file)."""
    folders = (trust.root, *trust.allowed_paths)

    def followable(candidate: str) -> bool:  # inside a trusted folder, or an ancestor of one
        return any(is_under(candidate, f) or is_under(f, candidate) for f in folders)

    pending = [p for p in os.path.abspath(path).split(os.sep) if p]
    current, links = os.sep, 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        candidate = os.path.dirname(current) if part == ".." else os.path.join(current, part)
        if not followable(candidate):
            real = os.path.realpath(candidate)  # the project named through a link of the user's
            if not followable(real):
                return os.path.normpath(os.path.join(candidate, *pending))
            current = real
            continue
        if part != ".." and os.path.islink(candidate) and links < _MAX_LINKS:
            links += 1
            target = os.readlink(candidate)
            pending[:0] = [p for p in target.split(os.sep) if p]
            current = os.sep if os.path.isabs(target) else current
            continue
        current = candidate
    return current


# ----------------------------------------------------------------------------- cleaning


_ANSI_PATTERN = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # other escapes (and a lone ESC)
)
_ANSI = lazy_regex(_ANSI_PATTERN)
_CONTROL = lazy_regex(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# The same in UTF-8 bytes: every byte of the patterns is ASCII, so they match where the text's do.
_ANSI_BYTES = lazy_regex(_ANSI_PATTERN.encode("ascii"))
_C0_BYTES = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F])
_C1_BYTES = lazy_regex(rb"\xc2[\x80-\x9f]")  # U+0080-U+009F in UTF-8


def clean_text(text: str) -> tuple[str, int]:
    """``text`` without ANSI escape sequences, NUL and control characters other than newline,
    tab and CR, with how many were removed (an escape sequence counts once)."""
    text, sequences = _ANSI.subn("", text)
    text, controls = _CONTROL.subn("", text)
    return text, sequences + controls


def clean_utf8(data: bytes | bytearray) -> tuple[bytes, int]:
    """:func:`clean_text` on UTF-8 bytes, before decoding: the same removals, a few times
    faster on a large file (the escape regex runs only when an ESC is there, C0 controls go
    with ``bytes.translate``). Bytes that are not UTF-8 are decoded as replacement characters
    afterwards, as they would have been."""
    data, removed = bytes(data), 0
    if b"\x1b" in data:
        data, removed = _without_escapes(data)
    kept = data.translate(None, _C0_BYTES)
    removed += len(data) - len(kept)
    if b"\xc2" in kept:
        kept, c1 = _C1_BYTES.subn(b"", kept)
        removed += c1
    return kept, removed


def _without_escapes(data: bytes) -> tuple[bytes, int]:
    """``_ANSI_BYTES.subn(b"", data)``, each sequence matched where ``bytes.find`` puts an ESC
    (every ESC starts a match): a few times faster than the regex's own scan of a large file."""
    pieces, start, match = [], 0, _ANSI_BYTES.match
    found = data.find(b"\x1b")
    while found >= 0:
        pieces.append(data[start:found])
        start = match(data, found).end()
        found = data.find(b"\x1b", start)
    pieces.append(data[start:])
    return b"".join(pieces), len(pieces) - 1


def cleaned_warning(where: str, removed: int) -> str | None:
    """The warning for ``removed`` control characters taken out of ``where`` (None for 0)."""
    if not removed:
        return None
    return f"{where}: removed {removed} control character{'s' if removed != 1 else ''} (NUL, ANSI escapes and the like)"


@dataclass(frozen=True)
class LoadedText:
    """Text read (cleaned), where it came from, and what was done to it on the way."""

    text: str
    removed: int = 0  # control characters and escape sequences removed
    kept_tail: int | None = None  # bytes kept from the end when the file was over its cap
    size: int = 0  # bytes of the file or body

    def notes(self, where: str, cap_key: str = "the size cap") -> tuple[str, ...]:
        """The warnings this read owes: control characters removed, only the newest part kept."""
        out = []
        if self.kept_tail is not None:
            out.append(f"{where} is {self.size} bytes, over {cap_key} ({self.kept_tail}); only its last "
                       f"{self.kept_tail} bytes were read")
        warning = cleaned_warning(where, self.removed)
        if warning:
            out.append(warning)
        return tuple(out)


def decode_text(data: bytes | bytearray, where: str, charset: str = "utf-8") -> str:
    """``data`` as text (undecodable bytes replaced); binary data raises TextUnavailable."""
    if b"\0" in data[:BINARY_PROBE]:
        raise TextUnavailable(f"{where} is binary, not a text document")
    try:
        return data.decode(charset, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _loaded(data: bytes | bytearray, where: str, charset: str = "utf-8", crlf: bool = False,
            grown: str | None = None, **extra: Any) -> LoadedText:
    """The cleaned text of ``data`` (``crlf``: CRLF as LF; ``grown``: the key of a file that
    grows, read again through :data:`GROWN`, re-using what it was before)."""
    if charset.lower().replace("_", "-") not in ("utf-8", "utf8"):
        text, removed = clean_text(decode_text(data, where, charset))
        return LoadedText(text.replace("\r\n", "\n") if crlf else text, removed, **extra)
    if b"\0" in data[:BINARY_PROBE]:
        decode_text(data, where, charset)  # raises: a binary file

    def make(raw: bytes) -> tuple[str, int, bytes | None]:
        cleaned, removed = clean_utf8(raw)
        if crlf:
            cleaned = cleaned.replace(b"\r\n", b"\n")
        try:  # strictly decoded, the cleaned bytes are the text's UTF-8 (no need to encode it to hash it)
            return cleaned.decode("utf-8"), removed, cleaned
        except UnicodeDecodeError:
            return decode_text(cleaned, where, charset), removed, None

    if grown is None:
        return LoadedText(*make(data)[:2], **extra)
    return LoadedText(*GROWN.text(grown, bytes(data), make, _prefix_safe), **extra)


def _prefix_safe(data: bytes) -> bool:
    """Whether cleaning ``data`` and what is appended to it apart equals cleaning them together:
    it ends a line (no character, CRLF or C1 control is cut) and no escape sequence runs to its
    end (an OSC or DCS string left open would take in what follows)."""
    if not data.endswith(b"\n"):
        return False
    last = data.rfind(b"\x1b")
    if last < 0:
        return True
    found = _ANSI_BYTES.match(data, last)
    return found is not None and found.end() < len(data)


# ----------------------------------------------------------------------------- local files


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def resolved_path(path: str, trust: Trust, shown: str | None = None) -> str:
    """The real path of ``path`` when the trust rules let it be read; Refused outside the project
    and allowed folders (judged first, on the path with its symlinks resolved as far as they
    exist, so the refusal is the same for a file that is there and one that is not), then
    TextUnavailable for a missing file or a symlink loop."""
    shown = shown or path
    lexical = os.path.realpath(path)
    if not (is_under(lexical, trust.root) or any(is_under(lexical, folder) for folder in trust.allowed_paths)):
        raise _outside(shown, path, trust)
    try:
        real = os.path.realpath(path, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TextUnavailable(f"{shown} is a symlink loop (it links back to itself); fix or remove the link") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TextUnavailable(f"{shown}: file not found") from None
        raise TextUnavailable(f"cannot read {shown}: {exc.strerror or exc}") from None
    if not (is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)):
        raise _outside(shown, path, trust)
    return real


def _kind(mode: int) -> str | None:
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
    if real is None:
        real = resolved_path(path, trust, shown)
    elif not (is_under(real, trust.root) or any(is_under(real, folder) for folder in trust.allowed_paths)):
        raise _outside(shown, real)
    max_bytes = max(0, int(max_bytes))
    try:
        before = os.stat(real)
        kind = _kind(before.st_mode)
        if kind:
            raise Refused(f"{shown} is {kind}, not a regular file; skipped")
        if before.st_size > max_bytes and not keep_tail:
            raise TextUnavailable(f"{shown} is {before.st_size} bytes, over {cap_key} ({max_bytes}); not loaded")
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            after = os.fstat(fd)
            if not stat.S_ISREG(after.st_mode) or (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise Refused(f"{shown} changed while it was opened (now {_kind(after.st_mode) or 'another file'}); skipped")
            tail = keep_tail and after.st_size > max_bytes
            if tail:
                os.lseek(fd, after.st_size - max_bytes, os.SEEK_SET)
            data = _read_fd(fd, max_bytes, shown, cap_key, min(after.st_size, max_bytes))
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{shown} was swapped for a symlink while it was read; skipped") from None
        raise TextUnavailable(f"cannot read {shown}: {exc.strerror or exc}") from None
    if tail:
        newline = data.find(b"\n")
        data = data[newline + 1:] if 0 <= newline < len(data) - 1 else data
        return _loaded(data, shown, crlf=crlf, kept_tail=max_bytes, size=after.st_size)
    return _loaded(data, shown, crlf=crlf, grown=real if grows else None, size=len(data))


def _read_fd(fd: int, max_bytes: int, shown: str, cap_key: str, size: int = 0) -> bytes:
    """At most ``max_bytes`` of ``fd``: the ``size`` its fstat gave in one read (one copy of a
    4 MB transcript, not sixty), then in chunks to the end (a file that grew meanwhile, or one
    whose size was not given), never the cap allocated; a binary start is refused as soon as
    its first bytes are in."""
    parts: list[bytes] = []
    total, probed = 0, False
    want = min(size, max_bytes) + 1 if size > 0 else _CHUNK
    while True:
        chunk = os.read(fd, min(want, max_bytes + 1 - total))
        want = _CHUNK
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
        return [], [str(_outside(base, base, trust)).replace("not read", "not listed")]
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


# ----------------------------------------------------------------------------- URLs


#: The IANA IPv4 Special-Purpose Address Registry (and multicast), most specific first: no
#: address in it is fetched from without trust.allowPrivateUrls (whatever the registry says of
#: global reachability: none is where a document lives). Written out rather than taken from
#: ``ipaddress``'s ``is_global``, which in Python 3.11 calls several of these global.
IPV4_SPECIAL = tuple((ipaddress.IPv4Network(net), kind) for net, kind in (
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "this-network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "non-public shared (carrier-grade NAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignment"),  # 192.0.0.192: a cloud metadata address
    ("192.0.2.0/24", "documentation"),
    ("192.31.196.0/24", "AS112"),
    ("192.52.193.0/24", "AMT"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "AS112 direct delegation"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
))
#: IPv6: only global unicast (2000::/3) is fetched from, less the IANA IPv6 Special-Purpose
#: Address Registry's entries in it; the forms that carry an IPv4 address (:func:`embedded_ipv4`)
#: are judged by that address. Outside 2000::/3 (loopback, unique-local, link-local, the old
#: site-local fec0::/10, multicast, IPv4-compatible ...) :data:`IPV6_OUTSIDE` names the kind.
IPV6_SPECIAL = tuple((ipaddress.IPv6Network(net), kind) for net, kind in (
    ("2001::/23", "IETF protocol assignment"),  # Teredo (2001::/32) is judged by its client first
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4"),  # judged by its IPv4 address first
    ("2620:4f:8000::/48", "AS112 direct delegation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
))
IPV6_OUTSIDE = tuple((ipaddress.IPv6Network(net), kind) for net, kind in (
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("fc00::/7", "private (unique-local)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
))
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    """(form, the IPv4 address) an IPv6 address carries: IPv4-mapped (::ffff:0:0/96), 6to4
    (2002::/16), Teredo (2001::/32: the client, its last 32 bits inverted) or NAT64
    (64:ff9b::/96); None for any other."""
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip.teredo is not None:
        return "Teredo", ip.teredo[1]
    if ip in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _ipv4_kind(ip: ipaddress.IPv4Address) -> str | None:
    return next((kind for net, kind in IPV4_SPECIAL if ip in net), None)


def address_refusal(address: str) -> str | None:
    """Why an IP address may not be fetched from without trust.allowPrivateUrls (it is in a
    special-purpose registry: :data:`IPV4_SPECIAL`, :data:`IPV6_SPECIAL`, outside IPv6 global
    unicast, or carries such an IPv4 address), or None."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address} is not an IP address"
    if isinstance(ip, ipaddress.IPv4Address):
        kind = _ipv4_kind(ip)
        return f"{kind} address {ip}" if kind else None
    carried = embedded_ipv4(ip)
    if carried is not None:
        form, inner = carried
        kind = _ipv4_kind(inner)
        if form == "IPv4-mapped":
            return f"{kind} address {inner}" if kind else None
        return f"{form} address {ip} carrying the {kind} address {inner}" if kind else None
    outside = next((kind for net, kind in IPV6_OUTSIDE if ip in net), None)
    if outside is None and ip not in _GLOBAL_UNICAST:
        outside = "reserved"
    kind = outside or next((kind for net, kind in IPV6_SPECIAL if ip in net), None)
    return f"{kind} address {ip}" if kind else None


def metadata_address(address: str) -> bool:
    """Whether ``address`` is a cloud metadata address (:data:`METADATA_HOSTS`), also when an
    IPv6 address carries it (:func:`embedded_ipv4`) or it is written another way."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address in METADATA_HOSTS
    forms = {str(ip)}
    if isinstance(ip, ipaddress.IPv6Address) and embedded_ipv4(ip) is not None:
        forms.add(str(embedded_ipv4(ip)[1]))
    return bool(forms & METADATA_HOSTS)


def host_refusal(host: str, trust: Trust) -> str | None:
    """Why a host name may not be fetched from at all (allowlist, metadata names), or None."""
    host = host.lower().rstrip(".")
    if trust.allowed_hosts and host not in trust.allowed_hosts:
        return (f"host {host} is not in trust.allowedHosts ({', '.join(trust.allowed_hosts)}); not fetched (add it "
                f"{_SETTINGS_HINT} to allow it)")
    if host in METADATA_HOSTS and host not in trust.allowed_hosts:
        return (f"{host} is a cloud metadata endpoint; not fetched (list it in trust.allowedHosts "
                f"{_SETTINGS_HINT} to allow it)")
    return None


def _resolve(host: str, port: int, timeout: float) -> list:
    """getaddrinfo in a helper thread, given up after ``timeout`` seconds (a stalled resolver
    cannot hold the build past its deadline)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if worker.is_alive():
        raise TimeoutError
    if "error" in box:
        exc = box["error"]
        raise TextUnavailable(f"cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}")
    return box["infos"]


def vetted_address(host: str, port: int, trust: Trust, timeout: float = 5.0) -> str:
    """The address to connect to: the host resolved (within ``timeout`` seconds), every address
    checked (Refused when one is a cloud metadata address, however written, unless the host is in
    trust.allowedHosts; Refused when one is special-purpose, :func:`address_refusal`, and
    trust.allowPrivateUrls is off)."""
    infos = _resolve(host, port, timeout)
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not addresses:
        raise TextUnavailable(f"cannot resolve {host}")
    for address in addresses:
        if metadata_address(address) and host.lower() not in trust.allowed_hosts:
            raise Refused(f"{host} resolves to the cloud metadata address {address}; not fetched (list it in "
                          f"trust.allowedHosts {_SETTINGS_HINT} to allow it)")
        reason = None if trust.allow_private_urls else address_refusal(address)
        if reason:
            raise Refused(f"{host} resolves to the {reason}; not fetched (set trust.allowPrivateUrls: true "
                          f"{_SETTINGS_HINT} to allow private addresses)")
    return addresses[0]


class _Watchdog:
    """Shuts a socket down when its deadline passes, so a peer dripping bytes cannot hold a read."""

    def __init__(self) -> None:
        self.fired = False
        self._timer: threading.Timer | None = None

    def arm(self, sock: socket.socket | None, deadline: float) -> None:
        self.disarm()
        if sock is None:
            return
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire, (sock,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, sock: socket.socket) -> None:
        self.fired = True
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _connection(scheme: str, host: str, port: int, address: str, timeout: float) -> http.client.HTTPConnection:
    """An HTTP(S) connection to ``host`` that connects to the vetted ``address`` (the Host
    header and the TLS name stay ``host``): no second DNS lookup, no rebinding gap, no proxy."""
    import http.client

    if scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)

    def create_connection(_address, timeout=timeout, source_address=None):
        return socket.create_connection((address, port), timeout, source_address)

    conn._create_connection = create_connection  # type: ignore[attr-defined]
    return conn


def fetch_url(
    url: str,
    trust: Trust,
    timeout: float,
    max_bytes: int,
    deadline: float | None = None,
) -> LoadedText:
    """The cleaned body of an http(s) URL under the trust rules (see the module docstring).
    ``timeout`` is references.urlTimeout (the body), ``deadline`` the build's shared
    ``time.monotonic()`` deadline (None: ``trust.buildDeadline`` from now)."""
    deadline = time.monotonic() + trust.build_deadline if deadline is None else deadline
    current = url
    for hop in range(trust.max_redirects + 1):
        location = _fetch_once(current, url, trust, timeout, max_bytes, deadline)
        if isinstance(location, LoadedText):
            return location
        current = urljoin(current, location)
    raise Refused(f"{url}: more than trust.maxRedirects ({trust.max_redirects}) redirects; not fetched (raise "
                  f"trust.maxRedirects {_SETTINGS_HINT} to follow more)")


def _fetch_once(url: str, original: str, trust: Trust, timeout: float, max_bytes: int,
                deadline: float) -> LoadedText | str:
    """One request: the body, or the Location of a redirect."""
    import http.client

    via = "" if url == original else f" (redirected to {url})"
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        what = "only http:// and https:// URLs are fetched"
        raise (Refused if via else TextUnavailable)(f"{original}{via}: {what}" if via else f"{url}: {what}")
    try:
        host, port = parts.hostname or "", parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise TextUnavailable(f"{url}: bad port") from None
    if not host:
        raise TextUnavailable(f"{url}: no host")
    reason = host_refusal(host, trust)
    if reason:
        raise Refused(f"{original}{via}: {reason}")
    started = time.monotonic()
    if started >= deadline:
        raise _deadline_spent(original, trust)
    limits = _Limits(started, trust, timeout, deadline, original, url)
    try:
        address = vetted_address(host, port, trust, limits.head - started)
    except TextUnavailable as exc:
        raise type(exc)(f"{original}{via}: {exc}") from None
    except TimeoutError:
        raise limits.exceeded() from None
    conn = _connection(scheme, host, port, address, max(0.01, limits.head - started))
    watchdog = _Watchdog()
    try:
        conn.connect()
        watchdog.arm(conn.sock, limits.head)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        conn.request("GET", target, headers={"User-Agent": "ctxengine", "Accept-Encoding": "identity",
                                             "Accept": "text/markdown, text/plain;q=0.9, */*;q=0.5"})
        response = conn.getresponse()
        if watchdog.fired or time.monotonic() > limits.head:
            raise TimeoutError
        if response.status in _REDIRECTS:
            location = response.getheader("Location")
            if not location:
                raise TextUnavailable(f"{original}{via} answered HTTP {response.status} without a Location")
            return location
        if not 200 <= response.status < 300:
            raise TextUnavailable(f"{url} answered HTTP {response.status} {response.reason}")
        length = response.getheader("Content-Length", "") or ""
        if length.isdigit() and int(length) > max_bytes:
            raise TextUnavailable(_too_large(url, f"{length} bytes", max_bytes))
        limits.phase = "body"
        watchdog.arm(conn.sock, limits.body)
        data = _read_capped(response, url, max_bytes, limits.body, watchdog)
        charset = response.msg.get_content_charset() or "utf-8"
    except TextUnavailable:
        raise
    except (TimeoutError, socket.timeout):
        raise limits.exceeded() from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if watchdog.fired:
            raise limits.exceeded() from None
        raise TextUnavailable(f"cannot fetch {url}: {exc}") from None
    finally:
        watchdog.disarm()
        conn.close()
    return _loaded(data, url, charset, size=len(data))


def _read_capped(response, url: str, max_bytes: int, deadline: float, watchdog: _Watchdog) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(min(_CHUNK, max_bytes + 1 - size))  # whatever has arrived, so the deadline holds
        if watchdog.fired or time.monotonic() > deadline:
            raise TimeoutError
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise TextUnavailable(_too_large(url, f"more than {max_bytes} bytes", max_bytes))


class _Limits:
    """The deadlines of one request: headers by trust.urlConnectTimeout, the whole answer by
    references.urlTimeout, both by the build's deadline; ``exceeded()`` names the one that hit."""

    def __init__(self, started: float, trust: Trust, timeout: float, deadline: float, original: str, url: str):
        self.phase = "head"
        self.build = deadline
        self.connect = started + trust.connect_timeout
        self.total = started + timeout
        self.head = min(self.connect, self.total, deadline)
        self.body = min(self.total, deadline)
        self.trust, self.timeout, self.original, self.url = trust, timeout, original, url

    def exceeded(self) -> TextUnavailable:
        hit = self.head if self.phase == "head" else self.body
        if hit == self.build and hit < self.total and (self.phase == "body" or hit < self.connect):
            return _deadline_spent(self.original, self.trust)
        if self.phase == "head" and self.connect < self.total:
            return TextUnavailable(f"{self.url} did not connect and send its headers within trust.urlConnectTimeout "
                                   f"({self.trust.connect_timeout:g} s); not loaded")
        return TextUnavailable(_timed_out(self.url, self.timeout))


def _deadline_spent(url: str, trust: Trust) -> Refused:
    return Refused(f"{url}: not fetched, the build's URL deadline trust.buildDeadline ({trust.build_deadline:g} s) "
                   f"is spent (raise it {_SETTINGS_HINT})")


def _too_large(url: str, size: str, max_bytes: int) -> str:
    return (f"{url} is {size}, over references.urlMaxBytes ({max_bytes}); not loaded "
            "(raise references.urlMaxBytes to read it)")


def _timed_out(url: str, timeout: float) -> str:
    return f"{url} did not answer within references.urlTimeout ({timeout:g} s); not loaded"
