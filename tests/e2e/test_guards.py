"""The guards on a stack of its own: API keys on every route but health, request ids (into the
agent's trace), security headers, rate limit, CORS, trusted hosts, structured errors, /metrics, the
gRPC token between services, JSON logs."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragstack.resources import Resources
from ragstack.serve import Stack
from ragstack.telemetry import REQUEST_ID, JsonFormatter
from ragstack.v1 import ingest_pb2, ingest_pb2_grpc
from tests.conftest import make_config, start_with

KEY = "k-3a1f9c2e"
TOKEN = "t-77b0d14e"
KEYED = {"x-api-key": KEY}


@pytest.fixture(scope="module")
async def guarded(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    cfg = make_config(
        tmp_path_factory.mktemp("guarded") / "data",
        gateway={
            "api_keys": f"{KEY},second-key",  # comma-separated, as an environment variable gives it
            "rate_limit_per_minute": 30,
            "max_in_flight_per_caller": 2,
            "cors_origins": ["https://app.example.com"],
            "trusted_hosts": ["127.0.0.1", "localhost"],
            "keep_alive_s": 8,
        },
        services={"token": TOKEN},
    )
    stack = await start_with(cfg, resources)
    yield stack
    await stack.stop()


async def test_an_idle_connection_is_kept_for_keep_alive_s_then_closed(guarded: Stack) -> None:
    """Kept while a client's pool may still reuse it (past uvicorn's own 5 s; by default past a load
    balancer's 60 s), then closed; here `gateway.keep_alive_s` is 8."""
    port = guarded.gateway_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = f"GET /health/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()

    async def answered() -> bytes:
        writer.write(request)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:"))[15:])
        await reader.readexactly(length)
        return head.split(b"\r\n", 1)[0]

    try:
        assert await answered() == b"HTTP/1.1 200 OK"
        await asyncio.sleep(6)  # idle under the limit: the same connection serves the next request
        assert await answered() == b"HTTP/1.1 200 OK"
        idle = asyncio.get_running_loop().time()
        assert await asyncio.wait_for(reader.read(), 30) == b""  # idle past it: closed by the gateway
        assert asyncio.get_running_loop().time() - idle > 7
    finally:
        writer.close()


async def test_keys_guard_every_route_but_health(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=30) as client:
        assert (await client.get("/health/live")).status_code == 200
        assert (await client.get("/health/ready")).status_code == 200  # peers reached with the token
        for path in ("/v1/documents", "/openapi.json", "/metrics"):
            missing = await client.get(path)
            assert missing.status_code == 401, path
            error = missing.json()["error"]
            assert error["code"] == "UNAUTHENTICATED" and "X-API-Key" in error["message"]
            assert error["request_id"] == missing.headers["x-request-id"]
        assert (await client.get("/v1/documents", headers={"x-api-key": "wrong"})).status_code == 401
        assert (await client.get("/v1/documents", headers=KEYED)).status_code == 200
        bearer = await client.get("/v1/documents", headers={"authorization": "Bearer second-key"})
        assert bearer.status_code == 200


async def test_request_ids_headers_and_the_trace(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=60) as client:
        fresh = await client.get("/v1/documents", headers=KEYED)
        assert re.fullmatch(r"[0-9a-f]{32}", fresh.headers["x-request-id"])
        for name, value in (
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "DENY"),
            ("cache-control", "no-store"),
        ):
            assert fresh.headers[name] == value
        assert "default-src 'none'" in fresh.headers["content-security-policy"]
        odd = await client.get("/v1/documents", headers={**KEYED, "x-request-id": "bad id\twith spaces"})
        assert re.fullmatch(r"[0-9a-f]{32}", odd.headers["x-request-id"])

        body = {"question": "What is BM25?", "stream": False}
        done = await client.post("/v1/query", json=body, headers={**KEYED, "x-request-id": "req-42.a"})
        assert done.status_code == 200 and done.headers["x-request-id"] == "req-42.a"
        trace = await client.get(f"/v1/traces/{done.json()['trace_id']}", headers=KEYED)
        assert trace.json()["request_id"] == "req-42.a"  # carried to the agent as gRPC metadata


async def test_errors_are_structured(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=30) as client:
        unknown = await client.get("/v1/nothing-here", headers=KEYED)
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NOT_FOUND"
        invalid = await client.post("/v1/query", json={"question": ""}, headers=KEYED)
        assert invalid.status_code == 422
        assert invalid.json()["error"]["code"] == "INVALID_ARGUMENT" and "question" in invalid.text
        assert "Traceback" not in invalid.text


