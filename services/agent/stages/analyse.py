"""Analyse: a question that asks for a computation over the documents' tables (a total, a count, an
average) when no database answered it. The tables of the documents the search found are read
whole and the analysis runs as a program in the sandbox (services/agent/sandbox: no network, the
documents read-only, limits); its result becomes evidence of its own, cited beside the documents
it read, so the number the answer states is checked against the computation that produced it. The
program and its output go into the trace. Without the sandbox (not root, no namespaces) nothing
runs: the trace says why and the answer is drafted from the passages as usual."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.errors import RagstackError
from ragstack.query_trace import QueryTrace
from services.agent import sandbox
from services.agent.ports import RetrieverPort
from services.agent.query import Query
from services.agent.router import aggregate
from services.agent.stages.grade import Evidence

tracer = get_tracer("ragstack.agent")

_TABLE = re.compile(r"^\s*\|.*\|\s*\n\s*\|\s*:?-{3,}", re.MULTILINE)  # a Markdown table's header
DOCUMENTS = 3  # documents with tables read whole, the best-ranked first
DOCUMENT_CHUNKS = 100  # chunks read of each


@dataclass(frozen=True)
class Analysed:
    evidence: Evidence  # the computation first, then the documents' chunks it read
    answer: str  # the result in one sentence, citing the computation and those chunks


class Analyse:
    def __init__(self, retriever: RetrieverPort, clock: Callable[[], float]) -> None:
        self._retriever = retriever
        self._clock = clock

    async def run(
        self, query: Query, question: str, evidence: Evidence, trace: QueryTrace
    ) -> AsyncIterator[d.AskEvent | Analysed]:
        """The tool call's event, then the result (last) when the analysis answered."""
        if not aggregate(question) or not any(_TABLE.search(h.chunk.text) for h in evidence.hits):
            return  # nothing to compute over: the documents found hold no table
        documents = await self._documents(query.library, evidence.hits)
        if not documents:
            return
        t0 = self._clock()
        with tracer.start_as_current_span("agent.analyse"):
            try:
                found = await asyncio.to_thread(sandbox.analyse, question, [doc for doc, _ in documents])
            except sandbox.SandboxUnavailable as err:
                trace.analysis = {"ran": False, "reason": f"the sandbox cannot run here: {err}"}
                return
        took = round((self._clock() - t0) * 1000, 1)
        if found is None:
            trace.analysis = {
                "ran": False,
                "reason": "not a total, count or average of a column it could tell",
            }
            return
        trace.analysis = {
            "ran": True,
            "description": found.description,
            "value": found.text,
            "code": found.code,
            "stdout": found.outcome.stdout,
            "stderr": found.outcome.stderr[-2000:],
            "killed_by": found.outcome.killed_by,
            "documents": list(found.document_ids),
        }
        arguments = {"question": question, "operation": found.operation, "column": found.column}
        yield d.ToolCallEvent("analyse", json.dumps(arguments), found.rows, took)
        if found.value is None:
            return
        yield _analysed(query.library, found, documents, evidence)

    async def _documents(
        self, library: str, hits: list[d.SearchHit]
    ) -> list[tuple[sandbox.Doc, list[d.Chunk]]]:
        """The best-ranked documents among the hits that hold a table, each read whole."""
        out: list[tuple[sandbox.Doc, list[d.Chunk]]] = []
        for document_id in dict.fromkeys(h.chunk.document_id for h in hits):
            if len(out) == DOCUMENTS:
                break
            if document_id.startswith("sql:"):
                continue
            try:
                found, _ = await self._retriever.search(
                    " ".join(h.chunk.title for h in hits[:1]) or "table",
                    library,
                    DOCUMENT_CHUNKS,
                    d.SearchMode.DENSE,
                    d.SearchFilter(document_ids=(document_id,)),
                )
            except RagstackError:
                continue
            chunks = sorted((h.chunk for h in found), key=lambda c: c.position)
            markdown = "\n\n".join(c.text for c in chunks)
            if chunks and _TABLE.search(markdown):
                name = chunks[0].title or chunks[0].source.rsplit("/", 1)[-1]
                out.append((sandbox.Doc(document_id, name, markdown), chunks))
        return out


def _analysed(
    library: str,
    found: sandbox.Analysis,
    documents: list[tuple[sandbox.Doc, list[d.Chunk]]],
    evidence: Evidence,
) -> Analysed:
    digest = hashlib.sha256(found.code.encode()).hexdigest()[:12]
    result = d.Chunk(
        chunk_id=f"analysis:{digest}",
        document_id="analysis",
        library=library,
        text=f"{found.sentence()} Computed by a program run in the sandbox over {len(found.files)} "
        f"table(s); it printed {found.text}.",
        heading_path=("analysis",),
        title="analysis",
        media_type="application/x-analysis",
    )
    read = [  # of each document it read, the chunk holding its (first) table
        d.SearchHit(next((c for c in chunks if _TABLE.search(c.text)), chunks[0]), 0.0)
        for doc, chunks in documents
        if doc.document_id in found.document_ids and chunks
    ]
    hits = [d.SearchHit(result, 1.0), *read]
    refs = " ".join(f"[{i}]" for i in range(1, len(hits) + 1))
    return Analysed(Evidence(hits, 1.0, evidence.grade), f"{found.sentence().rstrip('.')} {refs}.")
