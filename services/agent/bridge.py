"""Bridge searches, for questions that chain facts.

The first search finds the passage about what the question names; the passage about what it only
describes ("the county where X was born") shares few words with the question. The top hits of the
first search say what the missing link is: their sentence that matches the question best names it
("X was born in Hale, a town in Marsh County"). Searching again with the question and that
sentence finds the next passage. No entity list or question template is involved; how many bridge
searches to make (`generation.bridge_searches`) was chosen on musique_train100 (README: Answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragstack.domain import SearchHit
from ragstack.text import content_words, split_sentences


@dataclass(frozen=True)
class Bridge:
    query: str
    from_chunk: str  # the hit whose sentence it adds


def bridges(question: str, hits: Sequence[SearchHit], count: int) -> list[Bridge]:
    """One follow-up search per top hit (at most `count`): the question and the hit's sentence that
    shares most of its content words (the first on ties). A sentence that adds no word of its own
    to the question would only repeat the first search: it gives none."""
    asked = content_words(question)
    out: list[Bridge] = []
    for hit in hits[:count]:
        sentences = split_sentences(hit.chunk.text)
        if not sentences:
            continue
        best = max(sentences, key=lambda s: len(asked & content_words(s)))
        query = f"{question} {best}"
        if content_words(best) - asked and query not in {b.query for b in out}:
            out.append(Bridge(query, hit.chunk.chunk_id))
    return out
