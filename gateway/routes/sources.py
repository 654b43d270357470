"""Sources kept in sync: /v1/sources (admins register, pause, resume, retry and remove them; a
caller lists those of the libraries it may use)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from gateway.deps import Clients
from gateway.encoding import pb_json
from ragstack.config import SourceConfig

router = APIRouter(tags=["sources"])


@router.get("/v1/sources")
async def list_sources(upstreams: Clients, library: str = "") -> dict[str, Any]:
    """The sources of the libraries the caller may use, with their breaker, retries and dead letters."""
    return {"sources": [pb_json(s) for s in await upstreams.ingest.sources(library)]}


@router.post("/v1/sources", status_code=201)
async def add_source(body: SourceConfig, upstreams: Clients) -> dict[str, Any]:
    """Registers a source (or updates one of the same name), as in the config's `sources:`; it is
    polled at once."""
    return pb_json(await upstreams.ingest.add_source(body))


@router.get("/v1/sources/{name}")
async def get_source(name: str, upstreams: Clients) -> dict[str, Any]:
    return pb_json(await upstreams.ingest.source(name))


@router.delete("/v1/sources/{name}")
async def remove_source(name: str, upstreams: Clients, remove_documents: bool = False) -> dict[str, Any]:
    """Forgets the source; `remove_documents=true` also removes its documents from every store."""
    removed = await upstreams.ingest.remove_source(name, remove_documents)
    return {"name": name, "removed": True, "documents_removed": removed}


@router.post("/v1/sources/{name}/pause")
async def pause_source(name: str, upstreams: Clients) -> dict[str, Any]:
    return pb_json(await upstreams.ingest.pause_source(name))


@router.post("/v1/sources/{name}/resume")
async def resume_source(name: str, upstreams: Clients) -> dict[str, Any]:
    return pb_json(await upstreams.ingest.pause_source(name, paused=False))


@router.post("/v1/sources/{name}/retry")
async def retry_source(name: str, upstreams: Clients) -> dict[str, Any]:
    """Dead letters get new attempts, an open breaker half-opens, the source is polled at once."""
    source, requeued = await upstreams.ingest.retry_source(name)
    return {"source": pb_json(source), "requeued": requeued}


@router.post("/v1/sources/{name}/sync", status_code=202)
async def sync_source(name: str, upstreams: Clients) -> dict[str, Any]:
    """Queues the source's sync now; returns the job (GET /v1/ingest/jobs/{job_id} follows it)."""
    return asdict(await upstreams.ingest.sync_source(name))
