"""Outbound HTTP fetches, guarded against server-side request forgery. Every URL the crawler and URL
ingest fetch goes through `Fetcher`:

- http and https only; userinfo is sent as basic auth (to that origin only) and never recorded or shown;
- the host is resolved once (numeric spellings such as 2130706433, 0x7f.1, 0177.0.0.1 and 127.1 are read
  the way the C library reads them) and every address is checked against the internal ranges (loopback,
  private, link-local, cloud metadata, IPv4 inside IPv6, ...) unless `ingest.fetch_allow` lets it
  through; the request then goes to the checked address, with the name in the Host header and the TLS
  SNI (so certificates are checked against the name), leaving DNS no second answer to give;
- redirects are followed by hand, at most `max_redirects`, every hop checked again (a request signed
  for one URL, S3's, follows none: the redirect is its answer);
- the body is streamed and cut once it grows past `max_bytes` (after content decoding, so a compressed
  bomb is cut too), within one deadline per page that covers connecting, the headers and the body;
- network failures all read the same whatever the port did (closed, open but silent, not HTTP, TLS);
  a refusal names its rule and the key that lifts it.
"""

from __future__ import annotations

import base64
import codecs
import ipaddress
import re
import socket
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from email.message import Message
from types import TracebackType
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

import httpx

from ragstack.errors import (
    ConfigError,
    InvalidArgument,
    PermissionDenied,
    RagstackError,
    ResourceExhausted,
    Unavailable,
)
from ragstack.guard.deadline import DeadlineTransport
from ragstack.redact import redact_url, strip_userinfo

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# A host name to the addresses it resolves to (as text); socket.getaddrinfo by default.
Resolver = Callable[[str], Sequence[str]]

ALLOW_KEY = "ingest.fetch_allow"
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_METHODS = frozenset({"GET", "PROPFIND"})  # PROPFIND: a WebDAV folder's listing
# The headers a caller may add: validators, a WebDAV depth, a body's type. The rest (host, auth,
# encodings) stay the fetcher's, so no caller can undo what the guard sets.
_CALLER_HEADERS = frozenset(
    {"if-none-match", "if-modified-since", "if-match", "depth", "content-type", "accept"}
)
# A request signed for one URL (S3's signature version 4): sent only where no redirect is followed,
# so the signature and its session token never reach another address.
_SIGNED_HEADERS = frozenset({"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"})
_MAX_REQUEST_BODY = 64 * 1024
DEFAULT_PORTS = {"http": 80, "https": 443}
# An ETag fit to be sent back (If-Match, If-None-Match): quoted printable ASCII, no line breaks.
ETAG = re.compile(r'(W/)?"[\x20\x21\x23-\x7e]{0,250}"')


class FetchError(RagstackError):
    """A URL that was not fetched. The message is safe to show: no userinfo, secret parameters masked."""


class FetchRefused(FetchError, PermissionDenied):
    """Refused by policy, before any connection to the address: the message names the rule."""


class FetchTooLarge(FetchError, ResourceExhausted):
    """The body grew past the byte cap while it was read (or announced a length over it)."""


class FetchFailed(FetchError, Unavailable):
    """The network failed. One text for every cause, so that it does not tell port states apart."""

    def __init__(self, url: str) -> None:
        super().__init__(f"could not fetch {shown_url(url)}: unreachable, refused or timed out")


def shown_url(url: str) -> str:
    """The form of a URL for messages and logs: no userinfo at all, secret query parameters masked."""
    return redact_url(strip_userinfo(url))


# --- addresses -------------------------------------------------------------------------------------


