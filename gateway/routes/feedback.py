"""Feedback on answers: up or down, with an optional comment, kept with the answer's trace id."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from gateway.deps import Clients

router = APIRouter(tags=["feedback"])


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trace_id: str = Field(
        ..., pattern=r"^[0-9a-f]{32}$", description="The answer's trace id (the `start` event's)."
    )
    rating: Literal["up", "down"] = Field(..., description="Whether the answer helped.")
    comment: str = Field("", max_length=2000, description="Why, in your words.")


@router.post("/v1/feedback", status_code=201)
async def give_feedback(body: FeedbackRequest, upstreams: Clients) -> dict[str, Any]:
    """Your verdict on one of your answers; giving it again replaces it. Another's answer, or one
    whose trace is gone, is a 404."""
    return asdict(await upstreams.agent.send_feedback(body.trace_id, body.rating, body.comment))


@router.get("/v1/feedback")
async def list_feedback(
    upstreams: Clients, limit: Annotated[int, Query(ge=1, le=1000)] = 50, library: str = ""
) -> dict[str, Any]:
    """The feedback given, newest first, optionally one library's (admins)."""
    found = await upstreams.agent.list_feedback(limit, library)
    return {"feedback": [asdict(f) for f in found]}
