"""Ingest: streamed (POST /v1/ingest) and as durable jobs (/v1/ingest/jobs)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, UploadFile
from sse_starlette.sse import EventSourceResponse

from gateway.deps import CallerOf, Clients
from gateway.encoding import sse
from ragstack.domain import acl_groups
from ragstack.errors import InvalidArgument

router = APIRouter(tags=["documents"])

Files = Annotated[list[UploadFile] | None, File()]
Urls = Annotated[list[str] | None, Form()]
Groups = Annotated[list[str] | None, Form()]


@router.post("/v1/ingest")
async def ingest(
    upstreams: Clients,
    caller: CallerOf,
    files: Files = None,
    urls: Urls = None,
    library: Annotated[str, Form()] = "",
    enrich: Annotated[bool, Form()] = False,
    groups: Groups = None,
) -> EventSourceResponse:
    """Ingests uploaded files (multipart field `files`, repeatable) and web pages (field `urls`,
    repeatable: each crawled politely on its own host) into `library`, optionally with contextual
    enrichment (`enrich`); streams one `file` event per file and stage, then a `summary` event.
    `groups` (repeatable): the ACL groups that may see the documents; none: everyone who may
    use the library."""
    caller.permit("IngestService/Ingest", library)
    acl = acl_groups(groups or ())  # a 400 now, not an error event once the stream has started
    payload = await _uploads(files, urls)
    stream = upstreams.ingest.ingest_pb(payload, library, urls or (), enrich, acl)
    return EventSourceResponse(sse(stream), ping=15)


@router.post("/v1/ingest/jobs", status_code=202)
async def submit_ingest(
    upstreams: Clients,
    files: Files = None,
    urls: Urls = None,
    library: Annotated[str, Form()] = "",
    groups: Groups = None,
) -> dict[str, Any]:
    """Queues an ingest of uploaded files and web pages (durable: it survives a restart of the
    ingest service) and returns the job at once; GET /v1/ingest/jobs/{job_id} follows it.
    `groups` (repeatable): the documents' ACL groups, as for POST /v1/ingest."""
    payload = await _uploads(files, urls)
    job = await upstreams.ingest.submit(files=payload, urls=urls or (), library=library, groups=groups or ())
    return asdict(job)


@router.get("/v1/ingest/jobs")
async def list_ingest_jobs(upstreams: Clients, limit: int = 50) -> dict[str, Any]:
    return {"jobs": [asdict(j) for j in await upstreams.ingest.jobs(max(0, min(limit, 500)))]}


@router.get("/v1/ingest/jobs/{job_id}")
async def get_ingest_job(job_id: str, upstreams: Clients) -> dict[str, Any]:
    return asdict(await upstreams.ingest.job(job_id))


@router.delete("/v1/ingest/jobs/{job_id}")
async def cancel_ingest_job(job_id: str, upstreams: Clients) -> dict[str, Any]:
    """Cancels a queued ingest (it never runs) or a running one (it stops within the services'
    grace, no document half indexed); returns the job as it ended."""
    return asdict(await upstreams.ingest.cancel_job(job_id))


async def _uploads(files: list[UploadFile] | None, urls: list[str] | None) -> list[tuple[str, bytes]]:
    """The uploaded files' names and bytes; refused when neither files nor URLs were sent."""
    payload = [(f.filename or "upload", await f.read()) for f in files or ()]
    if not payload and not urls:
        raise InvalidArgument("nothing to ingest: send `files` or `urls`")
    return payload
