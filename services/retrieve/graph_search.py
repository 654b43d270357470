"""Graph local and global search over the knowledge graph that ingest builds.

Local: the entities named in the query (n-grams matched against entity names and aliases), each
worth its rarity (idf over chunks); their heaviest neighbours worth a share of theirs, so a chunk
one hop away (the band of the drummer asked about) is found too; chunks ranked by the sum.
Global: every community's vector (the mean of its chunks' vectors) scored against the query
vector; the chunks behind the best few (passing over a community that brings no chunk the better
ones did not), taken in turn from each, the better community first.

Document ACLs (`SearchFilter.acl`): local search walks the graph of the documents the caller sees
(`GraphReader.graph(library, acl)`: an entity only hidden documents name is no seed and no hop), and
every chunk is looked up with the caller's ACL. Global search considers only the communities whose
every document the caller sees: a summary (extractive or the LLM's) is written from all the
documents that name its members, so one built partly from a hidden document is never a candidate,
and rewriting summaries per caller would cost an LLM call per query. A caller with few groups may
therefore see fewer communities; the chunks behind the ones it sees are all its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from ragstack.domain import (
    Chunk,
    CommunityHit,
    GraphCommunity,
    GraphEntity,
    GraphRelation,
    GraphView,
    SearchFilter,
    acl_allows,
)
from ragstack.knowledge_graph import Community, KnowledgeGraph

HOP_SHARE = 0.3  # a neighbour's chunk counts this much of the neighbour's idf (at most)
FETCH_FACTOR = 4  # chunks looked up per hit wanted, so that filters still leave enough


class GraphReader(Protocol):
    def graph(self, library: str, acl: tuple[str, ...] | None = None) -> KnowledgeGraph: ...
    def document_groups(self, library: str) -> dict[str, tuple[str, ...]]: ...
    def communities(self, library: str) -> tuple[list[Community], np.ndarray]: ...


class ChunkLookup(Protocol):
    def chunks_by_id(
        self, library: str, chunk_ids: Sequence[str], acl: tuple[str, ...] | None = None
    ) -> list[Chunk]: ...


class GraphSearch:
    def __init__(
        self, store: GraphReader, chunks: ChunkLookup, neighbours: int = 20, communities: int = 3
    ) -> None:
        self._store = store
        self._chunks = chunks
        self._neighbours = neighbours
        self._communities = communities

    def local(self, query: str, library: str, k: int, where: SearchFilter) -> list[tuple[Chunk, float]]:
        kg = self._store.graph(library, where.acl)
        seeds = kg.find_entities(query)
        scores: dict[str, float] = defaultdict(float)
        for seed in seeds:
            for chunk_id in kg.chunks_of(seed):
                scores[chunk_id] += kg.idf(seed)
            edges = sorted(kg.graph[seed].items(), key=lambda kv: (-kv[1]["weight"], kv[0]))
            for neighbour, edge in edges[: self._neighbours]:
                if neighbour in seeds:
                    continue
                share = HOP_SHARE * kg.idf(neighbour) * edge["weight"] / (edge["weight"] + 1.0)
                for chunk_id in kg.chunks_of(neighbour):
                    scores[chunk_id] += share
        return self._resolve(library, scores, k, where)

    def global_(
        self, vector: np.ndarray, library: str, k: int, where: SearchFilter
    ) -> tuple[list[tuple[Chunk, float]], list[CommunityHit]]:
        communities, matrix = self._store.communities(library)
        if not communities:
            return [], []
        similarity = matrix @ vector.astype(np.float32)
        visible = self._visible(library, communities, where.acl)
        best = sorted(visible, key=lambda i: (-float(similarity[i]), communities[i].community_id))
        picked: list[int] = []
        covered: set[str] = set()
        for i in best:  # a community whose chunks are all in already adds nothing
            if not covered.issuperset(communities[i].chunk_ids):
                picked.append(i)
                covered.update(communities[i].chunk_ids)
                if len(picked) == self._communities:
                    break
        scores: dict[str, float] = {}
        for i in picked:
            for rank, chunk_id in enumerate(communities[i].chunk_ids):
                score = float(similarity[i]) / (1.0 + rank)
                scores[chunk_id] = max(scores.get(chunk_id, float("-inf")), score)
        kg = self._store.graph(library, where.acl)
        names = kg.graph.nodes
        found = [
            CommunityHit(
                communities[i].community_id,
                communities[i].summary,
                float(similarity[i]),
                tuple(names[m]["name"] if m in names else m for m in communities[i].members),
                communities[i].chunk_ids,
            )
            for i in picked
        ]
        return self._resolve(library, scores, k, where), found

    def view(self, library: str, acl: tuple[str, ...] | None) -> GraphView:
        """The graph a caller who sees `acl` may be shown: what local and global search walk."""
        kg = self._store.graph(library, acl)
        communities, _ = self._store.communities(library)
        return GraphView(
            [
                GraphEntity(key, data["name"], data["type"], tuple(sorted(data["chunk_ids"])))
                for key, data in kg.graph.nodes(data=True)
            ],
            [
                GraphRelation(a, b, float(data["weight"]), data["label"], data["evidence"])
                for a, b, data in kg.graph.edges(data=True)
            ],
            [
                GraphCommunity(c.community_id, c.members, c.summary, c.chunk_ids, c.document_ids)
                for c in (communities[i] for i in self._visible(library, communities, acl))
            ],
            kg.chunk_total,
        )

    def _visible(self, library: str, communities: list[Community], acl: tuple[str, ...] | None) -> list[int]:
        """The communities a caller who sees `acl` may be shown: those whose every document it
        sees (a document without graph rows any more counts as hidden: a stale community)."""
        if acl is None:
            return list(range(len(communities)))
        groups = self._store.document_groups(library)
        return [
            i
            for i, c in enumerate(communities)
            if all(d in groups and acl_allows(acl, groups[d]) for d in c.document_ids)
        ]

    def _resolve(
        self, library: str, scores: dict[str, float], k: int, where: SearchFilter
    ) -> list[tuple[Chunk, float]]:
        """The best-scored chunk ids as chunks, filtered, best first (ties by chunk id). The ACL
        goes into the lookup: a hidden chunk never comes back."""
        ranked = sorted(scores, key=lambda c: (-scores[c], c))
        if not (where.document_ids or where.media_types or where.heading_prefix):
            ranked = ranked[: k * FETCH_FACTOR]
        chunks = self._chunks.chunks_by_id(library, ranked, where.acl)
        by_id = {c.chunk_id: c for c in chunks if where.accepts(c)}
        return [(by_id[c], scores[c]) for c in ranked if c in by_id][:k]