async def test_cors_and_trusted_hosts(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=30) as client:
        preflight = {"access-control-request-method": "POST", "access-control-request-headers": "x-api-key"}
        allowed = await client.options(
            "/v1/query", headers={"origin": "https://app.example.com", **preflight}
        )
        assert allowed.headers.get("access-control-allow-origin") == "https://app.example.com"
        other = await client.options("/v1/query", headers={"origin": "https://evil.example", **preflight})
        assert "access-control-allow-origin" not in other.headers
        wrong_host = await client.get("/v1/documents", headers={"host": "evil.example", **KEYED})
        assert wrong_host.status_code == 400 and "gateway.trusted_hosts" in wrong_host.text
        probe = await client.get("/health/live", headers={"host": "10.1.2.3:8080"})  # kubelet's Host
        assert probe.status_code == 200
        # A browser MCP client of an allowed origin sends the transport's own headers after initialize.
        mcp = {
            "access-control-request-method": "POST",
            "access-control-request-headers": "mcp-protocol-version",
        }
        from_app = await client.options("/mcp", headers={"origin": "https://app.example.com", **mcp})
        assert from_app.status_code == 200, from_app.text
        assert "mcp-protocol-version" in from_app.headers["access-control-allow-headers"].lower()


async def test_metrics_count_routes_and_rpcs(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=30) as client:
        await client.get("/v1/documents", headers=KEYED)
        text = (await client.get("/metrics", headers=KEYED)).text
    assert re.search(r'ragstack_http_requests_total\{route="/v1/documents",status="200"\} \d', text)
    assert 'ragstack_http_duration_seconds_bucket{le="0.005",route="/v1/documents"}' in text
    assert re.search(
        r'ragstack_rpc_requests_total\{code="OK",method="/ragstack.v1.IngestService/ListDocuments"\}', text
    )


async def test_grpc_services_need_the_token(guarded: Stack) -> None:
    async with grpc.aio.insecure_channel(guarded.peers["ingest"]) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.ListDocuments(
                ingest_pb2.ListDocumentsRequest(), timeout=5, metadata=(("authorization", "Bearer nope"),)
            )
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        ok = await stub.ListDocuments(
            ingest_pb2.ListDocumentsRequest(), timeout=5, metadata=(("authorization", f"Bearer {TOKEN}"),)
        )
        assert list(ok.documents) == []
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING  # probes need no token


async def test_a_caller_holds_so_many_requests_at_once(guarded: Stack) -> None:
    """Requests still arriving (or running, or streaming) count against their caller: past the
    limit the next one is refused, naming the setting; another caller, and the probes, are not held
    back; once one ends there is room again."""
    second = {"x-api-key": "second-key"}
    arrived = asyncio.Event()

    async def dribbled() -> AsyncIterator[bytes]:
        yield b'{"question": "What is BM25?",'
        await arrived.wait()  # the rest of the body comes once the refusal was seen
        yield b' "stream": false}'

    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=60) as client:
        json_body = {**second, "content-type": "application/json"}
        held = [
            asyncio.create_task(client.post("/v1/query", content=dribbled(), headers=json_body))
            for _ in range(2)
        ]
        await asyncio.sleep(1.0)  # both reach the gateway before anything else of this caller does
        for _ in range(30):
            refused = await client.get("/v1/documents", headers=second)
            if refused.status_code == 429:
                break
            await asyncio.sleep(0.2)
        assert refused.status_code == 429, refused.text
        message = refused.json()["error"]["message"]
        assert message.startswith("2 requests of this caller are in progress")
        assert "gateway.max_in_flight_per_caller" in message and refused.headers["retry-after"] == "1"
        assert (await client.get("/v1/documents", headers=KEYED)).status_code == 200  # its own room
        assert (await client.get("/health/live")).status_code == 200
        arrived.set()
        answered = await asyncio.gather(*held)
        assert [r.status_code for r in answered] == [200, 200], [r.text for r in answered]
        assert (await client.get("/v1/documents", headers=second)).status_code == 200  # room again


async def test_the_rate_limit_names_itself(guarded: Stack) -> None:
    async with httpx.AsyncClient(base_url=guarded.gateway_url, timeout=30) as client:
        codes = [(await client.get("/v1/documents", headers=KEYED)).status_code for _ in range(40)]
        assert codes[0] == 200 and 429 in codes
        limited = await client.get("/v1/documents", headers=KEYED)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert "gateway.rate_limit_per_minute" in limited.json()["error"]["message"]
        other_key = await client.get("/v1/documents", headers={"x-api-key": "second-key"})
        assert other_key.status_code == 200  # a bucket per key
        assert (await client.get("/health/live")).status_code == 200  # probes are never limited


def test_json_logs_carry_the_request_id() -> None:
    record = logging.LogRecord(
        "ragstack.test", logging.WARNING, __file__, 1, "cannot reach %s", ("db",), None
    )
    token = REQUEST_ID.set("req-7")
    try:
        record.request_id = REQUEST_ID.get()
        line = json.loads(JsonFormatter().format(record))
    finally:
        REQUEST_ID.reset(token)
    assert (
        line["message"] == "cannot reach db" and line["request_id"] == "req-7" and line["level"] == "WARNING"
    )
