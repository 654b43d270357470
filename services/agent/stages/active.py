"""Active retrieval, FLARE-style: the draft's low-confidence spans are searched for, the chunks that
come back join the evidence, and the answer is drafted again from it (generation.
active_retrieval_rounds). The spans are the claims the verifier did not support; the LLM client
reports no token probabilities, and the offline drafts have none, so the verifier is the one signal
every drafter has. A redraft stands only when the verifier supports at least as much of it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.query_trace import QueryTrace
from services.agent import grading
from services.agent.ports import RetrieverPort
from services.agent.query import Query
from services.agent.sql_tool import SqlOutcome
from services.agent.stages.draft import Draft, Drafter
from services.agent.stages.grade import Evidence
from services.agent.stages.route import Routed
from services.agent.stages.verify import Verify

tracer = get_tracer("ragstack.agent")

ADDED_PER_SPAN = 3  # new chunks one span may add: the evidence grows by a few passages a round


@dataclass
class Answered:
    """A draft, what the verifier made of it, and its deltas, held back until it stands."""

    draft: Draft
    verification: d.Verification
    deltas: list[d.DeltaEvent]
    evidence: Evidence
    record: d.ActiveRetrieval = field(default_factory=d.ActiveRetrieval)


class ActiveRetrieval:
    def __init__(
        self,
        retriever: RetrieverPort,
        grader: grading.Grader,
        drafter: Drafter,
        verify: Verify,
        generation: GenerationConfig,
        clock: Callable[[], float],
    ) -> None:
        self._retriever = retriever
        self._grader = grader
        self._drafter = drafter
        self._verify = verify
        self._gen = generation
        self._clock = clock

    async def run(
        self, query: Query, routed: Routed, first: Answered, trace: QueryTrace
    ) -> AsyncIterator[d.AskEvent | Answered]:
        """The searches' events as they run, then the answer that stands (last)."""
        best, searched = first, set[str]()
        queries: list[str] = []
        added: list[str] = []
        rounds, redrafted = 0, False
        for _ in range(self._gen.active_retrieval_rounds):
            spans = [s for s in low_confidence_spans(best.verification) if s not in searched]
            spans = spans[: self._gen.active_retrieval_spans]
            if not spans or best.draft.generator == "sql":
                break
            rounds += 1
            searched.update(spans)
            queries.extend(spans)
            found: list[d.SearchHit] = []
            for span in spans:
                hits, arguments, took = await self._search(span, query, routed, trace)
                yield d.ToolCallEvent("active_search", json.dumps(arguments), len(hits), took)
                found.extend(hits)
            merged, new = merge(best.evidence.hits, found, ADDED_PER_SPAN * len(spans))
            if not new:
                break
            added.extend(new)
            score = await self._grader.score(routed.question, merged)
            evidence = Evidence(merged, score, grading.grade(score), from_several=True)
            yield d.EvidenceEvent(tuple(merged), evidence.grade, evidence.score)
            again = await self._answer(query, routed, evidence, trace)
            if again.verification.manifest.supported_ratio < best.verification.manifest.supported_ratio:
                break
            best, redrafted = again, True
        record = d.ActiveRetrieval(rounds, tuple(queries), tuple(added), redrafted)
        trace.active_retrieval = {**asdict(record), "first_draft": first.draft.text}
        # The trace's draft and verification are those of the answer that stands.
        trace.generator, trace.draft, trace.verification = (
            best.draft.generator,
            best.draft.text,
            asdict(best.verification),
        )
        trace.draft_cut_by = best.draft.cut_by or None  # the answer that stands: a redraft's own
        best.record = record
        yield best

    async def _answer(self, query: Query, routed: Routed, evidence: Evidence, trace: QueryTrace) -> Answered:
        return await draft_and_verify(self._drafter, self._verify, query, routed, evidence, None, trace)

    async def _search(
        self, span: str, query: Query, routed: Routed, trace: QueryTrace
    ) -> tuple[list[d.SearchHit], dict[str, Any], float]:
        """(hits, arguments, took ms) of one span's search, in the request's mode when it fixed one."""
        fixed = query.mode not in (d.SearchMode.AUTO, d.SearchMode.SQL)
        mode = query.mode if fixed else d.SearchMode.HYBRID
        with tracer.start_as_current_span("agent.active_search"):
            t0 = self._clock()
            hits, ran = await self._retriever.search(span, query.library, routed.top_k, mode)
            took = round((self._clock() - t0) * 1000, 1)
        arguments = {"query": span, "library": query.library, "top_k": routed.top_k, "mode": ran.value}
        trace.add_call(
            {
                "tool": "active_search",
                "arguments": arguments,
                "hint": "a claim of the draft the verifier did not support",
                "result_count": len(hits),
                "took_ms": took,
                "hits": [
                    {
                        "chunk_id": h.chunk.chunk_id,
                        "score": h.score,
                        "signals": [asdict(x) for x in h.signals],
                    }
                    for h in hits
                ],
            }
        )
        return hits, arguments, took


async def draft_and_verify(
    drafter: Drafter,
    verify: Verify,
    query: Query,
    routed: Routed,
    evidence: Evidence,
    sql: SqlOutcome | None,
    trace: QueryTrace,
    computed: str = "",
) -> Answered:
    """A draft written and verified, its deltas held back."""
    draft = Draft("", "none", [])
    mode = routed.event.query_mode
    async for piece in drafter.run(query.question, routed.question, evidence, sql, trace, mode, computed):
        if isinstance(piece, Draft):
            draft = piece
    verification = await verify.run(draft, evidence.score, trace)
    # Held back, so streamed as it stands (not as it was written: the citation policy may have
    # cut it, or an extract replaced it).
    return Answered(draft, verification, [d.DeltaEvent(draft.text)] if draft.text else [], evidence)


def low_confidence_spans(verification: d.Verification) -> list[str]:
    """The claims the verifier did not support, the least supported first."""
    weak = [c for c in verification.manifest.claims if c.verdict != d.Verdict.SUPPORTED]
    weak.sort(key=lambda c: (c.verdict != d.Verdict.UNSUPPORTED, c.confidence))
    return list(dict.fromkeys(" ".join(c.claim.split()) for c in weak if c.claim.strip()))


def merge(
    held: list[d.SearchHit], found: list[d.SearchHit], limit: int
) -> tuple[list[d.SearchHit], list[str]]:
    """The evidence with `found` merged in by chunk identity: a chunk already held keeps the better
    score, in its place; at most `limit` new chunks join at the end, best first. Returns the
    evidence and the ids it gained."""
    by_id = {h.chunk.chunk_id: h for h in held}
    fresh: dict[str, d.SearchHit] = {}
    for hit in found:
        cid = hit.chunk.chunk_id
        if cid in by_id:
            if hit.score > by_id[cid].score:
                by_id[cid] = hit
        elif cid not in fresh or hit.score > fresh[cid].score:
            fresh[cid] = hit
    new = sorted(fresh.values(), key=lambda h: -h.score)[:limit]
    return [*by_id.values(), *new], [h.chunk.chunk_id for h in new]
