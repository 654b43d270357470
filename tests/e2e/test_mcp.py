"""The MCP server through the official SDK's own client: over stdio (`ragstack mcp`, a process of
its own) and over Streamable HTTP at the gateway's /mcp, with API keys, roles and library scopes."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from ragstack.resources import Resources
from ragstack.serve import Stack
from tests.conftest import make_config, start_with
from tests.e2e.test_processes import write_config

READER, WRITER = "mcp-reader-5e1b7c20a9", "mcp-writer-90c4d3e81f"
TOOLS = {"ask", "search", "list_libraries", "list_documents", "get_document", "get_chunk", "ingest"}


def payload(result: Any) -> Any:
    """A tool's structured result (a list comes wrapped as {"result": [...]})."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def rows(result: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = payload(result)["result"]
    return found


def error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content)


def notes(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ferry.md").write_text(
        "# Ferry\n\nThe Quellen ferry leaves the north pier every 40 minutes from 6 in the morning.\n"
    )
    return folder


@pytest.mark.slow
async def test_stdio_ingest_ask_search_and_read(tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    folder = notes(tmp_path / "work" / "notes")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragstack.cli.main", "--config", str(config), "mcp"],
        cwd=str(folder.parent),
        env={"HF_HUB_OFFLINE": "1"},
    )
    async with Client(server, read_timeout_seconds=300) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        summary = payload(await client.call_tool("ingest", {"paths": [str(folder)], "library": "town"}))
        assert summary["indexed"] == 1 and summary["failed"] == 0
        done = payload(
            await client.call_tool(
                "ask", {"question": "How often does the Quellen ferry leave?", "library": "town"}
            )
        )
        assert "every 40 minutes" in done["answer"] and done["citations"] and done["trace_id"]
        assert done["manifest"]["claims"] and not done["abstained"]
        cited = done["citations"][0]
        chunk = payload(
            await client.call_tool("get_chunk", {"chunk_id": cited["chunk_id"], "library": "town"})
        )
        assert chunk["text"].startswith("The Quellen ferry") and chunk["heading_path"] == ["Ferry"]
        unknown = await client.call_tool("get_chunk", {"chunk_id": "nope:0", "library": "town"})
        assert "NOT_FOUND: chunk 'nope:0' not found" in error_text(unknown)
        hits = rows(await client.call_tool("search", {"query": "north pier ferry", "library": "town"}))
        assert hits[0]["source"].endswith("ferry.md") and hits[0]["heading_path"] == ["Ferry"]
        elsewhere = {"query": "north pier ferry", "library": "town", "heading_prefix": ["Bus"]}
        assert rows(await client.call_tool("search", elsewhere)) == []
        (doc,) = rows(await client.call_tool("list_documents", {"library": "town"}))
        one = payload(
            await client.call_tool("get_document", {"document_id": doc["document_id"], "library": "town"})
        )
        assert one["title"] == "Ferry"
        outside = await client.call_tool("ingest", {"paths": ["/etc"], "library": "town"})
        assert "PERMISSION_DENIED: path '/etc' is not under ingest.allowed_roots" in error_text(outside)


@pytest.fixture(scope="module")
async def keyed(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    cfg = make_config(
        tmp_path_factory.mktemp("mcp") / "data",
        gateway={
            "api_keys": [
                {"name": "reader", "key": READER, "role": "reader", "libraries": ["town"]},
                {"name": "writer", "key": WRITER, "role": "writer"},
            ]
        },
    )
    stack = await start_with(cfg, resources)
    yield stack
    await stack.stop()


@contextlib.asynccontextmanager
async def over_http(stack: Stack, key: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"x-api-key": key} if key else {}, timeout=300) as http,
        Client(streamable_http_client(f"{stack.gateway_url}/mcp", http_client=http)) as client,
    ):
        yield client


async def test_http_tools_run_as_the_keys_caller(keyed: Stack, tmp_path: Path) -> None:
    folder = notes(tmp_path / "notes")
    async with over_http(keyed, WRITER) as writer:
        summary = payload(await writer.call_tool("ingest", {"paths": [str(folder)], "library": "town"}))
        assert summary["indexed"] == 1
        payload(await writer.call_tool("ingest", {"paths": [str(folder)], "library": "harbour"}))
    async with over_http(keyed, READER) as reader:
        done = payload(
            await reader.call_tool("ask", {"question": "When does the first ferry leave?", "library": "town"})
        )
        assert "6 in the morning" in done["answer"]
        assert [lib["name"] for lib in rows(await reader.call_tool("list_libraries", {}))] == ["town"]
        refused = await reader.call_tool(
            "ask", {"question": "When does the ferry leave?", "library": "harbour"}
        )
        assert "PERMISSION_DENIED" in error_text(refused) and "harbour" in error_text(refused)
        hit = rows(await reader.call_tool("search", {"query": "ferry", "library": "town"}))[0]
        elsewhere = await reader.call_tool("get_chunk", {"chunk_id": hit["chunk_id"], "library": "harbour"})
        assert "PERMISSION_DENIED" in error_text(elsewhere)
    async with httpx2.AsyncClient(base_url=keyed.gateway_url, headers={"x-api-key": READER}) as http:
        same = (await http.get(f"/v1/chunks/{hit['chunk_id']}", params={"library": "town"})).json()
        assert same["text"] == hit["text"] and same["heading_path"] == ["Ferry"]
        assert (
            await http.get(f"/v1/chunks/{hit['chunk_id']}", params={"library": "harbour"})
        ).status_code == 403
    async with over_http(keyed, READER) as reader:
        bad_mode = await reader.call_tool("search", {"query": "ferry", "library": "town", "mode": "bogus"})
        assert "INVALID_ARGUMENT: mode 'bogus' is not one of hybrid, lexical, dense, graph" in error_text(
            bad_mode
        )
        for top_k in (0, -1, 10**9):
            too_many = await reader.call_tool("search", {"query": "ferry", "library": "town", "top_k": top_k})
            assert f"INVALID_ARGUMENT: top_k {top_k} is not between 1 and 50" in error_text(too_many)
        # Arguments that do not fit the schema: named like any other bad argument, never coerced.
        for arguments, said in [
            ({"query": "ferry", "top_k": "5"}, "top_k: Input should be a valid integer"),
            ({"query": "ferry", "top_k": True}, "top_k: Input should be a valid integer"),
            ({"query": 5}, "query: Input should be a valid string"),
            ({"top_k": 3}, "query: Field required"),
        ]:
            text = error_text(await reader.call_tool("search", {**arguments, "library": "town"}))
            assert f"INVALID_ARGUMENT: {said}" in text and "pydantic" not in text, text
        schema = next(t for t in (await reader.list_tools()).tools if t.name == "search").input_schema
        assert schema["properties"]["top_k"]["type"] == "integer"
        no_write = await reader.call_tool("ingest", {"paths": [str(folder)], "library": "town"})
        assert "PERMISSION_DENIED" in error_text(no_write)


