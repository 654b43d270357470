"""Carry: in a session, the earlier turns' evidence is drafted from again, so a follow-up can build
on what was found before. Compacted to what those turns' answers cited (generation.session_evidence:
cited), newest turns first, at most generation.session_evidence_chunks, so the prompt of a long
conversation stays bounded; `all` carries everything they were drafted from (it grows), `none`
nothing. Chunks are read again by id, as the caller may see them now: a deleted or hidden one is
left out."""

from __future__ import annotations

from dataclasses import replace

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import RagstackError
from ragstack.query_trace import QueryTrace
from services.agent.ports import RetrieverPort
from services.agent.query import Query
from services.agent.sessions import SessionStore
from services.agent.stages.grade import Evidence

TURNS_READ = 20  # the newest turns whose evidence may be carried


async def carry(
    query: Query,
    evidence: Evidence,
    sessions: SessionStore | None,
    retriever: RetrieverPort,
    gen: GenerationConfig,
    trace: QueryTrace,
) -> Evidence:
    if not query.session_key or sessions is None or gen.session_evidence == "none":
        return evidence
    held = {h.chunk.chunk_id for h in evidence.hits}
    wanted: list[str] = []
    for turn in reversed(sessions.recent(query.session_key, TURNS_READ)):  # the newest first
        for chunk_id in turn.cited if gen.session_evidence == "cited" else turn.drafted:
            if chunk_id not in held and chunk_id not in wanted:
                wanted.append(chunk_id)
    if gen.session_evidence == "cited":
        wanted = wanted[: gen.session_evidence_chunks]
    carried: list[d.SearchHit] = []
    for chunk_id in wanted:
        try:
            carried.append(d.SearchHit(await retriever.get_chunk(chunk_id, query.library), 0.0))
        except RagstackError:  # deleted since, or no longer visible to this caller
            continue
    trace.session_evidence = {
        "policy": gen.session_evidence,
        "carried": [h.chunk.chunk_id for h in carried],
    }
    return replace(evidence, hits=[*evidence.hits, *carried]) if carried else evidence
