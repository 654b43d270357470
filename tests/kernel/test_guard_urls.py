"""ragstack.guard.urls: the address rules, numeric host spellings, resolution with a fake resolver, the
allowlist, and `Fetcher` against real HTTP and TCP servers on loopback."""

from __future__ import annotations

import base64
import gzip
import http.server
import ipaddress
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest

from ragstack.errors import ConfigError, PermissionDenied, ResourceExhausted, Unavailable
from ragstack.guard.urls import (
    ALLOW_KEY,
    ETAG,
    Allowlist,
    Fetcher,
    FetchFailed,
    FetchRefused,
    FetchTooLarge,
    numeric_address,
    refused_rule,
    resolve_checked,
    shown_url,
)

# --- refused_rule ------------------------------------------------------------------------------------

REFUSED: list[tuple[str, str]] = [
    # IPv4
    ("127.0.0.1", "a loopback address"),
    ("127.255.255.254", "a loopback address"),
    ("10.0.0.1", "a private address"),
    ("10.255.255.255", "a private address"),
    ("172.16.0.1", "a private address"),
    ("172.31.255.254", "a private address"),
    ("192.168.0.1", "a private address"),
    ("192.168.255.255", "a private address"),
    ("169.254.0.1", "a link-local address"),
    ("169.254.255.254", "a link-local address"),
    ("169.254.169.254", "a cloud metadata address"),
    ("100.100.100.200", "a cloud metadata address"),
    ("100.64.0.1", "a shared (CGNAT) address"),
    ("100.127.255.254", "a shared (CGNAT) address"),
    ("224.0.0.1", "a multicast address"),
    ("239.255.255.250", "a multicast address"),
    ("0.0.0.0", "an unspecified address"),
    ("0.1.2.3", "an unspecified address"),
    ("255.255.255.255", "a broadcast address"),
    ("192.0.2.1", "a documentation address"),
    ("198.51.100.7", "a documentation address"),
    ("203.0.113.9", "a documentation address"),
    ("198.18.0.1", "a benchmarking address"),
    ("198.19.255.254", "a benchmarking address"),
    ("192.0.0.8", "a reserved address"),
    ("192.88.99.1", "a reserved address"),
    ("240.0.0.1", "a reserved address"),
    ("250.1.2.3", "a reserved address"),
    # IPv6
    ("::", "an unspecified address"),
    ("::1", "a loopback address"),
    ("fd00::1", "a private address"),
    ("fdff:ffff::1", "a private address"),
    ("fc00::1", "a private address"),
    ("fe80::1", "a link-local address"),
    ("febf::1", "a link-local address"),
    ("fe80::1%eth0", "a link-local address"),
    ("ff02::1", "a multicast address"),
    ("ff05::2", "a multicast address"),
    ("fd00:ec2::254", "a cloud metadata address"),
    ("2001:db8::1", "a documentation address"),
    ("3fff::1", "a documentation address"),
    ("2001:2::1", "a benchmarking address"),
    ("100::1", "a reserved address"),
    ("fec0::1", "a reserved address"),
    ("64:ff9b:1::1", "a reserved address"),
    ("4000::1", "a reserved address"),  # outside global unicast 2000::/3
    # IPv4 inside IPv6
    ("::ffff:127.0.0.1", "a loopback address inside an IPv4-mapped IPv6 address"),
    ("::ffff:7f00:1", "a loopback address inside an IPv4-mapped IPv6 address"),
    ("::ffff:10.1.2.3", "a private address inside an IPv4-mapped IPv6 address"),
    ("::ffff:169.254.169.254", "a cloud metadata address inside an IPv4-mapped IPv6 address"),
    ("::ffff:8.8.8.8", "an IPv4-mapped IPv6 address"),  # refused even with a public address inside
    ("::127.0.0.1", "a loopback address inside an IPv4-compatible IPv6 address"),
    ("::8.8.8.8", "an IPv4-compatible IPv6 address"),
    ("64:ff9b::7f00:1", "a loopback address inside a NAT64 address"),
    ("64:ff9b::a9fe:a9fe", "a cloud metadata address inside a NAT64 address"),
    ("64:ff9b::192.168.1.1", "a private address inside a NAT64 address"),
    ("2002:7f00:1::", "a loopback address inside a 6to4 address"),
    ("2002:a00:1::1", "a private address inside a 6to4 address"),
    ("2002:a9fe:a9fe::", "a cloud metadata address inside a 6to4 address"),
    ("2001::1", "a Teredo address"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo address"),
]

PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "11.0.0.1",
    "172.15.255.255",
    "172.32.0.1",
    "192.167.255.255",
    "192.169.0.1",
    "100.63.255.255",
    "100.128.0.1",
    "169.253.255.255",
    "223.255.255.255",
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:82a::200e",
    "64:ff9b::808:808",  # NAT64 of a public address
    "2002:808:808::1",  # 6to4 of a public address
]


