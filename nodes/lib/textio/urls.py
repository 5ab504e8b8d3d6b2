"""Fetching a URL under the trust rules (:func:`fetch_url`), with address filtering.

A URL is fetched only over http/https from a host whose every address is public (unless
``trust.allowPrivateUrls``: :func:`address_refusal`), never from a cloud-metadata name or address
(unless the host is listed in ``trust.allowedHosts``), only from ``trust.allowedHosts`` when that
list is set; the connection goes to the address that was checked; redirects are followed by
hand, each checked again, at most ``trust.maxRedirects``; connect and headers within
``trust.urlConnectTimeout``, the body within ``references.urlTimeout``, every fetch of a build
before the build's deadline (``trust.buildDeadline``); environment proxies are ignored. The
body is cleaned as a file's is (:mod:`.clean`).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from .clean import LoadedText, loaded_text
from .files import READ_CHUNK
from .trust import SETTINGS_HINT, Refused, TextUnavailable, Trust

METADATA_HOSTS = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal",
    "169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "metadata.azure.com",
    "192.0.0.192",  # Oracle Cloud's
})
_REDIRECTS = (301, 302, 303, 307, 308)


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
        return _kind_named(_ipv4_kind(ip), ip)
    carried = embedded_ipv4(ip)
    if carried is not None:
        return carried_refusal(ip, *carried)
    return _kind_named(ipv6_kind(ip), ip)


def _kind_named(kind: str | None, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """``<kind> address <ip>``, or None when ``kind`` is None (not special)."""
    return f"{kind} address {ip}" if kind else None


def carried_refusal(ip: ipaddress.IPv6Address, form: str, inner: ipaddress.IPv4Address) -> str | None:
    """Why the IPv6 address ``ip`` carrying the IPv4 address ``inner`` (in ``form``, see
    :func:`embedded_ipv4`) may not be fetched from: the special kind of ``inner``, or None.
    An IPv4-mapped address is named as the IPv4 address it is."""
    kind = _ipv4_kind(inner)
    if not kind:
        return None
    if form == "IPv4-mapped":
        return f"{kind} address {inner}"
    return f"{form} address {ip} carrying the {kind} address {inner}"


def ipv6_kind(ip: ipaddress.IPv6Address) -> str | None:
    """The special kind of an IPv6 address carrying no IPv4 one: a kind of :data:`IPV6_OUTSIDE`,
    "reserved" outside global unicast, else its :data:`IPV6_SPECIAL` entry; None: an ordinary one."""
    outside = next((kind for net, kind in IPV6_OUTSIDE if ip in net), None)
    if outside is None and ip not in _GLOBAL_UNICAST:
        outside = "reserved"
    return outside or next((kind for net, kind in IPV6_SPECIAL if ip in net), None)


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
                f"{SETTINGS_HINT} to allow it)")
    if host in METADATA_HOSTS and host not in trust.allowed_hosts:
        return (f"{host} is a cloud metadata endpoint; not fetched (list it in trust.allowedHosts "
                f"{SETTINGS_HINT} to allow it)")
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
                          f"trust.allowedHosts {SETTINGS_HINT} to allow it)")
        reason = None if trust.allow_private_urls else address_refusal(address)
        if reason:
            raise Refused(f"{host} resolves to the {reason}; not fetched (set trust.allowPrivateUrls: true "
                          f"{SETTINGS_HINT} to allow private addresses)")
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
                  f"trust.maxRedirects {SETTINGS_HINT} to follow more)")


def _fetch_once(url: str, original: str, trust: Trust, timeout: float, max_bytes: int,
                deadline: float) -> LoadedText | str:
    """One request: the body, or the Location of a redirect."""
    target = request_target(url, original)
    reason = host_refusal(target.host, trust)
    if reason:
        raise Refused(f"{original}{target.via}: {reason}")
    started = time.monotonic()
    if started >= deadline:
        raise _deadline_spent(original, trust)
    limits = _Limits(started, trust, timeout, deadline, original, url)
    address = _address_of(target, trust, limits, started)
    conn = _connection(target.scheme, target.host, target.port, address, max(0.01, limits.head - started))
    watchdog = _Watchdog()
    try:
        answer = _answer(conn, target, limits, watchdog, max_bytes)
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
    if isinstance(answer, str):
        return answer
    data, charset = answer
    return loaded_text(data, url, charset, size=len(data))


@dataclass(frozen=True)
class Target:
    """What one request asks for: ``url`` (reached from ``original`` by redirects, or the same),
    its lower-case scheme, host, port (the scheme's default when none is given) and the path
    with its query as the request line carries it."""

    url: str
    original: str
    scheme: str
    host: str
    port: int
    path: str

    @property
    def via(self) -> str:
        """`` (redirected to URL)`` for a redirect's target, else empty: what messages add after the original."""
        return "" if self.url == self.original else f" (redirected to {self.url})"


def request_target(url: str, original: str) -> Target:
    """The :class:`Target` of ``url``; TextUnavailable for a URL that is not http(s), has a bad
    port or no host (Refused when a redirect led to another scheme)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        what = "only http:// and https:// URLs are fetched"
        if url != original:
            raise Refused(f"{original} (redirected to {url}): {what}")
        raise TextUnavailable(f"{url}: {what}")
    try:
        host, port = parts.hostname or "", parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise TextUnavailable(f"{url}: bad port") from None
    if not host:
        raise TextUnavailable(f"{url}: no host")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(url, original, scheme, host, port, path)


def _address_of(target: Target, trust: Trust, limits: _Limits, started: float) -> str:
    """The vetted address to connect to for ``target`` (:func:`vetted_address`), its refusal
    naming the original URL, its timeout the limit that hit."""
    try:
        return vetted_address(target.host, target.port, trust, limits.head - started)
    except TextUnavailable as exc:
        raise type(exc)(f"{target.original}{target.via}: {exc}") from None
    except TimeoutError:
        raise limits.exceeded() from None


#: The request's headers: no compression (the size cap counts the bytes as sent), text preferred.
REQUEST_HEADERS = {"User-Agent": "ctxengine", "Accept-Encoding": "identity",
                   "Accept": "text/markdown, text/plain;q=0.9, */*;q=0.5"}


def _answer(conn: http.client.HTTPConnection, target: Target, limits: _Limits, watchdog: _Watchdog,
            max_bytes: int) -> str | tuple[bytes, str]:
    """The Location of a redirect, or (the body, its charset): the request sent on ``conn``,
    the headers by ``limits.head``, the body by ``limits.body`` and within ``max_bytes``."""
    response = _response(conn, target.path, limits, watchdog)
    location = redirect_location(response, target)
    if location is not None:
        return location
    length = response.getheader("Content-Length", "") or ""
    if length.isdigit() and int(length) > max_bytes:
        raise TextUnavailable(_too_large(target.url, f"{length} bytes", max_bytes))
    limits.phase = "body"
    watchdog.arm(conn.sock, limits.body)
    data = _read_capped(response, target.url, max_bytes, limits.body, watchdog)
    return data, response.msg.get_content_charset() or "utf-8"


def _response(conn: http.client.HTTPConnection, path: str, limits: _Limits,
              watchdog: _Watchdog) -> http.client.HTTPResponse:
    """The response to GET ``path`` with its headers read; TimeoutError past ``limits.head``."""
    conn.connect()
    watchdog.arm(conn.sock, limits.head)
    conn.request("GET", path, headers=REQUEST_HEADERS)
    response = conn.getresponse()
    if watchdog.fired or time.monotonic() > limits.head:
        raise TimeoutError
    return response


def redirect_location(response: http.client.HTTPResponse, target: Target) -> str | None:
    """The Location a redirect points to; None for a success (2xx); TextUnavailable for any
    other status, or a redirect without a Location."""
    if response.status in _REDIRECTS:
        location = response.getheader("Location")
        if not location:
            raise TextUnavailable(f"{target.original}{target.via} answered HTTP {response.status} without a Location")
        return location
    if not 200 <= response.status < 300:
        raise TextUnavailable(f"{target.url} answered HTTP {response.status} {response.reason}")
    return None


def _read_capped(response, url: str, max_bytes: int, deadline: float, watchdog: _Watchdog) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(min(READ_CHUNK, max_bytes + 1 - size))  # whatever has arrived, so the deadline holds
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
                   f"is spent (raise it {SETTINGS_HINT})")


def _too_large(url: str, size: str, max_bytes: int) -> str:
    return (f"{url} is {size}, over references.urlMaxBytes ({max_bytes}); not loaded "
            "(raise references.urlMaxBytes to read it)")


def _timed_out(url: str, timeout: float) -> str:
    return f"{url} did not answer within references.urlTimeout ({timeout:g} s); not loaded"
