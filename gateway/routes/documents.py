"""Libraries, documents and chunks: what has been ingested."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

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
    """One chunk by id (a citation's or a search hit's): text, document, heading path, pages, and
    for a chunk of a PDF `regions`: where it lies on its pages, as fractions of the page (origin
    top left)."""
    chunk, regions = await upstreams.retrieve.locate_chunk(chunk_id, library)
    return {**pb_json(convert.chunk_to_pb(chunk)), "regions": [asdict(r) for r in regions]}


@router.get(
    "/v1/chunks/{chunk_id}/visual",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}, "description": "The page, the chunk's regions drawn."}},
)
async def get_chunk_visual(
    chunk_id: str,
    upstreams: Clients,
    library: str = "",
    page: Annotated[int, Query(ge=0, le=100_000, description="One of the chunk's pages; 0: its first.")] = 0,
    width: Annotated[int, Query(ge=0, le=2000, description="Pixels wide, 100 to 2,000; 0: 1,000.")] = 0,
) -> Response:
    """A chunk of a PDF drawn where it stands: its page as a PNG picture, the chunk's regions
    filled and outlined. 412 FAILED_PRECONDITION for a chunk of another format (or of a PDF whose
    pages were not kept)."""
    visual = await upstreams.retrieve.chunk_visual(chunk_id, library, page, width)
    return Response(
        visual.png,
        media_type="image/png",
        headers={"x-page": str(visual.page), "cache-control": "private, max-age=300"},
    )


@router.delete("/v1/documents/{document_id}")
async def delete_document(document_id: str, upstreams: Clients, library: str = "") -> dict[str, Any]:
    removed = await upstreams.ingest.delete_document(document_id, library)
    return {"document_id": document_id, "chunks_removed": removed}
