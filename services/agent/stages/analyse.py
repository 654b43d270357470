"""Analyse: a question that asks for a computation over the documents (a total, a count, an average
over their tables; with an LLM also a count across files) when no database answered it. The documents
the search found are read whole and a program runs over them in the sandbox (services/agent/sandbox:
no network, the documents read-only, limits). With an LLM reachable (and
`generation.analysis_programs`), the LLM writes the program (sandbox/programs.py), with up to
`generation.analysis_repairs` rounds to fix one that failed; when none works, or without an LLM, a
deterministic analysis runs where the question is one it can tell. The result becomes evidence of its
own, cited beside the documents the program read, so what the answer states is checked against the
computation that produced it. The programs, their output and errors go into the trace (`analysis`).
Without the sandbox (not root, no namespaces) nothing runs: the trace says why and the answer is
drafted from the passages as usual."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import RagstackError
from ragstack.llm import GenerationCut
from ragstack.query_trace import QueryTrace
from services.agent import generate, sandbox
from services.agent.ports import LLMPort, RetrieverPort
from services.agent.query import Query
from services.agent.router import aggregate
from services.agent.stages.grade import Evidence

tracer = get_tracer("ragstack.agent")

_TABLE = re.compile(r"^\s*\|.*\|\s*\n\s*\|\s*:?-{3,}", re.MULTILINE)  # a Markdown table's header
ANALYSIS = "application/x-analysis"  # the media type of an analysis's result, its own evidence
DOCUMENTS = 3  # documents with tables read whole, the best-ranked first
FILES_COUNTED = 10  # documents read whole for a count across files
REPLY_CHARS = 40_000  # of an LLM's reply read at most (a program is asked to be short)
DOCUMENT_CHUNKS = 100  # chunks read of each


@dataclass(frozen=True)
class Analysed:
    evidence: Evidence  # the computation first, then the documents' chunks it read
    answer: str  # the result in one sentence, citing the computation and those chunks


class Analyse:
    def __init__(
        self,
        retriever: RetrieverPort,
        llm: LLMPort,
        generation: GenerationConfig,
        directed: Callable[[str], bool],
        clock: Callable[[], float],
        limits: sandbox.Limits | None = None,
    ) -> None:
        """`directed`: whether a sentence of a document instructs its reader; such sentences are left
        out of what the LLM is shown of the files. `limits`: of every program (the sandbox's defaults)."""
        self._retriever = retriever
        self._llm = llm
        self._gen = generation
        self._directed = directed
        self._clock = clock
        self._limits = limits or sandbox.Limits()

    async def run(
        self, query: Query, question: str, evidence: Evidence, trace: QueryTrace
    ) -> AsyncIterator[d.AskEvent | Analysed]:
        """The tool calls' events, then the result (last) when an analysis answered."""
        if not aggregate(question):
            return
        tables = any(_TABLE.search(h.chunk.text) for h in evidence.hits)
        counting = sandbox.across_files(question)
        programs = self._gen.analysis_programs and (tables or counting) and await self._llm.available()
        counting = counting and programs  # only a program counts across files
        if not tables and not counting:
            return  # nothing to compute over: the documents found hold no table
        documents = await self._documents(query.library, evidence.hits, need_table=not counting)
        if not documents:
            return
        reason = sandbox.unavailable_reason()
        if reason:  # said before the LLM is asked for a program that could not run
            trace.analysis = {"ran": False, "by": None, "reason": f"the sandbox cannot run here: {reason}"}
            return
        docs = [doc for doc, _ in documents]
        written: sandbox.Written | None = None
        if programs:
            t0 = self._clock()
            try:
                with tracer.start_as_current_span("agent.analyse.program"):
                    written = await self._write(question, docs)
            except sandbox.SandboxUnavailable as err:
                trace.analysis = {"ran": False, "by": None, "reason": f"the sandbox cannot run here: {err}"}
                return
            took = round((self._clock() - t0) * 1000, 1)
            arguments = {"question": question, "by": "llm", "programs": len(written.attempts)}
            lines = len(written.result.splitlines())
            yield d.ToolCallEvent("analyse", json.dumps(arguments), lines, took)
            if written.ok:
                trace.analysis = {"ran": True, "by": "llm", **_program_record(written)}
                yield _programmed(query.library, written, documents, evidence)
                return
        t0 = self._clock()
        try:
            with tracer.start_as_current_span("agent.analyse"):
                found = await asyncio.to_thread(sandbox.analyse, question, docs, self._limits)
        except sandbox.SandboxUnavailable as err:
            trace.analysis = {"ran": False, "by": None, "reason": f"the sandbox cannot run here: {err}"}
            return
        took = round((self._clock() - t0) * 1000, 1)
        tried = _program_record(written) if written is not None else {}
        if found is None:
            why = "not a total, count or average of a column it could tell"
            if written is not None:
                ran = any(a.outcome is not None for a in written.attempts)
                failed = _first_line(written.error)
                why = f"the LLM's program gave no answer ({failed}); the offline analyses: {why}"
                trace.analysis = {"ran": ran, "by": None, "reason": why, **tried}
            else:
                trace.analysis = {"ran": False, "by": None, "reason": why}
            return
        trace.analysis = {
            "ran": True,
            "by": "offline",
            "description": found.description,
            "value": found.text,
            "code": found.code,
            "stdout": found.outcome.stdout,
            "stderr": found.outcome.stderr[-2000:],
            "error": None if found.value is not None else "the program gave no value",
            "killed_by": found.outcome.killed_by,
            "files": list(found.files),
            "documents": list(found.document_ids),
        }
        if written is not None:  # the LLM's programs that failed first
            trace.analysis["attempts"] = tried["attempts"]
            trace.analysis["program_error"] = written.error
        arguments = {"question": question, "operation": found.operation, "column": found.column}
        yield d.ToolCallEvent("analyse", json.dumps(arguments), found.rows, took)
        if found.value is None:
            return
        yield _analysed(query.library, found, documents, evidence)

    async def _write(self, question: str, docs: Sequence[sandbox.Doc]) -> sandbox.Written:
        """The LLM's program for `question` over `docs`, run (and repaired) in the sandbox."""
        view = sandbox.library(docs)
        names = {doc.document_id: doc.name for doc in docs}

        def clean(text: str) -> str:  # the documents' instructions stay out of the prompt
            return generate.without_instructions(text, question, self._directed)

        return await sandbox.write_and_run(
            question, view, names, self._ask, self._gen.analysis_repairs, self._limits, clean=clean
        )

    async def _ask(self, messages: list[dict[str, str]]) -> str:
        """The LLM's reply, read up to REPLY_CHARS, within `generation.analysis_timeout_s`."""

        async def read() -> str:
            parts: list[str] = []
            size = 0
            stream = self._llm.stream_chat(messages)
            try:
                async for piece in stream:
                    parts.append(piece)
                    size += len(piece)
                    if size >= REPLY_CHARS:
                        break
            except GenerationCut:  # an unfinished program: running it fails, and the repair asks again
                pass
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
            return "".join(parts)

        return await asyncio.wait_for(read(), self._gen.analysis_timeout_s)

    async def _documents(
        self, library: str, hits: list[d.SearchHit], need_table: bool = True
    ) -> list[tuple[sandbox.Doc, list[d.Chunk]]]:
        """The best-ranked documents among the hits (those that hold a table, when `need_table`),
        each read whole."""
        out: list[tuple[sandbox.Doc, list[d.Chunk]]] = []
        for document_id in dict.fromkeys(h.chunk.document_id for h in hits):
            if len(out) == (DOCUMENTS if need_table else FILES_COUNTED):
                break
            if document_id.startswith(("sql:", "analysis")):
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
            if chunks and (_TABLE.search(markdown) or not need_table):
                name = chunks[0].title or chunks[0].source.rsplit("/", 1)[-1]
                out.append((sandbox.Doc(document_id, name, markdown), chunks))
        return out


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "no reply"


def _program_record(written: sandbox.Written) -> dict[str, Any]:
    """The trace's account of the LLM's programs: the last one (the one that answered, when one did)
    at the top, every one in `attempts`."""
    attempts = [a.record() for a in written.attempts]
    last = attempts[-1] if attempts else {}
    return {
        "code": last.get("code", ""),
        "stdout": last.get("stdout", ""),
        "stderr": last.get("stderr", ""),
        "error": written.error or None,
        "killed_by": last.get("killed_by"),
        "files": list(written.files),
        "opened": last.get("opened", []),
        "documents": list(written.documents),
        "attempts": attempts,
    }


def _read(
    documents: list[tuple[sandbox.Doc, list[d.Chunk]]], document_ids: Sequence[str]
) -> list[d.SearchHit]:
    """Of each document read, the chunk holding its (first) table, else its first."""
    return [
        d.SearchHit(next((c for c in chunks if _TABLE.search(c.text)), chunks[0]), 0.0)
        for doc, chunks in documents
        if doc.document_id in document_ids and chunks
    ]


def _result(library: str, digest: str, text: str, read: list[d.SearchHit]) -> tuple[list[d.SearchHit], str]:
    """The analysis's result as evidence of its own, first, before the chunks of what it read; and
    the markers citing them all."""
    result = d.Chunk(
        chunk_id=f"analysis:{digest}",
        document_id="analysis",
        library=library,
        text=text,
        heading_path=("analysis",),
        title="analysis",
        media_type=ANALYSIS,
    )
    hits = [d.SearchHit(result, 1.0), *read]
    return hits, " ".join(f"[{i}]" for i in range(1, len(hits) + 1))


def _programmed(
    library: str,
    written: sandbox.Written,
    documents: list[tuple[sandbox.Doc, list[d.Chunk]]],
    evidence: Evidence,
) -> Analysed:
    """The working program's output as evidence, cited beside the documents whose files it read."""
    code = written.last.code if written.last else ""
    digest = hashlib.sha256(f"{code}\0{written.result}".encode()).hexdigest()[:12]
    names = [doc.name for doc, _ in documents if doc.document_id in written.documents]
    text = f"A program run in the sandbox over the files of {', '.join(names) or 'the documents'} printed:\n"
    hits, refs = _result(library, digest, text + written.result, _read(documents, written.documents))
    printed = " ".join(written.result.split())
    printed = printed if len(printed) <= 500 else printed[:500] + " ..."
    answer = f"A program run over the documents printed: {printed.rstrip('.')} {refs}."
    return Analysed(Evidence(hits, 1.0, evidence.grade), answer)


def _analysed(
    library: str,
    found: sandbox.Analysis,
    documents: list[tuple[sandbox.Doc, list[d.Chunk]]],
    evidence: Evidence,
) -> Analysed:
    digest = hashlib.sha256(found.code.encode()).hexdigest()[:12]
    text = (
        f"{found.sentence()} Computed by a program run in the sandbox over {len(found.files)} "
        f"table(s); it printed {found.text}."
    )
    hits, refs = _result(library, digest, text, _read(documents, found.document_ids))
    return Analysed(Evidence(hits, 1.0, evidence.grade), f"{found.sentence().rstrip('.')} {refs}.")
