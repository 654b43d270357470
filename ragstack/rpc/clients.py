"""Typed clients of the four services. Every call states its deadline; idempotent calls retry on
UNAVAILABLE (service config, not home-made loops); failures surface as `ragstack.errors.RpcError`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import propagate

from ragstack import auth, convert
from ragstack import domain as d
from ragstack.config import SERVICE_NAMES, SourceConfig
from ragstack.domain import SnapshotInfo, StoreStats, VacuumReport
from ragstack.errors import RpcError
from ragstack.telemetry import REQUEST_ID
from ragstack.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    retrieve_pb2,
    retrieve_pb2_grpc,
    verify_pb2,
    verify_pb2_grpc,
)

# Full proto names of the services, e.g. `ragstack.v1.IngestService`.
GRPC_SERVICES = {name: f"ragstack.v1.{name.capitalize()}Service" for name in SERVICE_NAMES}

# Only calls that change nothing are retried, and only when the peer was unreachable.
_RETRY_POLICY = {
    "maxAttempts": 4,
    "initialBackoff": "0.1s",
    "maxBackoff": "1s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}
_IDEMPOTENT = [
    {"service": GRPC_SERVICES["retrieve"], "method": "Search"},
    {"service": GRPC_SERVICES["retrieve"], "method": "Score"},
    {"service": GRPC_SERVICES["retrieve"], "method": "ListDatabases"},
    {"service": GRPC_SERVICES["retrieve"], "method": "Sql"},  # read-only by construction
    {"service": GRPC_SERVICES["retrieve"], "method": "GetChunk"},
    {"service": GRPC_SERVICES["retrieve"], "method": "GetChunkVisual"},
    {"service": GRPC_SERVICES["retrieve"], "method": "GetGraph"},  # retried before its first page only
    {"service": GRPC_SERVICES["retrieve"], "method": "Stats"},
    {"service": GRPC_SERVICES["verify"], "method": "Verify"},
    {"service": GRPC_SERVICES["ingest"], "method": "ListDocuments"},
    {"service": GRPC_SERVICES["ingest"], "method": "GetDocument"},
    {"service": GRPC_SERVICES["ingest"], "method": "ListLibraries"},
    {"service": GRPC_SERVICES["ingest"], "method": "Stats"},
    {"service": GRPC_SERVICES["ingest"], "method": "ListSnapshots"},
    {"service": GRPC_SERVICES["ingest"], "method": "GetIngestJob"},
    {"service": GRPC_SERVICES["ingest"], "method": "ListIngestJobs"},
    {"service": GRPC_SERVICES["agent"], "method": "GetTrace"},
    {"service": GRPC_SERVICES["agent"], "method": "ListFeedback"},
    {"service": "grpc.health.v1.Health", "method": "Check"},
]
# Calls go round-robin over every address the name resolves to (a headless Service's pods, or a
# list: `ipv4:10.0.0.1:50052,10.0.0.2:50052`), not all to the first; an address that fails is
# skipped until it reconnects, and the retries above land on another.
SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [{"name": _IDEMPOTENT, "retryPolicy": _RETRY_POLICY}],
    }
)
# Pings keep idle connections through proxies and NAT and find a dead peer in seconds, not at the
# next call's deadline; the servers allow them (ragstack/rpc/server.py).
KEEPALIVE_MS = 20_000


def open_channel(address: str, max_message_mb: int = 64, token: str = "") -> grpc.aio.Channel:
    """A channel whose calls carry `token` (services.token), the current request id and trace."""
    limit = max_message_mb * 1024 * 1024
    return grpc.aio.insecure_channel(
        address,
        options=[
            ("grpc.enable_retries", 1),
            ("grpc.service_config", SERVICE_CONFIG),
            ("grpc.keepalive_time_ms", KEEPALIVE_MS),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
        ],
        interceptors=[MetadataUnary(token), MetadataStream(token)],
    )


class _Metadata:
    """Adds the token, the current request id, the current principal and the current span (W3C
    `traceparent`: the peer's server span is its child, ragstack/rpc/interceptors.py) to an
    outgoing call."""

    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        if self._token:
            metadata.add("authorization", f"Bearer {self._token}")
        if request_id := REQUEST_ID.get():
            metadata.add("x-request-id", request_id)
        if (principal := auth.current()) is not auth.LOCAL:  # the caller's, passed on to every peer
            metadata.add(auth.HEADER, principal.to_header())
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        for key, value in carrier.items():
            metadata.add(key, value)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class MetadataUnary(_Metadata, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


class MetadataStream(_Metadata, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


def _rpc_error(err: grpc.aio.AioRpcError) -> RpcError:
    return RpcError(err.code().name, err.details() or "")


R = TypeVar("R")


async def _unary(method: Callable[..., Awaitable[R]], request: Any, deadline_s: float) -> R:
    """One unary call within `deadline_s` seconds; a failure as RpcError (its status and message)."""
    try:
        return await method(request, timeout=deadline_s)
    except grpc.aio.AioRpcError as err:
        raise _rpc_error(err) from None


async def _stream(call: Any) -> AsyncIterator[Any]:
    """The messages of a server stream; failures as RpcError; the call cancelled if the consumer stops."""
    try:
        async for message in call:
            yield message
    except grpc.aio.AioRpcError as err:
        raise _rpc_error(err) from None
    finally:
        call.cancel()


class RetrieveClient:
    def __init__(self, channel: grpc.aio.Channel, deadline_s: float) -> None:
        self._stub = retrieve_pb2_grpc.RetrieveServiceStub(channel)
        self._deadline = deadline_s

    async def search(
        self,
        query: str,
        library: str,
        top_k: int,
        mode: d.SearchMode,
        where: d.SearchFilter | None = None,
        max_per_document: int = 0,
        expand_context: bool = False,
    ) -> tuple[list[d.SearchHit], d.SearchMode]:
        where = where or d.SearchFilter()
        req = retrieve_pb2.SearchRequest(
            query=query,
            library=library,
            top_k=top_k,
            mode=convert.mode_to_pb(mode),
            document_ids=list(where.document_ids),
            media_types=list(where.media_types),
            heading_prefix=list(where.heading_prefix),
            max_per_document=max_per_document,
            expand_context=expand_context,
        )
        resp = await _unary(self._stub.Search, req, self._deadline)
        return [convert.hit_from_pb(h) for h in resp.hits], convert.mode_from_pb(resp.mode)

    async def get_chunk(self, chunk_id: str, library: str = "") -> d.Chunk:
        return (await self.locate_chunk(chunk_id, library))[0]

    async def locate_chunk(
        self, chunk_id: str, library: str = ""
    ) -> tuple[d.Chunk, tuple[d.ChunkRegion, ...]]:
        """The chunk, and where it lies on its PDF's pages (none for other formats)."""
        resp = await _unary(
            self._stub.GetChunk,
            retrieve_pb2.GetChunkRequest(chunk_id=chunk_id, library=library),
            self._deadline,
        )
        return convert.chunk_from_pb(resp.chunk), tuple(convert.region_from_pb(r) for r in resp.regions)

    async def chunk_visual(
        self, chunk_id: str, library: str = "", page: int = 0, width: int = 0
    ) -> d.ChunkVisual:
        """The chunk's page (its first when `page` is 0) as a PNG picture with its regions drawn."""
        req = retrieve_pb2.GetChunkVisualRequest(chunk_id=chunk_id, library=library, page=page, width=width)
        return convert.visual_from_pb(await _unary(self._stub.GetChunkVisual, req, self._deadline))

    async def graph(self, library: str = "") -> d.GraphView:
        """The library's knowledge graph as this caller may see it (all its pages)."""
        view = d.GraphView()
        call = self._stub.GetGraph(retrieve_pb2.GetGraphRequest(library=library), timeout=self._deadline)
        async for page in _stream(call):
            convert.graph_from_page(view, page)
        return view

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        resp = await _unary(
            self._stub.Score, retrieve_pb2.ScoreRequest(query=query, texts=list(texts)), self._deadline
        )
        return list(resp.scores)

    async def databases(self, library: str, question: str = "") -> list[d.Database]:
        resp = await _unary(
            self._stub.ListDatabases,
            retrieve_pb2.ListDatabasesRequest(library=library, question=question),
            self._deadline,
        )
        return [convert.database_from_pb(x) for x in resp.databases]

    async def sql(self, library: str, database: str, sql: str, max_rows: int = 0) -> d.SqlResult:
        req = retrieve_pb2.SqlRequest(library=library, database=database, sql=sql, max_rows=max_rows)
        resp = await _unary(self._stub.Sql, req, self._deadline)
        return convert.sql_result_from_pb(resp)

    async def stats(self) -> d.RetrieveStats:
        """One replica's freshness (calls go round-robin: each replica's own is on its /metrics)."""
        resp = await _unary(self._stub.Stats, retrieve_pb2.RetrieveServiceStatsRequest(), self._deadline)
        return convert.retrieve_stats_from_pb(resp)


class VerifyClient:
    def __init__(self, channel: grpc.aio.Channel, deadline_s: float) -> None:
        self._stub = verify_pb2_grpc.VerifyServiceStub(channel)
        self._deadline = deadline_s

    async def verify(
        self, answer: str, evidence: Iterable[d.Evidence], evidence_score: float
    ) -> d.Verification:
        req = verify_pb2.VerifyRequest(
            answer=answer,
            evidence=[verify_pb2.Evidence(ref=e.ref, chunk_id=e.chunk_id, text=e.text) for e in evidence],
            evidence_score=evidence_score,
        )
        resp = await _unary(self._stub.Verify, req, self._deadline)
        return d.Verification(convert.manifest_from_pb(resp.manifest), resp.confidence, resp.abstain)


class AgentClient:
    def __init__(self, channel: grpc.aio.Channel, deadline_s: float) -> None:
        self._stub = agent_pb2_grpc.AgentServiceStub(channel)
        self._deadline = deadline_s

    async def ask_pb(
        self,
        question: str,
        library: str = "",
        mode: d.SearchMode = d.SearchMode.AUTO,
        top_k: int = 0,
        session_id: str = "",
        *,
        skip_memory: bool = False,
        query_mode: d.QueryMode = d.QueryMode.AUTO,
    ) -> AsyncIterator[agent_pb2.AskResponse]:
        """The raw event stream (the gateway relays it as JSON)."""
        req = agent_pb2.AskRequest(
            question=question,
            library=library,
            mode=convert.mode_to_pb(mode),
            top_k=top_k,
            session_id=session_id,
            skip_memory=skip_memory,
            query_mode=convert.query_mode_to_pb(query_mode),
        )
        async for event in _stream(self._stub.Ask(req, timeout=self._deadline)):
            yield event

    async def ask(
        self,
        question: str,
        library: str = "",
        mode: d.SearchMode = d.SearchMode.AUTO,
        top_k: int = 0,
        session_id: str = "",
        *,
        skip_memory: bool = False,
        query_mode: d.QueryMode = d.QueryMode.AUTO,
    ) -> AsyncIterator[d.AskEvent]:
        async for pb in self.ask_pb(
            question, library, mode, top_k, session_id, skip_memory=skip_memory, query_mode=query_mode
        ):
            yield convert.ask_event_from_pb(pb)

    async def send_feedback(self, trace_id: str, rating: str, comment: str = "") -> d.Feedback:
        req = agent_pb2.SendFeedbackRequest(
            trace_id=trace_id, rating=convert.rating_to_pb(rating), comment=comment
        )
        resp = await _unary(self._stub.SendFeedback, req, self._deadline)
        return convert.feedback_from_pb(resp.feedback)

    async def list_feedback(self, limit: int = 50, library: str = "") -> list[d.Feedback]:
        req = agent_pb2.ListFeedbackRequest(limit=limit, library=library)
        resp = await _unary(self._stub.ListFeedback, req, self._deadline)
        return [convert.feedback_from_pb(f) for f in resp.feedback]

    async def get_trace(self, trace_id: str) -> dict[str, Any]:
        resp = await _unary(self._stub.GetTrace, agent_pb2.GetTraceRequest(trace_id=trace_id), self._deadline)
        result: dict[str, Any] = json.loads(resp.trace_json)
        return result


def _ingest_request(
    paths: Iterable[str],
    files: Iterable[tuple[str, bytes]],
    library: str,
    prune: bool,
    urls: Iterable[str],
    enrich: bool,
    groups: Iterable[str] = (),
) -> ingest_pb2.IngestRequest:
    return ingest_pb2.IngestRequest(
        library=library,
        prune=prune,
        enrich=enrich,
        urls=list(urls),
        paths=list(paths),
        files=[ingest_pb2.FileUpload(filename=n, content=c) for n, c in files],
        groups=list(groups),
    )


class IngestClient:
    def __init__(self, channel: grpc.aio.Channel, deadline_s: float, short_deadline_s: float = 10.0) -> None:
        self._stub = ingest_pb2_grpc.IngestServiceStub(channel)
        self._deadline = deadline_s
        self._short = short_deadline_s

    async def ingest_pb(
        self,
        files: Iterable[tuple[str, bytes]],
        library: str = "",
        urls: Iterable[str] = (),
        enrich: bool = False,
        groups: Iterable[str] = (),
    ) -> AsyncIterator[ingest_pb2.IngestResponse]:
        """The raw event stream for uploaded files and web pages (the gateway relays it as JSON).
        `groups`: the ACL groups of the documents (empty: public)."""
        req = _ingest_request((), files, library, False, urls, enrich, groups)
        async for event in _stream(self._stub.Ingest(req, timeout=self._deadline)):
            yield event

    async def ingest(
        self,
        paths: Iterable[str] = (),
        files: Iterable[tuple[str, bytes]] = (),
        library: str = "",
        prune: bool = False,
        urls: Iterable[str] = (),
        enrich: bool = False,
        groups: Iterable[str] = (),
    ) -> AsyncIterator[d.FileProgress | d.IngestSummary]:
        req = _ingest_request(paths, files, library, prune, urls, enrich, groups)
        async for event in _stream(self._stub.Ingest(req, timeout=self._deadline)):
            yield convert.ingest_event_from_pb(event)

    async def tune_embedder(
        self,
        library: str = "",
        epochs: float = 0.0,
        max_pairs: int = 0,
        revert: bool = False,
        pairs: str = "",
        reembed: bool = False,
    ) -> AsyncIterator[ingest_pb2.TuneEmbedderResponse]:
        """A library's embedder tuned (or reverted, or the library re-embedded): progress events,
        then `done`."""
        req = ingest_pb2.TuneEmbedderRequest(
            library=library, epochs=epochs, max_pairs=max_pairs, revert=revert, pairs=pairs, reembed=reembed
        )
        async for event in _stream(self._stub.TuneEmbedder(req, timeout=self._deadline)):
            yield event

    async def submit(
        self,
        paths: Iterable[str] = (),
        files: Iterable[tuple[str, bytes]] = (),
        library: str = "",
        prune: bool = False,
        urls: Iterable[str] = (),
        groups: Iterable[str] = (),
    ) -> d.IngestJob:
        """Queues an ingest (durable); returns the job at once."""
        req = _ingest_request(paths, files, library, prune, urls, enrich=False, groups=groups)
        resp = await _unary(self._stub.SubmitIngest, ingest_pb2.SubmitIngestRequest(request=req), self._short)
        return convert.ingest_job_from_pb(resp.job)

    async def job(self, job_id: str) -> d.IngestJob:
        resp = await _unary(
            self._stub.GetIngestJob, ingest_pb2.GetIngestJobRequest(job_id=job_id), self._short
        )
        return convert.ingest_job_from_pb(resp.job)

    async def cancel_job(self, job_id: str) -> d.IngestJob:
        """Cancels a queued or running job; returns it as it ended (waits for a running one to stop)."""
        resp = await _unary(
            self._stub.CancelIngestJob, ingest_pb2.CancelIngestJobRequest(job_id=job_id), self._deadline
        )
        return convert.ingest_job_from_pb(resp.job)

    async def jobs(self, limit: int = 0) -> list[d.IngestJob]:
        resp = await _unary(
            self._stub.ListIngestJobs, ingest_pb2.ListIngestJobsRequest(limit=limit), self._short
        )
        return [convert.ingest_job_from_pb(j) for j in resp.jobs]

    async def list_documents(self, library: str = "") -> list[d.Document]:
        resp = await _unary(
            self._stub.ListDocuments, ingest_pb2.ListDocumentsRequest(library=library), self._short
        )
        return [convert.document_from_pb(x) for x in resp.documents]

    async def libraries(self) -> list[dict[str, Any]]:
        """Every library: name, documents, chunks, updated_at, databases."""
        resp = await _unary(self._stub.ListLibraries, ingest_pb2.ListLibrariesRequest(), self._short)
        return [
            {
                "name": x.name,
                "documents": x.documents,
                "chunks": x.chunks,
                "updated_at": x.updated_at,
                "databases": x.databases,
            }
            for x in resp.libraries
        ]

    async def get_document(self, document_id: str, library: str = "") -> d.Document:
        resp = await _unary(
            self._stub.GetDocument,
            ingest_pb2.GetDocumentRequest(document_id=document_id, library=library),
            self._short,
        )
        return convert.document_from_pb(resp.document)

    async def delete_document(self, document_id: str, library: str = "") -> int:
        resp = await _unary(
            self._stub.DeleteDocument,
            ingest_pb2.DeleteDocumentRequest(document_id=document_id, library=library),
            self._short,
        )
        return int(resp.chunks_removed)

    async def attach_database(
        self, name: str, url: str, library: str = "", groups: Iterable[str] = ()
    ) -> d.Database:
        req = ingest_pb2.AttachDatabaseRequest(library=library, name=name, url=url, groups=list(groups))
        resp = await _unary(self._stub.AttachDatabase, req, self._short)
        return convert.database_from_pb(resp.database)

    async def detach_database(self, name: str, library: str = "") -> None:
        req = ingest_pb2.DetachDatabaseRequest(library=library, name=name)
        await _unary(self._stub.DetachDatabase, req, self._short)

    async def add_source(self, spec: SourceConfig) -> ingest_pb2.Source:
        """Registers (or updates) a source; it is polled at once. Sources are returned as their
        protobuf messages (a spec and a state): `pb_json` gives their JSON."""
        req = ingest_pb2.AddSourceRequest(spec=convert.source_spec_to_pb(spec))
        return (await _unary(self._stub.AddSource, req, self._short)).source

    async def sources(self, library: str = "") -> list[ingest_pb2.Source]:
        req = ingest_pb2.ListSourcesRequest(library=library)
        return list((await _unary(self._stub.ListSources, req, self._short)).sources)

    async def source(self, name: str) -> ingest_pb2.Source:
        req = ingest_pb2.GetSourceRequest(name=name)
        return (await _unary(self._stub.GetSource, req, self._short)).source

    async def pause_source(self, name: str, paused: bool = True) -> ingest_pb2.Source:
        """Pauses (or, with `paused=False`, resumes) a source."""
        if paused:
            req = ingest_pb2.PauseSourceRequest(name=name)
            return (await _unary(self._stub.PauseSource, req, self._short)).source
        resumed = ingest_pb2.ResumeSourceRequest(name=name)
        return (await _unary(self._stub.ResumeSource, resumed, self._short)).source

    async def retry_source(self, name: str) -> tuple[ingest_pb2.Source, int]:
        """Retries now; returns the source and how many dead-lettered items were given new attempts."""
        resp = await _unary(self._stub.RetrySource, ingest_pb2.RetrySourceRequest(name=name), self._short)
        return resp.source, int(resp.requeued)

    async def remove_source(self, name: str, remove_documents: bool = False) -> int:
        """Forgets a source; returns how many of its documents were removed (with `remove_documents`)."""
        req = ingest_pb2.RemoveSourceRequest(name=name, remove_documents=remove_documents)
        return int((await _unary(self._stub.RemoveSource, req, self._deadline)).documents_removed)

    async def sync_source(self, name: str) -> d.IngestJob:
        """Queues a sync of the source now (a job like the ones its polls queue)."""
        req = ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(source=name))
        return convert.ingest_job_from_pb((await _unary(self._stub.SubmitIngest, req, self._short)).job)

    async def stats(self, library: str = "") -> StoreStats:
        """Every library with documents (or only `library`), as each store counts it."""
        resp = await _unary(self._stub.Stats, ingest_pb2.StatsRequest(library=library), self._deadline)
        return convert.store_stats_from_pb(resp)

    async def create_snapshot(self, name: str) -> SnapshotInfo:
        """Waits for a running ingest to finish, then snapshots every store."""
        resp = await _unary(
            self._stub.CreateSnapshot, ingest_pb2.CreateSnapshotRequest(name=name), self._deadline
        )
        return convert.snapshot_from_pb(resp.snapshot)

    async def list_snapshots(self) -> list[SnapshotInfo]:
        """Oldest first."""
        resp = await _unary(self._stub.ListSnapshots, ingest_pb2.ListSnapshotsRequest(), self._short)
        return [convert.snapshot_from_pb(x) for x in resp.snapshots]

    async def restore_snapshot(self, name: str) -> tuple[SnapshotInfo, dict[str, int]]:
        """The snapshot restored and the new version of each LanceDB table."""
        resp = await _unary(
            self._stub.RestoreSnapshot, ingest_pb2.RestoreSnapshotRequest(name=name), self._deadline
        )
        return convert.snapshot_from_pb(resp.snapshot), dict(resp.table_versions)

    async def delete_snapshot(self, name: str) -> None:
        await _unary(self._stub.DeleteSnapshot, ingest_pb2.DeleteSnapshotRequest(name=name), self._deadline)

    async def vacuum(self, older_than_days: int | None = None) -> VacuumReport:
        """None: the service's `ingest.retention_days`."""
        req = ingest_pb2.VacuumRequest()
        if older_than_days is not None:
            req.older_than_days = older_than_days
        resp = await _unary(self._stub.Vacuum, req, self._deadline)
        return convert.vacuum_from_pb(resp)


async def check_health(channel: grpc.aio.Channel, service: str, deadline_s: float) -> str:
    """The peer's health status name (`SERVING`, `NOT_SERVING`, ...), or `UNREACHABLE`."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=deadline_s)
    except grpc.aio.AioRpcError as err:
        return (
            "UNREACHABLE"
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            else err.code().name
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))