def _nets(*cidrs: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


_METADATA = "a cloud metadata address"
_V4_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    (_METADATA, _nets("169.254.169.254/32", "100.100.100.200/32")),
    ("a broadcast address", _nets("255.255.255.255/32")),
    ("an unspecified address", _nets("0.0.0.0/8")),
    ("a loopback address", _nets("127.0.0.0/8")),
    ("a private address", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    ("a shared (CGNAT) address", _nets("100.64.0.0/10")),
    ("a link-local address", _nets("169.254.0.0/16")),
    ("a documentation address", _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")),
    ("a benchmarking address", _nets("198.18.0.0/15")),
    ("a multicast address", _nets("224.0.0.0/4")),
    ("a reserved address", _nets("192.0.0.0/24", "192.88.99.0/24", "240.0.0.0/4")),
)
_V6_FIRST: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    (_METADATA, _nets("fd00:ec2::254/128")),
    ("an unspecified address", _nets("::/128")),
    ("a loopback address", _nets("::1/128")),
)
_V6_RULES: tuple[tuple[str, tuple[IPNetwork, ...]], ...] = (
    ("a Teredo address", _nets("2001::/32")),
    ("a documentation address", _nets("2001:db8::/32", "3fff::/20")),
    ("a benchmarking address", _nets("2001:2::/48")),
    ("a private address", _nets("fc00::/7")),
    ("a link-local address", _nets("fe80::/10")),
    ("a multicast address", _nets("ff00::/8")),
    ("a reserved address", _nets("100::/64", "2001::/23", "64:ff9b:1::/48", "fec0::/10")),
)
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")


def _first_rule(address: IPAddress, rules: tuple[tuple[str, tuple[IPNetwork, ...]], ...]) -> str | None:
    for rule, networks in rules:
        if any(address.version == n.version and address in n for n in networks):
            return rule
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address, bool] | None:
    """(what kind of embedding, the IPv4 address inside, whether the kind is refused on its own)."""
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _MAPPED:
        return "an IPv4-mapped IPv6 address", low, True
    if address in _COMPATIBLE:
        return "an IPv4-compatible IPv6 address", low, True
    if address in _NAT64:
        return "a NAT64 address", low, False
    if address.sixtofour is not None:
        return "a 6to4 address", address.sixtofour, False
    return None


def refused_rule(address: IPAddress) -> str | None:
    """What makes `address` internal ("a loopback address", ...), or None when it is a public address."""
    if isinstance(address, ipaddress.IPv4Address):
        return _first_rule(address, _V4_RULES)
    bare = ipaddress.IPv6Address(int(address))  # without a scope id
    rule = _first_rule(bare, _V6_FIRST)
    if rule is not None:
        return rule
    embedded = _embedded_v4(bare)
    if embedded is not None:
        kind, inner, refused_alone = embedded
        inner_rule = refused_rule(inner)
        if inner_rule is not None:
            return f"{inner_rule} inside {kind}"
        if refused_alone:
            return kind
    rule = _first_rule(bare, _V6_RULES)
    if rule is None and bare not in _GLOBAL_UNICAST and embedded is None:
        rule = "a reserved address"
    return rule


def numeric_address(host: str) -> IPAddress | None:
    """`host` read as an IP address the way the C library reads one (127.1, 2130706433, 0x7f.1 and
    0177.0.0.1 are all 127.0.0.1; brackets around IPv6 are dropped), or None when it is a name."""
    bare = host.strip("[]")
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    if bare[:1].isdigit() and set(bare.lower()) <= set("0123456789abcdefx."):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


def system_resolver(host: str) -> list[str]:
    return [str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]


