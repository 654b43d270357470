"""The knowledge graph: entity keys, the rows ingest stores, and the networkx graph built from them.

Rows are per document (an entity as one document mentions it, a relation as one document states
it), so deleting a document deletes exactly its rows, and an entity lives while any document
still mentions it. The graph sums them: a node per entity key, an edge per entity pair weighted
by the sentences that name both.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import networkx as nx

from ragstack.text import STOPWORDS

_TOKEN = re.compile(r"\w+")
_POSSESSIVE = re.compile(r"['’]s\b")
MAX_QUERY_NGRAM = 6


def entity_key(name: str) -> str:
    """The name an entity is merged under: case, accents' width forms, punctuation, a leading
    article and a possessive do not matter ("The Beatles'", "the beatles" → "beatles")."""
    tokens = _TOKEN.findall(_POSSESSIVE.sub("", unicodedata.normalize("NFKC", name).lower()))
    if len(tokens) > 1 and tokens[0] in ("the", "a", "an"):
        tokens = tokens[1:]
    return " ".join(tokens)


@dataclass(frozen=True)
class EntityMention:
    """One entity as one document mentions it."""

    library: str
    document_id: str
    key: str
    name: str
    type: str
    chunk_ids: tuple[str, ...]
    count: int
    aliases: tuple[str, ...] = ()  # other keys this document used for it ("porcaro")


@dataclass(frozen=True)
class Relation:
    """A pair of entities named in the same sentences of one document. `source` < `target`."""

    library: str
    document_id: str
    source: str
    target: str
    label: str  # the words that most often join the two names, or "co-occurs"
    weight: float  # sentences naming both
    chunk_ids: tuple[str, ...]
    evidence: str  # one such sentence
    evidence_chunk: str


@dataclass(frozen=True)
class Community:
    """A Louvain community of entities with its summary."""

    library: str
    community_id: str
    members: tuple[str, ...]  # entity keys, most connected first
    summary: str
    chunk_ids: tuple[str, ...]  # the chunks behind the summary, most representative first
    document_ids: tuple[str, ...]


@dataclass
class _Edge:
    weight: float = 0.0
    chunk_ids: set[str] = field(default_factory=set)
    labels: Counter[str] = field(default_factory=Counter)
    document_id: str | None = None
    evidence: str = ""
    evidence_chunk: str = ""


class KnowledgeGraph:
    """The summed graph of one library. Nodes carry `name`, `type`, `chunk_ids`; edges `weight`,
    `label`, `chunk_ids`, `evidence`, `evidence_chunk`. Nodes and edges are inserted in sorted
    order, so algorithms seeded the same way give the same result on the same rows."""

    def __init__(self, mentions: Iterable[EntityMention], relations: Iterable[Relation]) -> None:
        names: dict[str, Counter[str]] = {}
        types: dict[str, Counter[str]] = {}
        chunks: dict[str, set[str]] = {}
        alias_of: dict[str, set[str]] = {}
        for m in mentions:
            names.setdefault(m.key, Counter())[m.name] += m.count
            types.setdefault(m.key, Counter())[m.type] += m.count
            chunks.setdefault(m.key, set()).update(m.chunk_ids)
            for alias in m.aliases:
                alias_of.setdefault(alias, set()).add(m.key)
        edges: dict[tuple[str, str], _Edge] = {}
        for r in relations:
            if r.source not in chunks or r.target not in chunks:
                continue
            edge = edges.setdefault((r.source, r.target), _Edge())
            edge.weight += r.weight
            edge.chunk_ids.update(r.chunk_ids)
            edge.labels[r.label] += int(r.weight) or 1
            if edge.document_id is None or r.document_id < edge.document_id:  # the same evidence every build
                edge.document_id, edge.evidence, edge.evidence_chunk = (
                    r.document_id,
                    r.evidence,
                    r.evidence_chunk,
                )
        self.graph = nx.Graph()
        for key in sorted(chunks):
            self.graph.add_node(
                key,
                name=_most_common(names[key]),
                type=_most_common(types[key]),
                chunk_ids=frozenset(chunks[key]),
            )
        for (source, target), edge in sorted(edges.items()):
            self.graph.add_edge(
                source,
                target,
                weight=edge.weight,
                label=_most_common(edge.labels),
                chunk_ids=frozenset(edge.chunk_ids),
                evidence=edge.evidence,
                evidence_chunk=edge.evidence_chunk,
            )
        # An alias that is itself an entity matches as that entity; a very ambiguous one not at all.
        self._alias_of = {a: keys for a, keys in alias_of.items() if a not in chunks and len(keys) <= 3}
        self.chunk_total = len({c for ids in chunks.values() for c in ids})

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def chunks_of(self, key: str) -> frozenset[str]:
        return self.graph.nodes[key]["chunk_ids"] if key in self.graph else frozenset()

    def idf(self, key: str) -> float:
        """Rarer entities say more about a chunk: log(1 + chunks / chunks mentioning it)."""
        return math.log1p(self.chunk_total / max(1, len(self.chunks_of(key))))

    def find_entities(self, text: str) -> list[str]:
        """Entity keys named in `text`: its word n-grams matched against entity keys and aliases,
        longest first, without overlaps. A lone stop word or a one-letter word never matches."""
        tokens = entity_key(text).split()
        found: list[str] = []
        taken = [False] * len(tokens)
        for n in range(min(MAX_QUERY_NGRAM, len(tokens)), 0, -1):
            for i in range(len(tokens) - n + 1):
                if any(taken[i : i + n]):
                    continue
                gram = " ".join(tokens[i : i + n])
                if n == 1 and (gram in STOPWORDS or len(gram) < 2):
                    continue
                keys = [gram] if gram in self.graph else sorted(self._alias_of.get(gram, ()))
                keys = [k for k in keys if k not in found]
                if keys:
                    found.extend(keys)
                    taken[i : i + n] = [True] * n
        return found


def _most_common(counts: Counter[str]) -> str:
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
