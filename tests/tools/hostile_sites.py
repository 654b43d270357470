"""Hostile HTTP sites on loopback for the source attacks (tests/e2e/test_source_attacks.py).

A `Site` answers every method (GET, HEAD, PROPFIND, ...) from a table of routes and records every
request it receives, so a test can assert that a host was never reached. A reply's body may be bytes
(sent with a length), or an iterable of bytes and floats (streamed without a length, a float being a
pause in seconds): bombs, bodies that never end and slow drips. `raw` replies skip the status line and
headers of the server (a status line whose headers never end). `Silent` accepts connections and never
answers.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Request:
    site: str
    method: str
    target: str  # the path and query as sent
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> str:
        return urlsplit(self.target).query


Chunks = Iterable[bytes | float]


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Chunks = b""
    raw: Chunks | None = None  # written as is: no status line or headers of the server's own


Route = Callable[[Request], Reply]


class Hits:
    """Every request every site received, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Request] = []
        self.hangups: list[tuple[str, str]] = []  # (site, path) of streams the client dropped

    def add(self, request: Request) -> None:
        with self._lock:
            self._seen.append(request)

    def of(self, site: str, path_prefix: str = "", method: str = "") -> list[Request]:
        with self._lock:
            return [
                r
                for r in self._seen
                if r.site == site and r.path.startswith(path_prefix) and (not method or r.method == method)
            ]

    def count(self, site: str, path_prefix: str = "", method: str = "") -> int:
        return len(self.of(site, path_prefix, method))

    def all(self) -> list[Request]:
        with self._lock:
            return list(self._seen)


