"""The knowledge graph of a library, as the caller may see it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from gateway.deps import Clients

router = APIRouter(tags=["graph"])


@router.get("/v1/graph")
async def get_graph(upstreams: Clients, library: str = "") -> dict[str, Any]:
    """The library's entities (key, name, type, chunks), relations (two entity keys, weight, label,
    evidence sentence) and communities (members, summary, chunks, documents): those of the
    documents the caller may see, and only the communities it sees whole."""
    return asdict(await upstreams.retrieve.graph(library))