async def test_http_limits_are_the_apis_and_no_stream_is_held_open(keyed: Stack) -> None:
    """What the REST routes and the services refuse, the tools refuse too, naming the limit; and a GET
    of /mcp, which in a stateless server would be a stream of pings held open forever, is refused."""
    async with over_http(keyed, READER) as reader:
        long = await reader.call_tool("ask", {"question": "why " * 1001, "library": "town"})
        assert "INVALID_ARGUMENT: question is 4003 characters, over the limit of 4000" in error_text(long)
        deep = await reader.call_tool(
            "search", {"query": "ferry", "library": "town", "heading_prefix": ["Ferry", "x" * 300]}
        )
        assert "INVALID_ARGUMENT: heading_prefix is 307 bytes" in error_text(deep)
        assert "over the limit of 256" in error_text(deep)
        wordy = await reader.call_tool("search", {"query": "ferry " * 1400, "library": "town"})
        assert "INVALID_ARGUMENT: query is 8399 characters, over the limit of 8000" in error_text(wordy)
    async with httpx2.AsyncClient(base_url=keyed.gateway_url, headers={"x-api-key": READER}) as http:
        stream = await http.get("/mcp", headers={"accept": "text/event-stream"}, timeout=10)
        assert stream.status_code == 405 and stream.headers["allow"] == "POST"
        assert "stateless" in stream.json()["error"]["message"]
        json_type = {"content-type": "application/json"}
        big = await http.post("/mcp", content=b"x" * (65 * 1024), headers=json_type)
        assert big.status_code == 413
        assert "over the limit of 64 KB (gateway.max_request_kb)" in big.json()["error"]["message"]


async def test_http_message_ids_are_strings_or_integers(keyed: Stack) -> None:
    """An id the SDK cannot answer (an object, a boolean, a fraction, null) would have been taken
    for a notification and answered 202 with nothing: it is refused as JSON-RPC's Invalid Request,
    and so is a batch. Well-formed messages pass as before."""
    headers = {"x-api-key": READER, "accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(base_url=keyed.gateway_url, headers=headers, timeout=30) as http:

        async def post(message: Any) -> httpx2.Response:
            return await http.post("/mcp", json=message)

        for ident, kind in (({"n": 1}, "an object"), (True, "a boolean"), (1.5, "a number"), (None, "null")):
            refused = await post({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
            assert refused.status_code == 400, (ident, refused.text)
            error = refused.json()["error"]
            assert error["code"] == -32600 and refused.json()["id"] is None
            assert f"id must be a string or an integer, not {kind}" in error["message"]
        batch = await post([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}])
        assert batch.status_code == 400 and "a JSON object, not an array" in batch.json()["error"]["message"]
        for ident in ("list-1", 7):
            listed = await post({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
            assert listed.status_code == 200 and listed.json()["id"] == ident
            assert {t["name"] for t in listed.json()["result"]["tools"]} == TOOLS
        noted = await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert noted.status_code == 202
        garbled = await http.post("/mcp", content=b"{not json", headers={"content-type": "application/json"})
        assert garbled.status_code == 400 and garbled.json()["error"]["code"] == -32700  # the SDK's


async def test_http_without_a_key_is_refused(keyed: Stack) -> None:
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            f"{keyed.gateway_url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401


async def test_read_only_leaves_ingest_out(tmp_path: Path, resources: Resources) -> None:
    cfg = make_config(tmp_path / "data", gateway={"mcp": "read-only"})
    stack = await start_with(cfg, resources)
    try:
        async with over_http(stack, "") as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS - {"ingest"}
    finally:
        await stack.stop()


def test_off_serves_no_mcp_route() -> None:
    from gateway.app import create_app
    from gateway.deps import Upstreams
    from ragstack.config import GatewayConfig

    unused: Any = None
    upstreams = Upstreams(agent=unused, ingest=unused, retrieve=unused, readiness=unused)
    off = create_app(upstreams, GatewayConfig(mcp="off"))
    assert (
        "/mcp" not in {getattr(r, "path", "") for r in off.routes} and "/v1/query" in off.openapi()["paths"]
    )
    assert "/mcp" in {getattr(r, "path", "") for r in create_app(upstreams, GatewayConfig()).routes}