class _V6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Site:
    """An HTTP server on `host` (a free port) answering from `routes`: a key ending in `*` matches
    every path it starts; the longest match wins; anything else is a 404."""

    def __init__(self, host: str, name: str, hits: Hits) -> None:  # noqa: C901 - the handler class
        self.host, self.name, self.hits = host, name, hits
        self.routes: dict[str, Route] = {}
        self.closing = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def handle_one(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(min(length, 1 << 20)) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(site.name, self.command, self.path, headers, body)
                site.hits.add(request)
                reply = site.route(request.path)(request)
                try:
                    self._send(request, reply)
                except (BrokenPipeError, ConnectionResetError, TimeoutError, OSError):
                    site.hits.hangups.append((site.name, request.path))
                self.close_connection = True

            def _send(self, request: Request, reply: Reply) -> None:
                if reply.raw is not None:
                    self._stream(reply.raw)
                    return
                self.send_response(reply.status)
                headers = {"content-type": "text/html; charset=utf-8", **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                if isinstance(reply.body, bytes):
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    if request.method != "HEAD":
                        self.wfile.write(reply.body)
                    return
                self.send_header("connection", "close")
                self.end_headers()
                if request.method != "HEAD":
                    self._stream(reply.body)

            def _stream(self, chunks: Chunks) -> None:
                for chunk in chunks:
                    if site.closing.is_set():
                        return
                    if isinstance(chunk, float | int) and not isinstance(chunk, bytes):
                        if site.closing.wait(float(chunk)):
                            return
                        continue
                    self.wfile.write(chunk)
                    self.wfile.flush()

            def log_message(self, *args: Any) -> None:
                pass

            def __getattr__(self, name: str) -> Any:
                if name.startswith("do_"):  # every method: GET, HEAD, PROPFIND, OPTIONS, ...
                    return self.handle_one
                raise AttributeError(name)

        self.server = (_V6 if ":" in host else ThreadingHTTPServer)((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def on(self, path: str, route: Route | Reply | bytes | str) -> None:
        if isinstance(route, str):
            route = route.encode()
        if isinstance(route, bytes):
            route = Reply(body=route)
        if isinstance(route, Reply):
            fixed = route
            self.routes[path] = lambda _req: fixed
        else:
            self.routes[path] = route

    def route(self, path: str) -> Route:
        if path in self.routes:
            return self.routes[path]
        prefixes = [k for k in self.routes if k.endswith("*") and path.startswith(k[:-1])]
        if prefixes:
            return self.routes[max(prefixes, key=len)]
        return lambda _req: Reply(404, body=b"<p>not here</p>")

    def url(self, path: str = "/") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def hang(self, seconds: float = 120.0) -> None:
        """Blocks a handler (headers never sent) until the site closes or `seconds` pass."""
        self.closing.wait(seconds)

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()


class Silent:
    """A TCP port that accepts connections and never says a word."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def free_port(host: str) -> int:
    """A port on `host` that nothing listens on (closed by the time it is used)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# --- bodies ------------------------------------------------------------------------------------------

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(urls: Iterable[str], prolog: str = "") -> bytes:
    locs = "".join(f"<url><loc>{u}</loc></url>" for u in urls)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<urlset xmlns="{SITEMAP_NS}">{locs}</urlset>'.encode()
    )


def sitemap_index(urls: Iterable[str]) -> bytes:
    locs = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
    head = f'<?xml version="1.0" encoding="UTF-8"?><sitemapindex xmlns="{SITEMAP_NS}">'
    return f"{head}{locs}</sitemapindex>".encode()


def streamed_urlset(count: int, url: Callable[[int], str], batch: int = 5000) -> Chunks:
    """A sitemap of `count` URLs, generated while it is sent."""
    yield f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{SITEMAP_NS}">'.encode()
    for start in range(0, count, batch):
        yield "".join(
            f"<url><loc>{url(i)}</loc></url>" for i in range(start, min(count, start + batch))
        ).encode()
    yield b"</urlset>"


def billion_laughs(
    levels: int = 9, root: str = "urlset", inside: str = "<url><loc>http://x/&lol{n};</loc></url>"
) -> bytes:
    """The entity expansion bomb: `levels` entities of ten of the one below (10**levels "lol"s)."""
    entities = ['<!ENTITY lol0 "lol">']
    entities += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, levels + 1)]
    body = inside.format(n=levels)
    return (
        f'<?xml version="1.0"?><!DOCTYPE {root} [{"".join(entities)}]>'
        f'<{root} xmlns="{SITEMAP_NS}">{body}</{root}>'
    ).encode()


_GZIP_BOMBS: dict[int, bytes] = {}


def gzip_bomb(megabytes: int = 512) -> bytes:
    """A gzip stream of a sitemap padded with `megabytes` MiB of spaces (about 1000:1)."""
    import zlib

    if megabytes not in _GZIP_BOMBS:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        parts = [c.compress(f'<?xml version="1.0"?><urlset xmlns="{SITEMAP_NS}">'.encode())]
        chunk = b" " * (16 << 20)
        for _ in range(megabytes // 16):
            parts.append(c.compress(chunk))
        parts += [c.compress(b"</urlset>"), c.flush()]
        _GZIP_BOMBS[megabytes] = b"".join(parts)
    return _GZIP_BOMBS[megabytes]


def endless(block: bytes = b"<p>" + b"a" * 65533 + b"</p>") -> Chunks:
    """A body that never ends, as fast as it is read."""
    while True:
        yield block


def drip(first: bytes = b"<html><body>", every_s: float = 0.5) -> Chunks:
    """A body that never ends, one byte every `every_s` seconds (slow loris)."""
    yield first
    while True:
        yield every_s
        yield b"a"


def multistatus(entries: Iterable[tuple[str, bool]], prolog: str = "") -> bytes:
    """A WebDAV PROPFIND answer: (href, is a collection) per entry."""
    parts = []
    for n, (href, collection) in enumerate(entries):
        kind = "<d:collection/>" if collection else ""
        parts.append(
            f"<d:response><d:href>{href}</d:href><d:propstat><d:prop><d:resourcetype>{kind}</d:resourcetype>"
            f'<d:getetag>"e{n}"</d:getetag>'
            "<d:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</d:getlastmodified>"
            f"<d:getcontentlength>64</d:getcontentlength><d:getcontenttype>text/markdown</d:getcontenttype>"
            f"</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        )
    head = f'<?xml version="1.0" encoding="utf-8"?>{prolog}<d:multistatus xmlns:d="DAV:">'
    return f"{head}{''.join(parts)}</d:multistatus>".encode()


def s3_listing(bucket: str, keys: Iterable[str], token: str = "", prolog: str = "") -> bytes:
    """A ListObjectsV2 answer; `token`: truncated, with this continuation token."""
    contents = "".join(
        f"<Contents><Key>{k}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
        f'<ETag>"{abs(hash(k))}"</ETag><Size>64</Size><StorageClass>STANDARD</StorageClass></Contents>'
        for k in keys
    )
    more = (
        f"<IsTruncated>true</IsTruncated><NextContinuationToken>{token}</NextContinuationToken>"
        if token
        else ("<IsTruncated>false</IsTruncated>")
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}'
        f'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>{bucket}</Name>'
        f"<Prefix></Prefix><MaxKeys>1000</MaxKeys>{more}{contents}</ListBucketResult>"
    ).encode()


class RssPeak:
    """The peak resident memory of this process (the in-process stack's too) while it runs, sampled."""

    def __init__(self, every_s: float = 0.02) -> None:
        self.every_s, self.base, self.peak = every_s, _rss(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssPeak:
        self.base = self.peak = _rss()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def grew_mb(self) -> float:
        return (self.peak - self.base) / (1 << 20)


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_until(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