@pytest.mark.parametrize(("text", "rule"), REFUSED)
def test_internal_addresses_are_refused_by_their_rule(text: str, rule: str) -> None:
    assert refused_rule(ipaddress.ip_address(text)) == rule


@pytest.mark.parametrize("text", PUBLIC)
def test_public_addresses_are_not_refused(text: str) -> None:
    assert refused_rule(ipaddress.ip_address(text)) is None


# --- numeric_address -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7F.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("10.1", "10.0.0.1"),
        ("1.2.3", "1.2.0.3"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
    ],
)
def test_numeric_spellings_read_as_the_c_library_reads_them(host: str, address: str) -> None:
    assert numeric_address(host) == ipaddress.ip_address(address)
    if address.count(".") == 3 and ":" not in address:
        assert ipaddress.IPv4Address(socket.inet_aton(host.strip("[]"))) == ipaddress.ip_address(address)


@pytest.mark.parametrize("host", ["example.com", "1e100.net", "localhost", "0x7f.example", "123.example"])
def test_names_are_not_numeric(host: str) -> None:
    assert numeric_address(host) is None


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "0177.0.0.1", "127.1", "0x7f000001"])
def test_numeric_loopback_spellings_are_refused(host: str) -> None:
    def resolver(name: str) -> Sequence[str]:
        raise AssertionError(f"a numeric host must not be resolved: {name}")

    with pytest.raises(FetchRefused) as info:
        resolve_checked(host, Allowlist(), resolver)
    message = str(info.value)
    assert "a loopback address" in message and "127.0.0.1" in message and ALLOW_KEY in message


# --- resolve_checked -------------------------------------------------------------------------------------


def fake_resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> Callable[[str], list[str]]:
    def resolve(host: str) -> list[str]:
        if calls is not None:
            calls.append(host)
        key = host.lower().rstrip(".")
        if key not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return table[key]

    return resolve


def test_a_name_resolving_to_loopback_is_refused_naming_rule_and_key() -> None:
    resolver = fake_resolver({"evil.test": ["127.0.0.1"]})
    with pytest.raises(FetchRefused) as info:
        resolve_checked("evil.test", Allowlist(), resolver)
    message = str(info.value)
    assert "evil.test" in message
    assert "a loopback address" in message
    assert ALLOW_KEY in message
    assert isinstance(info.value, PermissionDenied)


@pytest.mark.parametrize(
    ("answers", "rule"),
    [
        (["93.184.216.34", "10.0.0.5"], "a private address"),
        (["10.0.0.5", "93.184.216.34"], "a private address"),
        (["2606:4700::1111", "::1"], "a loopback address"),
        (["93.184.216.34", "169.254.169.254"], "a cloud metadata address"),
        (["93.184.216.34", "fe80::1%eth0"], "a link-local address"),
    ],
)
def test_a_name_with_any_internal_address_is_refused(answers: list[str], rule: str) -> None:
    with pytest.raises(FetchRefused) as info:
        resolve_checked("mixed.test", Allowlist(), fake_resolver({"mixed.test": answers}))
    assert rule in str(info.value) and ALLOW_KEY in str(info.value)


