"""Draft: the answer written from the evidence, streamed as it is written: by the LLM when one is
reachable, else the database's result sentence or an extract of the evidence's best sentences."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.answer_units import finished_part
from ragstack.config import GenerationConfig
from ragstack.errors import RagstackError
from ragstack.llm import MAX_ANSWER_CHARS, GenerationCut
from ragstack.query_trace import QueryTrace
from services.agent import generate, grading, modes, shapes
from services.agent.ports import LLMPort, RetrieverPort
from services.agent.sql_tool import SqlOutcome
from services.agent.stages.grade import Evidence
from services.agent.stages.ground import grounded_text

log = logging.getLogger(__name__)
tracer = get_tracer("ragstack.agent")


@dataclass(frozen=True)
class Draft:
    text: str  # "" when nothing was drafted
    generator: str  # the LLM's name, extractive, sql or none
    evidence: list[generate.NumberedEvidence]  # what its [n] markers point at
    cut_by: str = ""  # the limit that stopped the LLM mid-draft (llm.max_output_tokens, ...)


class Drafter:
    def __init__(
        self,
        retriever: RetrieverPort,
        llm: LLMPort,
        generation: GenerationConfig,
        directed: Callable[[str], bool],
    ) -> None:
        self._retriever = retriever
        self._llm = llm
        self._gen = generation
        self._directed = directed

    async def run(
        self,
        asked: str,
        question: str,
        evidence: Evidence,
        sql: SqlOutcome | None,
        trace: QueryTrace,
        mode: d.QueryMode = d.QueryMode.GENERAL,
        computed: str = "",
    ) -> AsyncIterator[d.DeltaEvent | Draft]:
        """The pieces as they are written, then the draft (an async generator cannot return).
        `asked`: the question as the user asked it, which the LLM answers; `question`: standalone;
        `mode`: the answer's shape, and how much evidence it reads; `computed`: the sentence an
        analysis computed (the offline draft, as a database's result sentence is)."""
        spec = modes.SPECS[mode]
        numbered = generate.number_evidence(evidence.hits[: spec.context or None])
        shaped = mode != d.QueryMode.GENERAL and (sql is None or sql.hit is None) and not computed
        with tracer.start_as_current_span("agent.generate"):
            text, generator, withheld, cut_by = "", "extractive", False, ""
            if evidence.grade == grading.INCORRECT:
                # Nothing relevant came back: an answer drafted from it would only sound right.
                trace.no_draft_reason = "evidence graded incorrect"
                generator = "none"
            elif numbered and mode != d.QueryMode.DATASETS and await self._llm.available():
                messages = await asyncio.to_thread(
                    generate.llm_messages, asked, numbered, self._directed, question, spec.instruction
                )
                try:
                    parts, size = [], 0
                    try:
                        async with contextlib.aclosing(self._llm.stream_chat(messages)) as stream:
                            async for piece in stream:
                                size += len(piece)
                                if size > d.MAX_ANSWER_CHARS:  # more than Verify takes: stop it here
                                    raise GenerationCut(MAX_ANSWER_CHARS)
                                parts.append(piece)
                                yield d.DeltaEvent(piece)
                    except GenerationCut as cut:  # what was finished stays; the rest goes
                        cut_by = cut.limit
                    written = finished_part("".join(parts)) if cut_by else "".join(parts).strip()
                    generator = self._llm.name
                    # Every sentence cites or says it is not from the documents; the rest goes (or,
                    # under the strict policy, the whole answer: then nothing else is drafted; under
                    # the lenient one, a draft with nothing left is written extractively instead). A
                    # table's or checklist's uncited cell is left to the verifier (unsupported).
                    text = (
                        written
                        if shaped
                        else grounded_text(written, numbered, self._gen.citation_policy, trace)
                    )
                    withheld = self._gen.citation_policy == "strict" and bool(written) and not text
                except Exception as err:
                    log.warning("LLM generation failed (%s); answering extractively", err)
                    trace.llm_error = f"{type(err).__name__}: {err}"
            if shaped and not text and not withheld and evidence.grade != grading.INCORRECT:
                filled = await asyncio.to_thread(_shape, mode, asked, numbered, self._directed)
                text, generator = filled, "extractive"
                async for piece in generate.stream_text(text):
                    yield d.DeltaEvent(piece)
            if computed and not text and not withheld:
                text, generator = computed, "analysis"
                async for piece in generate.stream_text(text):
                    yield d.DeltaEvent(piece)
            if (
                not text
                and not withheld
                and (offline := await self._offline(question, numbered, evidence, sql, trace))
            ):
                text, generator = offline
                async for piece in generate.stream_text(text):
                    yield d.DeltaEvent(piece)
        trace.generator, trace.draft, trace.draft_cut_by = generator, text, cut_by or None
        yield Draft(text, generator, numbered, cut_by)

    async def _offline(
        self,
        question: str,
        numbered: Sequence[generate.NumberedEvidence],
        evidence: Evidence,
        sql: SqlOutcome | None,
        trace: QueryTrace,
    ) -> tuple[str, str] | None:
        """(text, generator) without the LLM: the database's result sentence, else an extract of
        evidence that was not graded incorrect; None when there is nothing to draft from."""
        if sql is not None and sql.hit is not None:
            return sql.answer, "sql"
        if evidence.grade != grading.INCORRECT:
            return await self._extract(question, numbered, trace), "extractive"
        return None

    async def _extract(
        self, question: str, evidence: Sequence[generate.NumberedEvidence], trace: QueryTrace
    ) -> str:
        candidates = generate.strips(evidence)
        try:
            semantic = await self._retriever.score(question, [s.text for s in candidates])
        except RagstackError as err:  # word overlap alone still gives an answer
            trace.score_error = str(err)
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
            trace.instructions_left_out = list(extract.left_out)
        return extract.answer


def _without_instructions(
    question: str, evidence: Sequence[generate.NumberedEvidence], directed: Callable[[str], bool]
) -> list[generate.NumberedEvidence]:
    """The evidence as a shape may quote it: a sentence that instructs its reader is left out unless
    the question is about it (the extractive answer's rule), so no cell or item carries one."""
    return [
        generate.NumberedEvidence(
            e.ref,
            replace(
                e.hit,
                chunk=replace(
                    e.hit.chunk, text=generate.without_instructions(e.hit.chunk.text, question, directed)
                ),
            ),
        )
        for e in evidence
    ]


def _shape(
    mode: d.QueryMode,
    question: str,
    numbered: Sequence[generate.NumberedEvidence],
    directed: Callable[[str], bool],
) -> str:
    """The mode's answer filled from the evidence alone: quoted cells with their refs."""
    evidence = _without_instructions(question, numbered, directed)
    match mode:
        case d.QueryMode.COMPARE:
            return shapes.to_markdown(shapes.compare_table(question, evidence))
        case d.QueryMode.METHODOLOGY:
            return shapes.to_markdown(shapes.methodology(question, evidence))
        case d.QueryMode.DATASETS:
            return shapes.to_markdown(shapes.datasets(evidence))
        case d.QueryMode.REPRODUCE:
            return shapes.to_markdown(shapes.reproduce_checklist(question, evidence))
    raise ValueError(f"no shape for {mode}")
