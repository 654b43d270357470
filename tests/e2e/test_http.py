"""End to end over the gateway: health, SSE and JSON queries, error bodies."""

from __future__ import annotations

import json

import httpx


async def _sse(client: httpx.AsyncClient, path: str, **request) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    """The (event, data) pairs of a Server-Sent Events response."""
    events: list[tuple[str, dict]] = []
    async with client.stream("POST", path, headers={"accept": "text/event-stream"}, **request) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        kind = ""
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind:
                events.append((kind, json.loads(line.split(":", 1)[1])))
                kind = ""
    return events


async def test_health(stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=10) as client:
        assert (await client.get("/health/live")).json() == {"status": "live"}
        ready = await client.get("/health/ready")
        assert ready.status_code == 200
        assert ready.json()["services"] == {n: "SERVING" for n in ("ingest", "retrieve", "agent", "verify")}


async def test_query_over_sse(stack, spans) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        events = await _sse(
            client, "/v1/query", json={"question": "How does RAGStack decide to abstain from answering?"}
        )
        kinds = [k for k, _ in events]
        assert kinds[0] == "start" and kinds[-1] == "done"
        assert {"route", "tool_call", "evidence", "delta", "verification"} <= set(kinds)
        start, done = events[0][1], events[-1][1]
        assert start["trace_id"] == done["trace_id"]
        assert done["citations"] and done["manifest"]["claims"]
        assert all(c["verdict"].startswith("VERDICT_") for c in done["manifest"]["claims"])
        assert "abstain" in done["answer"].lower() and not done["abstained"]
        # gateway -> agent -> retrieve -> verify: one OpenTelemetry trace, the JSON trace's id.
        names = {
            s.name
            for s in spans.get_finished_spans()
            if format(s.context.trace_id, "032x") == done["trace_id"]
        }
        assert {
            "POST /v1/query",
            "/ragstack.v1.AgentService/Ask",
            "/ragstack.v1.RetrieveService/Search",
            "/ragstack.v1.VerifyService/Verify",
        } <= names
        trace = (await client.get(f"/v1/traces/{done['trace_id']}")).json()
        assert trace["trace_id"] == done["trace_id"] and trace["answer"] == done["answer"]