def test_a_name_resolving_to_public_addresses_passes() -> None:
    resolver = fake_resolver({"pub.test": ["93.184.216.34", "2606:4700::1111", "93.184.216.34"]})
    assert resolve_checked("pub.test", Allowlist(), resolver) == [
        ipaddress.ip_address("93.184.216.34"),
        ipaddress.ip_address("2606:4700::1111"),
    ]


def test_public_literals_pass_without_resolving() -> None:
    def resolver(name: str) -> Sequence[str]:
        raise AssertionError("literal resolved")

    assert resolve_checked("93.184.216.34", Allowlist(), resolver) == [ipaddress.ip_address("93.184.216.34")]
    assert resolve_checked("[2606:4700::1111]", Allowlist(), resolver) == [
        ipaddress.ip_address("2606:4700::1111")
    ]


def test_a_name_that_does_not_resolve_raises_oserror() -> None:
    with pytest.raises(OSError):
        resolve_checked("nowhere.test", Allowlist(), fake_resolver({}))
    with pytest.raises(OSError):
        resolve_checked("empty.test", Allowlist(), fake_resolver({"empty.test": []}))


def test_allowlist_by_host_name_lets_an_internal_name_through() -> None:
    resolver = fake_resolver({"intranet.test": ["10.0.0.5"], "other.test": ["10.0.0.5"]})
    allow = Allowlist.parse(["Intranet.Test."])
    assert resolve_checked("intranet.test", allow, resolver) == [ipaddress.ip_address("10.0.0.5")]
    assert resolve_checked("INTRANET.test", allow, resolver) == [ipaddress.ip_address("10.0.0.5")]
    with pytest.raises(FetchRefused):  # the address alone is not allowed
        resolve_checked("other.test", allow, resolver)


def test_allowlist_by_cidr_lets_addresses_in_the_range_through() -> None:
    resolver = fake_resolver({"a.test": ["10.1.2.3"], "b.test": ["10.1.2.3", "192.168.0.1"]})
    allow = Allowlist.parse(["10.0.0.0/8"])
    assert resolve_checked("a.test", allow, resolver) == [ipaddress.ip_address("10.1.2.3")]
    assert resolve_checked("10.9.9.9", allow, resolver) == [ipaddress.ip_address("10.9.9.9")]
    with pytest.raises(FetchRefused) as info:  # one address outside the range
        resolve_checked("b.test", allow, resolver)
    assert "a private address" in str(info.value)
    with pytest.raises(FetchRefused):
        resolve_checked("127.0.0.1", allow, resolver)


def test_allowlist_of_an_ipv4_range_covers_its_mapped_ipv6_form() -> None:
    allow = Allowlist.parse(["127.0.0.1"])
    assert resolve_checked("::ffff:127.0.0.1", allow) == [ipaddress.ip_address("::ffff:127.0.0.1")]
    assert resolve_checked("127.0.0.1", allow) == [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(FetchRefused):
        resolve_checked("127.0.0.2", allow)


def test_allowlist_parse_accepts_names_addresses_and_ranges() -> None:
    allow = Allowlist.parse(
        ["Intranet.Example.", "10.0.0.0/8", "127.0.0.1", "[::1]", "fd00::/8", "10.1.2.3/8"]
    )
    assert allow.hosts == frozenset({"intranet.example"})
    assert set(allow.networks) == {
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
        ipaddress.ip_network("fd00::/8"),
    }


@pytest.mark.parametrize("entry", ["http://intranet", "a b", "host/path", "user@host", "-bad", ""])
def test_allowlist_parse_refuses_anything_else_naming_the_key(entry: str) -> None:
    with pytest.raises(ConfigError) as info:
        Allowlist.parse([entry])
    assert ALLOW_KEY in str(info.value)


# --- servers -----------------------------------------------------------------------------------------------


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


Route = Callable[[http.server.BaseHTTPRequestHandler], None]


@dataclass
class Server:
    host: str
    port: int
    seen: list[Seen] = field(default_factory=list)
    route: Route | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/", userinfo: str = "") -> str:
        return f"http://{userinfo}{self.host}:{self.port}{path}"


class _Quiet(socketserver.ThreadingMixIn):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: object, client_address: object) -> None:  # broken pipes are expected
        pass


