"""What the routes depend on: the clients of the services, and the caller's permissions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from ragstack import auth
from ragstack.rpc.access import permit
from ragstack.rpc.clients import AgentClient, IngestClient, RetrieveClient


@dataclass
class Upstreams:
    agent: AgentClient
    ingest: IngestClient
    retrieve: RetrieveClient
    readiness: Callable[[], Awaitable[dict[str, str]]]


@dataclass(frozen=True)
class Caller:
    """The principal of the request (the middleware found it from the key) and the library a
    request without one means."""

    default_library: str

    def permit(self, method: str, library: str) -> None:
        """A streamed call's permission and library scope, checked before its stream starts (the
        service checks again): a refusal is a 403, not an error event after a 200."""
        permit(f"/ragstack.v1.{method}", library, auth.current(), self.default_library)


async def _upstreams(request: Request) -> Upstreams:
    upstreams: Upstreams = request.app.state.upstreams
    return upstreams


async def _caller(request: Request) -> Caller:
    return Caller(request.app.state.default_library)


Clients = Annotated[Upstreams, Depends(_upstreams)]
CallerOf = Annotated[Caller, Depends(_caller)]
