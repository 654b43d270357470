"""Lexical, dense and hybrid search over one library."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from opentelemetry import trace

from ragstack.domain import Chunk, SearchHit, SearchMode, SignalScore
from ragstack.errors import InvalidArgument
from services.retrieve.fusion import normalized_score_fusion, reciprocal_rank_fusion

tracer = trace.get_tracer("ragstack.retrieve")


class QueryEmbedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class DenseIndex(Protocol):
    def search(self, vector: np.ndarray, library: str, k: int) -> list[tuple[Chunk, float]]: ...


class LexicalIndex(Protocol):
    def search(self, query: str, library: str, k: int) -> list[tuple[Chunk, float]]: ...


class Searcher:
    def __init__(
        self,
        embedder: QueryEmbedder,
        dense: DenseIndex,
        lexical: LexicalIndex,
        default_top_k: int,
        max_top_k: int,
        candidates: int,
        rrf_k: int,
        max_score_texts: int = 512,
        fusion: str = "score",
        dense_weight: float = 0.5,
    ) -> None:
        self._embedder = embedder
        self._dense = dense
        self._lexical = lexical
        self._default_top_k = default_top_k
        self._max_top_k = max_top_k
        self._candidates = candidates
        self._rrf_k = rrf_k
        self._max_score_texts = max_score_texts
        self._fusion = fusion
        self._weights = {"dense": dense_weight, "lexical": 1.0 - dense_weight}

    async def search(
        self, query: str, library: str, top_k: int, mode: SearchMode
    ) -> tuple[list[SearchHit], SearchMode]:
        query = query.strip()
        if not query:
            raise InvalidArgument("query is empty")
        k = top_k or self._default_top_k
        if k < 0 or k > self._max_top_k:
            raise InvalidArgument(f"top_k {k} is out of range 1..{self._max_top_k} (retrieve.max_top_k)")
        mode = SearchMode.HYBRID if mode == SearchMode.AUTO else mode
        if mode == SearchMode.LEXICAL:
            return _single("lexical", await self._lexical_hits(query, library, k)), mode
        if mode == SearchMode.DENSE:
            return _single("dense", await self._dense_hits(query, library, k)), mode
        n = max(self._candidates, k)
        lexical, dense = await asyncio.gather(
            self._lexical_hits(query, library, n), self._dense_hits(query, library, n)
        )
        lists = {"lexical": lexical, "dense": dense}
        with tracer.start_as_current_span("retrieve.fuse", attributes={"fusion": self._fusion}):
            if self._fusion == "score":
                fused = normalized_score_fusion(lists, self._weights)
            else:
                fused = reciprocal_rank_fusion(lists, self._rrf_k)
        return fused[:k], mode

    async def score(self, query: str, texts: Sequence[str]) -> tuple[list[float], str]:
        """Cosine similarity of each text to the query, in order."""
        if not query.strip():
            raise InvalidArgument("query is empty")
        if len(texts) > self._max_score_texts:
            raise InvalidArgument(
                f"{len(texts)} texts is over the limit of {self._max_score_texts} (retrieve.max_score_texts)"
            )
        if not texts:
            return [], f"cosine:{self._embedder.name}"
        with tracer.start_as_current_span("retrieve.score", attributes={"texts": len(texts)}):
            vectors = await asyncio.to_thread(self._embedder.embed, [query, *texts])
        return [float(x) for x in vectors[1:] @ vectors[0]], f"cosine:{self._embedder.name}"

    async def _lexical_hits(self, query: str, library: str, k: int) -> list[tuple[Chunk, float]]:
        with tracer.start_as_current_span("retrieve.lexical"):
            return await asyncio.to_thread(self._lexical.search, query, library, k)

    async def _dense_hits(self, query: str, library: str, k: int) -> list[tuple[Chunk, float]]:
        with tracer.start_as_current_span("retrieve.dense"):
            vector = (await asyncio.to_thread(self._embedder.embed, [query]))[0]
            return await asyncio.to_thread(self._dense.search, vector, library, k)


def _single(signal: str, hits: list[tuple[Chunk, float]]) -> list[SearchHit]:
    return [
        SearchHit(chunk=c, score=s, signals=(SignalScore(signal, s, rank),))
        for rank, (c, s) in enumerate(hits, start=1)
    ]
