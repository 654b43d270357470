"""Protobuf <-> domain conversion for the shared messages, used by servicers and clients alike."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime

from pydantic import ValidationError

from ragstack import domain as d
from ragstack.config import SourceConfig
from ragstack.convert_fields import from_pb, to_pb
from ragstack.domain import ItemFailure, SnapshotInfo, SourceState, StoreStats, VacuumReport
from ragstack.errors import InvalidArgument
from ragstack.guard.urls import shown_url
from ragstack.v1 import agent_pb2, common_pb2, ingest_pb2, retrieve_pb2

_MODE_TO_PB: dict[d.SearchMode, common_pb2.SearchMode] = {
    d.SearchMode.AUTO: common_pb2.SEARCH_MODE_UNSPECIFIED,
    d.SearchMode.LEXICAL: common_pb2.SEARCH_MODE_LEXICAL,
    d.SearchMode.DENSE: common_pb2.SEARCH_MODE_DENSE,
    d.SearchMode.HYBRID: common_pb2.SEARCH_MODE_HYBRID,
    d.SearchMode.GRAPH_LOCAL: common_pb2.SEARCH_MODE_GRAPH_LOCAL,
    d.SearchMode.GRAPH_GLOBAL: common_pb2.SEARCH_MODE_GRAPH_GLOBAL,
    d.SearchMode.SQL: common_pb2.SEARCH_MODE_SQL,
}
_MODE_FROM_PB: dict[int, d.SearchMode] = {int(v): k for k, v in _MODE_TO_PB.items()}

_VERDICT_TO_PB = {
    d.Verdict.SUPPORTED: common_pb2.VERDICT_SUPPORTED,
    d.Verdict.PARTIAL: common_pb2.VERDICT_PARTIAL,
    d.Verdict.UNSUPPORTED: common_pb2.VERDICT_UNSUPPORTED,
}
_VERDICT_FROM_PB = {v: k for k, v in _VERDICT_TO_PB.items()}

_STAGE_TO_PB = {
    d.FileStage.PARSED: ingest_pb2.FILE_STAGE_PARSED,
    d.FileStage.CHUNKED: ingest_pb2.FILE_STAGE_CHUNKED,
    d.FileStage.EMBEDDED: ingest_pb2.FILE_STAGE_EMBEDDED,
    d.FileStage.INDEXED: ingest_pb2.FILE_STAGE_INDEXED,
    d.FileStage.UNCHANGED: ingest_pb2.FILE_STAGE_UNCHANGED,
    d.FileStage.FAILED: ingest_pb2.FILE_STAGE_FAILED,
    d.FileStage.REMOVED: ingest_pb2.FILE_STAGE_REMOVED,
}
_STAGE_FROM_PB = {v: k for k, v in _STAGE_TO_PB.items()}


_QUERY_MODE_TO_PB = {
    d.QueryMode.AUTO: agent_pb2.QUERY_MODE_UNSPECIFIED,
    d.QueryMode.GENERAL: agent_pb2.QUERY_MODE_GENERAL,
    d.QueryMode.COMPARE: agent_pb2.QUERY_MODE_COMPARE,
    d.QueryMode.METHODOLOGY: agent_pb2.QUERY_MODE_METHODOLOGY,
    d.QueryMode.DATASETS: agent_pb2.QUERY_MODE_DATASETS,
    d.QueryMode.REPRODUCE: agent_pb2.QUERY_MODE_REPRODUCE,
}
_QUERY_MODE_FROM_PB: dict[int, d.QueryMode] = {int(v): k for k, v in _QUERY_MODE_TO_PB.items()}


def query_mode_to_pb(mode: d.QueryMode) -> agent_pb2.QueryMode:
    return _QUERY_MODE_TO_PB[mode]


def query_mode_from_pb(value: int) -> d.QueryMode:
    return _QUERY_MODE_FROM_PB.get(value, d.QueryMode.AUTO)


def query_mode_of_request(value: int) -> d.QueryMode:
    """A request's query mode; a value this server does not know is refused, never guessed."""
    if value not in _QUERY_MODE_FROM_PB:
        raise InvalidArgument(f"query_mode {value} is not a known query mode")
    return _QUERY_MODE_FROM_PB[value]