def _host_key(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?\Z")


@dataclass(frozen=True)
class Allowlist:
    """Hosts and ranges that may be fetched although they are internal (`ingest.fetch_allow`)."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Allowlist:
        """Host names, addresses and CIDR ranges; anything else fails naming `ingest.fetch_allow`."""
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in entries:
            key = _host_key(str(entry))
            try:
                networks.append(ipaddress.ip_network(key, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.match(key):
                raise ConfigError(f"{ALLOW_KEY}: {entry!r} is neither a host name nor a CIDR range")
            hosts.add(key)
        return cls(frozenset(hosts), tuple(networks))

    def permits(self, host: str, address: IPAddress) -> bool:
        if _host_key(host) in self.hosts:
            return True
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        return any(a.version == n.version and a in n for a in candidates for n in self.networks)


def resolve_checked(host: str, allow: Allowlist, resolver: Resolver = system_resolver) -> list[IPAddress]:
    """The addresses `host` stands for, once none of them is refused. Raises FetchRefused naming the
    rule (and the key that lifts it) when any address is internal and not allowed; OSError when the
    name does not resolve."""
    literal = numeric_address(host)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        addresses = []
        for text in resolver(host):
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise OSError(f"{host} has no address")
    for address in addresses:
        rule = refused_rule(address)
        if rule is None or allow.permits(host, address):
            continue
        if literal is None:
            said = f"{host} resolves to {rule}"
        elif host.strip("[]") == str(address):
            said = f"{host} is {rule}"
        else:
            said = f"{host} ({address}) is {rule}"
        raise FetchRefused(f"refused: {said}; allow it with {ALLOW_KEY}")
    return addresses


# --- fetching --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    url: str  # as given: may carry userinfo, never shown
    scheme: str
    host: str  # lower case, IDNA-encoded, no brackets
    port: int
    path: str  # path and query
    credentials: tuple[str, str] | None

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def host_header(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == DEFAULT_PORTS[self.scheme] else f"{name}:{self.port}"

    def at(self, address: IPAddress) -> str:
        """The URL of the same resource on one checked address."""
        where = f"[{address}]" if address.version == 6 else str(address)
        return f"{self.scheme}://{where}:{self.port}{self.path}"


def _target(url: str) -> _Target:
    try:
        parts = urlsplit(urldefrag(url.strip())[0])
        port = parts.port
    except ValueError as err:
        raise InvalidArgument(f"not a valid URL: {shown_url(url)}") from err
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise FetchRefused(f"refused: {shown_url(url)}: only http and https URLs are fetched")
    host = parts.hostname or ""
    if not host:
        raise InvalidArgument(f"no host in URL: {shown_url(url)}")
    if not host.isascii():
        try:
            host = httpx.URL(f"http://{host}/").raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeError) as err:
            raise InvalidArgument(f"not a valid host name in URL: {shown_url(url)}") from err
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    credentials = None
    if parts.username is not None:
        credentials = (unquote(parts.username), unquote(parts.password or ""))
    return _Target(url, scheme, host, port or DEFAULT_PORTS[scheme], path, credentials)


@dataclass(frozen=True)
class Fetched:
    """A fetched page. `url` is where it was found after redirects, without userinfo: the form to record."""

    url: str
    status: int
    headers: httpx.Headers
    content: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def text(self) -> str:
        message = Message()
        message["content-type"] = self.headers.get("content-type", "")
        charset = message.get_content_charset() or "utf-8"
        try:
            codecs.lookup(charset)
        except LookupError:
            charset = "utf-8"
        return self.content.decode(charset, errors="replace")


class _Decoder:
    """Content decoding with the output bounded, so a small compressed body cannot grow past the cap."""

    def __init__(self, encoding: str) -> None:
        names = [n.strip().lower() for n in encoding.split(",") if n.strip().lower() not in ("", "identity")]
        self._raw_fallback = names == ["deflate"]
        if not names:
            self._z = None
        elif names in (["gzip"], ["x-gzip"]):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self._raw_fallback:
            self._z = zlib.decompressobj()
        else:
            raise ValueError(encoding)

    def feed(self, data: bytes, room: int) -> bytes:
        """At most `room` (> 0) decoded bytes; fewer only when `data` is used up."""
        if self._z is None:
            return data
        if self._raw_fallback:  # "deflate" is zlib-wrapped by the standard, raw by some servers
            self._raw_fallback = False
            try:
                return self._z.decompress(data, room)
            except zlib.error:
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._z.decompress(data, room)

    def flush(self) -> bytes:
        return b"" if self._z is None else self._z.flush()


@dataclass(frozen=True)
class _Request:
    method: str
    headers: dict[str, str]
    content: bytes

    def redirected(self, status: int) -> _Request:
        """A 303 is answered with a GET of the new location, without the body (and its type)."""
        if status != 303 or self.method == "GET":
            return self
        headers = {k: v for k, v in self.headers.items() if k != "content-type"}
        return _Request("GET", headers, b"")


def _request(method: str, headers: dict[str, str] | None, content: bytes, redirects: bool) -> _Request:
    """The caller's part of a request, checked: a mistake here is a bug, so it raises ValueError."""
    if method not in _METHODS:
        raise ValueError(f"method {method!r}: the fetcher sends {sorted(_METHODS)} only")
    extra = {k.lower(): v for k, v in (headers or {}).items()}
    allowed = _CALLER_HEADERS if redirects else _CALLER_HEADERS | _SIGNED_HEADERS
    refused = sorted(set(extra) - allowed)
    if refused:
        signed = " (signed headers: only with redirects=False)" if set(refused) & _SIGNED_HEADERS else ""
        raise ValueError(f"headers {refused}: a caller may set {sorted(allowed)} only{signed}")
    if any(not (v.isascii() and v.isprintable()) for v in extra.values()):
        raise ValueError("a header value holds a line break or is not printable ASCII")
    if len(content) > _MAX_REQUEST_BODY:
        raise ValueError(f"a request body is at most {_MAX_REQUEST_BODY} bytes")
    return _Request(method, extra, content)


class Fetcher:
    """Guarded requests (see the module's docstring): GET, and PROPFIND for WebDAV listings. Close it,
    or use it in a `with` block."""

    def __init__(
        self,
        allow: Allowlist | Iterable[str] = (),
        *,
        max_redirects: int = 5,
        max_bytes: int = 10 * 1024 * 1024,
        timeout_s: float = 15.0,
        user_agent: str = "RAGStack",
        resolver: Resolver = system_resolver,
        clock: Callable[[], float] = time.monotonic,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self._allow = allow if isinstance(allow, Allowlist) else Allowlist.parse(allow)
        self._max_redirects = max_redirects
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s
        self._user_agent = user_agent
        self._resolver = resolver
        self._clock = clock
        # No proxies from the environment, no cookies, no connection reuse: every request goes to the
        # address checked for it, over a connection made (and, for https, verified) for its name;
        # every socket operation stops at the page's deadline.
        self._transport = DeadlineTransport(verify, clock)

    def close(self) -> None:
        self._transport.close()

    def cancel(self) -> None:
        """Stops the fetch in flight (from another thread) and refuses every later one, as failures."""
        self._transport.cancel()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def fetch(
        self,
        url: str,
        *,
        auth: tuple[str, str] | None = None,
        deadline: float | None = None,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        content: bytes = b"",
        redirects: bool = True,
    ) -> Fetched:
        """GET `url` (or `method` it), following redirects. `auth` (or the URL's userinfo) goes to the
        URL's origin only. The page's deadline is `timeout_s` from now, or `deadline` (on this fetcher's
        clock) if sooner. `headers` (validators such as If-None-Match, Depth, Content-Type, Accept) and
        `content` go with every hop; a 303 turns the request into a GET without a body. Raises
        FetchRefused, FetchTooLarge or FetchFailed; other statuses than redirects (304 included) are
        returned. `redirects=False`: a redirect is returned too, unfollowed, and the request may carry
        a signature for its one URL (Authorization, X-Amz-*)."""
        request = _request(method, headers, content, redirects)
        end = self._clock() + self._timeout_s
        if deadline is not None:
            end = min(end, deadline)
        self._transport.set_deadline(end)
        target = _target(url)
        credentials, origin = target.credentials or auth, target.origin
        via: str | None = None
        for _ in range(self._max_redirects + 1):
            own = credentials if target.origin == origin else None
            response = self._send(target, own, end, via, request)
            location = response.headers.get("location") if response.status_code in REDIRECTS else None
            if not location or not redirects:
                return self._finish(target, response, end)
            response.close()
            request = request.redirected(response.status_code)
            via = target.url
            try:
                target = _target(urljoin(target.url, location))
            except (FetchRefused, InvalidArgument):
                raise FetchRefused(
                    f"refused: {shown_url(via)} redirects to a URL that is not a valid http or https URL"
                ) from None
            if target.credentials is not None:
                credentials, origin = target.credentials, target.origin
        raise FetchRefused(
            f"refused: {shown_url(url)} redirects more than {self._max_redirects} times "
            "(ingest.crawl_max_redirects)"
        )

    def _send(
        self,
        target: _Target,
        credentials: tuple[str, str] | None,
        end: float,
        via: str | None,
        call: _Request,
    ) -> httpx.Response:
        if self._clock() >= end:
            raise FetchFailed(target.url)
        try:
            addresses = resolve_checked(target.host, self._allow, self._resolver)
        except FetchRefused as err:
            if via is None:
                raise
            raise FetchRefused(f"{err} (redirected from {shown_url(via)})") from None
        except (OSError, UnicodeError, ValueError):
            raise FetchFailed(target.url) from None
        headers = {
            **call.headers,
            "host": target.host_header,
            "user-agent": self._user_agent,
            "accept-encoding": "gzip, deflate",
        }
        if credentials is not None:
            token = base64.b64encode(":".join(credentials).encode()).decode("ascii")
            headers["authorization"] = f"Basic {token}"
        for address in addresses:  # the next address only when one cannot be connected to
            left = end - self._clock()
            if left <= 0:
                break
            timeouts = {"connect": left, "read": left, "write": left, "pool": left}  # the transport: less
            extensions = {"timeout": timeouts, "sni_hostname": target.host}
            request = httpx.Request(
                call.method,
                target.at(address),
                headers=headers,
                content=call.content or None,  # none: a GET as before, without a Content-Length
                extensions=extensions,
            )
            try:
                response = self._transport.handle_request(request)
            except httpx.ConnectError:
                continue
            except (httpx.HTTPError, OSError):
                break
            response.request = request
            return response
        raise FetchFailed(target.url)

    def _finish(self, target: _Target, response: httpx.Response, end: float) -> Fetched:
        try:
            content = self._read(target, response, end)
        finally:
            response.close()
        return Fetched(strip_userinfo(target.url), response.status_code, response.headers, content)

    def _read(self, target: _Target, response: httpx.Response, end: float) -> bytes:
        too_large = FetchTooLarge(
            f"refused: {shown_url(target.url)} is larger than {self._max_bytes} bytes "
            "(ingest.crawl_max_page_mb)"
        )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._max_bytes:
            raise too_large
        encoding = response.headers.get("content-encoding", "")
        try:
            decoder = _Decoder(encoding)
        except ValueError:
            raise FetchRefused(
                f"refused: {shown_url(target.url)} came in an unsupported content encoding ({encoding})"
            ) from None
        chunks: list[bytes] = []
        size = 0
        try:
            for raw in response.iter_raw():  # each chunk as it arrives, so a drip feed meets the deadline
                if self._clock() > end:
                    raise FetchFailed(target.url)
                chunks.append(decoder.feed(raw, self._max_bytes + 1 - size))
                size += len(chunks[-1])
                if size > self._max_bytes:
                    raise too_large
            chunks.append(decoder.flush())
        except (httpx.HTTPError, OSError, zlib.error):
            raise FetchFailed(target.url) from None
        if size + len(chunks[-1]) > self._max_bytes:
            raise too_large
        return b"".join(chunks)
