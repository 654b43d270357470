"""Cite: the sources the verified answer rests on, and the answer delivered (or withheld)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from ragstack import domain as d
from ragstack.query_trace import CitationRecord, QueryTrace
from services.agent import generate
from services.agent.sql_tool import SqlOutcome
from services.agent.stages.analyse import ANALYSIS
from services.agent.stages.draft import Draft


def cite(
    draft: Draft, verification: d.Verification, sql: SqlOutcome | None, trace: QueryTrace
) -> d.DoneEvent:
    read = (trace.analysis or {}).get("documents") or ()  # what an analysis's program read
    citations = _citations(draft, verification, sql, read)
    answer = draft.text
    if verification.abstain:  # no database answer and no document answer: say which was missing
        notice = sql.notice if sql is not None and sql.hit is None else ""
        answer = notice if notice and not draft.text else generate.ABSTAIN_NOTICE
    trace.answer = answer
    trace.abstained = verification.abstain
    trace.confidence = verification.confidence
    trace.citations = [_record(c) for c in citations]
    return d.DoneEvent(
        trace_id=trace.trace_id,
        answer=answer,
        citations=citations,
        confidence=verification.confidence,
        abstained=verification.abstain,
        generator=draft.generator,
        manifest=verification.manifest,
        evidence_chunk_ids=tuple(e.hit.chunk.chunk_id for e in draft.evidence) if draft.text else (),
        cut_by=draft.cut_by,
    )


def _citations(
    draft: Draft, verification: d.Verification, sql: SqlOutcome | None, read: Sequence[str] = ()
) -> tuple[d.Citation, ...]:
    """The evidence the verified claims cite; else what the draft's markers cite; else all of it
    (an abstention still lists the closest sources)."""
    by_ref = {e.ref: e for e in draft.evidence}
    cited = [r for c in verification.manifest.claims for r in c.refs if r in by_ref]
    if not cited:
        cited = [r for r in by_ref if f"[{r}]" in draft.text]
    refs = list(dict.fromkeys(cited)) or list(by_ref)
    refs = _with_what_analyses_read(refs, draft, read)
    sql_source = sql.source if sql is not None and sql.hit is not None else None
    return tuple(
        d.Citation(
            ref=r,
            chunk=by_ref[r].hit.chunk,
            quote=by_ref[r].hit.chunk.text,
            sql=sql_source if by_ref[r].hit.chunk.media_type == "application/sql" else None,
        )
        for r in refs
    )


def _with_what_analyses_read(refs: list[str], draft: Draft, read: Sequence[str]) -> list[str]:
    """A cited analysis brings the documents its program read (`read`): the answer cites where its
    number came from, even when the writer cited only the computation."""
    evidence = {e.ref: e.hit.chunk for e in draft.evidence}
    if not any(evidence[r].media_type == ANALYSIS for r in refs):
        return refs
    first: dict[str, str] = {}
    for ref, chunk in evidence.items():
        if chunk.media_type != ANALYSIS:
            first.setdefault(chunk.document_id, ref)
    cited = {evidence[r].document_id for r in refs}
    return refs + [first[doc] for doc in dict.fromkeys(read) if doc in first and doc not in cited]


def _record(c: d.Citation) -> CitationRecord:
    record: CitationRecord = {
        "ref": c.ref,
        "chunk_id": c.chunk.chunk_id,
        "source": c.chunk.source,
        "heading_path": list(c.chunk.heading_path),
        "pages": list(c.chunk.pages),
    }
    if c.sql:
        record["sql"] = asdict(c.sql)
    return record
