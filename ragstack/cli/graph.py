"""`ragstack graph ...`: the knowledge graph as ingest stored it, read straight from the data dir
(LanceDB readers never block the ingest writer)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx

from ragstack.config import Config
from ragstack.knowledge_graph import KnowledgeGraph
from ragstack.stores.graph import GraphStore


def open_graph(cfg: Config) -> GraphStore:
    return GraphStore(cfg.storage.lancedb(cfg.data_dir), storage_options=cfg.storage.options)


def graph_stats(store: GraphStore, library: str) -> dict[str, Any]:
    kg = store.graph(library)
    communities, _ = store.communities(library)
    g = kg.graph
    strength = dict(g.degree(weight="weight"))
    top = sorted(g.nodes, key=lambda n: (-strength[n], n))[:10]
    return {
        "library": library,
        "libraries": store.libraries(),
        "entities": len(kg),
        "relations": g.number_of_edges(),
        "communities": len(communities),
        "chunks_with_entities": kg.chunk_total,
        "entity_types": dict(Counter(t for _, t in g.nodes(data="type")).most_common()),
        "most_connected": [
            {
                "name": g.nodes[n]["name"],
                "type": g.nodes[n]["type"],
                "degree": g.degree(n),
                "weight": strength[n],
            }
            for n in top
        ],
    }


def communities_listing(store: GraphStore, library: str) -> list[dict[str, Any]]:
    found, _ = store.communities(library)
    return [
        {
            "community_id": c.community_id,
            "members": list(c.members),
            "summary": c.summary,
            "chunk_ids": list(c.chunk_ids),
            "document_ids": list(c.document_ids),
        }
        for c in sorted(found, key=lambda c: (-len(c.members), c.community_id))
    ]


def export_graphml(store: GraphStore, library: str, out: Path) -> tuple[int, int]:
    kg: KnowledgeGraph = store.graph(library)
    communities, _ = store.communities(library)
    community_of = {m: c.community_id for c in communities for m in c.members}
    g = nx.Graph()
    for key, data in kg.graph.nodes(data=True):
        g.add_node(
            key,
            name=data["name"],
            type=data["type"],
            community=community_of.get(key, ""),
            chunks=" ".join(sorted(data["chunk_ids"])),
        )
    for a, b, data in kg.graph.edges(data=True):
        g.add_edge(a, b, weight=float(data["weight"]), label=data["label"], evidence=data["evidence"])
    out.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(g, out)
    return g.number_of_nodes(), g.number_of_edges()
