"""Lexical, dense, hybrid and graph search over one library.

Every search runs with the caller's document ACL (`ragstack.auth.current().acl`) in its filter,
which each store applies inside its own query: a document the caller may not see is never a
candidate, so top_k is filled from visible documents and no score depends on a hidden one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
from opentelemetry import trace

from ragstack import auth
from ragstack.batching import Batcher
from ragstack.domain import (
    MAX_HEADING_PREFIX_BYTES,
    MAX_QUERY_CHARS,
    MAX_SCORE_TEXT_CHARS,
    Candidate,
    Chunk,
    CommunityHit,
    GraphView,
    SearchFilter,
    SearchHit,
    SearchMode,
    SignalScore,
    heading_key,
    read_chunks,
)
from ragstack.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from ragstack.stores.vectors import EmbedderChanged
from ragstack.text import STOPWORDS, content_words
from services.retrieve.feedback import expansion_terms, rocchio
from services.retrieve.fusion import (
    Fused,
    cap_per_document,
    normalized_score_fusion,
    ranked_alone,
    reciprocal_rank_fusion,
)
from services.retrieve.graph_search import GraphSearch

MAX_CHUNK_ID = 512  # `<document_id>:<position>`: ids are hashes, far shorter

tracer = trace.get_tracer("ragstack.retrieve")
CONTEXT_RADIUS = 2  # neighbours on each side considered for context expansion


class QueryEmbedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class DenseIndex(Protocol):
    def search(
        self,
        vector: np.ndarray,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        embedder: str | None = None,
    ) -> list[tuple[Chunk, float]]: ...
    def search_candidates(
        self,
        vector: np.ndarray,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        embedder: str | None = None,
    ) -> list[tuple[Candidate, float]]: ...
    def around(
        self,
        library: str,
        document_id: str,
        position: int,
        radius: int,
        acl: tuple[str, ...] | None = None,
    ) -> list[Chunk]: ...
    def chunks_of(
        self, library: str, document_id: str, acl: tuple[str, ...] | None = None
    ) -> list[Chunk]: ...
    def chunks_by_id(
        self, library: str, chunk_ids: Sequence[str], acl: tuple[str, ...] | None = None
    ) -> list[Chunk]: ...
    def vectors_by_id(self, library: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]: ...
    def library_embedder(self, library: str) -> str: ...


class LexicalIndex(Protocol):
    def search_candidates(
        self,
        query: str,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        expansion: Mapping[str, float] | None = None,
    ) -> list[tuple[Candidate, float]]: ...
    def search_pages(
        self, query: str, library: str, k: int, where: SearchFilter | None = None
    ) -> list[tuple[str, int, float]]: ...
    def analyze(self, texts: Sequence[str]) -> list[list[str]]: ...
    def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]: ...


@dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback (services/retrieve/feedback.py): the first search's best
    `documents` (one chunk each) move a second search. Off at 0 documents."""

    documents: int = 0
    terms: int = 30  # lexical: expansion terms added
    lexical_weight: float = 0.1  # RM3's interpolation: the added terms' share of the query's weight
    dense_weight: float = 0.0  # Rocchio: how far the query vector moves towards theirs

    @property
    def on(self) -> bool:
        return self.documents > 0 and (self.lexical_weight > 0 or self.dense_weight > 0)


class Reranker(Protocol):
    name: str

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray: ...


@dataclass(frozen=True)
class Query:
    text: str
    library: str
    top_k: int = 0  # 0: the configured default
    mode: SearchMode = SearchMode.AUTO
    where: SearchFilter = field(default_factory=SearchFilter)
    max_per_document: int = 0  # 0: the configured default
    expand_context: bool = False


