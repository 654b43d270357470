"""Grades retrieved evidence as correct / ambiguous / incorrect: from the retrieval signals, or by
the LLM (`Grader`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragstack import policy
from ragstack.config import GenerationConfig
from ragstack.domain import SearchHit, SearchMode
from ragstack.errors import RagstackError
from ragstack.text import STOPWORDS, content_words, words
from services.agent.llm_steps import llm_grade
from services.agent.ports import LLMPort, RetrieverPort

CORRECT, AMBIGUOUS, INCORRECT = "correct", "ambiguous", "incorrect"


def evidence_score(question: str, hits: Sequence[SearchHit], semantic: Sequence[float] = ()) -> float:
    """0..1: the best of the top hits' cosine similarity to the question (the dense signal where
    it ran, else `semantic`, the scores of the top hits' texts), blended with how many of the
    question's content words the best hits contain."""
    if not hits:
        return 0.0
    dense = [s.score for h in hits[:3] for s in h.signals if s.signal == "dense" and s.rank > 0] or list(
        semantic
    )
    words = content_words(question)
    text = " ".join(h.chunk.text + " " + " ".join(h.chunk.heading_path) for h in hits[:3])
    coverage = len(words & content_words(text)) / len(words) if words else 0.0
    if not dense:
        return round(coverage, 4)
    w = policy.GRADE_SIMILARITY_WEIGHT
    return round(w * max(0.0, max(dense)) + (1 - w) * coverage, 4)


def grade(score: float) -> str:
    if score >= policy.CORRECT_FROM:
        return CORRECT
    if score >= policy.AMBIGUOUS_FROM:
        return AMBIGUOUS
    return INCORRECT


def corrective(query: str, ran: SearchMode, tried: set[SearchMode]) -> tuple[str, SearchMode] | None:
    """What to try after evidence graded incorrect: the query's keywords alone through BM25 after a
    fused or dense search, meaning after words, the graph after both; None once all were tried."""
    keywords = " ".join(w for w in words(query) if w not in STOPWORDS) or query
    for mode, text in (
        (SearchMode.LEXICAL, keywords),
        (SearchMode.DENSE, query),
        (SearchMode.GRAPH_LOCAL, query),
        (SearchMode.HYBRID, query),
    ):
        if mode not in tried and mode != ran:
            return text, mode
    return None


@dataclass(frozen=True)
class Graded:
    score: float
    grade: str
    grader: str  # llm or score


class Grader:
    """Grades hits against a question: by the LLM when `generation.evidence_grader` says so and one
    answers in time and on schema; from the scoring signals otherwise."""

    def __init__(self, retriever: RetrieverPort, llm: LLMPort, generation: GenerationConfig) -> None:
        self._retriever = retriever
        self._llm = llm
        self._gen = generation

    async def grade(self, question: str, hits: Sequence[SearchHit]) -> Graded:
        if self._gen.evidence_grader == "llm" and hits and await self._llm.available():
            judged = await llm_grade(self._llm, question, hits, self._gen.route_timeout_s)
            if judged is not None:
                return Graded(round(judged.score, 4), judged.grade, "llm")
        score = await self.score(question, hits)
        return Graded(score, grade(score), "score")

    async def score(self, question: str, hits: Sequence[SearchHit]) -> float:
        """`evidence_score` with the top hits' similarity to the question computed when no dense
        search scored them (lexical, graph), so that every search is graded on the same scale."""
        return evidence_score(question, hits, await self._semantic(question, hits))

    async def _semantic(self, question: str, hits: Sequence[SearchHit]) -> list[float]:
        if not hits or any(s.signal == "dense" and s.rank > 0 for h in hits[:3] for s in h.signals):
            return []
        try:
            return await self._retriever.score(question, [h.chunk.text for h in hits[:3]])
        except RagstackError:  # word coverage alone still grades
            return []
