"""Gather: the database tool on a SQL route; on any other (or when no database answered a routed
question) the bounded search loop over the documents. Each call is streamed and traced as it runs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import RagstackError
from ragstack.query_trace import GradeRecord, QueryTrace
from services.agent import bridge, grading
from services.agent.ports import LLMPort, RetrieverPort
from services.agent.query import Query
from services.agent.sessions import Memory, SessionStore
from services.agent.sql_tool import SqlOutcome, query_databases
from services.agent.stages.route import Routed

tracer = get_tracer("ragstack.agent")

_GRAPH_MODES = (d.SearchMode.GRAPH_LOCAL, d.SearchMode.GRAPH_GLOBAL)


@dataclass(frozen=True)
class Search:
    """A search's hits as kept (its neighbours' when reading them graded better), and their grade."""

    hits: list[d.SearchHit]
    grade: str


@dataclass(frozen=True)
class Gathered:
    searches: list[Search] = field(default_factory=list)  # in the order they ran
    sql: SqlOutcome | None = None  # when the route was SQL


@dataclass(frozen=True)
class _Step:
    """A search the loop will make: graded against `asked`, the question it serves."""

    query: str
    mode: d.SearchMode
    asked: str
    hint: str = ""
    where: d.SearchFilter = field(default_factory=d.SearchFilter)
    tool: str = "search"


@dataclass(frozen=True)
class _Result:
    hits: list[d.SearchHit]
    ran: d.SearchMode  # the mode that answered (hybrid when a graph search found nothing)
    arguments: dict[str, Any]
    took: float  # ms
    graded: grading.Graded


@dataclass
class _Loop:
    """What the search loop has left to do, and what it has done that decides the rest."""

    question: str
    explicit: bool  # the request fixed the mode: no other tool is tried
    queue: list[_Step]
    budget: int
    bridged: bool  # bridge searches were made (or the question chains no facts)
    tried: dict[str, set[d.SearchMode]] = field(default_factory=dict)
    widened: set[str] = field(default_factory=set)

    def next(self) -> _Step | None:
        if not self.queue or self.budget <= 0:
            return None
        self.budget -= 1
        return self.queue.pop(0)

    def follow_up(self, step: _Step, found: _Result, bridge_searches: int) -> None:
        """Queues what a search calls for: bridge searches after the question's first useful one,
        another tool after one graded incorrect."""
        self.tried.setdefault(step.asked, set()).add(found.ran)
        if not self.bridged and step.asked == self.question and found.graded.grade != grading.INCORRECT:
            self._bridge(step, found, bridge_searches)
        if found.graded.grade == grading.INCORRECT and not self.explicit:
            self._retry(step, found)

    def widen(self, step: _Step, found: _Result, read_neighbours: bool) -> bool:
        """Whether to read the passages around hits that are related but do not answer: once per
        question, and it costs a step."""
        if (
            found.graded.grade != grading.AMBIGUOUS
            or not read_neighbours
            or self.budget <= 0
            or step.asked in self.widened
        ):
            return False
        self.widened.add(step.asked)
        self.budget -= 1
        return True

    def _bridge(self, step: _Step, found: _Result, count: int) -> None:
        """The top hits name what the question only describes: search again from them (steps of
        their own, bounded by generation.bridge_searches)."""
        self.bridged = True
        found_by = bridge.bridges(self.question, found.hits, count)
        self.budget += len(found_by)
        self.queue[:0] = [
            _Step(
                b.query, found.ran, self.question, f"bridge from {b.from_chunk}", step.where, "bridge_search"
            )
            for b in found_by
        ]

    def _retry(self, step: _Step, found: _Result) -> None:
        retry = grading.corrective(step.asked, found.ran, self.tried[step.asked])
        if retry is not None:
            text, again = retry
            hint = f"evidence graded incorrect: retrying with {again.value}"
            self.queue.insert(0, _Step(text, again, step.asked, hint, step.where))


class Gather:
    def __init__(
        self,
        retriever: RetrieverPort,
        llm: LLMPort,
        generation: GenerationConfig,
        grader: grading.Grader,
        sessions: SessionStore | None,
        sql_answer_rows: int,
        clock: Callable[[], float],
    ) -> None:
        self._retriever = retriever
        self._llm = llm
        self._gen = generation
        self._grader = grader
        self._sessions = sessions
        self._sql_rows = sql_answer_rows
        self._clock = clock

    async def run(
        self, query: Query, routed: Routed, trace: QueryTrace
    ) -> AsyncIterator[d.AskEvent | Gathered]:
        """The events as the calls run, then what was gathered (an async generator cannot return)."""
        trace.open_tools()
        chosen = routed.event
        sql: SqlOutcome | None = None
        if chosen.mode == d.SearchMode.SQL:
            llm = self._llm if await self._llm.available() else None
            with tracer.start_as_current_span("agent.sql"):
                sql = await query_databases(
                    routed.question, query.library, self._retriever, llm, self._sql_rows, routed.databases
                )
            for event in _sql_events(sql, routed.question, trace):
                yield event
            if sql.hit is not None or chosen.classifier == "explicit":
                yield Gathered(sql=sql)
                return
            # Documents answer when no database could (the notice stays for an empty result).
            chosen = replace(chosen, mode=d.SearchMode.HYBRID)
        searches: list[Search] = []
        async for item in self._search_documents(query, routed, chosen, trace):
            if isinstance(item, Search):
                searches.append(item)
            else:
                yield item
        yield Gathered(searches, sql)

    async def _search_documents(
        self, query: Query, routed: Routed, chosen: d.RouteEvent, trace: QueryTrace
    ) -> AsyncIterator[d.AskEvent | Search]:
        """The bounded search loop: one search per sub-question (or the question), each graded; a
        search graded incorrect is followed by another tool (new keywords, or another retrieval
        mode) while the step budget lasts, unless the request fixed the mode. A question that
        chains facts is searched again from what its first search found (bridge searches). Yields
        each search's events, then the search as kept."""
        question = routed.question
        queue = [_Step(q, chosen.mode, q) for q in chosen.sub_questions] or [
            _Step(question, chosen.mode, question)
        ]
        recalled = await self._recall(query, question, trace)
        if recalled is not None:
            yield d.ToolCallEvent("recall_memory", json.dumps({"query": question}), 1, 0.0)
            where = d.SearchFilter(document_ids=recalled.documents)
            queue.append(_Step(question, chosen.mode, question, f"recalled: {recalled.question}", where))
        explicit = chosen.classifier == "explicit"
        loop = _Loop(question, explicit, queue, max(self._gen.max_steps, len(queue)), not chosen.chains_facts)
        while (step := loop.next()) is not None:
            found = await self._search_step(step, query.library, routed.top_k, explicit, trace)
            yield d.ToolCallEvent(step.tool, json.dumps(found.arguments), len(found.hits), found.took)
            yield d.EvidenceEvent(tuple(found.hits), found.graded.grade, found.graded.score)
            # Bridges and retries are queued first: widening spends from the budget bridges add to.
            loop.follow_up(step, found, self._gen.bridge_searches)
            kept = Search(found.hits, found.graded.grade)
            if loop.widen(step, found, self._gen.read_neighbours):
                wider = await self._read_neighbours(step, found, query.library, routed.top_k, trace)
                yield d.ToolCallEvent(
                    "read_neighbours", json.dumps(found.arguments), len(wider.hits), wider.took
                )
                yield d.EvidenceEvent(tuple(wider.hits), wider.graded.grade, wider.graded.score)
                if wider.graded.score > found.graded.score:
                    kept = Search(wider.hits, wider.graded.grade)
            yield kept

    async def _search_step(
        self, step: _Step, library: str, top_k: int, explicit: bool, trace: QueryTrace
    ) -> _Result:
        with tracer.start_as_current_span("agent.retrieve"):
            t0 = self._clock()
            hits, ran = await self._retriever.search(step.query, library, top_k, step.mode, step.where)
            if not hits and not explicit and ran in _GRAPH_MODES:
                # A library without a graph (or communities) still answers: fall back to hybrid.
                hits, ran = await self._retriever.search(step.query, library, top_k, d.SearchMode.HYBRID)
            took = (self._clock() - t0) * 1000
        arguments = {"query": step.query, "library": library, "top_k": top_k, "mode": ran.value}
        graded = await self._grader.grade(step.asked, hits)
        trace.add_call(
            {
                "tool": step.tool,
                "arguments": arguments,
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
        trace.add_grade(_grade_record(step.query, graded))
        return _Result(hits, ran, arguments, took, graded)

    async def _read_neighbours(
        self, step: _Step, found: _Result, library: str, top_k: int, trace: QueryTrace
    ) -> _Result:
        """The hits with the passages around them, graded again: related hits that do not answer may
        have the rest next to them."""
        t0 = self._clock()
        wider, _ = await self._retriever.search(
            step.query, library, top_k, found.ran, step.where, expand_context=True
        )
        wider = [replace(h, chunk=replace(h.chunk, text=h.context or h.chunk.text)) for h in wider]
        took = (self._clock() - t0) * 1000
        graded = await self._grader.grade(step.asked, wider)
        trace.add_call(
            {
                "tool": "read_neighbours",
                "arguments": found.arguments,
                "result_count": len(wider),
                "took_ms": round(took, 1),
            }
        )
        trace.add_grade(_grade_record(step.query, graded))
        return _Result(wider, found.ran, found.arguments, took, graded)

    async def _recall(self, query: Query, question: str, trace: QueryTrace) -> Memory | None:
        """The most similar question the caller had answered before in this library (any session),
        when it is close enough (`generation.recall_threshold`); its documents are then searched too."""
        if self._sessions is None or not query.memory:
            return None
        memories = self._sessions.memories(query.library, query.principal)
        if not memories:
            return None
        try:
            scores = await self._retriever.score(question, [m.question for m in memories])
        except RagstackError:
            return None
        best = max(range(len(memories)), key=lambda i: scores[i])
        if scores[best] < self._gen.recall_threshold or not memories[best].documents:
            return None
        trace.add_call(
            {
                "tool": "recall_memory",
                "arguments": {"query": question},
                "result_count": 1,
                "recalled": {"question": memories[best].question, "score": round(scores[best], 4)},
            }
        )
        return memories[best]


def _grade_record(query: str, graded: grading.Graded) -> GradeRecord:
    return {"query": query, "grade": graded.grade, "score": graded.score, "grader": graded.grader}


def _sql_events(sql: SqlOutcome, question: str, trace: QueryTrace) -> Iterator[d.AskEvent]:
    """The database tool's calls, and its result as evidence (or why there is none, for the trace)."""
    for call in sql.calls:
        trace.add_call(call)
        yield d.ToolCallEvent("sql", json.dumps(call["arguments"]), call["result_count"], call["took_ms"])
    if sql.hit is not None:
        trace.add_grade({"query": question, "grade": grading.CORRECT, "score": 1.0})
        yield d.EvidenceEvent((sql.hit,), grading.CORRECT, 1.0)
    else:
        trace.sql_notice = sql.notice
