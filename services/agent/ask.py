"""The answer path: route → retrieve → grade → draft → verify → deliver, as a stream of events,
with one JSON trace per query. Peers are reached through ports, never through grpc here."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from opentelemetry import trace

from ragstack import auth
from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import InvalidArgument, RagstackError, TraceNotFound
from ragstack.telemetry import REQUEST_ID, current_trace_id
from ragstack.traces import TraceStore
from services.agent import bridge, generate, grading
from services.agent.classify import classify
from services.agent.llm_steps import llm_grade, llm_standalone
from services.agent.router import aggregate, route
from services.agent.sessions import (
    Memory,
    SessionInfo,
    SessionStore,
    check_session_id,
    session_key,
    standalone,
)
from services.agent.sql_tool import SqlOutcome, query_databases

log = logging.getLogger(__name__)
tracer = trace.get_tracer("ragstack.agent")

_GRAPH_MODES = (d.SearchMode.GRAPH_LOCAL, d.SearchMode.GRAPH_GLOBAL)


@dataclass(frozen=True)
class _Step:
    """A search the loop will make: graded against `asked`, the question it serves."""

    query: str
    mode: d.SearchMode
    asked: str
    hint: str = ""
    where: d.SearchFilter = field(default_factory=d.SearchFilter)
    tool: str = "search"


@dataclass
class _Found:
    hits: list[d.SearchHit] = field(default_factory=list)
    score: float = 0.0
    grade: str = grading.INCORRECT


def _interleave(lists: Sequence[Sequence[d.SearchHit]], limit: int) -> list[d.SearchHit]:
    """The hits of several searches taken in turn (each one's best first), each chunk once."""
    out: dict[str, d.SearchHit] = {}
    for rank in range(max((len(x) for x in lists), default=0)):
        for hits in lists:
            if rank < len(hits) and hits[rank].chunk.chunk_id not in out:
                out[hits[rank].chunk.chunk_id] = hits[rank]
    return list(out.values())[:limit]


class RetrieverPort(Protocol):
    async def search(
        self,
        query: str,
        library: str,
        top_k: int,
        mode: d.SearchMode,
        where: d.SearchFilter | None = None,
        *,
        expand_context: bool = False,
    ) -> tuple[list[d.SearchHit], d.SearchMode]: ...
    async def score(self, query: str, texts: Sequence[str]) -> list[float]: ...
    async def databases(self, library: str, question: str = "") -> list[d.Database]: ...
    async def sql(self, library: str, database: str, sql: str, max_rows: int = 0) -> d.SqlResult: ...


class VerifierPort(Protocol):
    async def verify(
        self, answer: str, evidence: Sequence[d.Evidence], evidence_score: float
    ) -> d.Verification: ...


class LLMPort(Protocol):
    @property
    def name(self) -> str: ...
    async def available(self) -> bool: ...
    def chat_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any]) -> str: ...
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
        sessions: SessionStore | None = None,
        sql_answer_rows: int = 20,
        *,
        directed: Callable[[str], bool],
    ) -> None:
        """`directed`: whether a sentence of a document instructs its reader
        (`instructions.InstructionDetector`); such sentences are quoted only when asked about."""
        self._directed = directed
        self._sessions = sessions
        self._sql_rows = sql_answer_rows
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
        self,
        question: str,
        library: str,
        mode: d.SearchMode,
        top_k: int,
        session_id: str = "",
        *,
        skip_memory: bool = False,
    ) -> AsyncIterator[d.AskEvent]:
        """`skip_memory`: answer on its own, neither recalling similar earlier questions nor
        remembering this one (evaluations, batch runs)."""
        question = question.strip()
        if not question:
            raise InvalidArgument("question is empty")
        if session_id:
            check_session_id(session_id)
            if self._sessions is None:
                raise InvalidArgument("this agent keeps no sessions")
        caller = auth.current()
        with tracer.start_as_current_span("agent.ask"):
            record: dict[str, Any] = {
                # The OpenTelemetry trace id when tracing is set up, so both traces join.
                "trace_id": current_trace_id() or self._new_trace_id(),
                "principal": caller.name,  # only it (and admins) may read the trace
                "question": question,
                "library": library,
                "session_id": session_id,
                "session_key": session_key(caller.name, session_id) if session_id else "",
                "request_id": REQUEST_ID.get(),  # the gateway's, passed along with the call
                "memory": self._gen.recall_memory and not skip_memory and self._sessions is not None,
                "started_at": self._now().isoformat(),
            }
            start = self._clock()
            try:
                record["top_k_requested"] = top_k
                async for event in self._answer(question, library, mode, top_k or self._top_k, record):
                    yield event
                    if isinstance(event, d.DoneEvent) and self._sessions is not None:
                        self._remember(record["session_key"], library, question, record, event)
            finally:
                record["took_ms"] = round((self._clock() - start) * 1000, 1)
                self._traces.write(record["trace_id"], record)

    def _remember(
        self, session_id: str, library: str, question: str, record: dict[str, Any], done: d.DoneEvent
    ) -> None:
        """The turn goes to its session; an answered question to the library's memory."""
        assert self._sessions is not None
        at = self._now().isoformat()
        if session_id:
            self._sessions.add(
                session_id, question, record["standalone_question"], done.answer, done.abstained, at
            )
        if not done.abstained and record["memory"]:
            documents = list(dict.fromkeys(c.chunk.document_id for c in done.citations if c.sql is None))
            self._sessions.remember(
                library, record["standalone_question"], done.answer, documents, at, record["principal"]
            )

    async def _answer(
        self, question: str, library: str, mode: d.SearchMode, top_k: int, record: dict[str, Any]
    ) -> AsyncIterator[d.AskEvent]:
        trace_id = record["trace_id"]
        yield d.StartEvent(trace_id)

        asked = question  # the generator sees the question as asked; retrieval the standalone one
        if record["session_key"] and self._sessions is not None:
            turns = self._sessions.recent(record["session_key"])
            question = standalone(asked, turns)
            record["rewrite"] = "heuristic" if question != asked else "none"
            if turns and self._gen.llm_rewrite and await self._llm.available():
                rewritten = await llm_standalone(self._llm, asked, turns, self._gen.route_timeout_s)
                if rewritten:
                    question, record["rewrite"] = rewritten, "llm"
        record["standalone_question"] = question
        chosen, databases = await self._route(question, mode, library)
        if chosen.top_k and not record["top_k_requested"]:
            top_k = chosen.top_k
        if question != asked:
            chosen = replace(chosen, standalone_question=question)
        record["route"] = {
            "mode": chosen.mode.value,
            "classifier": chosen.classifier,
            "reason": chosen.reason,
            "sub_questions": list(chosen.sub_questions),
            "standalone_question": chosen.standalone_question,
            "top_k": top_k,
        }
        yield chosen

        found = _Found()
        sql: SqlOutcome | None = None
        if chosen.mode == d.SearchMode.SQL:
            record["tool_calls"], record["grades"] = [], []
            llm = self._llm if await self._llm.available() else None
            with tracer.start_as_current_span("agent.sql"):
                sql = await query_databases(
                    question, library, self._retriever, llm, self._sql_rows, databases
                )
            for call in sql.calls:
                record["tool_calls"].append(call)
                yield d.ToolCallEvent(
                    "sql", json.dumps(call["arguments"]), call["result_count"], call["took_ms"]
                )
            if sql.hit is not None:
                found.hits, found.score, found.grade = [sql.hit], 1.0, grading.CORRECT
                record["grades"].append({"query": question, "grade": found.grade, "score": 1.0})
                yield d.EvidenceEvent((sql.hit,), found.grade, found.score)
            else:
                record["sql_notice"] = sql.notice
        if chosen.mode != d.SearchMode.SQL or (sql and sql.hit is None and chosen.classifier != "explicit"):
            # Documents answer when no database could (the notice stays for an empty result).
            fallback = (
                replace(chosen, mode=d.SearchMode.HYBRID) if chosen.mode == d.SearchMode.SQL else chosen
            )
            async for event in self._gather(question, library, top_k, fallback, record, found):
                yield event
        hits, score, grade = found.hits, found.score, found.grade
        record["grade"] = {"grade": grade, "score": score, "hits": len(hits)}

        evidence = generate.number_evidence(hits)
        with tracer.start_as_current_span("agent.generate"):
            draft, generator = "", "extractive"
            if grade == grading.INCORRECT:
                # Nothing relevant came back: an answer drafted from it would only sound right.
                record["no_draft_reason"] = "evidence graded incorrect"
                generator = "none"
            elif evidence and await self._llm.available():
                messages = await asyncio.to_thread(
                    generate.llm_messages, asked, evidence, self._directed, question
                )
                try:
                    parts = []
                    async for piece in self._llm.stream_chat(messages):
                        parts.append(piece)
                        yield d.DeltaEvent(piece)
                    draft, generator = "".join(parts).strip(), self._llm.name
                except Exception as err:
                    log.warning("LLM generation failed (%s); answering extractively", err)
                    record["llm_error"] = f"{type(err).__name__}: {err}"
                    draft = ""
            if not draft and sql is not None and sql.hit is not None:
                generator = "sql"
                draft = sql.answer
                async for piece in generate.stream_text(draft):
                    yield d.DeltaEvent(piece)
            elif not draft and grade != grading.INCORRECT:
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
        sql_source = sql.source if sql is not None and sql.hit is not None else None
        citations = tuple(
            d.Citation(
                ref=r,
                chunk=by_ref[r].hit.chunk,
                quote=by_ref[r].hit.chunk.text,
                sql=sql_source if by_ref[r].hit.chunk.media_type == "application/sql" else None,
            )
            for r in refs
        )
        answer = draft
        if verification.abstain:  # no database answer and no document answer: say which was missing
            notice = str(record.get("sql_notice") or "")
            answer = notice if notice and not draft else generate.ABSTAIN_NOTICE
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
                    **({"sql": asdict(c.sql)} if c.sql else {}),
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
            evidence_chunk_ids=tuple(e.hit.chunk.chunk_id for e in evidence) if draft else (),
        )

    async def _route(
        self, question: str, mode: d.SearchMode, library: str
    ) -> tuple[d.RouteEvent, list[d.Database]]:
        """An explicit mode wins; else the LLM classifier when one is reachable; else the heuristic.
        SQL only when the library has a database attached (its tables come back ranked)."""
        if mode == d.SearchMode.AUTO and self._gen.llm_router and await self._llm.available():
            with tracer.start_as_current_span("agent.classify"):
                classified = await classify(self._llm, question, self._gen.route_timeout_s)
            if classified is not None:
                if classified.mode != d.SearchMode.SQL:
                    return classified, []
                databases = await self._databases(library, question)
                if databases:
                    return classified, databases
                return replace(
                    classified, mode=d.SearchMode.HYBRID, reason=f"{classified.reason}; no database: hybrid"
                ), []
        wants = mode == d.SearchMode.SQL or (mode == d.SearchMode.AUTO and aggregate(question))
        databases = await self._databases(library, question) if wants else []
        chosen = route(question, mode, bool(databases), self._gen.multi_hop_top_k)
        return chosen, databases

    async def _databases(self, library: str, question: str) -> list[d.Database]:
        try:
            return [db for db in await self._retriever.databases(library, question) if not db.error]
        except RagstackError as err:
            log.warning("cannot list the databases of %s: %s", library, err)
            return []

    async def _gather(
        self,
        question: str,
        library: str,
        top_k: int,
        chosen: d.RouteEvent,
        record: dict[str, Any],
        found: _Found,
    ) -> AsyncIterator[d.AskEvent]:
        """The bounded search loop: one search per sub-question (or the question), each graded; a
        search graded incorrect is followed by another tool (new keywords, or another retrieval
        mode) while the step budget lasts, unless the request fixed the mode. The evidence is every
        useful search's hits, taken in turn. A question that chains facts is searched again from
        what its first search found (bridge searches)."""
        queue = [_Step(q, chosen.mode, q) for q in chosen.sub_questions] or [
            _Step(question, chosen.mode, question)
        ]
        record.setdefault("tool_calls", [])
        record.setdefault("grades", [])
        recalled = await self._recall(question, library, record)
        if recalled is not None:
            yield d.ToolCallEvent("recall_memory", json.dumps({"query": question}), 1, 0.0)
            hint = f"recalled: {recalled.question}"
            where = d.SearchFilter(document_ids=recalled.documents)
            queue.append(_Step(question, chosen.mode, question, hint, where))
        budget = max(self._gen.max_steps, len(queue))
        tried: dict[str, set[d.SearchMode]] = {}
        widened: set[str] = set()
        bridged = not chosen.chains_facts
        steps: list[tuple[list[d.SearchHit], str]] = []
        while queue and budget > 0:
            step = queue.pop(0)
            query, mode, asked, where = step.query, step.mode, step.asked, step.where
            budget -= 1
            with tracer.start_as_current_span("agent.retrieve"):
                t0 = self._clock()
                hits, ran = await self._retriever.search(query, library, top_k, mode, where)
                if not hits and chosen.classifier != "explicit" and ran in _GRAPH_MODES:
                    # A library without a graph (or communities) still answers: fall back to hybrid.
                    hits, ran = await self._retriever.search(query, library, top_k, d.SearchMode.HYBRID)
                took = (self._clock() - t0) * 1000
            tried.setdefault(asked, set()).add(ran)
            args = {"query": query, "library": library, "top_k": top_k, "mode": ran.value}
            score, grade, grader = await self._grade(asked, hits)
            record["tool_calls"].append(
                {
                    "tool": step.tool,
                    "arguments": args,
                    "hint": step.hint,
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
            )
            record["grades"].append({"query": query, "grade": grade, "score": score, "grader": grader})
            yield d.ToolCallEvent(step.tool, json.dumps(args), len(hits), took)
            yield d.EvidenceEvent(tuple(hits), grade, score)
            steps.append((hits, grade))
            if not bridged and asked == question and grade != grading.INCORRECT:
                # The top hits name what the question only describes: search again from them
                # (steps of their own, bounded by generation.bridge_searches).
                bridged = True
                found_by = bridge.bridges(question, hits, self._gen.bridge_searches)
                budget += len(found_by)
                queue[:0] = [
                    _Step(b.query, ran, question, f"bridge from {b.from_chunk}", where, "bridge_search")
                    for b in found_by
                ]
            if (
                grade == grading.AMBIGUOUS
                and self._gen.read_neighbours
                and budget > 0
                and asked not in widened
            ):
                # Related but not answering: the passages around the hits may hold the rest.
                widened.add(asked)
                budget -= 1
                t0 = self._clock()
                wider, _ = await self._retriever.search(
                    query, library, top_k, ran, where, expand_context=True
                )
                wider = [replace(h, chunk=replace(h.chunk, text=h.context or h.chunk.text)) for h in wider]
                took = (self._clock() - t0) * 1000
                score2, grade2, grader = await self._grade(asked, wider)
                record["tool_calls"].append(
                    {
                        "tool": "read_neighbours",
                        "arguments": args,
                        "result_count": len(wider),
                        "took_ms": round(took, 1),
                    }
                )
                record["grades"].append({"query": query, "grade": grade2, "score": score2, "grader": grader})
                yield d.ToolCallEvent("read_neighbours", json.dumps(args), len(wider), took)
                yield d.EvidenceEvent(tuple(wider), grade2, score2)
                if score2 > score:
                    steps[-1] = (wider, grade2)
            if grade == grading.INCORRECT and chosen.classifier != "explicit":
                retry = grading.corrective(asked, ran, tried[asked])
                if retry is not None:
                    text, again = retry
                    hint = f"evidence graded incorrect: retrying with {again.value}"
                    queue.insert(0, _Step(text, again, asked, hint, where))
        useful = [h for h, g in steps if g != grading.INCORRECT]
        if not useful:  # every search missed: no draft, the first search's hits stay as the sources
            found.hits = steps[0][0] if steps else []
            found.score = 0.0
            found.grade = grading.INCORRECT
            return
        found.hits = _interleave(useful, top_k * max(1, len(chosen.sub_questions)))
        found.score = grading.evidence_score(question, found.hits, await self._semantic(question, found.hits))
        found.grade = grading.grade(found.score)
        if len(steps) > 1:  # the evidence as a whole, graded against the whole question
            yield d.EvidenceEvent(tuple(found.hits), found.grade, found.score)

    async def _grade(self, question: str, hits: Sequence[d.SearchHit]) -> tuple[float, str, str]:
        """(score, grade, grader): by the LLM when `generation.evidence_grader` says so and one
        answers in time and on schema; from the scoring signals otherwise."""
        if self._gen.evidence_grader == "llm" and hits and await self._llm.available():
            judged = await llm_grade(self._llm, question, hits, self._gen.route_timeout_s)
            if judged is not None:
                return round(judged.score, 4), judged.grade, "llm"
        score = grading.evidence_score(question, hits, await self._semantic(question, hits))
        return score, grading.grade(score), "score"

    async def _recall(self, question: str, library: str, record: dict[str, Any]) -> Memory | None:
        """The most similar question the caller had answered before in this library (any session),
        when it is close enough (`generation.recall_threshold`); its documents are then searched too."""
        if self._sessions is None or not record["memory"]:
            return None
        memories = self._sessions.memories(library, record["principal"])
        if not memories:
            return None
        try:
            scores = await self._retriever.score(question, [m.question for m in memories])
        except RagstackError:
            return None
        best = max(range(len(memories)), key=lambda i: scores[i])
        if scores[best] < self._gen.recall_threshold or not memories[best].documents:
            return None
        record["tool_calls"].append(
            {
                "tool": "recall_memory",
                "arguments": {"query": question},
                "result_count": 1,
                "recalled": {"question": memories[best].question, "score": round(scores[best], 4)},
            }
        )
        return memories[best]

    async def _semantic(self, question: str, hits: Sequence[d.SearchHit]) -> list[float]:
        """Cosine similarity of the top hits to the question when no dense search scored them
        (lexical, graph), so that every search is graded on the same scale."""
        if not hits or any(s.signal == "dense" and s.rank > 0 for h in hits[:3] for s in h.signals):
            return []
        try:
            return await self._retriever.score(question, [h.chunk.text for h in hits[:3]])
        except RagstackError:  # word coverage alone still grades
            return []

    async def _extract(
        self, question: str, evidence: Sequence[generate.NumberedEvidence], record: dict[str, Any]
    ) -> str:
        candidates = generate.strips(evidence)
        try:
            semantic = await self._retriever.score(question, [s.text for s in candidates])
        except RagstackError as err:  # word overlap alone still gives an answer
            record["score_error"] = str(err)
            semantic = [0.0] * len(candidates)
        extract = await asyncio.to_thread(
            generate.extractive_answer,
            question,
            candidates,
            semantic,
            self._gen.max_answer_sentences,
            self._directed,
        )
        if extract.left_out:  # instructions in the documents, not quoted: the trace shows them
            record["instructions_left_out"] = list(extract.left_out)
        return extract.answer

    def sessions(self, limit: int) -> list[SessionInfo]:
        """The caller's sessions (every session for an admin)."""
        caller = auth.current()
        owner = None if caller.is_admin else caller.name
        return self._sessions.list(limit, owner) if self._sessions is not None else []

    def trace(self, trace_id: str) -> dict[str, Any]:
        """A trace of the caller's own (any trace for an admin); another's reads as unknown."""
        found = self._traces.read(trace_id)
        if not auth.current().owns(str(found.get("principal", ""))):
            raise TraceNotFound(trace_id)
        return found
