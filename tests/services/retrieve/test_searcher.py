"""The Searcher's composition: modes, cap, reranking, validation (stores are small honest doubles)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ragstack.domain import Candidate, Chunk, SearchFilter, SearchMode
from ragstack.errors import InvalidArgument
from services.retrieve.searcher import Query, Searcher, merge_page_hits


def chunk(doc: str, pos: int, text: str) -> Chunk:
    return Chunk(f"{doc}:{pos}", doc, "lib", text, ("T",), (), pos, "T", "s", "text/markdown")


CHUNKS = [
    chunk("a", 0, "alpha one"),
    chunk("a", 1, "alpha two"),
    chunk("b", 0, "beta"),
    chunk("c", 0, "gamma"),
]


class ListIndex:
    """Returns the chunks in a fixed order with descending scores, honouring the filter."""

    def __init__(self, order: list[int]) -> None:
        self.order = order

    def search(self, query, library, k, where=None, embedder=None):  # type: ignore[no-untyped-def]
        where = where or SearchFilter()
        picked = [CHUNKS[i] for i in self.order if where.accepts(CHUNKS[i])][:k]
        return [(c, 1.0 - 0.1 * r) for r, c in enumerate(picked)]

    def around(self, library, document_id, position, radius, acl=None):  # type: ignore[no-untyped-def]
        return [c for c in CHUNKS if c.document_id == document_id and abs(c.position - position) <= radius]

    def chunks_of(self, library, document_id, acl=None):  # type: ignore[no-untyped-def]
        return [c for c in CHUNKS if c.document_id == document_id]

    def search_pages(self, query, library, k, where=None):  # type: ignore[no-untyped-def]
        return []

    def search_candidates(self, query, library, k, where=None, embedder=None):  # type: ignore[no-untyped-def]
        return [(Candidate.of(c), s) for c, s in self.search(query, library, k, where)]


class Embedder:
    name = "fake"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32) / 2


class ReverseAlphabet:
    """A reranker that prefers texts later in the alphabet: visible, deterministic reordering."""

    name = "reverse"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.seen.append(len(pairs))
        return np.array([float(ord(p[0])) for _, p in pairs])


def searcher(**kw) -> Searcher:  # type: ignore[no-untyped-def]
    return Searcher(
        Embedder(),
        ListIndex([0, 1, 2, 3]),
        ListIndex([2, 0, 3, 1]),
        default_top_k=3,
        max_top_k=10,
        candidates=4,
        rrf_k=60,
        **kw,
    )


async def test_cap_per_document_and_filter() -> None:
    result = await searcher(max_per_document=1).search(Query("q", "lib", top_k=3))
    assert result.mode == SearchMode.HYBRID and len({h.chunk.document_id for h in result.hits}) == 3
    result = await searcher().search(Query("q", "lib", top_k=3, where=SearchFilter(document_ids=("a",))))
    assert {h.chunk.document_id for h in result.hits} == {"a"}


async def test_reranker_reorders_candidates_and_reports_its_signal() -> None:
    reranker = ReverseAlphabet()
    hits = (
        await searcher(reranker=reranker, rerank_factor=2, max_per_document=0).search(
            Query("q", "lib", top_k=2, mode=SearchMode.LEXICAL)
        )
    ).hits
    assert [h.chunk.text for h in hits] == ["gamma", "beta"]
    assert reranker.seen == [4]  # top_k x factor candidates
    assert [s.signal for s in hits[0].signals] == ["lexical", "rerank"]


async def test_validation() -> None:
    with pytest.raises(InvalidArgument, match="empty"):
        await searcher().search(Query("  ", "lib"))
    with pytest.raises(InvalidArgument, match="max_top_k"):
        await searcher().search(Query("q", "lib", top_k=11))


def test_page_hits_merge_into_the_lexical_list() -> None:
    a, b, c = (Candidate.of(x) for x in (CHUNKS[0], CHUNKS[2], CHUNKS[3]))
    chunk_hits = [(a, 10.0), (b, 6.0), (c, 2.0)]  # normalised: a 1.0, b 0.5, c 0.0
    page_hits = [(c, 8.0), (b, 4.0)]  # normalised: c 1.0, b 0.0
    merged = merge_page_hits(chunk_hits, page_hits)
    # a and c tie at 1.0, and on the other score too (a has no page hit, c's chunk hit is 0.0).
    tied = sorted([a, c], key=lambda x: x.key)  # so in key order
    assert [(x.chunk, s) for x, s in merged] == [(tied[0].chunk, 1.0), (tied[1].chunk, 1.0), (b.chunk, 0.5)]
    lifted = merge_page_hits([(a, 5.0), (c, 5.0)], [(c, 3.0)])  # both 1.0; c's page lifts it
    assert [x for x, _ in lifted] == [c, a]
    assert merge_page_hits(chunk_hits, []) == chunk_hits