def mode_to_pb(mode: d.SearchMode) -> common_pb2.SearchMode:
    return _MODE_TO_PB[mode]


def mode_from_pb(value: int) -> d.SearchMode:
    return _MODE_FROM_PB.get(value, d.SearchMode.AUTO)


def mode_of_request(value: int) -> d.SearchMode:
    """A request's search mode; a value this server does not know is refused, never guessed."""
    if value not in _MODE_FROM_PB:
        raise InvalidArgument(f"mode {value} is not a known search mode")
    return _MODE_FROM_PB[value]


def document_to_pb(doc: d.Document) -> common_pb2.Document:
    return to_pb(doc, common_pb2.Document)


def document_from_pb(pb: common_pb2.Document) -> d.Document:
    return from_pb(pb, d.Document)


def chunk_to_pb(chunk: d.Chunk) -> common_pb2.Chunk:
    return to_pb(chunk, common_pb2.Chunk)  # not its ACL groups: a caller sees only what it may


def chunk_from_pb(pb: common_pb2.Chunk) -> d.Chunk:
    return from_pb(pb, d.Chunk)


def region_to_pb(region: d.ChunkRegion) -> retrieve_pb2.ChunkRegion:
    return to_pb(region, retrieve_pb2.ChunkRegion)


def region_from_pb(pb: retrieve_pb2.ChunkRegion) -> d.ChunkRegion:
    return from_pb(pb, d.ChunkRegion)


def visual_to_pb(visual: d.ChunkVisual) -> retrieve_pb2.GetChunkVisualResponse:
    return to_pb(visual, retrieve_pb2.GetChunkVisualResponse)


def visual_from_pb(pb: retrieve_pb2.GetChunkVisualResponse) -> d.ChunkVisual:
    return from_pb(pb, d.ChunkVisual)


def hit_to_pb(hit: d.SearchHit) -> common_pb2.SearchHit:
    return common_pb2.SearchHit(
        chunk=chunk_to_pb(hit.chunk),
        score=hit.score,
        signals=[common_pb2.SignalScore(signal=s.signal, score=s.score, rank=s.rank) for s in hit.signals],
        context=hit.context,
    )


def community_to_pb(c: d.CommunityHit) -> retrieve_pb2.CommunityHit:
    return to_pb(c, retrieve_pb2.CommunityHit)


def hit_from_pb(pb: common_pb2.SearchHit) -> d.SearchHit:
    return d.SearchHit(
        chunk=chunk_from_pb(pb.chunk),
        score=pb.score,
        signals=tuple(d.SignalScore(s.signal, s.score, s.rank) for s in pb.signals),
        context=pb.context,
    )


def citation_to_pb(c: d.Citation) -> common_pb2.Citation:
    return common_pb2.Citation(
        ref=c.ref,
        chunk_id=c.chunk.chunk_id,
        document_id=c.chunk.document_id,
        title=c.chunk.title,
        source=c.chunk.source,
        heading_path=list(c.chunk.heading_path),
        pages=list(c.chunk.pages),
        quote=c.quote,
        sql=common_pb2.SqlSource(
            database=c.sql.database, query=c.sql.query, row_count=c.sql.row_count, truncated=c.sql.truncated
        )
        if c.sql
        else None,
    )


def citation_from_pb(pb: common_pb2.Citation) -> d.Citation:
    chunk = d.Chunk(
        chunk_id=pb.chunk_id,
        document_id=pb.document_id,
        library="",
        text=pb.quote,
        heading_path=tuple(pb.heading_path),
        pages=tuple(pb.pages),
        title=pb.title,
        source=pb.source,
    )
    sql = (
        d.SqlSource(pb.sql.database, pb.sql.query, pb.sql.row_count, pb.sql.truncated)
        if pb.HasField("sql")
        else None
    )
    return d.Citation(ref=pb.ref, chunk=chunk, quote=pb.quote, sql=sql)


