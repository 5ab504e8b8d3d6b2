"""Reading the user's text (files and URLs) with errors that name what failed and how to fix it."""

from __future__ import annotations

import http.client
import os
import time
import urllib.error
import urllib.request

from ..types import ConfigError


def read_config_text(path: str) -> str:
    """The text of a configuration or template file; a file that is not UTF-8 or cannot be
    read is a ConfigError naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None



class TextUnavailable(Exception):
    """A file or URL whose text cannot be had: missing, unreadable, binary, too large, too slow."""


BINARY_PROBE = 8192  # bytes looked at for a NUL that marks a binary file
DEFAULT_MAX_FILE_BYTES = 4 << 20


def decode_text(data: bytes, where: str, charset: str = "utf-8") -> str:
    """``data`` as text (undecodable bytes replaced); binary data raises TextUnavailable."""
    if b"\0" in data[:BINARY_PROBE]:
        raise TextUnavailable(f"{where} is binary, not a text document")
    try:
        return data.decode(charset, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def read_text_file(path: str, max_bytes: int = DEFAULT_MAX_FILE_BYTES, cap_key: str = "the size cap") -> str:
    """The text of a local file, refused when unreadable, binary or over ``max_bytes``
    (``cap_key`` names the setting that raises the cap)."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise TextUnavailable(f"{path} is {size} bytes, over {cap_key} ({max_bytes}); not loaded")
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise TextUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_text(data, path)


def fetch_url_text(url: str, timeout: float, max_bytes: int) -> str:
    """The body of an http(s) URL as text: refused past ``max_bytes`` (references.urlMaxBytes)
    or ``timeout`` seconds in all (references.urlTimeout), on an HTTP error, or when binary."""
    if not url.lower().startswith(("http://", "https://")):
        raise TextUnavailable(f"{url}: only http:// and https:// URLs are fetched")
    request = urllib.request.Request(url, headers={
        "User-Agent": "ctxengine", "Accept": "text/markdown, text/plain;q=0.9, */*;q=0.5"})
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise TextUnavailable(_too_large(url, f"{length} bytes", max_bytes))
            data = _read_capped(response, url, max_bytes, deadline, timeout)
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as exc:
        raise TextUnavailable(f"{url} answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TextUnavailable(_timed_out(url, timeout)) from None
        raise TextUnavailable(f"cannot fetch {url}: {exc.reason}") from None
    except TimeoutError:
        raise TextUnavailable(_timed_out(url, timeout)) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise TextUnavailable(f"cannot fetch {url}: {exc}") from None
    return decode_text(data, url, charset)


def _read_capped(response, url: str, max_bytes: int, deadline: float, timeout: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    read_some = getattr(response, "read1", response.read)  # read1: whatever has arrived, so the deadline holds
    while True:
        chunk = read_some(min(65536, max_bytes + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise TextUnavailable(_too_large(url, f"more than {max_bytes} bytes", max_bytes))
        if time.monotonic() > deadline:
            raise TextUnavailable(_timed_out(url, timeout))


def _too_large(url: str, size: str, max_bytes: int) -> str:
    return (f"{url} is {size}, over references.urlMaxBytes ({max_bytes}); not loaded "
            "(raise references.urlMaxBytes to read it)")


def _timed_out(url: str, timeout: float) -> str:
    return f"{url} did not answer within references.urlTimeout ({timeout:g} s); not loaded"
