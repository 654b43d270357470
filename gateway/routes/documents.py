"""Libraries, documents and chunks: what has been ingested."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.deps import Clients
from gateway.encoding import doc_json, pb_json
from ragstack import convert

router = APIRouter(tags=["documents"])


@router.get("/v1/libraries")
async def list_libraries(upstreams: Clients) -> dict[str, Any]:
    """The libraries holding documents or databases, with their sizes."""
    return {"libraries": await upstreams.ingest.libraries()}


@router.get("/v1/documents")
async def list_documents(upstreams: Clients, library: str = "") -> dict[str, Any]:
    docs = await upstreams.ingest.list_documents(library)
    return {"documents": [doc_json(x) for x in docs]}


@router.get("/v1/documents/{document_id}")
async def get_document(document_id: str, upstreams: Clients, library: str = "") -> dict[str, Any]:
    return doc_json(await upstreams.ingest.get_document(document_id, library))


@router.get("/v1/chunks/{chunk_id}")
async def get_chunk(chunk_id: str, upstreams: Clients, library: str = "") -> dict[str, Any]:
    """One chunk by id (a citation's or a search hit's): text, document, heading path, pages."""
    return pb_json(convert.chunk_to_pb(await upstreams.retrieve.get_chunk(chunk_id, library)))


@router.delete("/v1/documents/{document_id}")
async def delete_document(document_id: str, upstreams: Clients, library: str = "") -> dict[str, Any]:
    removed = await upstreams.ingest.delete_document(document_id, library)
    return {"document_id": document_id, "chunks_removed": removed}