def database_to_pb(db: d.Database) -> common_pb2.Database:
    scores = db.scores or (0.0,) * len(db.tables)
    return common_pb2.Database(
        name=db.name,
        library=db.library,
        dialect=db.dialect,
        url=db.url,
        origin=db.origin,
        error=db.error,
        groups=db.groups,
        tables=[
            common_pb2.TableSchema(
                name=t.name,
                row_count=t.row_count,
                score=score,
                columns=[
                    common_pb2.ColumnSchema(name=c.name, type=c.type, samples=c.samples) for c in t.columns
                ],
                foreign_keys=[
                    common_pb2.ForeignKey(column=c, references_table=rt, references_column=rc)
                    for c, rt, rc in t.foreign_keys
                ],
            )
            for t, score in zip(db.tables, scores, strict=True)
        ],
    )


def database_from_pb(pb: common_pb2.Database) -> d.Database:
    tables = tuple(
        d.Table(
            name=t.name,
            columns=tuple(d.Column(c.name, c.type, tuple(c.samples)) for c in t.columns),
            foreign_keys=tuple((k.column, k.references_table, k.references_column) for k in t.foreign_keys),
            row_count=t.row_count,
        )
        for t in pb.tables
    )
    return d.Database(
        name=pb.name,
        library=pb.library,
        dialect=pb.dialect,
        url=pb.url,
        origin=pb.origin,
        tables=tables,
        scores=tuple(t.score for t in pb.tables),
        error=pb.error,
        groups=tuple(pb.groups),
    )


def sql_result_to_pb(r: d.SqlResult) -> retrieve_pb2.SqlResponse:
    resp = retrieve_pb2.SqlResponse(
        database=r.database,
        dialect=r.dialect,
        sql=r.sql,
        columns=list(r.columns),
        truncated=r.truncated,
        took_ms=r.took_ms,
    )
    for row in r.rows:
        resp.rows.add().extend(list(row))
    return resp


def sql_result_from_pb(pb: retrieve_pb2.SqlResponse) -> d.SqlResult:
    rows = tuple(tuple(_json_number(v) for v in row) for row in pb.rows)
    return d.SqlResult(pb.database, pb.dialect, pb.sql, tuple(pb.columns), rows, pb.truncated, pb.took_ms)


def _json_number(value: object) -> object:
    """ListValue carries every number as a double: whole ones come back as ints."""
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 else value


def manifest_to_pb(m: d.Manifest) -> common_pb2.Manifest:
    return common_pb2.Manifest(
        claims=[
            common_pb2.Claim(
                claim_id=c.claim_id,
                claim=c.claim,
                refs=list(c.refs),
                verdict=_VERDICT_TO_PB[c.verdict],
                confidence=c.confidence,
                reason=c.reason,
            )
            for c in m.claims
        ],
        supported_ratio=m.supported_ratio,
        method=m.method,
        verified=m.verified,
    )


def manifest_from_pb(pb: common_pb2.Manifest) -> d.Manifest:
    return d.Manifest(
        claims=tuple(
            d.Claim(
                claim_id=c.claim_id,
                claim=c.claim,
                refs=tuple(c.refs),
                # Fail closed: an unknown or unset verdict is unsupported.
                verdict=_VERDICT_FROM_PB.get(c.verdict, d.Verdict.UNSUPPORTED),
                confidence=c.confidence,
                reason=c.reason,
            )
            for c in pb.claims
        ),
        supported_ratio=pb.supported_ratio,
        method=pb.method,
        verified=pb.verified,
    )


def progress_to_pb(p: d.FileProgress) -> ingest_pb2.IngestResponse:
    return ingest_pb2.IngestResponse(file=to_pb(p, ingest_pb2.FileProgress, stage=_STAGE_TO_PB[p.stage]))


def summary_to_pb(s: d.IngestSummary) -> ingest_pb2.IngestResponse:
    return ingest_pb2.IngestResponse(summary=to_pb(s, ingest_pb2.IngestSummary))


def ingest_job_from_pb(pb: ingest_pb2.IngestJob) -> d.IngestJob:
    state = ingest_pb2.IngestJobState.Name(pb.state).removeprefix("INGEST_JOB_STATE_").lower()
    return from_pb(pb, d.IngestJob, state=state)