async def test_query_as_json(stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        resp = await client.post(
            "/v1/query", json={"question": "What is the default gateway port?", "stream": False}
        )
        assert resp.status_code == 200
        done = resp.json()
        assert "8080" in done["answer"] and done["citations"]


async def test_errors_are_json_with_status(stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=10) as client:
        missing = await client.get("/v1/traces/" + "a" * 32)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "NOT_FOUND"
        bad = await client.get("/v1/traces/not-a-trace")
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_ARGUMENT"
        assert (await client.post("/v1/query", json={"question": ""})).status_code == 422
        assert (await client.post("/v1/query", json={"question": "x", "bogus": 1})).status_code == 422
        doc = await client.get("/v1/documents/unknown")
        assert doc.status_code == 404 and "unknown" in doc.json()["error"]["message"]
        docs = (await client.get("/v1/documents")).json()["documents"]
        assert len(docs) == 12 and all(d["document_id"] for d in docs)
        assert (await client.get("/openapi.json")).json()["paths"]["/v1/query"]


async def test_upload_ingest_streams_progress_and_limits(stack) -> None:
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        files = [
            (
                "files",
                ("notes.md", b"# Notes\n\nThe okapi lives in the Congo rainforest.\n", "text/markdown"),
            ),
            ("files", ("bad.exe", b"MZ\x90", "application/octet-stream")),
        ]
        events = await _sse(client, "/v1/ingest", files=files, data={"library": "uploads"})
        stages = [(e["source"], e["stage"]) for k, e in events if k == "file"]
        notes, bad = (
            "upload://uploads/notes.md",
            "upload://uploads/bad.exe",
        )  # uploads: a namespace of their own
        assert (notes, "FILE_STAGE_INDEXED") in stages and (bad, "FILE_STAGE_FAILED") in stages
        summary = events[-1]
        assert summary[0] == "summary" and summary[1]["indexed"] == 1 and summary[1]["failed"] == 1
        docs = (await client.get("/v1/documents", params={"library": "uploads"})).json()["documents"]
        assert [d["source"] for d in docs] == [notes]

        huge = [("files", ("big.txt", b"x" * (101 * 1024 * 1024), "text/plain"))]
        refused = await client.post("/v1/ingest", files=huge)
        assert refused.status_code == 413
        assert "gateway.max_upload_mb" in refused.json()["error"]["message"]
        long_query = await client.post("/v1/query", json={"question": "q" * 3000, "padding": "x" * 70_000})
        assert long_query.status_code == 413 and "max_request_kb" in long_query.json()["error"]["message"]


async def test_databases_over_http(stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.tools import shop

    shop.build_sqlite(tmp_path / "shop.db")
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        attach = {"name": "shop", "url": f"sqlite:///{tmp_path / 'shop.db'}", "library": "http-sql"}
        created = await client.post("/v1/databases", json=attach)
        assert created.status_code == 201 and created.json()["dialect"] == "sqlite"
        listed = (await client.get("/v1/databases", params={"library": "http-sql"})).json()["databases"]
        assert [db["name"] for db in listed] == ["shop"]

        ok = await client.post(
            "/v1/sql", json={"sql": "SELECT count(*) AS n FROM orders", "library": "http-sql"}
        )
        assert ok.status_code == 200 and ok.json()["rows"] == [[len(shop.ORDERS)]]
        refused = await client.post("/v1/sql", json={"sql": "DROP TABLE orders", "library": "http-sql"})
        assert refused.status_code == 400 and "only SELECT" in refused.json()["error"]["message"]

        body = {"question": "How many orders shipped late in March?", "library": "http-sql", "stream": False}
        done = (await client.post("/v1/query", json=body)).json()
        assert f"is {shop.LATE_IN_MARCH} [1]" in done["answer"]
        assert done["citations"][0]["sql"]["database"] == "shop"

        gone = await client.delete("/v1/databases/shop", params={"library": "http-sql"})
        assert gone.status_code == 200
        again = await client.delete("/v1/databases/shop", params={"library": "http-sql"})
        assert again.status_code == 404 and again.json()["error"]["code"] == "NOT_FOUND"


async def test_libraries_and_ingest_by_url(stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    (tmp_path / "index.html").write_text(
        "<html><head><title>Capybaras</title></head><body><main><h1>Capybaras</h1>"
        "<p>The capybara is the largest living rodent, native to South America.</p></main></body></html>"
    )

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=120) as client:
            url = f"http://127.0.0.1:{site.server_address[1]}/index.html"
            events = await _sse(client, "/v1/ingest", data={"urls": [url], "library": "web-by-url"})
            assert events[-1][0] == "summary" and events[-1][1]["indexed"] == 1, events
            nothing = await client.post("/v1/ingest", data={"library": "web-by-url"})
            assert nothing.status_code == 400 and "files" in nothing.json()["error"]["message"]
            libraries = {x["name"]: x for x in (await client.get("/v1/libraries")).json()["libraries"]}
            assert libraries["default"]["documents"] == 12 and libraries["default"]["chunks"] > 12
            assert libraries["web-by-url"]["documents"] == 1 and libraries["web-by-url"]["updated_at"]
    finally:
        site.shutdown()
        site.server_close()


async def test_queued_ingest_over_http(stack) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        files = [
            ("files", ("queued.md", b"# Queued\n\nThe pangolin is covered in scales.\n", "text/markdown"))
        ]
        queued = await client.post("/v1/ingest/jobs", files=files, data={"library": "queued"})
        assert queued.status_code == 202 and queued.json()["state"] == "queued"
        job_id = queued.json()["job_id"]
        for _ in range(300):
            job = (await client.get(f"/v1/ingest/jobs/{job_id}")).json()
            if job["state"] == "done":
                break
            await asyncio.sleep(0.1)
        assert job["state"] == "done" and job["summary"]["indexed"] == 1
        assert job_id in [j["job_id"] for j in (await client.get("/v1/ingest/jobs")).json()["jobs"]]
        assert (await client.get("/v1/ingest/jobs/nope")).status_code == 404


async def test_the_knowledge_graph_over_http(stack) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as client:
        graph = (await client.get("/v1/graph")).json()
        keys = {e["key"] for e in graph["entities"]}
        assert graph["entities"] and graph["communities"] and graph["chunks_with_entities"] > 0
        assert all(r["source"] in keys and r["target"] in keys for r in graph["relations"])
        assert all(set(c["members"]) <= keys for c in graph["communities"])
        empty = (await client.get("/v1/graph", params={"library": "no-such-library"})).json()
        assert empty == {"entities": [], "relations": [], "communities": [], "chunks_with_entities": 0}
        bad = await client.get("/v1/graph", params={"library": "../etc"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_ARGUMENT"
