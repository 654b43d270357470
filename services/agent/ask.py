"""The answer path: route → gather → grade → draft → verify → cite (services.agent.stages), as a
stream of events, with one JSON trace per query. Peers are reached through ports, never through grpc."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import get_tracer

from ragstack import auth
from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.disk import full_disk
from ragstack.errors import InvalidArgument, TraceNotFound
from ragstack.query_trace import QueryTrace
from ragstack.telemetry import REQUEST_ID, current_trace_id
from ragstack.traces import TraceStore
from services.agent.feedback import FeedbackStore
from services.agent.grading import Grader
from services.agent.ports import LLMPort, RetrieverPort, VerifierPort
from services.agent.query import Query
from services.agent.sessions import SessionInfo, SessionStore, check_session_id, session_key
from services.agent.stages.active import ActiveRetrieval, Answered, draft_and_verify
from services.agent.stages.analyse import Analyse, Analysed
from services.agent.stages.carry import carry
from services.agent.stages.cite import cite
from services.agent.stages.draft import Draft, Drafter
from services.agent.stages.gather import Gather, Gathered
from services.agent.stages.grade import grade_evidence
from services.agent.stages.route import Route
from services.agent.stages.verify import Verify

tracer = get_tracer("ragstack.agent")
log = logging.getLogger(__name__)


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
        feedback: FeedbackStore | None = None,
    ) -> None:
        """`directed`: whether a sentence of a document instructs its reader
        (`instructions.InstructionDetector`); such sentences are quoted only when asked about."""
        self._sessions = sessions
        self._retriever = retriever
        self._feedback = feedback
        self._traces = traces
        self._gen = generation
        self._clock = clock
        self._now = now
        self._new_trace_id = new_trace_id
        self._grader = Grader(retriever, llm, generation)
        self._route = Route(retriever, llm, generation, default_top_k, sessions)
        self._gather = Gather(retriever, llm, generation, self._grader, sessions, sql_answer_rows, clock)
        self._drafter = Drafter(retriever, llm, generation, directed)
        self._verify = Verify(verifier, generation)
        self._analyse = Analyse(retriever, llm, generation, directed, clock)
        self._active = ActiveRetrieval(
            retriever, self._grader, self._drafter, self._verify, generation, clock
        )

    async def ask(
        self,
        question: str,
        library: str,
        mode: d.SearchMode,
        top_k: int,
        session_id: str = "",
        *,
        skip_memory: bool = False,
        query_mode: d.QueryMode = d.QueryMode.AUTO,
    ) -> AsyncIterator[d.AskEvent]:
        """`skip_memory`: answer on its own, neither recalling similar earlier questions nor
        remembering this one (evaluations, batch runs); `query_mode`: the answer's shape (AUTO: the
        router chooses)."""
        question = question.strip()
        if not question:
            raise InvalidArgument("question is empty")
        if len(question) > d.MAX_QUESTION_CHARS:
            raise InvalidArgument(
                f"question is {len(question)} characters, over the limit of {d.MAX_QUESTION_CHARS}"
            )
        if session_id:
            check_session_id(session_id)
            if self._sessions is None:
                raise InvalidArgument("this agent keeps no sessions")
        caller = auth.current()
        with tracer.start_as_current_span("agent.ask"):
            query = Query(
                question,
                library,
                mode,
                top_k,
                caller.name,
                session_key(caller.name, session_id) if session_id else "",
                memory=self._gen.recall_memory and not skip_memory and self._sessions is not None,
                query_mode=query_mode,
            )
            trace = QueryTrace(
                # The OpenTelemetry trace id when tracing is set up, so both traces join.
                trace_id=current_trace_id() or self._new_trace_id(),
                principal=caller.name,
                question=question,
                library=library,
                session_id=session_id,
                session_key=query.session_key,
                request_id=REQUEST_ID.get(),  # the gateway's, passed along with the call
                memory=query.memory,
                started_at=self._now().isoformat(),
                top_k_requested=top_k,
            )
            start = self._clock()
            try:
                async for event in self._answer(query, trace):
                    yield event
            finally:
                trace.took_ms = round((self._clock() - start) * 1000, 1)
                try:
                    self._traces.write(trace.trace_id, trace.to_json(), trace.principal)
                except OSError as err:  # a full disk: the answer, streamed already, stands
                    log.error("the trace %s was not kept: %s", trace.trace_id, err)

    async def _answer(self, query: Query, trace: QueryTrace) -> AsyncIterator[d.AskEvent]:
        yield d.StartEvent(trace.trace_id)
        routed = await self._route.run(query, trace)
        yield routed.event
        # Gather and draft stream their events as they run, and yield their result last.
        gathered = Gathered()
        async for item in self._gather.run(query, routed, trace):
            if isinstance(item, Gathered):
                gathered = item
            else:
                yield item
        evidence = await grade_evidence(self._grader, routed, gathered, trace)
        found, computed = len(evidence.hits), ""
        if gathered.sql is None or gathered.sql.hit is None:
            evidence = await carry(query, evidence, self._sessions, self._retriever, self._gen, trace)
            async for computation in self._analyse.run(query, routed.question, evidence, trace):
                if isinstance(computation, Analysed):  # a total, count or average over the tables
                    evidence, computed, found = computation.evidence, computation.answer, 0
                else:
                    yield computation
        if evidence.from_several or len(evidence.hits) != found:  # the evidence as a whole
            yield d.EvidenceEvent(tuple(evidence.hits), evidence.grade, evidence.score)
        if self._gen.active_retrieval_rounds:
            # The first draft is held back until the verifier has read it: the deltas streamed
            # are those of the answer that stands.
            answered = await draft_and_verify(
                self._drafter, self._verify, query, routed, evidence, gathered.sql, trace, computed
            )
            async for step in self._active.run(query, routed, answered, trace):
                if isinstance(step, Answered):
                    answered = step
                else:
                    yield step
            for delta in answered.deltas:
                yield delta
            draft, verification = answered.draft, answered.verification
        else:
            draft = Draft("", "none", [])
            async for piece in self._drafter.run(
                query.question,
                routed.question,
                evidence,
                gathered.sql,
                trace,
                routed.event.query_mode,
                computed,
            ):
                if isinstance(piece, Draft):
                    draft = piece
                else:
                    yield piece
            verification = await self._verify.run(draft, evidence.score, trace)
        yield d.VerificationEvent(verification.manifest)
        done = cite(draft, verification, gathered.sql, trace)
        if self._gen.active_retrieval_rounds:
            done = replace(done, active_retrieval=answered.record)
        yield done
        self._remember(query, routed.question, done, trace.trace_id)  # once the caller has the answer

    def _remember(self, query: Query, standalone: str, done: d.DoneEvent, trace_id: str) -> None:
        """The turn goes to its session; an answered question to the library's memory. The answer,
        which the caller has, stands when that fails (a full disk: logged)."""
        if self._sessions is None:
            return
        try:
            self._keep(query, standalone, done)
        except Exception as err:
            if (full := full_disk(err)) is None:
                log.exception("the turn of trace %s was not remembered", trace_id)
            else:
                log.error("the turn of trace %s was not remembered: a disk is full (%s)", trace_id, full)

    def _keep(self, query: Query, standalone: str, done: d.DoneEvent) -> None:
        assert self._sessions is not None
        at = self._now().isoformat()
        if query.session_key:
            cited = [c.chunk.chunk_id for c in done.citations if c.sql is None and not done.abstained]
            self._sessions.add(
                query.session_key,
                query.question,
                standalone,
                done.answer,
                done.abstained,
                at,
                cited,
                [c for c in done.evidence_chunk_ids if not c.startswith("sql:")],
            )
        if not done.abstained and query.memory:
            documents = list(dict.fromkeys(c.chunk.document_id for c in done.citations if c.sql is None))
            self._sessions.remember(query.library, standalone, done.answer, documents, at, query.principal)

    def sessions(self, limit: int) -> list[SessionInfo]:
        """The caller's sessions (every session for an admin)."""
        caller = auth.current()
        owner = None if caller.is_admin else caller.name
        return self._sessions.list(limit, owner) if self._sessions is not None else []

    def give_feedback(self, trace_id: str, rating: str, comment: str) -> d.Feedback:
        """The caller's verdict on one of its answers (the store checks it); another's trace reads
        as unknown."""
        if self._feedback is None:
            raise InvalidArgument("this agent keeps no feedback")
        answered = self.trace(trace_id)
        given = d.Feedback(
            trace_id,
            rating,
            comment.strip(),
            auth.current().name,
            str(answered.get("question", "")),
            str(answered.get("library", "")),
            self._now().isoformat(),
        )
        return self._feedback.put(given)

    def feedback(self, limit: int, library: str = "") -> list[d.Feedback]:
        """The feedback given, newest first (the service lets only admins ask)."""
        return self._feedback.list(limit, library) if self._feedback is not None else []

    def trace(self, trace_id: str) -> dict[str, Any]:
        """A trace of the caller's own (any trace for an admin); another's reads as unknown."""
        caller = auth.current()
        found = QueryTrace.from_json(self._traces.read(trace_id, None if caller.is_admin else caller.name))
        if not caller.owns(found.principal):
            raise TraceNotFound(trace_id)
        return found.to_json()