def ingest_event_from_pb(pb: ingest_pb2.IngestResponse) -> d.FileProgress | d.IngestSummary:
    if pb.WhichOneof("event") == "summary":
        return from_pb(pb.summary, d.IngestSummary)
    return from_pb(pb.file, d.FileProgress, stage=_STAGE_FROM_PB.get(pb.file.stage, d.FileStage.FAILED))


def ask_event_to_pb(event: d.AskEvent) -> agent_pb2.AskResponse:
    match event:
        case d.StartEvent():
            return agent_pb2.AskResponse(start=agent_pb2.StartEvent(trace_id=event.trace_id))
        case d.RouteEvent():
            return agent_pb2.AskResponse(
                route=agent_pb2.RouteEvent(
                    mode=mode_to_pb(event.mode),
                    classifier=event.classifier,
                    reason=event.reason,
                    sub_questions=list(event.sub_questions),
                    standalone_question=event.standalone_question,
                    top_k=event.top_k,
                    chains_facts=event.chains_facts,
                    query_mode=query_mode_to_pb(event.query_mode),
                )
            )
        case d.ToolCallEvent():
            return agent_pb2.AskResponse(
                tool_call=agent_pb2.ToolCallEvent(
                    tool=event.tool,
                    arguments_json=event.arguments_json,
                    result_count=event.result_count,
                    took_ms=event.took_ms,
                )
            )
        case d.EvidenceEvent():
            return agent_pb2.AskResponse(
                evidence=agent_pb2.EvidenceEvent(
                    hits=[hit_to_pb(h) for h in event.hits], grade=event.grade, score=event.score
                )
            )
        case d.DeltaEvent():
            return agent_pb2.AskResponse(delta=agent_pb2.DeltaEvent(text=event.text))
        case d.VerificationEvent():
            return agent_pb2.AskResponse(
                verification=agent_pb2.VerificationEvent(manifest=manifest_to_pb(event.manifest))
            )
        case d.DoneEvent():
            return agent_pb2.AskResponse(
                done=agent_pb2.DoneEvent(
                    trace_id=event.trace_id,
                    answer=event.answer,
                    citations=[citation_to_pb(c) for c in event.citations],
                    confidence=event.confidence,
                    abstained=event.abstained,
                    generator=event.generator,
                    manifest=manifest_to_pb(event.manifest),
                    evidence_chunk_ids=list(event.evidence_chunk_ids),
                    active_retrieval=(
                        to_pb(event.active_retrieval, agent_pb2.ActiveRetrieval)
                        if event.active_retrieval is not None
                        else None
                    ),
                    cut_by=event.cut_by,
                )
            )
    raise TypeError(f"not an ask event: {event!r}")


def ask_event_from_pb(pb: agent_pb2.AskResponse) -> d.AskEvent:
    kind = pb.WhichOneof("event")
    if kind == "start":
        return d.StartEvent(trace_id=pb.start.trace_id)
    if kind == "route":
        r = pb.route
        return d.RouteEvent(
            mode_from_pb(r.mode),
            r.classifier,
            r.reason,
            tuple(r.sub_questions),
            r.standalone_question,
            r.top_k,
            r.chains_facts,
            query_mode_from_pb(r.query_mode),
        )
    if kind == "tool_call":
        t = pb.tool_call
        return d.ToolCallEvent(t.tool, t.arguments_json, t.result_count, t.took_ms)
    if kind == "evidence":
        e = pb.evidence
        return d.EvidenceEvent(tuple(hit_from_pb(h) for h in e.hits), e.grade, e.score)
    if kind == "delta":
        return d.DeltaEvent(pb.delta.text)
    if kind == "verification":
        return d.VerificationEvent(manifest_from_pb(pb.verification.manifest))
    if kind == "done":
        x = pb.done
        return d.DoneEvent(
            trace_id=x.trace_id,
            answer=x.answer,
            citations=tuple(citation_from_pb(c) for c in x.citations),
            confidence=x.confidence,
            abstained=x.abstained,
            generator=x.generator,
            manifest=manifest_from_pb(x.manifest),
            evidence_chunk_ids=tuple(x.evidence_chunk_ids),
            active_retrieval=(
                from_pb(x.active_retrieval, d.ActiveRetrieval) if x.HasField("active_retrieval") else None
            ),
            cut_by=x.cut_by,
        )
    raise ValueError(f"empty AskResponse event: {kind!r}")


