"""The HTTP/SSE gateway: JSON and Server-Sent Events in front of the gRPC services. The routes
live in `gateway.routes`, one module per resource; this module puts them behind the guards."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from gateway.deps import Upstreams
from gateway.encoding import error_message
from gateway.guards import (
    Authenticate,
    EarlyPermission,
    InFlightLimit,
    RateLimit,
    RequestContext,
    RequireKey,
    SameOrigin,
    TrustedHosts,
    error_body,
)
from gateway.limits import BodyLimit
from gateway.routes import ROUTERS
from ragstack.config import GatewayConfig
from ragstack.errors import RagstackError

log = logging.getLogger(__name__)

# The request headers of MCP's Streamable HTTP transport (a browser asks CORS for each).
MCP_HEADERS = ("mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name", "last-event-id")

HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 412,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def create_app(
    upstreams: Upstreams, cfg: GatewayConfig | None = None, default_library: str = "default"
) -> FastAPI:
    """`default_library`: the library a request without one means (the services' `library`)."""
    cfg = cfg or GatewayConfig()
    mcp = None
    if cfg.mcp != "off":
        from gateway.mcp import build as build_mcp

        mcp = build_mcp(upstreams, default_library, read_only=cfg.mcp == "read-only")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run() if mcp is not None else contextlib.nullcontext():
            yield

    app = FastAPI(
        lifespan=lifespan,
        title="RAGStack gateway",
        version="0.1.0",
        description="Ask questions over your documents and get cited, verified answers. With "
        "`gateway.api_keys` set, every route but /health/* needs the key in the X-API-Key header.",
    )
    app.state.upstreams = upstreams
    app.state.default_library = default_library
    _guard(app, cfg)
    _answer_errors(app)
    for router in ROUTERS:
        app.include_router(router)
    if mcp is not None:
        _mount(app, mcp)
    return app


def _guard(app: FastAPI, cfg: GatewayConfig) -> None:
    """Starlette runs the middleware added last first: request context, hosts, origin, CORS, who
    is calling, rate, requests in progress, key required, permission, size."""
    app.add_middleware(
        BodyLimit,
        max_bytes=int(cfg.max_upload_mb * 1024 * 1024),
        paths=("/v1/ingest",),  # and /v1/ingest/jobs
        setting="gateway.max_upload_mb",
    )
    app.add_middleware(
        BodyLimit,
        max_bytes=cfg.max_request_kb * 1024,
        paths=("/v1/query", "/v1/databases", "/v1/sql", "/v1/feedback", "/mcp"),
        setting="gateway.max_request_kb",
    )
    app.add_middleware(EarlyPermission)
    app.add_middleware(RequireKey)
    app.add_middleware(InFlightLimit, most=cfg.max_in_flight_per_caller)
    app.add_middleware(RateLimit, per_minute=cfg.rate_limit_per_minute)
    app.add_middleware(Authenticate, keys=cfg.api_keys)
    if cfg.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cfg.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            # and MCP's own (Streamable HTTP), so that a browser client of an allowed origin can use /mcp
            allow_headers=["content-type", "x-api-key", "authorization", "x-request-id", *MCP_HEADERS],
            expose_headers=["x-request-id"],
        )
    app.add_middleware(SameOrigin, allowed=cfg.cors_origins)
    app.add_middleware(TrustedHosts, hosts=cfg.trusted_hosts)
    app.add_middleware(RequestContext)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status)


def _answer_errors(app: FastAPI) -> None:
    """Every failure as the same JSON body: the gRPC code's name and a message."""

    @app.exception_handler(RagstackError)
    async def domain_error(_: Request, exc: RagstackError) -> JSONResponse:
        status = HTTP_STATUS.get(exc.code, 500)
        response = _error(status, exc.code, error_message(exc))
        if status == 503:  # UNAVAILABLE is transient by definition: a peer restarting, slots full
            response.headers["retry-after"] = "5"
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        return _error(422, "INVALID_ARGUMENT", problems or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "NOT_FOUND", 405: "UNIMPLEMENTED"}.get(exc.status_code, "INVALID_ARGUMENT")
        return _error(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")  # the log has the trace; the caller never does
        return _error(500, "INTERNAL", "internal error; the gateway log has the details")


def _mount(app: FastAPI, mcp: MCPServer) -> None:
    """The MCP SDK's Streamable HTTP endpoint as a route of this app, behind the same guards (keys,
    rate, hosts, origins, size): the gateway's TrustedHosts stands for the SDK's host check."""
    served = mcp.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    # Stateless: every POST is answered in its response, so there is no server stream to open. The
    # SDK would hold a GET open forever with pings only, one connection each, without a cap.
    @app.get("/mcp", include_in_schema=False)
    async def no_stream() -> JSONResponse:
        said = "GET /mcp opens no event stream here: this MCP server is stateless; POST requests"
        response = _error(405, "UNIMPLEMENTED", said)
        response.headers["allow"] = "POST"
        return response

    for route in served.routes:
        if isinstance(route, Route) and route.path == "/mcp":
            route = Route(route.path, endpoint=_MessageShape(route.app), methods=route.methods)
        app.router.routes.append(route)


class _MessageShape:
    """Before the SDK reads a POST: one JSON-RPC message, an object, whose `id` (when present) is a
    string or an integer, as JSON-RPC and MCP require. The SDK would take a message with any other id
    for a notification and answer 202 with nothing, so its caller would wait for a reply that never
    comes; here it gets JSON-RPC's Invalid Request (-32600), naming the rule."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:  # the body's size is bounded by BodyLimit, outside
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            more = message.get("more_body", False)
        problem = _message_problem(body)
        if problem:
            said = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": problem}}
            await JSONResponse(said, status_code=400)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _message_problem(body: bytes) -> str:
    """Why `body` is not one JSON-RPC message with a usable id; "" when it is, or when it is not
    JSON at all (the SDK answers that with its parse error)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    if not isinstance(message, dict):
        return f"Invalid Request: a message is a JSON object, not {_json_kind(message)} (no batches)"
    if "id" in message:
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return f"Invalid Request: id must be a string or an integer, not {_json_kind(ident)}"
    return ""


def _json_kind(value: Any) -> str:
    kinds = {bool: "a boolean", dict: "an object", list: "an array", float: "a number with a fraction"}
    return "null" if value is None else kinds.get(type(value), "a string or an integer")
