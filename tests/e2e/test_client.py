"""ragstack.client against the shared stack: the HTTP client (run in a thread: it is synchronous and
the servers share this event loop) and the gRPC one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragstack import domain as d
from ragstack.client import Client, GrpcClient
from ragstack.errors import RpcError

QUESTION = "How does reciprocal rank fusion combine lexical and dense rankings?"


def _http_round_trip(base_url: str, upload: Path) -> None:
    with Client(base_url) as rag:
        assert rag.ready()
        answer = rag.ask(QUESTION)
        assert isinstance(answer, d.DoneEvent) and answer.answer and len(answer.trace_id) == 32
        assert answer.citations[0].chunk.source.endswith(".md") and answer.manifest.claims
        events = list(rag.stream(QUESTION))
        assert events[0].kind == "start" and events[-1].kind == "done"
        assert rag.trace(answer.trace_id)["question"] == QUESTION
        assert rag.feedback(answer.trace_id, "up", "clear")["rating"] == "up"
        cited = rag.chunk(answer.citations[0].chunk.chunk_id)
        assert cited["text"] == answer.citations[0].chunk.text and cited["regions"] == []  # Markdown
        with pytest.raises(RpcError) as err:
            rag.chunk_visual(cited["chunk_id"])
        assert err.value.code == "FAILED_PRECONDITION"
        assert rag.graph()["entities"]

        progress = list(rag.ingest([upload], library="client"))
        assert progress[-1].kind == "summary" and progress[-1].data["indexed"] == 1
        [doc] = rag.documents("client")
        assert rag.delete_document(doc["document_id"], "client") >= 1
        with pytest.raises(RpcError) as err:
            rag.delete_document(doc["document_id"], "client")
        assert err.value.code == "NOT_FOUND"


async def test_the_http_client(stack, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    upload = tmp_path / "note.md"
    upload.write_text("# Note\n\nThe client test uploads this small note about tantivy segments.\n")
    await asyncio.to_thread(_http_round_trip, stack.gateway_url, upload)


async def test_the_grpc_client(stack) -> None:  # type: ignore[no-untyped-def]
    async with GrpcClient(stack.peers["agent"], stack.peers["ingest"], stack.peers["retrieve"]) as rag:
        done = await rag.ask(QUESTION)
        assert isinstance(done, d.DoneEvent) and done.citations and not done.abstained
        hits = await rag.search("reciprocal rank fusion", top_k=3)
        assert len(hits) == 3 and hits[0].chunk.source.endswith(".md")
        with pytest.raises(RpcError) as err:
            await rag.ask("")
        assert err.value.code == "INVALID_ARGUMENT"
