"""The gateway's guards, as ASGI middleware: request ids and security headers on every response,
metrics per route, trusted Host names, same-origin writes, the caller's principal from its API key
(constant-time), and a rate limit. Every refusal is the same structured JSON error as the routes
return, with the request id."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from prometheus_client import Counter, Histogram

from ragstack.auth import (
    ALL,
    LOCAL,
    PRINCIPAL,
    KeyEntry,
    Principal,
    Role,
    key_digest,
    make_principal,
    match_key,
)
from ragstack.config import ApiKey
from ragstack.errors import PermissionDenied
from ragstack.rpc.access import RULES
from ragstack.telemetry import REQUEST_ID

Scope = dict[str, Any]

HTTP_REQUESTS = Counter(
    "ragstack_http_requests_total", "HTTP requests, by route and status.", ["route", "status"]
)
HTTP_SECONDS = Histogram(
    "ragstack_http_duration_seconds", "HTTP request duration (SSE: until the stream ends).", ["route"]
)

OPEN_PATHS = ("/health/live", "/health/ready")  # probes need no key
UI_PREFIX = "/ui/"  # the web UI's page and assets: no key (they hold no data; its API calls need one)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}\Z")
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")
# The web UI's own scripts, styles and API calls, page pictures as blob: URLs; nothing inline, no
# other origin (an answer's Markdown image could not load even if it were ever rendered).
_UI_CSP = (
    b"content-security-policy",
    b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
    b"connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
)


def ui_path(path: str) -> bool:
    """The web UI: `/` (a redirect to it), `/ui` and everything under /ui/."""
    return path in ("/", "/ui") or path.startswith(UI_PREFIX)


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "request_id": REQUEST_ID.get()}}


async def send_error(
    send: Any, status: int, code: str, message: str, headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequestContext:
    """Outermost: the request id (the caller's X-Request-ID when well-formed, else a new one) for
    logs, upstream calls and the response; security headers; request count and latency per route."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        token = REQUEST_ID.set(request_id)
        status = 500
        docs = scope["path"] in ("/docs", "/redoc") or scope["path"].startswith("/docs/")
        ui = ui_path(scope["path"])

        async def send_with_headers(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers") or [])
                headers += [(b"x-request-id", request_id.encode()), *_SECURITY_HEADERS]
                if ui:
                    headers.append(_UI_CSP)
                elif not docs:  # the Swagger page needs its scripts
                    headers.append(_CSP)
                message = {**message, "headers": headers}
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            HTTP_REQUESTS.labels(template, str(status)).inc()
            HTTP_SECONDS.labels(template).observe(time.perf_counter() - start)
            REQUEST_ID.reset(token)


def _credentials(scope: Scope) -> list[str]:
    """Every key the request sends: each X-API-Key header and each `Authorization: Bearer`. More
    than one names nobody (which one counted would depend on how proxies order headers)."""
    found = []
    for name, value in scope.get("headers") or ():
        if name == b"x-api-key":
            found.append(value.decode("latin-1"))
        elif name == b"authorization" and value[:7].lower() == b"bearer ":
            found.append(value[7:].strip().decode("latin-1"))
    return found


def key_entries(keys: Sequence[ApiKey | str]) -> list[KeyEntry]:
    """The configured keys as digests and principals; a plain string is an admin key (key1, ...)."""
    entries = []
    for n, key in enumerate(keys, start=1):
        if isinstance(key, str):
            entries.append(
                KeyEntry(key_digest(key).encode(), Principal(f"key{n}", Role.ADMIN, (ALL,), (ALL,)))
            )
        else:
            digest = key.key_sha256 or key_digest(key.key)
            principal = make_principal(key.name, key.role, key.libraries, key.groups)
            entries.append(KeyEntry(digest.encode(), principal))
    return entries


def scope_principal(scope: Scope) -> Principal | None:
    """The principal the Authenticate middleware found for this request (None: no valid key)."""
    found: Principal | None = scope.get("state", {}).get("principal")
    return found


class Authenticate:
    """Finds the caller's principal: the API key's (X-API-Key, or Authorization: Bearer), or, with
    no keys configured, the local admin (the loopback-only default). It refuses nothing itself, so
    the rate limit after it can count failed attempts by address; RequireKey refuses them."""

    def __init__(self, app: Any, keys: Sequence[ApiKey | str]) -> None:
        self.app = app
        self.entries = key_entries(keys)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.entries:
            principal: Principal | None = LOCAL
        else:
            given = _credentials(scope)
            principal = match_key(given[0], self.entries) if len(given) == 1 and given[0] else None
        scope.setdefault("state", {})["principal"] = principal
        token = PRINCIPAL.set(principal or LOCAL)
        try:
            await self.app(scope, receive, send)
        finally:
            PRINCIPAL.reset(token)


class RequireKey:
    """With keys configured, every route but the health probes and the web UI's static page needs
    a valid one; 401 otherwise."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] in OPEN_PATHS
            or ui_path(scope["path"])
            or scope_principal(scope) is not None
        ):
            await self.app(scope, receive, send)
            return
        given = _credentials(scope)
        what = "missing" if not any(given) else "sent more than once" if len(given) > 1 else "not valid"
        await send_error(
            send,
            401,
            "UNAUTHENTICATED",
            f"API key {what}: send one in the X-API-Key header (gateway.api_keys)",
            [(b"www-authenticate", b'Bearer realm="ragstack"')],
        )


def _host_name(value: str) -> str:
    """The name in a Host header, without its port; IPv6 literals without brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else ""
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _host_allowed(name: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.strip().lower().strip("[]")
        if pattern == "*" or name == pattern:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
            return True
    return False


class TrustedHosts:
    """Only the configured Host names (loopback names by default) are served: a page on another
    name that resolves to this machine (DNS rebinding) gets 400. Ports are ignored; the health
    probes answer any Host."""

    def __init__(self, app: Any, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = list(hosts)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        # Probes come with the pod's address as Host (kubelet); they read nothing and change nothing.
        if scope["type"] != "http" or "*" in self.hosts or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
        if not _host_allowed(_host_name(given), self.hosts):
            await send_error(send, 400, "INVALID_ARGUMENT", "Host header not allowed (gateway.trusted_hosts)")
            return
        await self.app(scope, receive, send)


_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class SameOrigin:
    """A state-changing request (POST, DELETE, ...) sent by a browser from a foreign page gets 403:
    its Origin must be the gateway itself or one of gateway.cors_origins. Requests without an
    Origin (curl, scripts, the clients) pass; browsers always send one on cross-origin writes."""

    def __init__(self, app: Any, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = {o.rstrip("/").lower() for o in allowed}

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin", b"").decode("latin-1").rstrip("/").lower()
        if origin and origin not in self.allowed and not self._same(origin, scope, headers):
            await send_error(
                send,
                403,
                "PERMISSION_DENIED",
                f"cross-origin {scope['method']} from {origin[:100]!r} refused (gateway.cors_origins)",
            )
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _same(origin: str, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        host = headers.get(b"host", b"").decode("latin-1").lower()
        return origin == f"{scope.get('scheme', 'http')}://{host}"


def caller_of(scope: Scope) -> str:
    """Whom a request counts against: the principal of a valid API key, else the client's address
    (a made-up key buys no fresh allowance)."""
    principal = scope_principal(scope)
    if principal is not None and principal is not LOCAL:
        return f"key:{principal.name}"
    return f"addr:{(scope.get('client') or ('?', 0))[0]}"


class RateLimit:
    """A token bucket per caller (`caller_of`): `per_minute` requests a minute, bursts up to the
    same number; over it, 429 with Retry-After."""

    def __init__(self, app: Any, per_minute: int, clock: Any = time.monotonic) -> None:
        self.app = app
        self.per_minute = per_minute
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # who -> (tokens, last refill)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.per_minute or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        who = caller_of(scope)
        now = self.clock()
        tokens, last = self.buckets.get(who, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - last) * self.per_minute / 60.0)
        if tokens < 1.0:
            wait = max(1, round((1.0 - tokens) * 60.0 / self.per_minute))
            self.buckets[who] = (tokens, now)
            await send_error(
                send,
                429,
                "RESOURCE_EXHAUSTED",
                f"over the limit of {self.per_minute} requests a minute (gateway.rate_limit_per_minute)",
                [(b"retry-after", str(wait).encode())],
            )
            return
        self.buckets[who] = (tokens - 1.0, now)
        if len(self.buckets) > 10_000:  # forget the idlest callers rather than grow without bound
            for stale in sorted(self.buckets, key=lambda k: self.buckets[k][1])[:5_000]:
                del self.buckets[stale]
        await self.app(scope, receive, send)


class InFlightLimit:
    """At most `most` requests of one caller (`caller_of`) in progress at once, a streamed answer
    until its last event; past it, 429 naming the setting. The rate limit bounds how fast requests
    come; this bounds how many long ones (asks, uploads, streams) one caller holds open at once."""

    def __init__(self, app: Any, most: int) -> None:
        self.app = app
        self.most = most
        self.open: dict[str, int] = {}  # caller -> requests in progress (only callers with some)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not self.most or path in OPEN_PATHS or ui_path(path):
            await self.app(scope, receive, send)
            return
        who = caller_of(scope)
        held = self.open.get(who, 0)
        if held >= self.most:
            message = (
                f"{held} requests of this caller are in progress, the limit "
                "(gateway.max_in_flight_per_caller); wait for one to end"
            )
            await send_error(send, 429, "RESOURCE_EXHAUSTED", message, [(b"retry-after", b"1")])
            return
        self.open[who] = held + 1
        try:
            await self.app(scope, receive, send)
        finally:
            left = self.open[who] - 1
            if left:
                self.open[who] = left
            else:
                del self.open[who]


# Routes whose permission is checked before the body is read (an upload is not taken in from a
# caller who may not ingest). The services check every call again, with the library.
_EARLY_RULES = (
    ("POST", "/v1/ingest/jobs", "/ragstack.v1.IngestService/SubmitIngest"),
    ("POST", "/v1/ingest", "/ragstack.v1.IngestService/Ingest"),
    ("DELETE", "/v1/documents/", "/ragstack.v1.IngestService/DeleteDocument"),
    ("DELETE", "/v1/ingest/jobs/", "/ragstack.v1.IngestService/CancelIngestJob"),
    ("POST", "/v1/databases", "/ragstack.v1.IngestService/AttachDatabase"),
    ("DELETE", "/v1/databases/", "/ragstack.v1.IngestService/DetachDatabase"),
)


class EarlyPermission:
    """403 with the missing permission named, before a write or admin route reads its body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        principal = scope_principal(scope) if scope["type"] == "http" else None
        if principal is not None:
            for method, path, rpc in _EARLY_RULES:
                if scope["method"] == method and scope["path"].startswith(path):
                    rule = RULES[rpc]
                    try:
                        principal.require(rule.permission, rule.action)
                    except PermissionDenied as err:
                        await send_error(send, 403, "PERMISSION_DENIED", str(err))
                        return
                    break
        await self.app(scope, receive, send)