class _HTTPServer(_Quiet, http.server.HTTPServer):
    owner: Server


class _TCPServer(_Quiet, socketserver.TCPServer):
    owner: Server


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer

    def do_GET(self) -> None:
        owner = self.server.owner
        owner.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
        if owner.route is None:
            body = b"hello " + self.path.encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            owner.route(self)

    def log_message(self, format: str, *args: object) -> None:
        pass


def reply(
    handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str
) -> None:
    handler.send_response(status)
    for key, value in headers.items():
        handler.send_header(key.replace("_", "-"), value)
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def redirect(handler: http.server.BaseHTTPRequestHandler, location: str, status: int = 302) -> None:
    reply(handler, status, location=location)


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    """Starts HTTP servers (or raw TCP servers with `tcp=`) on loopback; all stopped at the end."""
    started: list[tuple[Server, _HTTPServer | _TCPServer, threading.Thread]] = []

    def start(host: str = "127.0.0.1", tcp: Callable[[socket.socket, Server], None] | None = None) -> Server:
        srv: _HTTPServer | _TCPServer
        if tcp is None:
            srv = _HTTPServer((host, 0), _Handler)
        else:

            class Raw(socketserver.BaseRequestHandler):
                def handle(self) -> None:
                    assert tcp is not None
                    tcp(self.request, owner)

            srv = _TCPServer((host, 0), Raw)
        owner = Server(host, srv.server_address[1])
        srv.owner = owner
        thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        started.append((owner, srv, thread))
        return owner

    yield start
    for owner, srv, thread in started:
        owner.stop.set()
        srv.shutdown()
        srv.server_close()
        thread.join(5)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


LOOPBACK_ALLOWED = ["127.0.0.0/8"]


# --- fetching ----------------------------------------------------------------------------------------------


def test_plain_get_through_the_allowlist(servers: Callable[..., Server]) -> None:
    a = servers()
    with Fetcher(["127.0.0.1"]) as fetcher:
        page = fetcher.fetch(a.url("/page?q=1"))
    assert page.status == 200
    assert page.content == b"hello /page?q=1"
    assert page.text == "hello /page?q=1"
    assert page.content_type == "text/plain"
    assert page.url == a.url("/page?q=1")
    assert len(a.seen) == 1 and a.seen[0].path == "/page?q=1"
    assert a.seen[0].headers["host"] == f"127.0.0.1:{a.port}"
    assert "authorization" not in a.seen[0].headers


def test_loopback_server_is_refused_without_the_allowlist(servers: Callable[..., Server]) -> None:
    a = servers()
    with Fetcher() as fetcher, pytest.raises(FetchRefused) as info:
        fetcher.fetch(a.url())
    assert "a loopback address" in str(info.value) and ALLOW_KEY in str(info.value)
    assert a.seen == []


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://10.0.0.1/",
        "http://0.0.0.0/",
        "http://[::]/",
    ],
)
def test_internal_urls_are_refused_before_connecting(url: str) -> None:
    with Fetcher() as fetcher, pytest.raises(FetchRefused) as info:
        fetcher.fetch(url)
    assert ALLOW_KEY in str(info.value)


def test_a_numeric_spelling_connects_to_the_address_it_stands_for(servers: Callable[..., Server]) -> None:
    a = servers()
    with Fetcher(["127.0.0.1/32"]) as fetcher:
        page = fetcher.fetch(f"http://0x7f.1:{a.port}/x")
    assert page.content == b"hello /x"
    assert a.seen[0].headers["host"] == f"0x7f.1:{a.port}"


def test_the_connection_goes_to_the_checked_address_with_the_name_in_host(
    servers: Callable[..., Server],
) -> None:
    a = servers()
    calls: list[str] = []
    resolver = fake_resolver({"example.test": ["127.0.0.1"]}, calls)
    with Fetcher(["127.0.0.1"], resolver=resolver) as fetcher:
        page = fetcher.fetch(f"http://example.test:{a.port}/doc")
    assert page.content == b"hello /doc"
    assert page.url == f"http://example.test:{a.port}/doc"
    assert a.seen[0].headers["host"] == f"example.test:{a.port}"
    assert calls == ["example.test"]  # resolved once: DNS has no second answer to give


