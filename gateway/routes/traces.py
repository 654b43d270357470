"""The JSON trace of an answered query."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gateway.deps import Clients

router = APIRouter(tags=["traces"])


@router.get("/v1/traces/{trace_id}")
async def get_trace(trace_id: str, upstreams: Clients) -> dict[str, Any]:
    return await upstreams.agent.get_trace(trace_id)