def snapshot_to_pb(s: SnapshotInfo) -> ingest_pb2.Snapshot:
    return to_pb(s, ingest_pb2.Snapshot)


def snapshot_from_pb(pb: ingest_pb2.Snapshot) -> SnapshotInfo:
    return from_pb(pb, SnapshotInfo)


def store_stats_to_pb(s: StoreStats) -> ingest_pb2.StatsResponse:
    return to_pb(s, ingest_pb2.StatsResponse)


def store_stats_from_pb(pb: ingest_pb2.StatsResponse) -> StoreStats:
    return from_pb(pb, StoreStats)


def retrieve_stats_to_pb(s: d.RetrieveStats) -> retrieve_pb2.RetrieveServiceStatsResponse:
    return to_pb(s, retrieve_pb2.RetrieveServiceStatsResponse)


def retrieve_stats_from_pb(pb: retrieve_pb2.RetrieveServiceStatsResponse) -> d.RetrieveStats:
    return from_pb(pb, d.RetrieveStats)


def vacuum_to_pb(r: VacuumReport) -> ingest_pb2.VacuumResponse:
    return to_pb(r, ingest_pb2.VacuumResponse)


def vacuum_from_pb(pb: ingest_pb2.VacuumResponse) -> VacuumReport:
    return from_pb(pb, VacuumReport)


_RATING_TO_PB = {"up": agent_pb2.RATING_UP, "down": agent_pb2.RATING_DOWN}
_RATING_FROM_PB = {int(v): k for k, v in _RATING_TO_PB.items()}


def rating_from_pb(value: int) -> str:
    """`up` or `down`; empty for no rating, the number for one this server does not know (both
    refused, and named, where they are checked)."""
    return _RATING_FROM_PB.get(value, str(value) if value else "")


def rating_to_pb(rating: str) -> agent_pb2.Rating:
    return _RATING_TO_PB.get(rating, agent_pb2.RATING_UNSPECIFIED)


def feedback_to_pb(f: d.Feedback) -> agent_pb2.Feedback:
    return to_pb(f, agent_pb2.Feedback, rating=rating_to_pb(f.rating))


def feedback_from_pb(pb: agent_pb2.Feedback) -> d.Feedback:
    return from_pb(pb, d.Feedback, rating=rating_from_pb(pb.rating))


GRAPH_PAGE = 1_000  # items per GetGraph page: a large graph stays far below any message size limit


def graph_to_pages(view: d.GraphView) -> list[retrieve_pb2.GetGraphResponse]:
    """The graph as GetGraph's pages; the first carries `chunks_with_entities`."""
    items = [
        *(("entities", to_pb(e, retrieve_pb2.GraphEntity)) for e in view.entities),
        *(("relations", to_pb(r, retrieve_pb2.GraphRelation)) for r in view.relations),
        *(("communities", to_pb(c, retrieve_pb2.GraphCommunity)) for c in view.communities),
    ]
    pages = []
    for start in range(0, max(1, len(items)), GRAPH_PAGE):
        page = retrieve_pb2.GetGraphResponse()
        for kind, item in items[start : start + GRAPH_PAGE]:
            getattr(page, kind).append(item)
        pages.append(page)
    pages[0].chunks_with_entities = view.chunks_with_entities
    return pages


def graph_from_page(view: d.GraphView, page: retrieve_pb2.GetGraphResponse) -> None:
    """Adds one GetGraph page to `view`."""
    view.entities.extend(from_pb(e, d.GraphEntity) for e in page.entities)
    view.relations.extend(from_pb(r, d.GraphRelation) for r in page.relations)
    view.communities.extend(from_pb(c, d.GraphCommunity) for c in page.communities)
    view.chunks_with_entities = max(view.chunks_with_entities, page.chunks_with_entities)