def test_a_name_resolving_to_an_unallowed_address_is_refused(servers: Callable[..., Server]) -> None:
    a = servers()
    resolver = fake_resolver({"example.test": ["127.0.0.1"]})
    with Fetcher(resolver=resolver) as fetcher, pytest.raises(FetchRefused) as info:
        fetcher.fetch(f"http://example.test:{a.port}/")
    assert "example.test" in str(info.value) and "a loopback address" in str(info.value)
    assert a.seen == []


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/x",
        "gopher://127.0.0.1:70/_x",
        "javascript:alert(1)",
        "data:text/plain,hi",
        "dict://127.0.0.1:11211/stat",
        "ws://example.com/",
    ],
)
def test_non_http_schemes_are_refused(url: str) -> None:
    with Fetcher(LOOPBACK_ALLOWED) as fetcher, pytest.raises(FetchRefused):
        fetcher.fetch(url)


def test_redirect_to_a_non_allowed_loopback_address_is_refused(servers: Callable[..., Server]) -> None:
    a = servers("127.0.0.1")
    b = servers("127.0.0.2")
    b.route = lambda h: redirect(h, a.url("/secret"))
    with Fetcher(["127.0.0.2/32"]) as fetcher, pytest.raises(FetchRefused) as info:
        fetcher.fetch(b.url("/start"))
    message = str(info.value)
    assert "a loopback address" in message and ALLOW_KEY in message
    assert "redirected from" in message and b.url("/start") in message
    assert [s.path for s in b.seen] == ["/start"]
    assert a.seen == []  # the target never saw a request


@pytest.mark.parametrize(
    "location",
    ["file:///etc/passwd", "gopher://127.0.0.2:70/_stats", "ftp://127.0.0.2/", "mailto:a@example.com"],
)
def test_redirect_to_a_non_http_url_is_refused(servers: Callable[..., Server], location: str) -> None:
    b = servers("127.0.0.2")
    b.route = lambda h: redirect(h, location)
    with Fetcher(["127.0.0.2/32"]) as fetcher, pytest.raises(FetchRefused):
        fetcher.fetch(b.url("/start"))
    assert len(b.seen) == 1


def test_more_redirects_than_the_maximum_are_refused(servers: Callable[..., Server]) -> None:
    a = servers()

    def loop(h: http.server.BaseHTTPRequestHandler) -> None:
        n = int(h.path.strip("/") or 0)
        redirect(h, f"/{n + 1}", 301 if n % 2 else 307)

    a.route = loop
    with Fetcher(LOOPBACK_ALLOWED, max_redirects=3) as fetcher, pytest.raises(FetchRefused) as info:
        fetcher.fetch(a.url("/0"))
    assert "3" in str(info.value)
    assert [s.path for s in a.seen] == ["/0", "/1", "/2", "/3"]  # the first request and three redirects


def test_exactly_the_maximum_of_redirects_is_followed(servers: Callable[..., Server]) -> None:
    a = servers()

    def chain(h: http.server.BaseHTTPRequestHandler) -> None:
        n = int(h.path.strip("/"))
        if n == 0:
            reply(h, 200, b"done")
        else:
            redirect(h, f"/{n - 1}", 303)

    a.route = chain
    with Fetcher(LOOPBACK_ALLOWED, max_redirects=3) as fetcher:
        page = fetcher.fetch(a.url("/3"))
    assert page.content == b"done" and page.url == a.url("/0")


