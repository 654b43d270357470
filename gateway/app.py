"""The HTTP/SSE gateway: JSON and Server-Sent Events in front of the gRPC services."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from google.protobuf.json_format import MessageToDict
from mcp.server.transport_security import TransportSecuritySettings
from opentelemetry import trace
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from gateway.guards import (
    Authenticate,
    EarlyPermission,
    RateLimit,
    RequestContext,
    RequireKey,
    SameOrigin,
    TrustedHosts,
    error_body,
)
from gateway.limits import BodyLimit
from ragstack import auth, convert
from ragstack.config import GatewayConfig
from ragstack.domain import SearchMode, acl_groups
from ragstack.errors import InvalidArgument, RagstackError, RpcError
from ragstack.rpc.access import permit
from ragstack.rpc.clients import AgentClient, IngestClient, RetrieveClient

tracer = trace.get_tracer("ragstack.gateway")
log = logging.getLogger(__name__)

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


@dataclass
class Upstreams:
    agent: AgentClient
    ingest: IngestClient
    retrieve: RetrieveClient
    readiness: Callable[[], Awaitable[dict[str, str]]]


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., min_length=1, max_length=4000, description="The question.")
    library: str = Field("", max_length=64, description="Library to answer from; empty means the default.")
    mode: Literal["auto", "lexical", "dense", "hybrid", "graph", "graph-global", "sql"] = Field(
        "auto", description="Retrieval strategy (graph: graph local search; sql: the attached databases)."
    )
    top_k: int = Field(0, ge=0, le=100, description="Chunks to retrieve; 0 means the configured default.")
    session_id: str = Field(
        "",
        max_length=128,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="A conversation to continue: follow-ups are rewritten from its recent turns.",
    )
    skip_memory: bool = Field(
        False,
        description="Answer on its own: no recall of similar earlier questions, and this one is not "
        "remembered (evaluations, batch runs).",
    )
    stream: bool = Field(True, description="Server-Sent Events (true) or one JSON response (false).")


class AttachRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        ..., pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="The database's name in the library."
    )
    url: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="sqlite:///abs/path.db, postgresql://role@host:port/db or duckdb:///abs/path.duckdb, "
        "as the services see it. Files only under sql.allowed_roots, hosts only from sql.allowed_hosts; "
        "${NAME} only as the password, for variables in sql.secret_env. Use a role that can only SELECT.",
    )
    library: str = Field("", max_length=64, description="The library; empty means the default.")
    groups: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="ACL groups that may query it; empty: everyone who may use the library.",
    )


class SqlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(
        ..., min_length=1, max_length=20_000, description="One SELECT in the database's dialect."
    )
    database: str = Field("", max_length=64, description="The database; empty when the library has one.")
    library: str = Field("", max_length=64, description="The library; empty means the default.")
    max_rows: int = Field(0, ge=0, le=10_000, description="Row cap; 0 means sql.max_rows.")


def event_json(response: Any) -> tuple[str, dict[str, Any]]:
    kind = response.WhichOneof("event")
    body = MessageToDict(
        getattr(response, kind), preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return kind, body


def error_message(exc: RagstackError) -> str:
    return exc.message if isinstance(exc, RpcError) else str(exc)


async def _sse(responses: AsyncIterator[Any]) -> AsyncIterator[dict[str, str]]:
    """A stream's events as SSE: the oneof field names the event, its JSON is the data. A failure
    midway becomes a last `error` event (the status line is already sent)."""
    try:
        async for response in responses:
            kind, data = event_json(response)
            yield {"event": kind, "data": json.dumps(data, ensure_ascii=False)}
    except RagstackError as exc:
        yield {"event": "error", "data": json.dumps({"code": exc.code, "message": error_message(exc)})}


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status)


def create_app(
    upstreams: Upstreams, cfg: GatewayConfig | None = None, default_library: str = "default"
) -> FastAPI:
    """`default_library`: the library a request without one means (the services' `library`)."""
    cfg = cfg or GatewayConfig()

    def allowed(method: str, library: str) -> None:
        """A streamed call's permission and library scope, checked before its stream starts (the
        service checks again): a refusal is a 403, not an error event after a 200."""
        permit(f"/ragstack.v1.{method}", library, auth.current(), default_library)

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
    # Starlette runs the middleware added last first: request context, hosts, origin, CORS, who is
    # calling, rate, key required, permission, size.
    app.add_middleware(
        BodyLimit,
        max_bytes=int(cfg.max_upload_mb * 1024 * 1024),
        paths=("/v1/ingest",),  # and /v1/ingest/jobs
        setting="gateway.max_upload_mb",
    )
    app.add_middleware(
        BodyLimit,
        max_bytes=cfg.max_request_kb * 1024,
        paths=("/v1/query", "/v1/databases", "/v1/sql", "/mcp"),
        setting="gateway.max_request_kb",
    )
    app.add_middleware(EarlyPermission)
    app.add_middleware(RequireKey)
    app.add_middleware(RateLimit, per_minute=cfg.rate_limit_per_minute)
    app.add_middleware(Authenticate, keys=cfg.api_keys)
    if cfg.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=cfg.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["content-type", "x-api-key", "authorization", "x-request-id"],
            expose_headers=["x-request-id"],
        )
    app.add_middleware(SameOrigin, allowed=cfg.cors_origins)
    app.add_middleware(TrustedHosts, hosts=cfg.trusted_hosts)
    app.add_middleware(RequestContext)

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

    @app.get("/metrics", tags=["observability"], response_class=PlainTextResponse)
    async def metrics() -> Response:
        """Prometheus metrics: HTTP requests and latencies per route; in one process with the
        services (`ragstack serve`), gRPC calls and latencies per method too."""
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/health/live", tags=["health"])
    async def live() -> dict[str, str]:
        return {"status": "live"}

    @app.get("/health/ready", tags=["health"])
    async def ready() -> JSONResponse:
        statuses = await upstreams.readiness()
        ok = all(s == "SERVING" for s in statuses.values())
        return JSONResponse({"ready": ok, "services": statuses}, status_code=200 if ok else 503)

    @app.post("/v1/query", tags=["query"])
    async def query(body: QueryRequest, request: Request) -> Any:
        """Answers a question. Streams the agent's events as SSE (`start`, `route`, `tool_call`,
        `evidence`, `delta`, `verification`, `done`), or returns the `done` event as JSON."""
        wants_json = not body.stream or (
            "application/json" in request.headers.get("accept", "")
            and "text/event-stream" not in request.headers.get("accept", "")
        )
        mode = SearchMode(body.mode)
        allowed("AgentService/Ask", body.library)

        async def events() -> AsyncIterator[Any]:
            with tracer.start_as_current_span("POST /v1/query"):
                async for response in upstreams.agent.ask_pb(
                    body.question,
                    body.library,
                    mode,
                    body.top_k,
                    body.session_id,
                    skip_memory=body.skip_memory,
                ):
                    yield response

        if wants_json:
            done: dict[str, Any] = {}
            async for response in events():
                kind, data = event_json(response)
                if kind == "done":
                    done = data
            return done
        return EventSourceResponse(_sse(events()), ping=15)

    @app.post("/v1/ingest", tags=["documents"])
    async def ingest(
        files: Annotated[list[UploadFile] | None, File()] = None,
        urls: Annotated[list[str] | None, Form()] = None,
        library: Annotated[str, Form()] = "",
        enrich: Annotated[bool, Form()] = False,
        groups: Annotated[list[str] | None, Form()] = None,
    ) -> EventSourceResponse:
        """Ingests uploaded files (multipart field `files`, repeatable) and web pages (field `urls`,
        repeatable: each crawled politely on its own host) into `library`, optionally with contextual
        enrichment (`enrich`); streams one `file` event per file and stage, then a `summary` event.
        `groups` (repeatable): the ACL groups that may see the documents; none: everyone who may
        use the library."""
        allowed("IngestService/Ingest", library)
        acl = acl_groups(groups or ())  # a 400 now, not an error event once the stream has started
        payload = await _uploads(files, urls)
        stream = upstreams.ingest.ingest_pb(payload, library, urls or (), enrich, acl)
        return EventSourceResponse(_sse(stream), ping=15)

    @app.post("/v1/ingest/jobs", tags=["documents"], status_code=202)
    async def submit_ingest(
        files: Annotated[list[UploadFile] | None, File()] = None,
        urls: Annotated[list[str] | None, Form()] = None,
        library: Annotated[str, Form()] = "",
        groups: Annotated[list[str] | None, Form()] = None,
    ) -> dict[str, Any]:
        """Queues an ingest of uploaded files and web pages (durable: it survives a restart of the
        ingest service) and returns the job at once; GET /v1/ingest/jobs/{job_id} follows it.
        `groups` (repeatable): the documents' ACL groups, as for POST /v1/ingest."""
        payload = await _uploads(files, urls)
        job = await upstreams.ingest.submit(
            files=payload, urls=urls or (), library=library, groups=groups or ()
        )
        return asdict(job)

    @app.get("/v1/ingest/jobs", tags=["documents"])
    async def list_ingest_jobs(limit: int = 50) -> dict[str, Any]:
        return {"jobs": [asdict(j) for j in await upstreams.ingest.jobs(max(0, min(limit, 500)))]}

    @app.get("/v1/ingest/jobs/{job_id}", tags=["documents"])
    async def get_ingest_job(job_id: str) -> dict[str, Any]:
        return asdict(await upstreams.ingest.job(job_id))

    @app.delete("/v1/ingest/jobs/{job_id}", tags=["documents"])
    async def cancel_ingest_job(job_id: str) -> dict[str, Any]:
        """Cancels a queued ingest (it never runs) or a running one (it stops within the services'
        grace, no document half indexed); returns the job as it ended."""
        return asdict(await upstreams.ingest.cancel_job(job_id))

    @app.get("/v1/libraries", tags=["documents"])
    async def list_libraries() -> dict[str, Any]:
        """The libraries holding documents or databases, with their sizes."""
        return {"libraries": await upstreams.ingest.libraries()}

    @app.get("/v1/traces/{trace_id}", tags=["traces"])
    async def get_trace(trace_id: str) -> dict[str, Any]:
        return await upstreams.agent.get_trace(trace_id)

    @app.get("/v1/documents", tags=["documents"])
    async def list_documents(library: str = "") -> dict[str, Any]:
        docs = await upstreams.ingest.list_documents(library)
        return {"documents": [doc_json(x) for x in docs]}

    @app.get("/v1/documents/{document_id}", tags=["documents"])
    async def get_document(document_id: str, library: str = "") -> dict[str, Any]:
        return doc_json(await upstreams.ingest.get_document(document_id, library))

    @app.get("/v1/chunks/{chunk_id}", tags=["documents"])
    async def get_chunk(chunk_id: str, library: str = "") -> dict[str, Any]:
        """One chunk by id (a citation's or a search hit's): text, document, heading path, pages."""
        return _pb_json(convert.chunk_to_pb(await upstreams.retrieve.get_chunk(chunk_id, library)))

    @app.delete("/v1/documents/{document_id}", tags=["documents"])
    async def delete_document(document_id: str, library: str = "") -> dict[str, Any]:
        removed = await upstreams.ingest.delete_document(document_id, library)
        return {"document_id": document_id, "chunks_removed": removed}

    @app.get("/v1/databases", tags=["databases"])
    async def list_databases(library: str = "", question: str = "") -> dict[str, Any]:
        """The databases attached to a library, with their schema; with `question`, tables ranked."""
        found = await upstreams.retrieve.databases(library, question)
        return {"databases": [_pb_json(convert.database_to_pb(db)) for db in found]}

    @app.post("/v1/databases", tags=["databases"], status_code=201)
    async def attach_database(body: AttachRequest) -> dict[str, Any]:
        """Attaches a database (opened read-only, its schema read first)."""
        db = await upstreams.ingest.attach_database(body.name, body.url, body.library, body.groups)
        return _pb_json(convert.database_to_pb(db))

    @app.delete("/v1/databases/{name}", tags=["databases"])
    async def detach_database(name: str, library: str = "") -> dict[str, Any]:
        await upstreams.ingest.detach_database(name, library)
        return {"name": name, "detached": True}

    @app.post("/v1/sql", tags=["databases"])
    async def run_sql(body: SqlRequest) -> dict[str, Any]:
        """Runs one read-only SELECT through the fence; a refused statement is a 400 with the reason."""
        result = await upstreams.retrieve.sql(body.library, body.database, body.sql, body.max_rows)
        return _pb_json(convert.sql_result_to_pb(result))

    if mcp is not None:
        # The SDK's Streamable HTTP endpoint as a route of this app, behind the same guards (keys,
        # rate, hosts, origins, size): the gateway's TrustedHosts stands for the SDK's host check.
        served = mcp.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        app.router.routes.extend(served.routes)
    return app


async def _uploads(files: list[UploadFile] | None, urls: list[str] | None) -> list[tuple[str, bytes]]:
    """The uploaded files' names and bytes; refused when neither files nor URLs were sent."""
    payload = [(f.filename or "upload", await f.read()) for f in files or ()]
    if not payload and not urls:
        raise InvalidArgument("nothing to ingest: send `files` or `urls`")
    return payload


def _pb_json(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def doc_json(doc: Any) -> dict[str, Any]:
    return _pb_json(convert.document_to_pb(doc))
