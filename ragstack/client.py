"""A small typed Python client of RAGStack.

HTTP (the gateway), synchronous, for scripts and notebooks::

    from ragstack.client import Client
    with Client("http://127.0.0.1:8080", api_key="...") as rag:
        done = rag.ask("How does BM25 rank documents?")
        print(done.answer, [c.chunk.source for c in done.citations], done.confidence)
        for event in rag.stream("And its parameters?", session_id="s1"):
            print(event.kind, event.data)

gRPC (the services), asynchronous, for services written in Python::

    from ragstack.client import GrpcClient
    async with GrpcClient(agent="127.0.0.1:50053", token="...") as rag:
        done = await rag.ask("How does BM25 rank documents?")

Failures raise `ragstack.errors.RpcError` with the status name (`NOT_FOUND`, `UNAUTHENTICATED`, ...)
and the message, whichever way the call went.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from google.protobuf import json_format

from ragstack import convert
from ragstack import domain as d
from ragstack.errors import RpcError
from ragstack.rpc.clients import AgentClient, IngestClient, RetrieveClient, open_channel
from ragstack.v1 import agent_pb2


@dataclass(frozen=True)
class Event:
    """One Server-Sent Event: `start`, `route`, `tool_call`, `evidence`, `delta`, `verification`,
    `done` (queries); `file` (a file's progress), `summary` (ingest)."""

    kind: str
    data: dict[str, Any]


def done_from_json(done: dict[str, Any]) -> d.DoneEvent:
    """The gateway's `done` JSON as the domain object the gRPC client returns too."""
    event = convert.ask_event_from_pb(
        agent_pb2.AskResponse(
            done=json_format.ParseDict(done, agent_pb2.DoneEvent(), ignore_unknown_fields=True)
        )
    )
    assert isinstance(event, d.DoneEvent)
    return event


class Client:
    """The gateway over HTTP. `api_key` goes in X-API-Key; every call may raise RpcError."""

    def __init__(
        self, base_url: str = "http://127.0.0.1:8080", api_key: str = "", timeout_s: float = 300.0
    ) -> None:
        headers = {"x-api-key": api_key} if api_key else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def ready(self) -> bool:
        return self._http.get("/health/ready").status_code == 200

    def ask(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> d.DoneEvent:
        """The delivered answer: text, citations (chunks or query results), confidence, manifest."""
        body = _query(question, library, mode, top_k, session_id, stream=False)
        return done_from_json(self._json("POST", "/v1/query", json=body))

    def stream(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> Iterator[Event]:
        body = _query(question, library, mode, top_k, session_id, stream=True)
        yield from self._sse("POST", "/v1/query", json=body)

    def ingest(
        self, paths: Sequence[str | Path], library: str = "", groups: Sequence[str] = ()
    ) -> Iterator[Event]:
        """Uploads files; yields their progress events, then the summary. `groups`: the ACL groups
        that may see the documents (empty: everyone who may use the library)."""
        files = [("files", (Path(p).name, Path(p).read_bytes())) for p in paths]
        data: dict[str, Any] = {"library": library, "groups": list(groups)}
        yield from self._sse("POST", "/v1/ingest", files=files, data=data)

    def documents(self, library: str = "") -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = self._json("GET", "/v1/documents", params={"library": library})[
            "documents"
        ]
        return docs

    def delete_document(self, document_id: str, library: str = "") -> int:
        gone = self._json("DELETE", f"/v1/documents/{document_id}", params={"library": library})
        return int(gone["chunks_removed"])

    def trace(self, trace_id: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/traces/{trace_id}")

    def chunk(self, chunk_id: str, library: str = "") -> dict[str, Any]:
        """A cited chunk whole, with `regions` (where it lies on its PDF's pages)."""
        return self._json("GET", f"/v1/chunks/{chunk_id}", params={"library": library})

    def chunk_visual(self, chunk_id: str, library: str = "", page: int = 0, width: int = 0) -> bytes:
        """The chunk's page (its first when `page` is 0) as a PNG with the chunk outlined."""
        params: dict[str, Any] = {"library": library, "page": page, "width": width}
        resp = self._http.get(f"/v1/chunks/{chunk_id}/visual", params=params)
        _raise_for(resp)
        return resp.content

    def graph(self, library: str = "") -> dict[str, Any]:
        """The library's knowledge graph as this key may see it: entities, relations, communities."""
        return self._json("GET", "/v1/graph", params={"library": library})

    def feedback(self, trace_id: str, rating: str, comment: str = "") -> dict[str, Any]:
        """Your verdict (`up` or `down`) on one of your answers, by its trace id."""
        return self._json(
            "POST", "/v1/feedback", json={"trace_id": trace_id, "rating": rating, "comment": comment}
        )

    def databases(self, library: str = "") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._json("GET", "/v1/databases", params={"library": library})[
            "databases"
        ]
        return found

    def attach_database(self, name: str, url: str, library: str = "") -> dict[str, Any]:
        return self._json("POST", "/v1/databases", json={"name": name, "url": url, "library": library})

    def detach_database(self, name: str, library: str = "") -> None:
        self._json("DELETE", f"/v1/databases/{name}", params={"library": library})

    def sql(self, sql: str, database: str = "", library: str = "", max_rows: int = 0) -> dict[str, Any]:
        body = {"sql": sql, "database": database, "library": library, "max_rows": max_rows}
        return self._json("POST", "/v1/sql", json=body)

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        resp = self._http.request(method, path, **kw)
        _raise_for(resp)
        body: dict[str, Any] = resp.json()
        return body

    def _sse(self, method: str, path: str, **kw: Any) -> Iterator[Event]:
        with self._http.stream(method, path, headers={"accept": "text/event-stream"}, **kw) as resp:
            if resp.status_code >= 400:
                resp.read()
                _raise_for(resp)
            kind = ""
            for line in resp.iter_lines():
                if line.startswith("event:"):
                    kind = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and kind:
                    data = json.loads(line.split(":", 1)[1])
                    if kind == "error":
                        raise RpcError(data.get("code", "INTERNAL"), data.get("message", ""))
                    yield Event(kind, data)
                    kind = ""


def _query(
    question: str, library: str, mode: str, top_k: int, session_id: str, stream: bool
) -> dict[str, Any]:
    return {
        "question": question,
        "library": library,
        "mode": mode,
        "top_k": top_k,
        "session_id": session_id,
        "stream": stream,
    }


def _raise_for(resp: httpx.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        error = resp.json()["error"]
        raise RpcError(error["code"], error["message"])
    except (ValueError, KeyError, TypeError):
        raise RpcError(f"HTTP_{resp.status_code}", resp.text[:300]) from None


class GrpcClient:
    """The services over gRPC (give the addresses of those you call), with the services' token."""

    def __init__(
        self,
        agent: str = "127.0.0.1:50053",
        ingest: str = "127.0.0.1:50051",
        retrieve: str = "127.0.0.1:50052",
        token: str = "",
        deadline_s: float = 300.0,
    ) -> None:
        self._channels = [open_channel(a, token=token) for a in (agent, ingest, retrieve)]
        self.agent = AgentClient(self._channels[0], deadline_s)
        self.ingest = IngestClient(self._channels[1], deadline_s)
        self.retrieve = RetrieveClient(self._channels[2], deadline_s)

    async def __aenter__(self) -> GrpcClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def ask(
        self,
        question: str,
        library: str = "",
        mode: d.SearchMode = d.SearchMode.AUTO,
        top_k: int = 0,
        session_id: str = "",
    ) -> d.DoneEvent:
        """The delivered answer (the `done` event); `self.agent.ask` streams every event."""
        async for event in self.agent.ask(question, library, mode, top_k, session_id):
            if isinstance(event, d.DoneEvent):
                return event
        raise RpcError("INTERNAL", "the agent ended the stream without an answer")

    async def search(
        self, query: str, library: str = "", top_k: int = 0, mode: d.SearchMode = d.SearchMode.HYBRID
    ) -> list[d.SearchHit]:
        hits, _ = await self.retrieve.search(query, library, top_k, mode)
        return hits