def test_credentials_go_to_their_origin_only(servers: Callable[..., Server]) -> None:
    a = servers("127.0.0.1")
    b = servers("127.0.0.2")

    def start(h: http.server.BaseHTTPRequestHandler) -> None:
        if h.path == "/start":
            redirect(h, "/same")  # same origin: credentials kept
        else:
            redirect(h, a.url("/other"))  # another origin: not forwarded

    b.route = start
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(b.url("/start", userinfo="ann:s3cr%40t@"))
    assert page.content == b"hello /other"
    assert page.url == a.url("/other")
    assert [s.headers.get("authorization") for s in b.seen] == [basic("ann", "s3cr@t")] * 2
    assert len(a.seen) == 1 and "authorization" not in a.seen[0].headers


def test_auth_argument_goes_to_the_url_origin_only(servers: Callable[..., Server]) -> None:
    a = servers("127.0.0.1")
    b = servers("127.0.0.2")
    b.route = lambda h: redirect(h, a.url("/other"))
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        fetcher.fetch(b.url("/start"), auth=("bob", "pw"))
    assert b.seen[0].headers.get("authorization") == basic("bob", "pw")
    assert "authorization" not in a.seen[0].headers


@pytest.mark.parametrize(
    ("etag", "sent_back"),
    [
        ('"v1"', True),
        ('W/"v2"', True),
        ('""', True),
        ("v3", False),
        ('"caf\u00e9"', False),
        ('"a\r\nX: y"', False),
        ('"a"b"', False),
        ('"' + "x" * 251 + '"', False),
    ],
)
def test_only_a_quoted_printable_ascii_etag_is_sent_back(etag: str, sent_back: bool) -> None:
    """S3's If-Match and a page's If-None-Match carry back only ETags the header can hold as they are."""
    assert bool(ETAG.fullmatch(etag)) is sent_back


def test_a_signed_request_goes_to_its_one_url_and_a_redirect_comes_back_unfollowed(
    servers: Callable[..., Server],
) -> None:
    """A request carrying a signature (S3's) is never sent on: with redirects=False the 3xx is the
    answer, and the signed headers are refused where redirects would be followed."""
    a = servers("127.0.0.1")
    b = servers("127.0.0.2")
    b.route = lambda h: redirect(h, a.url("/other"), 307)
    signed = {"Authorization": "AWS4-HMAC-SHA256 Credential=k/...", "X-Amz-Date": "20261207T000000Z"}
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(b.url("/bucket?list-type=2"), headers=signed, redirects=False)
        assert page.status == 307 and page.headers["location"] == a.url("/other")
        assert b.seen[0].headers["authorization"].startswith("AWS4-HMAC-SHA256")
        assert b.seen[0].headers["x-amz-date"] == "20261207T000000Z" and a.seen == []
        with pytest.raises(ValueError, match=r"signed headers: only with redirects=False"):
            fetcher.fetch(b.url("/bucket"), headers=signed)
        with pytest.raises(ValueError, match="a caller may set"):
            fetcher.fetch(b.url("/bucket"), headers={"host": "elsewhere"}, redirects=False)
        for odd in ('"a\r\nX-Injected: 1"', '"caf\u00e9"', '"\x00"'):  # refused before anything is sent
            with pytest.raises(ValueError, match="not printable ASCII"):
                fetcher.fetch(b.url("/bucket"), headers={"if-match": odd}, redirects=False)
    assert len(b.seen) == 1 and a.seen == []


def test_fetched_url_has_no_userinfo(servers: Callable[..., Server]) -> None:
    a = servers()
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(a.url("/p?token=abc", userinfo="ann:hunter2@"))
    assert page.url == a.url("/p?token=abc")
    assert "ann" not in page.url and "hunter2" not in page.url
    assert a.seen[0].headers["authorization"] == basic("ann", "hunter2")


def test_shown_url_drops_userinfo_and_masks_secret_parameters() -> None:
    shown = shown_url("https://ann:hunter2@example.com/x?token=abc&page=2")
    assert "ann" not in shown and "hunter2" not in shown and "abc" not in shown
    assert shown.startswith("https://example.com/x?") and "page=2" in shown


