"""Protobuf <-> domain conversion for the shared messages, used by servicers and clients alike."""

from __future__ import annotations

from ragstack import domain as d
from ragstack.domain import LibraryStats, SnapshotInfo, StoreStats, VacuumReport
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


def mode_to_pb(mode: d.SearchMode) -> common_pb2.SearchMode:
    return _MODE_TO_PB[mode]


def mode_from_pb(value: int) -> d.SearchMode:
    return _MODE_FROM_PB.get(value, d.SearchMode.AUTO)


def document_to_pb(doc: d.Document) -> common_pb2.Document:
    return common_pb2.Document(
        document_id=doc.document_id,
        library=doc.library,
        source=doc.source,
        revision=doc.revision,
        fingerprint=doc.fingerprint,
        title=doc.title,
        media_type=doc.media_type,
        chunk_count=doc.chunk_count,
        indexed_at=doc.indexed_at,
        groups=list(doc.groups),
    )


def document_from_pb(pb: common_pb2.Document) -> d.Document:
    return d.Document(
        document_id=pb.document_id,
        library=pb.library,
        source=pb.source,
        revision=pb.revision,
        fingerprint=pb.fingerprint,
        title=pb.title,
        media_type=pb.media_type,
        chunk_count=pb.chunk_count,
        indexed_at=pb.indexed_at,
        groups=tuple(pb.groups),
    )


def chunk_to_pb(chunk: d.Chunk) -> common_pb2.Chunk:
    return common_pb2.Chunk(
        chunk_id=chunk.chunk_id,
        document_id=chunk.document_id,
        library=chunk.library,
        text=chunk.text,
        heading_path=list(chunk.heading_path),
        pages=list(chunk.pages),
        position=chunk.position,
        title=chunk.title,
        source=chunk.source,
        media_type=chunk.media_type,
    )


def chunk_from_pb(pb: common_pb2.Chunk) -> d.Chunk:
    return d.Chunk(
        chunk_id=pb.chunk_id,
        document_id=pb.document_id,
        library=pb.library,
        text=pb.text,
        heading_path=tuple(pb.heading_path),
        pages=tuple(pb.pages),
        position=pb.position,
        title=pb.title,
        source=pb.source,
        media_type=pb.media_type,
    )


def hit_to_pb(hit: d.SearchHit) -> common_pb2.SearchHit:
    return common_pb2.SearchHit(
        chunk=chunk_to_pb(hit.chunk),
        score=hit.score,
        signals=[common_pb2.SignalScore(signal=s.signal, score=s.score, rank=s.rank) for s in hit.signals],
        context=hit.context,
    )


def community_to_pb(c: d.CommunityHit) -> retrieve_pb2.CommunityHit:
    return retrieve_pb2.CommunityHit(
        community_id=c.community_id,
        summary=c.summary,
        score=c.score,
        entities=list(c.entities),
        chunk_ids=list(c.chunk_ids),
    )


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
    return ingest_pb2.IngestResponse(
        file=ingest_pb2.FileProgress(
            source=p.source,
            stage=_STAGE_TO_PB[p.stage],
            document_id=p.document_id,
            reason=p.reason,
            chunk_count=p.chunk_count,
            index=p.index,
            total=p.total,
        )
    )


def summary_to_pb(s: d.IngestSummary) -> ingest_pb2.IngestResponse:
    return ingest_pb2.IngestResponse(
        summary=ingest_pb2.IngestSummary(
            files=s.files,
            indexed=s.indexed,
            unchanged=s.unchanged,
            failed=s.failed,
            removed=s.removed,
            chunks=s.chunks,
            seconds=s.seconds,
            failures=list(s.failures),
            entities=s.entities,
            relations=s.relations,
            communities=s.communities,
            communities_summarized=s.communities_summarized,
            notes=list(s.notes),
        )
    )


def ingest_job_from_pb(pb: ingest_pb2.IngestJob) -> d.IngestJob:
    summary = (
        ingest_event_from_pb(ingest_pb2.IngestResponse(summary=pb.summary))
        if pb.HasField("summary")
        else None
    )
    assert summary is None or isinstance(summary, d.IngestSummary)
    state = ingest_pb2.IngestJobState.Name(pb.state).removeprefix("INGEST_JOB_STATE_").lower()
    return d.IngestJob(
        pb.job_id,
        pb.library,
        state,
        pb.submitted_at,
        pb.updated_at,
        pb.files_done,
        summary,
        pb.error,
        pb.attempts,
        pb.principal,
    )


