"""Sources through the keyed gateway and the real services: a declared folder source and one added
over HTTP stay in sync on their own (file-system events, polls, jobs), pause and resume, a failing
source opens its breaker (in the listing and /metrics), and only admins manage sources."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragstack.config import SourceConfig
from ragstack.domain import SearchMode
from ragstack.rpc.clients import RetrieveClient, open_channel
from services.ingest.syncing.s3 import found_credentials
from tests.conftest import make_config, start_with
from tests.tools.s3 import s3_bucket
from tests.tools.websites import Page, serve_web

KEYS = [
    {"name": "admin", "key": "adm-5e0c2a9f7b3d1e48", "role": "admin", "libraries": ["*"]},
    {"name": "writer", "key": "wrt-8a1f3c5e7d9b0a26", "role": "writer", "libraries": ["synced"]},
    {"name": "reader", "key": "rdr-4c6e8a0b2d4f6a81", "role": "reader", "libraries": ["elsewhere"]},
]
H = {k["name"]: {"x-api-key": k["key"]} for k in KEYS}


@dataclass
class World:
    http: httpx.AsyncClient
    retrieve: RetrieveClient
    root: Path
    declared: Path


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Any) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("sources")
    declared = root / "declared"
    declared.mkdir()
    cfg = make_config(
        root / "data",
        gateway={"api_keys": KEYS},
        ingest={
            "graph": False,
            "fetch_allow": ["127.0.0.1"],  # the tests' web and S3 servers
            "source_tick_s": 0.2,
            "source_backoff_s": 0.1,
            "source_breaker_failures": 2,
            "source_breaker_cooldown_s": 600,
        },
    )
    # The declared source polls hourly: what it picks up within the test came by file-system events.
    cfg.sources = [
        SourceConfig(name="declared", kind="folder", url=str(declared), library="synced", interval_s=3600)
    ]
    stack = await start_with(cfg, resources)
    channel = open_channel(stack.peers["retrieve"])
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=60) as http:
        yield World(http, RetrieveClient(channel, 30), root, declared)
    await channel.close()
    await stack.stop()


async def until(check: Callable[[], Any], limit_s: float = 30.0) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)


async def sources_of(w: World, who: str = "admin") -> dict[str, dict[str, Any]]:
    r = await w.http.get("/v1/sources", headers=H[who])
    assert r.status_code == 200, r.text
    return {s["spec"]["name"]: s for s in r.json()["sources"]}


async def found(w: World, text: str) -> list[str]:
    hits, _ = await w.retrieve.search(text, "synced", 5, SearchMode.LEXICAL)
    return [Path(h.chunk.source).name for h in hits]


async def documents(w: World) -> set[str]:
    r = await w.http.get("/v1/documents", params={"library": "synced"}, headers=H["admin"])
    return {Path(d["source"]).name for d in r.json()["documents"]}


async def test_a_declared_folder_follows_its_files_by_file_system_events(world: World) -> None:
    listed = await sources_of(world)
    assert listed["declared"]["origin"] == "config"
    note = world.declared / "tides.md"
    note.write_text("# Tides\n\nThe harbour gate closes two hours before high water.\n")
    assert await until(lambda: found(world, "harbour gate high water")) == ["tides.md"]
    note.write_text("# Tides\n\nThe harbour gate now closes three hours before the spring tide.\n")
    await until(lambda: _contains(found(world, "spring tide"), "tides.md"))
    note.unlink()
    await until(lambda: _lacks(documents(world), "tides.md"))


async def _contains(result: Any, name: str) -> bool:
    return name in await result


async def _lacks(result: Any, name: str) -> bool:
    return name not in await result


async def test_an_added_source_is_polled_paused_resumed_and_removed(world: World) -> None:
    folder = world.root / "added"
    folder.mkdir()
    (folder / "owls.md").write_text("# Owls\n\nBarn owls hunt over the river meadows at dusk.\n")
    spec = {"name": "added", "kind": "folder", "url": str(folder), "library": "synced", "interval_s": 1}
    r = await world.http.post("/v1/sources", json=spec, headers=H["admin"])
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["interval_s"] == 1 and r.json()["origin"] == "api"
    await until(lambda: _contains(documents(world), "owls.md"))

    r = await world.http.post("/v1/sources/added/pause", headers=H["admin"])
    assert r.json()["paused"] is True
    (folder / "hares.md").write_text("# Hares\n\nHares box in the fields in March.\n")
    await asyncio.sleep(3)  # three intervals
    assert "hares.md" not in await documents(world)
    r = await world.http.post("/v1/sources/added/resume", headers=H["admin"])
    assert r.json()["paused"] is False
    await until(lambda: _contains(documents(world), "hares.md"))

    r = await world.http.post("/v1/sources/added/sync", headers=H["admin"])
    assert r.status_code == 202 and r.json()["state"] in ("queued", "running", "done")

    r = await world.http.delete("/v1/sources/added", params={"remove_documents": "true"}, headers=H["admin"])
    assert r.status_code == 200 and r.json()["documents_removed"] == 2
    assert {"owls.md", "hares.md"}.isdisjoint(await documents(world))
    assert "added" not in await sources_of(world)


async def test_a_failing_source_opens_its_breaker_and_says_so(world: World) -> None:
    spec = {"name": "flaky", "kind": "folder", "url": str(world.root / "missing"), "library": "synced"}
    r = await world.http.post("/v1/sources", json=spec, headers=H["admin"])
    assert r.status_code == 201, r.text

    async def opened() -> bool:
        r = await world.http.get("/v1/sources/flaky", headers=H["admin"])
        return r.json()["breaker"] == "BREAKER_STATE_OPEN"

    await until(opened)
    state = (await world.http.get("/v1/sources/flaky", headers=H["admin"])).json()
    assert state["consecutive_failures"] == 2 and "does not exist" in state["last_error"]
    metrics = (await world.http.get("/metrics", headers=H["admin"])).text
    assert 'ragstack_source_breaker_state{source="flaky"} 2.0' in metrics
    assert 'ragstack_source_polls_total{outcome="failed",source="flaky"}' in metrics

    (world.root / "missing").mkdir()
    r = await world.http.post("/v1/sources/flaky/retry", headers=H["admin"])
    assert r.status_code == 200

    async def closed() -> bool:
        r = await world.http.get("/v1/sources/flaky", headers=H["admin"])
        return r.json()["breaker"] == "BREAKER_STATE_CLOSED"

    await until(closed)
    metrics = (await world.http.get("/metrics", headers=H["admin"])).text
    assert 'ragstack_source_breaker_state{source="flaky"} 0.0' in metrics


async def test_only_admins_manage_sources_and_callers_see_their_libraries_only(world: World) -> None:
    spec = {"name": "mine", "kind": "folder", "url": str(world.declared), "library": "synced"}
    r = await world.http.post("/v1/sources", json=spec, headers=H["writer"])
    assert r.status_code == 403 and "admin" in r.text
    for action in ("pause", "resume", "retry"):
        r = await world.http.post(f"/v1/sources/declared/{action}", headers=H["writer"])
        assert r.status_code == 403, action
    r = await world.http.delete("/v1/sources/declared", headers=H["writer"])
    assert r.status_code == 403
    assert "declared" in await sources_of(world, "writer")  # its library's
    assert "declared" not in await sources_of(world, "reader")  # not its library
    r = await world.http.get("/v1/sources/declared", headers=H["reader"])
    assert r.status_code == 404
    r = await world.http.post("/v1/sources/declared/sync", headers=H["reader"])
    assert r.status_code == 403


@pytest.mark.parametrize(
    ("spec", "status", "says"),
    [
        ({"name": "out", "kind": "folder", "url": "/etc"}, 403, "ingest.allowed_roots"),
        ({"name": "bad url", "kind": "folder", "url": "/tmp"}, 422, "name"),
        ({"name": "ftp", "kind": "http", "url": "ftp://example.org/x"}, 400, "not an http(s) URL"),
        ({"name": "s3x", "kind": "s3", "url": "https://bucket/x"}, 400, "s3://"),
        ({"name": "ep", "kind": "http", "url": "https://example.org", "endpoint": "http://x"}, 422, "s3"),
        ({"name": "x", "kind": "folder", "url": "/tmp", "every": 5}, 422, "every"),
        ({"name": "x", "kind": "folder", "url": "/tmp", "interval_s": 0.1}, 422, "interval_s"),
        ({"name": "declared", "kind": "folder", "url": "/tmp"}, 400, "ragstack.yaml"),
    ],
)
async def test_a_bad_source_is_refused_naming_the_rule(
    world: World, spec: dict[str, Any], status: int, says: str
) -> None:
    r = await world.http.post("/v1/sources", json=spec, headers=H["admin"])
    assert r.status_code == status and says in r.text, r.text


async def test_a_declared_source_cannot_be_removed_through_the_api(world: World) -> None:
    r = await world.http.delete("/v1/sources/declared", headers=H["admin"])
    assert r.status_code == 400 and "ragstack.yaml" in r.text
    r = await world.http.get("/v1/sources/nope", headers=H["admin"])
    assert r.status_code == 404


async def test_an_http_source_costs_one_conditional_get_per_poll(world: World) -> None:
    with serve_web() as web:
        web.pages["/guide.md"] = Page(b"# Guide\n\nThe ferry timetable changes in May.\n", {"ETag": '"v1"'})
        spec = {
            "name": "guide",
            "kind": "http",
            "url": f"{web.url}/guide.md",
            "library": "synced",
            "interval_s": 1,
        }
        r = await world.http.post("/v1/sources", json=spec, headers=H["admin"])
        assert r.status_code == 201, r.text
        await until(lambda: _contains(documents(world), "guide.md"))
        job = (await world.http.get("/v1/sources/guide", headers=H["admin"])).json()["last_job_id"]
        web.requests.clear()
        await asyncio.sleep(3.5)
        polls = [headers for method, path, headers in web.requests]
        assert 2 <= len(polls) <= 5 and all(h.get("if-none-match") == '"v1"' for h in polls), polls
        state = (await world.http.get("/v1/sources/guide", headers=H["admin"])).json()
        assert state["last_job_id"] == job  # every poll answered 304: no job
        web.pages["/guide.md"] = Page(b"# Guide\n\nThe ferry timetable changes in June.\n", {"ETag": '"v2"'})
        await until(lambda: _contains(found(world, "timetable June"), "guide.md"))
        del web.pages["/guide.md"]  # 404: gone, and pruned
        await until(lambda: _lacks(documents(world), "guide.md"))
        await world.http.delete("/v1/sources/guide", headers=H["admin"])


async def test_an_s3_source_follows_its_objects(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    with s3_bucket() as (url, options):
        # The ingest service's environment holds the credentials, never the source.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", options["aws_access_key_id"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options["aws_secret_access_key"])
        # ... and names the endpoint they may sign for (a source's endpoint alone gets no signature).
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", options["aws_endpoint"])
        found_credentials.cache_clear()  # looked for once a process: look again, in this environment
        bucket = url.removeprefix("s3://")
        s3 = boto3.client(
            "s3",
            endpoint_url=options["aws_endpoint"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        s3.put_object(Bucket=bucket, Key="notes/kelp.md", Body=b"# Kelp\n\nKelp forests shelter young cod.\n")
        s3.put_object(
            Bucket=bucket, Key="notes/reef.md", Body=b"# Reef\n\nThe reef bleached in the hot summer.\n"
        )
        s3.put_object(Bucket=bucket, Key="other/skip.md", Body=b"# Skip\n\nOutside the prefix.\n")
        spec = {
            "name": "bucket",
            "kind": "s3",
            "url": f"{url}/notes",
            "endpoint": options["aws_endpoint"],
            "region": "us-east-1",
            "library": "synced",
            "interval_s": 1,
        }
        r = await world.http.post("/v1/sources", json=spec, headers=H["admin"])
        assert r.status_code == 201, r.text
        await until(lambda: _contains(documents(world), "reef.md"))
        assert {"kelp.md", "reef.md"} <= await documents(world) and "skip.md" not in await documents(world)
        s3.put_object(
            Bucket=bucket, Key="notes/kelp.md", Body=b"# Kelp\n\nKelp forests now shelter young pollock.\n"
        )
        s3.delete_object(Bucket=bucket, Key="notes/reef.md")
        await until(lambda: _contains(found(world, "young pollock"), "kelp.md"))
        await until(lambda: _lacks(documents(world), "reef.md"))
        await world.http.delete("/v1/sources/bucket", params={"remove_documents": "true"}, headers=H["admin"])