def test_a_body_larger_than_the_cap_is_cut_while_reading(servers: Callable[..., Server]) -> None:
    a = servers()
    total = 64 * 1024 * 1024
    sent = [0]
    finished = threading.Event()

    def stream(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "application/octet-stream")
        h.end_headers()  # HTTP/1.0, no content-length: the body ends when the connection does
        chunk = b"x" * 65536
        try:
            while sent[0] < total and not a.stop.is_set():
                h.wfile.write(chunk)
                sent[0] += len(chunk)
        except OSError:
            pass
        finally:
            finished.set()

    a.route = stream
    started = time.monotonic()
    with Fetcher(LOOPBACK_ALLOWED, max_bytes=256 * 1024) as fetcher, pytest.raises(FetchTooLarge) as info:
        fetcher.fetch(a.url("/big"))
    assert time.monotonic() - started < 5
    assert isinstance(info.value, ResourceExhausted)
    assert finished.wait(5)
    assert sent[0] < total  # the client stopped reading: the server could not send it all


def test_a_declared_length_over_the_cap_is_refused(servers: Callable[..., Server]) -> None:
    a = servers()
    a.route = lambda h: reply(h, 200, b"y" * 5000)
    with Fetcher(LOOPBACK_ALLOWED, max_bytes=4096) as fetcher, pytest.raises(FetchTooLarge):
        fetcher.fetch(a.url())


def test_a_body_of_exactly_the_cap_is_accepted(servers: Callable[..., Server]) -> None:
    a = servers()
    a.route = lambda h: reply(h, 200, b"y" * 4096)
    with Fetcher(LOOPBACK_ALLOWED, max_bytes=4096) as fetcher:
        assert fetcher.fetch(a.url()).content == b"y" * 4096


def test_gzip_bodies_are_decoded(servers: Callable[..., Server]) -> None:
    a = servers()
    a.route = lambda h: reply(h, 200, gzip.compress(b"compressed text"), content_encoding="gzip")
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(a.url())
    assert page.content == b"compressed text"
    assert a.seen[0].headers["accept-encoding"] == "gzip, deflate"