def ingest_event_from_pb(pb: ingest_pb2.IngestResponse) -> d.FileProgress | d.IngestSummary:
    if pb.WhichOneof("event") == "summary":
        s = pb.summary
        return d.IngestSummary(
            files=s.files,
            indexed=s.indexed,
            unchanged=s.unchanged,
            failed=s.failed,
            removed=s.removed,
            chunks=s.chunks,
            seconds=s.seconds,
            failures=list(s.failures),
            entities=s.entities,
            relations=s.relations,
            communities=s.communities,
            communities_summarized=s.communities_summarized,
            notes=list(s.notes),
        )
    f = pb.file
    return d.FileProgress(
        source=f.source,
        stage=_STAGE_FROM_PB.get(f.stage, d.FileStage.FAILED),
        index=f.index,
        total=f.total,
        document_id=f.document_id,
        chunk_count=f.chunk_count,
        reason=f.reason,
    )


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
        )
    raise ValueError(f"empty AskResponse event: {kind!r}")


def snapshot_to_pb(s: SnapshotInfo) -> ingest_pb2.Snapshot:
    return ingest_pb2.Snapshot(
        name=s.name,
        created_at=s.created_at,
        table_versions=s.table_versions,
        documents=s.documents,
        chunks=s.chunks,
        bytes=s.bytes,
    )


def snapshot_from_pb(pb: ingest_pb2.Snapshot) -> SnapshotInfo:
    return SnapshotInfo(
        name=pb.name,
        created_at=pb.created_at,
        table_versions=dict(pb.table_versions),
        documents=pb.documents,
        chunks=pb.chunks,
        bytes=pb.bytes,
    )


def store_stats_to_pb(s: StoreStats) -> ingest_pb2.StatsResponse:
    return ingest_pb2.StatsResponse(
        libraries=[
            ingest_pb2.LibraryStats(
                name=x.name,
                documents=x.documents,
                chunks=x.chunks,
                vector_chunks=x.vector_chunks,
                lexical_chunks=x.lexical_chunks,
                lexical_pages=x.lexical_pages,
                media_types=x.media_types,
                entities=x.entities,
                relations=x.relations,
                communities=x.communities,
                last_indexed_at=x.last_indexed_at,
            )
            for x in s.libraries
        ],
        table_versions=s.table_versions,
        lancedb_bytes=s.lancedb_bytes,
        tantivy_bytes=s.tantivy_bytes,
        catalog_bytes=s.catalog_bytes,
        snapshots_bytes=s.snapshots_bytes,
        snapshots=s.snapshots,
    )


def store_stats_from_pb(pb: ingest_pb2.StatsResponse) -> StoreStats:
    return StoreStats(
        libraries=[
            LibraryStats(
                name=x.name,
                documents=x.documents,
                chunks=x.chunks,
                vector_chunks=x.vector_chunks,
                lexical_chunks=x.lexical_chunks,
                lexical_pages=x.lexical_pages,
                media_types=dict(x.media_types),
                entities=x.entities,
                relations=x.relations,
                communities=x.communities,
                last_indexed_at=x.last_indexed_at,
            )
            for x in pb.libraries
        ],
        table_versions=dict(pb.table_versions),
        lancedb_bytes=pb.lancedb_bytes,
        tantivy_bytes=pb.tantivy_bytes,
        catalog_bytes=pb.catalog_bytes,
        snapshots_bytes=pb.snapshots_bytes,
        snapshots=pb.snapshots,
    )


def vacuum_to_pb(r: VacuumReport) -> ingest_pb2.VacuumResponse:
    return ingest_pb2.VacuumResponse(
        older_than_days=r.older_than_days,
        versions_removed=r.versions_removed,
        table_versions_removed=r.table_versions_removed,
        fragments_compacted=r.fragments_compacted,
        lancedb_bytes_freed=r.lancedb_bytes_freed,
        tantivy_bytes_freed=r.tantivy_bytes_freed,
    )


def vacuum_from_pb(pb: ingest_pb2.VacuumResponse) -> VacuumReport:
    return VacuumReport(
        older_than_days=pb.older_than_days,
        versions_removed=pb.versions_removed,
        table_versions_removed=dict(pb.table_versions_removed),
        fragments_compacted=pb.fragments_compacted,
        lancedb_bytes_freed=pb.lancedb_bytes_freed,
        tantivy_bytes_freed=pb.tantivy_bytes_freed,
    )
