"""The answer path: route → retrieve → grade → draft → verify → deliver, as a stream of events,
with one JSON trace per query. Peers are reached through ports, never through grpc here."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Protocol

from opentelemetry import trace

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import InvalidArgument, RagstackError
from ragstack.telemetry import current_trace_id
from ragstack.traces import TraceStore
from services.agent import generate, grading
from services.agent.router import route

log = logging.getLogger(__name__)
tracer = trace.get_tracer("ragstack.agent")

_GRAPH_MODES = (d.SearchMode.GRAPH_LOCAL, d.SearchMode.GRAPH_GLOBAL)


class RetrieverPort(Protocol):
    async def search(
        self, query: str, library: str, top_k: int, mode: d.SearchMode
    ) -> tuple[list[d.SearchHit], d.SearchMode]: ...
    async def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class VerifierPort(Protocol):
    async def verify(
        self, answer: str, evidence: Sequence[d.Evidence], evidence_score: float
    ) -> d.Verification: ...


class LLMPort(Protocol):
    @property
    def name(self) -> str: ...
    async def available(self) -> bool: ...
    def stream_chat(self, messages: Sequence[dict[str, str]]) -> AsyncIterator[str]: ...


class Agent:
    def __init__(
        self,
        retriever: RetrieverPort,
        verifier: VerifierPort,
        llm: LLMPort,
        traces: TraceStore,
        generation: GenerationConfig,
        default_top_k: int,
        clock: Callable[[], float] = time.perf_counter,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_trace_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        self._retriever = retriever
        self._verifier = verifier
        self._llm = llm
        self._traces = traces
        self._gen = generation
        self._top_k = default_top_k
        self._clock = clock
        self._now = now
        self._new_trace_id = new_trace_id

    async def ask(
        self, question: str, library: str, mode: d.SearchMode, top_k: int
    ) -> AsyncIterator[d.AskEvent]:
        question = question.strip()
        if not question:
            raise InvalidArgument("question is empty")
        with tracer.start_as_current_span("agent.ask"):
            record: dict[str, Any] = {
                # The OpenTelemetry trace id when tracing is set up, so both traces join.
                "trace_id": current_trace_id() or self._new_trace_id(),
                "question": question,
                "library": library,
                "started_at": self._now().isoformat(),
            }
            start = self._clock()
            try:
                async for event in self._answer(question, library, mode, top_k or self._top_k, record):
                    yield event
            finally:
                record["took_ms"] = round((self._clock() - start) * 1000, 1)
                self._traces.write(record["trace_id"], record)

    async def _answer(
        self, question: str, library: str, mode: d.SearchMode, top_k: int, record: dict[str, Any]
    ) -> AsyncIterator[d.AskEvent]:
        trace_id = record["trace_id"]
        yield d.StartEvent(trace_id)

        chosen = route(question, mode)
        record["route"] = {
            "mode": chosen.mode.value,
            "classifier": chosen.classifier,
            "reason": chosen.reason,
        }
        yield chosen

        with tracer.start_as_current_span("agent.retrieve"):
            t0 = self._clock()
            hits, ran = await self._retriever.search(question, library, top_k, chosen.mode)
            if not hits and chosen.classifier != "explicit" and ran in _GRAPH_MODES:
                # A library without a graph (or communities) still answers: fall back to hybrid.
                hits, ran = await self._retriever.search(question, library, top_k, d.SearchMode.HYBRID)
            took = (self._clock() - t0) * 1000
        args = {"query": question, "library": library, "top_k": top_k, "mode": ran.value}
        record["tool_calls"] = [
            {
                "tool": "search",
                "arguments": args,
                "result_count": len(hits),
                "took_ms": round(took, 1),
                "hits": [
                    {
                        "chunk_id": h.chunk.chunk_id,
                        "score": h.score,
                        "signals": [asdict(s) for s in h.signals],
                    }
                    for h in hits
                ],
            }
        ]
        yield d.ToolCallEvent("search", json.dumps(args), len(hits), took)
        score = grading.evidence_score(question, hits)
        grade = grading.grade(score)
        record["grades"] = [{"grade": grade, "score": score}]
        yield d.EvidenceEvent(tuple(hits), grade, score)

        evidence = generate.number_evidence(hits)
        with tracer.start_as_current_span("agent.generate"):
            draft, generator = "", "extractive"
            if grade == grading.INCORRECT:
                # Nothing relevant came back: an answer drafted from it would only sound right.
                record["no_draft_reason"] = "evidence graded incorrect"
                generator = "none"
            elif evidence and await self._llm.available():
                try:
                    parts = []
                    async for piece in self._llm.stream_chat(generate.llm_messages(question, evidence)):
                        parts.append(piece)
                        yield d.DeltaEvent(piece)
                    draft, generator = "".join(parts).strip(), self._llm.name
                except Exception as err:
                    log.warning("LLM generation failed (%s); answering extractively", err)
                    record["llm_error"] = f"{type(err).__name__}: {err}"
                    draft = ""
            if not draft and grade != grading.INCORRECT:
                generator = "extractive"
                draft = await self._extract(question, evidence, record)
                async for piece in generate.stream_text(draft):
                    yield d.DeltaEvent(piece)
        record["generator"] = generator
        record["draft"] = draft

        by_ref = {e.ref: e for e in evidence}
        if not draft:
            verification = d.Verification(d.Manifest(method="none", verified=False), 0.0, True)
        elif self._gen.verify_answers:
            with tracer.start_as_current_span("agent.verify"):
                verification = await self._verifier.verify(
                    draft,
                    [d.Evidence(e.ref, e.hit.chunk.chunk_id, e.hit.chunk.text) for e in evidence],
                    score,
                )
        else:
            verification = d.Verification(
                d.Manifest(method="disabled", verified=False), round(score, 4), False
            )
        record["verification"] = asdict(verification)
        yield d.VerificationEvent(verification.manifest)

        cited = [r for c in verification.manifest.claims for r in c.refs if r in by_ref]
        if not cited:
            cited = [r for r in by_ref if f"[{r}]" in draft]
        refs = list(dict.fromkeys(cited)) or list(by_ref)
        citations = tuple(
            d.Citation(ref=r, chunk=by_ref[r].hit.chunk, quote=by_ref[r].hit.chunk.text) for r in refs
        )
        answer = generate.ABSTAIN_NOTICE if verification.abstain else draft
        record.update(
            answer=answer,
            abstained=verification.abstain,
            confidence=verification.confidence,
            citations=[
                {
                    "ref": c.ref,
                    "chunk_id": c.chunk.chunk_id,
                    "source": c.chunk.source,
                    "heading_path": list(c.chunk.heading_path),
                    "pages": list(c.chunk.pages),
                }
                for c in citations
            ],
        )
        yield d.DoneEvent(
            trace_id=trace_id,
            answer=answer,
            citations=citations,
            confidence=verification.confidence,
            abstained=verification.abstain,
            generator=generator,
            manifest=verification.manifest,
        )

    async def _extract(
        self, question: str, evidence: Sequence[generate.NumberedEvidence], record: dict[str, Any]
    ) -> str:
        candidates = generate.strips(evidence)
        try:
            semantic = await self._retriever.score(question, [s.text for s in candidates])
        except RagstackError as err:  # word overlap alone still gives an answer
            record["score_error"] = str(err)
            semantic = [0.0] * len(candidates)
        return generate.extractive_answer(question, candidates, semantic, self._gen.max_answer_sentences)

    def trace(self, trace_id: str) -> dict[str, Any]:
        return self._traces.read(trace_id)
