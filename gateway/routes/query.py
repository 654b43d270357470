"""POST /v1/query: a question answered, streamed as SSE or returned as one JSON object."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette.sse import EventSourceResponse

from gateway.deps import CallerOf, Clients
from gateway.encoding import event_json, sse
from ragstack.domain import MAX_QUESTION_CHARS, QueryMode, SearchMode

router = APIRouter(tags=["query"])
tracer = trace.get_tracer("ragstack.gateway")


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS, description="The question.")
    library: str = Field("", max_length=64, description="Library to answer from; empty means the default.")
    mode: Literal["auto", "lexical", "dense", "hybrid", "graph", "graph-global", "sql"] = Field(
        "auto", description="Retrieval strategy (graph: graph local search; sql: the attached databases)."
    )
    top_k: int = Field(0, ge=0, le=100, description="Chunks to retrieve; 0 means the configured default.")
    query_mode: Literal["auto", "general", "compare", "methodology", "datasets", "reproduce"] = Field(
        "auto",
        description="The answer's shape: a few cited sentences (general), a table across documents "
        "(compare), steps/settings/data (methodology), the datasets named (datasets), a reproduction "
        "checklist (reproduce); auto lets the router choose.",
    )
    session_id: str = Field(
        "",
        max_length=128,
        pattern=r"^[A-Za-z0-9._-]*$",
        description="A conversation to continue: follow-ups are rewritten from its recent turns.",
    )
    skip_memory: bool = Field(
        False,
        description="Answer on its own: no recall of similar earlier questions, and this one is not "
        "remembered (evaluations, batch runs).",
    )
    stream: bool = Field(True, description="Server-Sent Events (true) or one JSON response (false).")


def _wants_json(body: QueryRequest, request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return not body.stream or ("application/json" in accept and "text/event-stream" not in accept)


@router.post("/v1/query")
async def query(body: QueryRequest, request: Request, upstreams: Clients, caller: CallerOf) -> Any:
    """Answers a question. Streams the agent's events as SSE (`start`, `route`, `tool_call`,
    `evidence`, `delta`, `verification`, `done`), or returns the `done` event as JSON."""
    mode = SearchMode(body.mode)
    caller.permit("AgentService/Ask", body.library)

    async def events() -> AsyncIterator[Any]:
        with tracer.start_as_current_span("POST /v1/query"):
            async for response in upstreams.agent.ask_pb(
                body.question,
                body.library,
                mode,
                body.top_k,
                body.session_id,
                skip_memory=body.skip_memory,
                query_mode=QueryMode(body.query_mode),
            ):
                yield response

    if _wants_json(body, request):
        done: dict[str, Any] = {}
        async for response in events():
            kind, data = event_json(response)
            if kind == "done":
                done = data
        return done
    return EventSourceResponse(sse(events()), ping=15)
