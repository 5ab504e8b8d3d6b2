"""Cleaning and decoding text loaded from a file or a URL: NUL, control characters (other than
newline, tab and CR) and ANSI escape sequences are removed and counted; binary data is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..grown import GROWN
from ..regex import lazy_regex
from .trust import TextUnavailable

BINARY_PROBE = 8192  # bytes looked at for a NUL that marks a binary file

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
    digest: bytes | None = None  # the text's text_digest (nodes/lib/digest.py), when read as a large file that grows
    grew_from: tuple[int, bytes] | None = None  # (length, text_digest) of the text read before that it begins with

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


def loaded_text(data: bytes | bytearray, where: str, charset: str = "utf-8", crlf: bool = False,
            grown: str | None = None, **extra: Any) -> LoadedText:
    """The cleaned text of ``data`` (``crlf``: CRLF as LF; ``grown``: the key of a file that
    grows, read again through :data:`GROWN`, re-using what it was before, its text's digest
    given with it)."""
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
    text, removed, digest, grew_from = GROWN.text(grown, bytes(data), make, _prefix_safe)
    return LoadedText(text, removed, digest=digest, grew_from=grew_from, **extra)


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
