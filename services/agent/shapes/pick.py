"""Choosing the quotes that state something best, and citing them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragstack.text import content_words
from services.agent.shapes.cells import Cell
from services.agent.shapes.quotes import Quote

RELEVANCE = 0.5  # weight of the share of the question's content words a quote holds


def ranked(
    quoted: Sequence[Quote], score: Callable[[Quote], float], question: str
) -> list[tuple[float, Quote]]:
    """The quotes `score` gives more than 0, best first (then in evidence and reading order), each
    sentence once: the overlap of adjacent chunks repeats some."""
    asked = content_words(question)
    out: list[tuple[float, Quote]] = []
    for q in quoted:
        s = score(q)
        if s > 0:
            relevance = len(asked & q.words) / len(asked) if asked else 0.0
            out.append((s + RELEVANCE * relevance, q))
    out.sort(key=lambda x: (-x[0], x[1].rank, x[1].position))
    seen: set[str] = set()
    unique = []
    for s, q in out:
        if q.text not in seen:
            seen.add(q.text)
            unique.append((s, q))
    return unique


def cited(q: Quote, quoted: Sequence[Quote]) -> Cell:
    """The quote, citing every evidence that holds the same sentence."""
    return Cell(q.text, tuple(dict.fromkeys(o.ref for o in quoted if o.text == q.text)))
