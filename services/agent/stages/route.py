"""Route: a follow-up made standalone, then the retrieval strategy chosen for it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import RagstackError
from ragstack.query_trace import QueryTrace
from services.agent import modes
from services.agent.classify import classify
from services.agent.llm_steps import llm_standalone
from services.agent.ports import LLMPort, RetrieverPort
from services.agent.query import Query
from services.agent.router import aggregate, route
from services.agent.sessions import SessionStore, standalone

log = logging.getLogger(__name__)
tracer = get_tracer("ragstack.agent")


@dataclass(frozen=True)
class Routed:
    event: d.RouteEvent  # as streamed
    question: str  # the standalone question: what retrieval, grading and the extract work with
    top_k: int
    databases: list[d.Database]  # for a SQL route: the attached ones, their tables ranked


class Route:
    def __init__(
        self,
        retriever: RetrieverPort,
        llm: LLMPort,
        generation: GenerationConfig,
        default_top_k: int,
        sessions: SessionStore | None,
    ) -> None:
        self._retriever = retriever
        self._llm = llm
        self._gen = generation
        self._top_k = default_top_k
        self._sessions = sessions

    async def run(self, query: Query, trace: QueryTrace) -> Routed:
        question = await self._standalone(query, trace)
        trace.standalone_question = question
        chosen, databases = await self._choose(question, query.mode, query.library)
        chosen = _with_query_mode(chosen, query.query_mode, question)
        spec = modes.SPECS[chosen.query_mode]
        top_k = query.top_k or chosen.top_k or spec.top_k or self._top_k
        if question != query.question:
            chosen = replace(chosen, standalone_question=question)
        trace.route = {
            "mode": chosen.mode.value,
            "classifier": chosen.classifier,
            "reason": chosen.reason,
            "sub_questions": list(chosen.sub_questions),
            "standalone_question": chosen.standalone_question,
            "top_k": top_k,
            "query_mode": chosen.query_mode.value,
        }
        return Routed(chosen, question, top_k, databases)

    async def _standalone(self, query: Query, trace: QueryTrace) -> str:
        """In a session, the question rewritten to read on its own: by the LLM when enabled and
        reachable, else by the heuristic; outside one, the question as asked."""
        if not query.session_key or self._sessions is None:
            return query.question
        turns = self._sessions.recent(query.session_key)
        question = standalone(query.question, turns)
        trace.rewrite = "heuristic" if question != query.question else "none"
        if turns and self._gen.llm_rewrite and await self._llm.available():
            rewritten = await llm_standalone(self._llm, query.question, turns, self._gen.route_timeout_s)
            if rewritten:
                question, trace.rewrite = rewritten, "llm"
        return question

    async def _choose(
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


def _with_query_mode(chosen: d.RouteEvent, asked: d.QueryMode, question: str) -> d.RouteEvent:
    """The answer's shape: the request's; else the LLM router's; else the question's wording."""
    if asked != d.QueryMode.AUTO:
        return replace(chosen, query_mode=asked)
    if chosen.classifier == "llm":
        return chosen
    mode, why = modes.detect(question)
    reason = f"{chosen.reason}; {mode.value} answer: {why}" if why else chosen.reason
    return replace(chosen, query_mode=mode, reason=reason)
