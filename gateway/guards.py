"""The gateway's guards, as ASGI middleware: request ids and security headers on every response,
metrics per route, API keys (constant-time), and a per-key rate limit. Every refusal is the same
structured JSON error as the routes return, with the request id."""

from __future__ import annotations

import hmac
import json
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from prometheus_client import Counter, Histogram

from ragstack.telemetry import REQUEST_ID

Scope = dict[str, Any]

HTTP_REQUESTS = Counter(
    "ragstack_http_requests_total", "HTTP requests, by route and status.", ["route", "status"]
)
HTTP_SECONDS = Histogram(
    "ragstack_http_duration_seconds", "HTTP request duration (SSE: until the stream ends).", ["route"]
)

OPEN_PATHS = ("/health/live", "/health/ready")  # probes need no key
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
_CSP = (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'")


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

        async def send_with_headers(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers") or [])
                headers += [(b"x-request-id", request_id.encode()), *_SECURITY_HEADERS]
                if not docs:  # the Swagger page needs its scripts
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


def _key(scope: Scope) -> bytes:
    headers = dict(scope.get("headers") or [])
    key = headers.get(b"x-api-key", b"")
    auth = headers.get(b"authorization", b"")
    if not key and auth[:7].lower() == b"bearer ":
        key = auth[7:].strip()
    return key


class ApiKeys:
    """With keys configured, every route but the health probes needs one (X-API-Key, or
    Authorization: Bearer). Compared in constant time against every key."""

    def __init__(self, app: Any, keys: Sequence[str]) -> None:
        self.app = app
        self.keys = [k.encode() for k in keys]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = _key(scope)
        matched = False
        for key in self.keys:  # no early exit: the time taken says nothing about which key
            matched |= hmac.compare_digest(given, key)
        if not matched:
            what = "missing" if not given else "not valid"
            await send_error(
                send,
                401,
                "UNAUTHENTICATED",
                f"API key {what}: send it in the X-API-Key header (gateway.api_keys)",
                [(b"www-authenticate", b'Bearer realm="ragstack"')],
            )
            return
        await self.app(scope, receive, send)


class RateLimit:
    """A token bucket per API key (per client address without one): `per_minute` requests a
    minute, bursts up to the same number; over it, 429 with Retry-After."""

    def __init__(self, app: Any, per_minute: int, clock: Any = time.monotonic) -> None:
        self.app = app
        self.per_minute = per_minute
        self.clock = clock
        self.buckets: dict[bytes, tuple[float, float]] = {}  # who -> (tokens, last refill)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not self.per_minute or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        who = _key(scope) or str(client[0]).encode()
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
