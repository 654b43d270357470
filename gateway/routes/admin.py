"""Health and metrics: what orchestrators and Prometheus poll."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.deps import Clients

router = APIRouter()


@router.get("/metrics", tags=["observability"], response_class=PlainTextResponse)
async def metrics() -> Response:
    """Prometheus metrics: HTTP requests and latencies per route; in one process with the
    services (`ragstack serve`), gRPC calls and latencies per method too."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get("/health/live", tags=["health"])
async def live() -> dict[str, str]:
    return {"status": "live"}


@router.get("/health/ready", tags=["health"])
async def ready(upstreams: Clients) -> JSONResponse:
    statuses = await upstreams.readiness()
    ok = all(s == "SERVING" for s in statuses.values())
    return JSONResponse({"ready": ok, "services": statuses}, status_code=200 if ok else 503)
