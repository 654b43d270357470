"""`ragstack graph ...`: the knowledge graph through RetrieveService.GetGraph, as the caller may see
it (the running server's, or an embedded retrieve service's on the configured data dir)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx

from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.domain import GraphView
from ragstack.rpc.clients import RetrieveClient


async def fetch(cfg: Config, library: str) -> GraphView:
    async with connect(cfg, needed=("retrieve",), start=("retrieve",)) as session:
        return await RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s).graph(library)


def _networkx(view: GraphView) -> nx.Graph:
    g = nx.Graph()
    for e in view.entities:
        g.add_node(e.key, name=e.name, type=e.type, chunk_ids=e.chunk_ids)
    for r in view.relations:
        g.add_edge(r.source, r.target, weight=r.weight, label=r.label, evidence=r.evidence)
    return g


def graph_stats(view: GraphView, library: str) -> dict[str, Any]:
    g = _networkx(view)
    strength = dict(g.degree(weight="weight"))
    top = sorted(g.nodes, key=lambda n: (-strength[n], n))[:10]
    return {
        "library": library,
        "entities": g.number_of_nodes(),
        "relations": g.number_of_edges(),
        "communities": len(view.communities),
        "chunks_with_entities": view.chunks_with_entities,
        "entity_types": dict(Counter(e.type for e in view.entities).most_common()),
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


def communities_listing(view: GraphView) -> list[dict[str, Any]]:
    return [
        {
            "community_id": c.community_id,
            "members": list(c.members),
            "summary": c.summary,
            "chunk_ids": list(c.chunk_ids),
            "document_ids": list(c.document_ids),
        }
        for c in sorted(view.communities, key=lambda c: (-len(c.members), c.community_id))
    ]


def export_graphml(view: GraphView, out: Path) -> tuple[int, int]:
    community_of = {m: c.community_id for c in view.communities for m in c.members}
    g = nx.Graph()
    for e in view.entities:
        g.add_node(
            e.key,
            name=e.name,
            type=e.type,
            community=community_of.get(e.key, ""),
            chunks=" ".join(e.chunk_ids),
        )
    for r in view.relations:
        g.add_edge(r.source, r.target, weight=r.weight, label=r.label, evidence=r.evidence)
    out.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(g, out)
    return g.number_of_nodes(), g.number_of_edges()