@dataclass(frozen=True)
class SearchResult:
    hits: list[SearchHit]
    mode: SearchMode  # the strategy that ran
    communities: tuple[CommunityHit, ...] = ()  # graph global search: the summaries used


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
        max_per_document: int = 3,
        max_context_chars: int = 6000,
        reranker: Reranker | None = None,
        rerank_factor: int = 10,
        page_search: bool = False,
        graph: GraphSearch | None = None,
        graph_weight: float = 0.0,
        query_embedder: QueryEmbedder | None = None,
        max_batch: int = 32,
        batch_window_s: float = 0.0,
        feedback: Feedback = Feedback(),
        tuned_queries: Callable[[str], QueryEmbedder] | None = None,
    ) -> None:
        """`embedder` embeds Score's texts; `query_embedder` (the same when not given) search
        queries; `tuned_queries` the query model of a library whose vectors a tuned embedder
        made, by its name (ragstack/tuning). Each model, and the reranker, runs concurrent
        requests in shared batches."""
        self._embedder = embedder
        self._embed = Batcher(embedder.embed, "embedder", max_batch, batch_window_s)
        self._embed_query = (
            self._embed
            if query_embedder is None or query_embedder is embedder
            else Batcher(query_embedder.embed, "query-embedder", max_batch, batch_window_s)
        )
        self._tuned_queries = tuned_queries
        self._query_models: dict[str, Batcher[str]] = {"": self._embed_query}
        self._library_embedder: dict[str, str] = {}  # last seen; a search that finds it changed redoes
        self._max_batch, self._batch_window_s = max_batch, batch_window_s
        self._rerank_pairs = (
            Batcher(reranker.score_pairs, "reranker", max_batch * rerank_factor, batch_window_s)
            if reranker is not None
            else None
        )
        self._dense = dense
        self._lexical = lexical
        self._default_top_k = default_top_k
        self._max_top_k = max_top_k
        self._candidates = candidates
        self._rrf_k = rrf_k
        self._max_score_texts = max_score_texts
        self._fusion = fusion
        self._weights = {"dense": dense_weight, "lexical": 1.0 - dense_weight}
        self._max_per_document = max_per_document
        self._max_context_chars = max_context_chars
        self._rerank_factor = rerank_factor
        self._page_search = page_search
        self._graph = graph
        self._graph_weight = graph_weight
        self._feedback = feedback
        self._stopterms: frozenset[str] | None = None
        if graph_weight:
            self._weights = {
                **{s: w * (1.0 - graph_weight) for s, w in self._weights.items()},
                "graph": graph_weight,
            }

    async def search(self, q: Query) -> SearchResult:
        text = q.text.strip()
        if not text:
            raise InvalidArgument("query is empty")
        if len(text) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is {len(text)} characters, over the limit of {MAX_QUERY_CHARS}")
        prefix = len(heading_key(q.where.heading_prefix).encode())
        if prefix > MAX_HEADING_PREFIX_BYTES:
            raise InvalidArgument(
                f"heading_prefix is {prefix} bytes (UTF-8, one separator a heading), over the limit of "
                f"{MAX_HEADING_PREFIX_BYTES}"
            )
        k = q.top_k or self._default_top_k
        if k < 0 or k > self._max_top_k:
            raise InvalidArgument(f"top_k {k} is out of range 1..{self._max_top_k} (retrieve.max_top_k)")
        if q.max_per_document < 0:
            raise InvalidArgument(
                f"max_per_document {q.max_per_document} is negative (0: the configured cap)"
            )
        cap = q.max_per_document or self._max_per_document
        mode = SearchMode.HYBRID if q.mode == SearchMode.AUTO else q.mode
        if mode == SearchMode.SQL:
            raise InvalidArgument(
                "SQL mode is not a search: the Sql RPC runs queries, the agent routes to it"
            )
        # Over-fetch so that the per-document cap still leaves k hits.
        n = max(self._candidates, k * 3 if cap else k, k * self._rerank_factor if self._rerank_pairs else 0)
        where = q.where.narrowed_to(auth.current().acl)  # the caller's ACL, inside every store's query
        communities: tuple[CommunityHit, ...] = ()
        if mode == SearchMode.DENSE:
            fused = ranked_alone("dense", await self._dense_hits(text, q.library, n, where))
        elif mode == SearchMode.GRAPH_LOCAL:
            fused = ranked_alone("graph", await self._graph_local(text, q.library, n, where))
        elif mode == SearchMode.GRAPH_GLOBAL:
            found, communities = await self._graph_global(text, q.library, n, where)
            fused = ranked_alone("graph", _candidates(found))
        else:
            fused = await self._text_search(text, q.library, n, where, mode, k, cap)
        hits = self._hits(fused)
        if self._rerank_pairs is not None:
            hits = await self._rerank(text, hits[: k * self._rerank_factor])
        hits = cap_per_document(hits, cap, _document)[:k]
        if q.expand_context:
            with tracer.start_as_current_span("retrieve.expand"):
                hits = await asyncio.to_thread(self._expand, q.library, hits, where.acl)
        return SearchResult(hits, mode, communities)

    def _graph_search(self) -> GraphSearch:
        if self._graph is None:
            raise InvalidArgument("graph search is not available in this retrieve service")
        return self._graph

    async def _graph_local(
        self, query: str, library: str, k: int, where: SearchFilter
    ) -> list[tuple[Candidate, float]]:
        graph = self._graph_search()
        with tracer.start_as_current_span("retrieve.graph_local"):
            return _candidates(await asyncio.to_thread(graph.local, query, library, k, where))

    async def _graph_global(
        self, query: str, library: str, k: int, where: SearchFilter
    ) -> tuple[list[tuple[Chunk, float]], tuple[CommunityHit, ...]]:
        graph = self._graph_search()
        with tracer.start_as_current_span("retrieve.graph_global"):
            # The communities' vectors are means of the chunks' (services/ingest/graph_index.py).
            name = await asyncio.to_thread(self._dense.library_embedder, library)
            vector = (await self._query_model(name)([query]))[0]
            hits, communities = await asyncio.to_thread(graph.global_, vector, library, k, where)
        return hits, tuple(communities)

    async def _text_search(
        self, text: str, library: str, n: int, where: SearchFilter, mode: SearchMode, k: int, cap: int
    ) -> list[Fused]:
        """Lexical or hybrid: each signal's `n` candidates, fused (hybrid) into the first `k` hits
        at most `cap` a document (`k` times the rerank factor, uncapped, for the reranker)."""
        vectors: dict[str, np.ndarray] = {}
        searches: dict[str, Awaitable[list[tuple[Candidate, float]]]] = {
            "lexical": self._lexical_hits(text, library, n, where)
        }
        if mode == SearchMode.HYBRID:
            searches["dense"] = self._dense_hits(text, library, n, where, keep=vectors)
            if self._graph_weight and self._graph is not None:
                searches["graph"] = self._graph_local(text, library, n, where)
        if self._page_search:
            searches["pages"] = self._page_hits(text, library, n, where)
        found_lists = dict(zip(searches, await asyncio.gather(*searches.values()), strict=True))
        if self._feedback.on:
            found_lists = await self._second_search(text, library, n, where, found_lists, vectors)
        if "pages" in found_lists:
            found_lists["lexical"] = merge_page_hits(found_lists["lexical"], found_lists.pop("pages"))
        if mode == SearchMode.LEXICAL:
            alone = ranked_alone("lexical", found_lists["lexical"])
            if self._rerank_pairs is not None:
                return alone[: k * self._rerank_factor]
            return cap_per_document(alone, cap, _document_key)[:k]
        if self._rerank_pairs is not None:  # capped after reranking
            return self._fuse(found_lists, k * self._rerank_factor, 0)
        return self._fuse(found_lists, k, cap)

    async def _second_search(
        self,
        text: str,
        library: str,
        n: int,
        where: SearchFilter,
        lists: dict[str, list[tuple[Candidate, float]]],
        vectors: dict[str, np.ndarray],
    ) -> dict[str, list[tuple[Candidate, float]]]:
        """The lexical and dense lists searched again, moved towards the first search's best
        documents: the fused lists' in hybrid mode (better feedback than either list alone)."""
        fb = self._feedback
        first: dict[str, list[tuple[Candidate, float]]] = {
            s: lists[s] for s in ("lexical", "dense", "graph") if s in lists
        }
        if len(first) > 1:
            best = self._fuse(first, fb.documents, 1)
        else:
            best = cap_per_document(ranked_alone("lexical", first["lexical"]), 1, _document_key)
        top = self._hits(best[: fb.documents])
        if not top:
            return lists
        with tracer.start_as_current_span("retrieve.feedback", attributes={"documents": len(top)}):
            again = {}
            if fb.lexical_weight > 0:
                again["lexical"] = asyncio.to_thread(self._expanded_search, text, library, n, where, top)
            if fb.dense_weight > 0 and "query" in vectors:
                again["dense"] = asyncio.to_thread(
                    self._moved_search, vectors["query"], library, n, where, top
                )
            found = dict(zip(again, await asyncio.gather(*again.values()), strict=True))
        return {**lists, **found}

    def _expanded_search(
        self, text: str, library: str, n: int, where: SearchFilter, top: list[SearchHit]
    ) -> list[tuple[Candidate, float]]:
        """RM3: the query plus the feedback's typical terms, which together weigh
        lexical_weight / (1 - lexical_weight) times the query's own terms (each weighs 1)."""
        fb = self._feedback
        if self._stopterms is None:
            self._stopterms = frozenset(t for ws in self._lexical.analyze(sorted(STOPWORDS)) for t in ws)
        query, *texts = self._lexical.analyze([text, *(h.chunk.text for h in top)])
        frequencies, entries = self._lexical.document_frequencies(sorted({t for ws in texts for t in ws}))
        terms = expansion_terms(
            [(ws, h.score) for ws, h in zip(texts, top, strict=True)],
            frequencies,
            entries,
            fb.terms,
            self._stopterms,
        )
        share = min(fb.lexical_weight, 0.9)  # the config's bound: at 1 the query itself would vanish
        scale = share / (1.0 - share) * max(1, len(set(query)))
        expansion = {t: w * scale for t, w in terms.items()}
        return self._lexical.search_candidates(text, library, n, where, expansion)

    def _moved_search(
        self, vector: np.ndarray, library: str, n: int, where: SearchFilter, top: list[SearchHit]
    ) -> list[tuple[Candidate, float]]:
        found = self._dense.vectors_by_id(library, [h.chunk.chunk_id for h in top])
        moved = rocchio(vector, list(found.values()), self._feedback.dense_weight)
        return self._dense.search_candidates(moved, library, n, where)

    def _hits(self, fused: Sequence[Fused]) -> list[SearchHit]:
        """The fused candidates as hits: the chunks the stores did not give at once read now, each
        store's few in one go."""
        chunks = read_chunks([f.candidate for f in fused])
        return [SearchHit(c, f.score, f.signals) for c, f in zip(chunks, fused, strict=True)]

    def _fuse(self, lists: dict[str, list[tuple[Candidate, float]]], limit: int, cap: int) -> list[Fused]:
        with tracer.start_as_current_span("retrieve.fuse", attributes={"fusion": self._fusion}):
            if self._fusion == "score":
                return normalized_score_fusion(lists, self._weights, limit, cap)
            return reciprocal_rank_fusion(lists, self._rrf_k, limit, cap)

    async def _page_hits(
        self, query: str, library: str, k: int, where: SearchFilter
    ) -> list[tuple[Candidate, float]]:
        """Whole-page BM25 hits, each mapped to the chunk of its page that holds most query words."""
        with tracer.start_as_current_span("retrieve.pages"):
            return _candidates(await asyncio.to_thread(self._map_pages, query, library, k, where))

    def _map_pages(self, query: str, library: str, k: int, where: SearchFilter) -> list[tuple[Chunk, float]]:
        words = content_words(query)
        out = []
        for document_id, page, score in self._lexical.search_pages(query, library, k, where):
            chunks = self._dense.chunks_of(library, document_id, where.acl)
            on_page = [c for c in chunks if page == 0 or page in c.pages] or chunks
            if on_page:
                best = max(on_page, key=lambda c: (len(words & content_words(c.text)), -c.position))
                if where.accepts(best):
                    out.append((best, score))
        return out

    async def _rerank(self, query: str, hits: list[SearchHit]) -> list[SearchHit]:
        assert self._rerank_pairs is not None
        with tracer.start_as_current_span("retrieve.rerank", attributes={"candidates": len(hits)}):
            scores = await self._rerank_pairs([(query, h.chunk.text) for h in hits])
        order = sorted(range(len(hits)), key=lambda i: (-float(scores[i]), i))
        return [
            replace(
                hits[i],
                score=float(scores[i]),
                signals=(*hits[i].signals, SignalScore("rerank", float(scores[i]), rank)),
            )
            for rank, i in enumerate(order, start=1)
        ]

    def _expand(self, library: str, hits: list[SearchHit], acl: tuple[str, ...] | None) -> list[SearchHit]:
        return [replace(h, context=self._context(library, h.chunk, acl)) for h in hits]

    def _context(self, library: str, chunk: Chunk, acl: tuple[str, ...] | None) -> str:
        """The chunk with its neighbours from the same section, nearest first, within the budget."""
        section = {
            c.position: c
            for c in self._dense.around(library, chunk.document_id, chunk.position, CONTEXT_RADIUS, acl)
            if c.heading_path == chunk.heading_path
        }
        picked = {chunk.position: chunk}
        size = len(chunk.text)
        for step in range(1, CONTEXT_RADIUS + 1):
            for pos in (chunk.position - step, chunk.position + step):
                neighbour = section.get(pos)
                if neighbour is not None and size + len(neighbour.text) + 2 <= self._max_context_chars:
                    picked[pos] = neighbour
                    size += len(neighbour.text) + 2
        return "\n\n".join(picked[p].text for p in sorted(picked))

    def close(self) -> None:
        for batcher in {self._embed, *self._query_models.values(), self._rerank_pairs}:
            if batcher is not None:
                batcher.close()

    async def graph(self, library: str) -> GraphView:
        """The library's knowledge graph as the caller may see it."""
        return await asyncio.to_thread(self._graph_search().view, library, auth.current().acl)

    async def chunk(self, library: str, chunk_id: str) -> Chunk:
        """One chunk by id, when the caller may see its document; NotFound otherwise (alike)."""
        if not chunk_id.strip():
            raise InvalidArgument("chunk_id is empty")
        if len(chunk_id) > MAX_CHUNK_ID:
            raise InvalidArgument(f"chunk_id is {len(chunk_id)} characters, over the limit of {MAX_CHUNK_ID}")
        found = await asyncio.to_thread(self._dense.chunks_by_id, library, [chunk_id], auth.current().acl)
        if not found:
            raise NotFound(f"chunk {chunk_id!r} not found in library {library!r}")
        return found[0]

    async def score(self, query: str, texts: Sequence[str]) -> tuple[list[float], str]:
        """Cosine similarity of each text to the query, in order."""
        if not query.strip():
            raise InvalidArgument("query is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidArgument(f"query is {len(query)} characters, over the limit of {MAX_QUERY_CHARS}")
        longest = max(range(len(texts)), key=lambda i: len(texts[i]), default=None)
        if longest is not None and len(texts[longest]) > MAX_SCORE_TEXT_CHARS:
            raise InvalidArgument(
                f"text {longest} is {len(texts[longest])} characters, over the limit of "
                f"{MAX_SCORE_TEXT_CHARS} (the embedder reads the first 256 word pieces)"
            )
        if len(texts) > self._max_score_texts:
            raise InvalidArgument(
                f"{len(texts)} texts is over the limit of {self._max_score_texts} (retrieve.max_score_texts)"
            )
        if not texts:
            return [], f"cosine:{self._embedder.name}"
        with tracer.start_as_current_span("retrieve.score", attributes={"texts": len(texts)}):
            vectors = await self._embed([query, *texts])
        return [float(x) for x in vectors[1:] @ vectors[0]], f"cosine:{self._embedder.name}"

    async def _lexical_hits(
        self, query: str, library: str, k: int, where: SearchFilter
    ) -> list[tuple[Candidate, float]]:
        with tracer.start_as_current_span("retrieve.lexical"):
            return await asyncio.to_thread(self._lexical.search_candidates, query, library, k, where)

    async def _dense_hits(
        self,
        query: str,
        library: str,
        k: int,
        where: SearchFilter,
        keep: dict[str, np.ndarray] | None = None,
    ) -> list[tuple[Candidate, float]]:
        """Nearest chunks to the query's vector, which `keep` gets (as "query") for feedback. The
        query goes through the model of the library's vectors: the one they had at the last search,
        and again through the right one when a tuning swapped them since."""
        with tracer.start_as_current_span("retrieve.dense"):
            name = self._library_embedder.get(library, "")
            for _ in range(3):
                vector = (await self._query_model(name)([query]))[0]
                try:
                    found = await asyncio.to_thread(
                        self._dense.search_candidates, vector, library, k, where, name
                    )
                except EmbedderChanged as changed:
                    name = self._library_embedder[library] = changed.embedder
                    continue
                if keep is not None:
                    keep["query"] = vector
                return found
            raise Unavailable(f"library {library!r}'s vectors kept changing models during the search")

    def _query_model(self, name: str) -> Batcher[str]:
        model = self._query_models.get(name)
        if model is None:
            if self._tuned_queries is None:
                raise FailedPrecondition(f"this retrieve service has no tuned embedders, and {name!r} is one")
            loaded = self._tuned_queries(name)
            model = self._query_models.setdefault(
                name, Batcher(loaded.embed, f"query-{name}", self._max_batch, self._batch_window_s)
            )
        return model


def _candidates(hits: Sequence[tuple[Chunk, float]]) -> list[tuple[Candidate, float]]:
    """A store's (chunk, score) list as candidates with their chunks."""
    return [(Candidate.of(c), s) for c, s in hits]


def _document(hit: SearchHit) -> str:
    return hit.chunk.document_id


def _document_key(fused: Fused) -> int:
    return fused.candidate.document_key


def merge_page_hits(
    chunks: list[tuple[Candidate, float]], pages: list[tuple[Candidate, float]]
) -> list[tuple[Candidate, float]]:
    """One lexical list from chunk hits and page hits (each mapped to a chunk): both min-max
    normalised, each chunk at the better of its two scores, ties broken by the other one (then by
    key). A chunk whose page matches the query better than the chunk alone (terms split across
    chunks) rises; documents without pages lose nothing. Without page hits the chunk list is
    returned as it is (raw BM25 scores)."""
    if not pages:
        return chunks
    norms: dict[int, list[float]] = {}
    found: dict[int, Candidate] = {}
    for hits in (chunks, pages):
        if not hits:
            continue
        scores = [s for _, s in hits]
        lo, hi = min(scores), max(scores)
        seen: set[int] = set()
        for candidate, score in hits:
            if candidate.key in seen:
                continue
            seen.add(candidate.key)
            found.setdefault(candidate.key, candidate)
            norms.setdefault(candidate.key, []).append((score - lo) / (hi - lo) if hi > lo else 1.0)
    order = sorted(norms, key=lambda key: (-max(norms[key]), -sum(norms[key]), key))
    return [(found[key], max(norms[key])) for key in order]
