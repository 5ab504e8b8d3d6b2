"""The steps of one URL request (nodes/lib/textio/urls.py), one table each: what a URL asks for
(scheme, host, port, path) or why it is not fetched, and what a response's status means."""

from __future__ import annotations

import http.client
import io
import ipaddress

import pytest

from ctxengine.nodes.lib.textio import urls as U
from ctxengine.nodes.lib.textio.trust import Refused, TextUnavailable


def case(id_: str, *values):
    return pytest.param(*values, id=id_)


@pytest.mark.parametrize("url, original, expected", [
    case("the default port, path '/'", "http://Example.com", "http://Example.com",
         ("http", "example.com", 80, "/", "")),
    case("https, a port, the query kept", "HTTPS://h.io:8443/a/b?x=1&y=2", "HTTPS://h.io:8443/a/b?x=1&y=2",
         ("https", "h.io", 8443, "/a/b?x=1&y=2", "")),
    case("a redirect's target names it", "https://b.io/doc", "http://a.io/",
         ("https", "b.io", 443, "/doc", " (redirected to https://b.io/doc)")),
])
def test_request_target(url, original, expected):
    target = U.request_target(url, original)
    assert (target.scheme, target.host, target.port, target.path, target.via) == expected


@pytest.mark.parametrize("url, original, error, message", [
    case("not http(s)", "ftp://h/x", "ftp://h/x", TextUnavailable, "ftp://h/x: only http:// and https:// URLs are fetched"),
    case("a redirect to another scheme is refused", "file:///etc/passwd", "http://a.io/", Refused,
         "http://a.io/ (redirected to file:///etc/passwd): only http:// and https:// URLs are fetched"),
    case("a bad port", "http://h:99999/", "http://h:99999/", TextUnavailable, "http://h:99999/: bad port"),
    case("no host", "http:///x", "http:///x", TextUnavailable, "http:///x: no host"),
])
def test_request_target_refuses(url, original, error, message):
    with pytest.raises(error) as raised:
        U.request_target(url, original)
    assert type(raised.value) is error and str(raised.value) == message


class _Wire:
    """A socket whose bytes are already there: http.client parses them as a real response."""

    def __init__(self, data: bytes):
        self.data = data

    def makefile(self, mode):
        return io.BytesIO(self.data)


def response(head: str) -> http.client.HTTPResponse:
    answer = http.client.HTTPResponse(_Wire(f"{head}\r\nContent-Length: 0\r\n\r\n".encode()))
    answer.begin()
    return answer


TARGET = U.request_target("http://b.io/x", "http://a.io/")


@pytest.mark.parametrize("head, expected", [
    case("a success", "HTTP/1.1 200 OK", None),
    case("no content is a success", "HTTP/1.1 204 No Content", None),
    case("a redirect's Location", "HTTP/1.1 302 Found\r\nLocation: /next", "/next"),
    case("a permanent one", "HTTP/1.1 308 Permanent Redirect\r\nLocation: https://c.io/", "https://c.io/"),
])
def test_redirect_location(head, expected):
    assert U.redirect_location(response(head), TARGET) == expected


@pytest.mark.parametrize("head, message", [
    case("a redirect without a Location names the original",
         "HTTP/1.1 301 Moved", "http://a.io/ (redirected to http://b.io/x) answered HTTP 301 without a Location"),
    case("an error status names the URL asked", "HTTP/1.1 404 Not Found", "http://b.io/x answered HTTP 404 Not Found"),
    case("a 3xx that is no redirect", "HTTP/1.1 304 Not Modified", "http://b.io/x answered HTTP 304 Not Modified"),
])
def test_redirect_location_refuses(head, message):
    with pytest.raises(TextUnavailable) as raised:
        U.redirect_location(response(head), TARGET)
    assert str(raised.value) == message


# address_refusal's steps: an IPv6 address carrying an IPv4 one, and one that carries none.

@pytest.mark.parametrize("address, form, inner, expected", [
    case("IPv4-mapped: named as the IPv4 address", "::ffff:10.0.0.1", "IPv4-mapped", "10.0.0.1", "private address 10.0.0.1"),
    case("NAT64 names both", "64:ff9b::a00:1", "NAT64", "10.0.0.1",
         "NAT64 address 64:ff9b::a00:1 carrying the private address 10.0.0.1"),
    case("6to4 carrying loopback", "2002:7f00:1::1", "6to4", "127.0.0.1",
         "6to4 address 2002:7f00:1::1 carrying the loopback address 127.0.0.1"),
    case("a public IPv4 inside: no refusal", "64:ff9b::808:808", "NAT64", "8.8.8.8", None),
])
def test_carried_refusal(address, form, inner, expected):
    assert U.carried_refusal(ipaddress.IPv6Address(address), form, ipaddress.IPv4Address(inner)) == expected


@pytest.mark.parametrize("address, expected", [
    case("loopback", "::1", "loopback"),
    case("link-local", "fe80::1", "link-local"),
    case("unique-local", "fc00::1", "private (unique-local)"),
    case("documentation, inside global unicast", "2001:db8::1", "documentation"),
    case("outside global unicast", "4000::1", "reserved"),
    case("an ordinary global address", "2606:4700::1", None),
])
def test_ipv6_kind(address, expected):
    assert U.ipv6_kind(ipaddress.IPv6Address(address)) == expected