_SOURCE_KINDS = {
    "folder": ingest_pb2.SOURCE_KIND_FOLDER,
    "http": ingest_pb2.SOURCE_KIND_HTTP,
    "sitemap": ingest_pb2.SOURCE_KIND_SITEMAP,
    "s3": ingest_pb2.SOURCE_KIND_S3,
    "webdav": ingest_pb2.SOURCE_KIND_WEBDAV,
}
_BREAKERS = {
    "closed": ingest_pb2.BREAKER_STATE_CLOSED,
    "open": ingest_pb2.BREAKER_STATE_OPEN,
    "half_open": ingest_pb2.BREAKER_STATE_HALF_OPEN,
}


def source_spec_to_pb(spec: SourceConfig) -> ingest_pb2.SourceSpec:
    return ingest_pb2.SourceSpec(
        name=spec.name,
        kind=_SOURCE_KINDS[spec.kind],
        url=spec.url if spec.kind == "folder" else shown_url(spec.url),  # no password shown
        library=spec.library,
        interval_s=spec.interval_s,
        groups=spec.groups,
        include=spec.include,
        exclude=spec.exclude,
        delete_policy=ingest_pb2.DELETE_POLICY_KEEP
        if spec.delete == "keep"
        else ingest_pb2.DELETE_POLICY_PRUNE,
        endpoint=shown_url(spec.endpoint) if spec.endpoint else "",
        region=spec.region or "",
    )


def source_spec_from_pb(pb: ingest_pb2.SourceSpec) -> SourceConfig:
    """The spec, validated as the config's `sources:` entries are (InvalidArgument naming the field)."""
    kinds = {int(v): k for k, v in _SOURCE_KINDS.items()}
    raw = {
        "name": pb.name,
        "kind": kinds.get(pb.kind, ""),
        "url": pb.url,
        "library": pb.library,
        "interval_s": pb.interval_s or 300.0,
        "groups": list(pb.groups),
        "include": list(pb.include),
        "exclude": list(pb.exclude),
        "delete": "keep" if pb.delete_policy == ingest_pb2.DELETE_POLICY_KEEP else "prune",
        "endpoint": pb.endpoint or None,
        "region": pb.region or None,
    }
    try:
        return SourceConfig.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'spec'}: {e['msg']}" for e in err.errors()
        )
        raise InvalidArgument(f"invalid source: {problems}") from None


def source_kind_name(kind: int) -> str:
    return {int(v): k for k, v in _SOURCE_KINDS.items()}.get(kind, "")


def breaker_name(state: int) -> str:
    return {int(v): k for k, v in _BREAKERS.items()}.get(state, "closed")


def breaker_to_pb(state: str) -> ingest_pb2.BreakerState:
    return _BREAKERS.get(state, ingest_pb2.BREAKER_STATE_CLOSED)


def source_to_pb(state: SourceState, failures: Iterable[ItemFailure]) -> ingest_pb2.Source:
    """A source's spec and state; `failures`: its items retrying or dead-lettered."""
    failed = list(failures)
    return ingest_pb2.Source(
        spec=source_spec_to_pb(state.spec),
        origin=state.origin,
        paused=state.paused,
        breaker=breaker_to_pb(state.breaker),
        consecutive_failures=state.failures,
        last_error=state.last_error,
        last_poll_at=state.last_poll_at,
        last_success_at=state.last_success_at,
        next_poll_at="" if state.paused else _iso(max(state.next_poll, time.time())),
        last_job_id=state.last_job_id,
        retrying=sum(1 for f in failed if not f.dead),
        dead_letters=[
            ingest_pb2.DeadLetter(
                item=f.item, revision=f.revision, error=f.error, attempts=f.attempts, failed_at=f.failed_at
            )
            for f in failed
            if f.dead
        ],
    )


def source_job_request(name: str) -> bytes:
    """The queued request of a source's sync job."""
    return ingest_pb2.IngestRequest(source=name).SerializeToString()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()
