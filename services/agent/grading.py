"""Grades retrieved evidence as correct / ambiguous / incorrect from the retrieval signals."""

from __future__ import annotations

from collections.abc import Sequence

from ragstack.domain import SearchHit
from ragstack.text import content_words

CORRECT, AMBIGUOUS, INCORRECT = "correct", "ambiguous", "incorrect"


def evidence_score(question: str, hits: Sequence[SearchHit]) -> float:
    """0..1: the best hit's dense cosine where the dense signal ran, blended with how many of the
    question's content words the best hits contain."""
    if not hits:
        return 0.0
    dense = [s.score for h in hits[:3] for s in h.signals if s.signal == "dense" and s.rank > 0]
    words = content_words(question)
    text = " ".join(h.chunk.text + " " + " ".join(h.chunk.heading_path) for h in hits[:3])
    coverage = len(words & content_words(text)) / len(words) if words else 0.0
    if not dense:
        return round(coverage, 4)
    return round(0.5 * max(0.0, max(dense)) + 0.5 * coverage, 4)


def grade(score: float) -> str:
    if score >= 0.5:
        return CORRECT
    if score >= 0.3:
        return AMBIGUOUS
    return INCORRECT