def test_a_gzip_bomb_is_cut_after_decoding(servers: Callable[..., Server]) -> None:
    a = servers()
    bomb = gzip.compress(b"\0" * (32 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 64 * 1024
    a.route = lambda h: reply(h, 200, bomb, content_encoding="gzip", content_type="text/html")
    with Fetcher(LOOPBACK_ALLOWED, max_bytes=1024 * 1024) as fetcher, pytest.raises(FetchTooLarge):
        fetcher.fetch(a.url("/bomb"))


def test_a_drip_fed_body_meets_the_deadline(servers: Callable[..., Server]) -> None:
    a = servers()

    def drip(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-length", "100")
        h.end_headers()
        h.wfile.flush()
        try:
            for _ in range(100):
                if a.stop.wait(0.2):
                    return
                h.wfile.write(b"z")
                h.wfile.flush()
        except OSError:
            pass

    a.route = drip
    started = time.monotonic()
    with Fetcher(LOOPBACK_ALLOWED, timeout_s=1.0) as fetcher, pytest.raises(FetchFailed):
        fetcher.fetch(a.url("/drip"))
    elapsed = time.monotonic() - started
    assert 0.8 <= elapsed < 2.0


def test_drip_fed_headers_meet_the_deadline(servers: Callable[..., Server]) -> None:
    """The deadline covers the headers too: a server that drips its header bytes is cut at it."""

    def drip(sock: socket.socket, owner: Server) -> None:
        sock.recv(65536)
        try:
            sock.sendall(b"HTTP/1.1 200 OK\r\nX-Pad: ")
            for _ in range(20):  # 4 s of header bytes
                if owner.stop.wait(0.2):
                    return
                sock.sendall(b"a")
            sock.sendall(b"\r\ncontent-length: 2\r\n\r\nok")
        except OSError:
            pass

    a = servers(tcp=drip)
    started = time.monotonic()
    with Fetcher(LOOPBACK_ALLOWED, timeout_s=1.0) as fetcher, pytest.raises(FetchFailed):
        fetcher.fetch(a.url("/slow-headers"))
    assert time.monotonic() - started < 2.0


def test_cancel_from_another_thread_stops_a_silent_fetch(servers: Callable[..., Server]) -> None:
    """A server that says nothing holds a fetch until its deadline; `cancel` ends it within a slice."""

    def silent(sock: socket.socket, owner: Server) -> None:
        sock.recv(65536)
        owner.stop.wait(30)

    a = servers(tcp=silent)
    with Fetcher(LOOPBACK_ALLOWED, timeout_s=30.0) as fetcher:
        threading.Timer(0.5, fetcher.cancel).start()
        started = time.monotonic()
        with pytest.raises(FetchFailed):
            fetcher.fetch(a.url("/silent"))
        assert time.monotonic() - started < 2.0
        with pytest.raises(FetchFailed):  # and every later one, at once
            fetcher.fetch(a.url("/again"))


def test_a_deadline_already_past_fails_without_a_request(servers: Callable[..., Server]) -> None:
    a = servers()
    now = [100.0]
    with Fetcher(LOOPBACK_ALLOWED, clock=lambda: now[0]) as fetcher, pytest.raises(FetchFailed):
        fetcher.fetch(a.url(), deadline=99.0)
    assert a.seen == []


def test_the_deadline_argument_shortens_the_timeout(servers: Callable[..., Server]) -> None:
    def silent(sock: socket.socket, owner: Server) -> None:
        sock.recv(65536)
        owner.stop.wait(10)

    a = servers(tcp=silent)
    started = time.monotonic()
    with Fetcher(LOOPBACK_ALLOWED, timeout_s=10.0) as fetcher, pytest.raises(FetchFailed):
        fetcher.fetch(a.url(), deadline=time.monotonic() + 0.5)
    assert time.monotonic() - started < 1.5


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_network_failures_all_read_the_same(servers: Callable[..., Server]) -> None:
    def garbage(sock: socket.socket, owner: Server) -> None:
        sock.recv(65536)
        sock.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02 not http at all\r\n\r\n")

    def silent(sock: socket.socket, owner: Server) -> None:
        sock.recv(65536)
        owner.stop.wait(10)

    plain = servers()
    urls = {
        "closed": f"http://ann:pw@127.0.0.1:{_closed_port()}/x?token=abc",
        "garbage": servers(tcp=garbage).url("/x?token=abc", userinfo="ann:pw@"),
        "silent": servers(tcp=silent).url("/x?token=abc", userinfo="ann:pw@"),
        "tls": f"https://ann:pw@127.0.0.1:{plain.port}/x?token=abc",  # TLS to a plain HTTP server
    }
    messages: dict[str, str] = {}
    with Fetcher(LOOPBACK_ALLOWED, timeout_s=1.0) as fetcher:
        for kind, url in urls.items():
            started = time.monotonic()
            with pytest.raises(FetchFailed) as info:
                fetcher.fetch(url)
            assert time.monotonic() - started < 2.5, kind
            assert type(info.value) is FetchFailed and isinstance(info.value, Unavailable)
            text = str(info.value)
            assert "pw" not in text and "ann" not in text and "abc" not in text, text
            assert shown_url(url) in text, text
            messages[kind] = text.replace(shown_url(url), "<url>")
    assert len(set(messages.values())) == 1, messages


def test_a_name_that_does_not_resolve_fails_like_the_network() -> None:
    with Fetcher(resolver=fake_resolver({})) as fetcher, pytest.raises(FetchFailed) as info:
        fetcher.fetch("http://nowhere.test/x")
    assert str(info.value) == str(FetchFailed("http://nowhere.test/x"))


def test_non_redirect_statuses_are_returned(servers: Callable[..., Server]) -> None:
    a = servers()
    a.route = lambda h: reply(h, 404, b"nope")
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(a.url("/missing"))
    assert page.status == 404 and page.content == b"nope"


def test_a_redirect_without_location_is_returned(servers: Callable[..., Server]) -> None:
    a = servers()
    a.route = lambda h: reply(h, 302, b"moved?")
    with Fetcher(LOOPBACK_ALLOWED) as fetcher:
        page = fetcher.fetch(a.url())
    assert page.status == 302 and page.content == b"moved?"
