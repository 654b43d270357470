"""Attacks on the features added with the ingest queue's turns, written against the interface (the
protos, README and settings) before the implementation was read: callers taking turns in the durable
queue, requests dropped once a job ends, Vacuum removing ended jobs, the ids and bodies /mcp accepts,
the bound on a whole scan of a source, and the cut of an LLM draft at what an answer may hold.

One keyed stack for the module (a services token; graph off; a small per-caller job limit; a short
scan bound; a local web site whose pages answer slowly), driven over gRPC with what the gateway sends
for each caller (the token and `x-ragstack-principal`) and over HTTP at /mcp with API keys. The queue
itself is also attacked through JobStore on SQLite and PostgreSQL, as test_job_queue.py does.

Each test passes when the system holds. The defects this file found are fixed, and their tests pass:
Vacuum's pruning and a job started out of turn moved a newcomer's floor (the floor is now the lowest
turn still pending), PostgreSQL let concurrent submits pass a caller's pending limit (a caller's submits
are now serialised), and the scan bound's docs now say it is looked at between requests.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import httpx2
import pytest

from ragstack import domain as d
from ragstack.config import LLMConfig, StateConfig
from ragstack.errors import ResourceExhausted
from ragstack.llm import LLM
from ragstack.resources import Resources
from ragstack.serve import Stack
from ragstack.v1 import ingest_pb2, ingest_pb2_grpc
from services.ingest import jobs
from services.ingest.jobs import CANCELLED, DEAD, FAILED, QUEUED, RUNNING, JobStore
from tests.conftest import make_config, start_with
from tests.services.agent.test_llm_steps import QUESTION, agent
from tests.services.agent.test_loop import PAGES, ScriptedRetriever
from tests.services.ingest.test_job_queue import Clock, worker
from tests.tools import state as state_tools
from tests.tools.ollama_server import OllamaServer

TOKEN = "svc-token-queue-attacks-7c1d93e2b4"
PEOPLE: dict[str, dict[str, Any]] = {
    "admin": {"name": "qa-admin", "role": "admin", "libraries": ["*"], "groups": ["*"]},
    "ann": {"name": "ann", "role": "writer", "libraries": ["*"], "groups": []},
    "bob": {"name": "bob", "role": "writer", "libraries": ["*"], "groups": []},
    "cat": {"name": "cat", "role": "writer", "libraries": ["*"], "groups": []},
    "rita": {"name": "rita", "role": "reader", "libraries": ["*"], "groups": []},
}
READER_KEY = "qa-reader-key-41f0c2d8e6a9"
KEYS = [
    {"name": "qa-admin", "key": "qa-admin-key-9b3e7d1c5a20", "role": "admin"},
    {"name": "rita", "key": READER_KEY, "role": "reader", "libraries": ["*"]},
]
PENDING_LIMIT = 30
SCAN_S = 1.5  # ingest.source_scan_timeout_s in this stack
OK = grpc.StatusCode.OK
INVALID, DENIED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND, EXHAUSTED = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.RESOURCE_EXHAUSTED
S = ingest_pb2  # states and kinds
ENDED = {S.INGEST_JOB_STATE_DONE, S.INGEST_JOB_STATE_FAILED, S.INGEST_JOB_STATE_CANCELLED}
ENDED |= {S.INGEST_JOB_STATE_DEAD}
PENDING = {S.INGEST_JOB_STATE_QUEUED, S.INGEST_JOB_STATE_RUNNING}


# --- a web site whose pages answer slowly (sources) --------------------------------------------------


class SlowSite:
    """/sitemap.xml at once; /p{n}.html after PAGE_S; /slow.html after SLOW_S. Records each request."""

    PAGES, PAGE_S, SLOW_S = 30, 0.5, 6.0

    def __init__(self) -> None:
        self.requests: list[tuple[float, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site.requests.append((time.monotonic(), self.path))
                try:
                    if self.path == "/sitemap.xml":
                        urls = "".join(
                            f"<url><loc>{site.url(f'/p{n}.html')}</loc></url>" for n in range(site.PAGES)
                        )
                        body = (
                            '<?xml version="1.0" encoding="UTF-8"?><urlset '
                            f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
                        ).encode()
                        kind = "application/xml"
                    else:
                        time.sleep(site.SLOW_S if self.path == "/slow.html" else site.PAGE_S)
                        body = f"<html><body><h1>Page</h1><p>{self.path} text.</p></body></html>".encode()
                        kind = "text/html"
                    self.send_response(200)
                    self.send_header("content-type", kind)
                    self.send_header("etag", f'"{abs(hash(self.path))}"')
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up (a scan stopped): nothing to answer
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- the stack ---------------------------------------------------------------------------------------


@dataclass
class World:
    stack: Stack
    base: Path
    channel: grpc.aio.Channel
    site: SlowSite
    salt: Iterator[int] = field(default_factory=lambda: iter(range(10**6)))

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def inbox(self) -> Path:
        return self.base / "inbox"


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[World]:
    base = tmp_path_factory.mktemp("queue-attacks")
    (base / "inbox").mkdir()
    cfg = make_config(
        base / "data",
        services={"token": TOKEN},
        ingest={
            "graph": False,
            "allowed_roots": [str(base / "inbox")],
            "fetch_allow": ["127.0.0.1"],
            "job_pending_limit": PENDING_LIMIT,
            "job_attempts": 1,
            "job_backoff_s": 1,
            "source_scan_timeout_s": SCAN_S,
            "source_tick_s": 0.2,
            "source_backoff_s": 30,
        },
        gateway={"api_keys": KEYS},
    )
    site = SlowSite()
    stack = await start_with(cfg, resources)
    channel = grpc.aio.insecure_channel(stack.peers["ingest"])
    try:
        yield World(stack, base, channel, site)
    finally:
        await channel.close()
        await stack.stop()
        site.stop()


def principal(who: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TOKEN}"), ("x-ragstack-principal", json.dumps(PEOPLE[who])))


async def call(
    w: World, method: str, request: Any, who: str = "admin", deadline_s: float = 60
) -> tuple[grpc.StatusCode, str, Any]:
    """(status, details, reply) of one unary IngestService call; never INTERNAL or a traceback."""
    stub = ingest_pb2_grpc.IngestServiceStub(w.channel)
    try:
        reply = await getattr(stub, method)(request, metadata=principal(who), timeout=deadline_s)
    except grpc.aio.AioRpcError as err:
        code, details = err.code(), err.details() or ""
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (method, code, details[:500])
        assert "Traceback" not in details and 'File "' not in details, details[:500]
        return code, details, None
    return OK, "", reply


async def ok(w: World, method: str, request: Any, who: str = "admin") -> Any:
    code, details, reply = await call(w, method, request, who)
    assert code == OK, (method, code, details)
    return reply


def uploading(library: str, files: dict[str, str], paths: list[str] | None = None) -> Any:
    uploads = [S.FileUpload(filename=n, content=t.encode()) for n, t in files.items()]
    return S.SubmitIngestRequest(request=S.IngestRequest(library=library, files=uploads, paths=paths or []))


async def submit(w: World, who: str, library: str, text: str = "") -> str:
    n = next(w.salt)
    body = text or f"# Note {n}\n\nNote {n} of {who} about the harbour office, line {n}.\n"
    reply = await ok(w, "SubmitIngest", uploading(library, {f"n{n}.md": body}), who)
    assert reply.job.state == S.INGEST_JOB_STATE_QUEUED
    return str(reply.job.job_id)


async def job(w: World, job_id: str) -> Any:
    return (await ok(w, "GetIngestJob", S.GetIngestJobRequest(job_id=job_id))).job


async def all_jobs(w: World) -> dict[str, Any]:
    listed = (await ok(w, "ListIngestJobs", S.ListIngestJobsRequest(limit=500))).jobs
    assert len(listed) < 500
    return {j.job_id: j for j in listed}


async def until_state(w: World, job_id: str, states: set[int], limit_s: float = 60) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = await job(w, job_id)
        if found.state in states:
            return found
        await asyncio.sleep(0.03)
    raise AssertionError(f"job {job_id} is still {found.state}")


async def idle(w: World, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while any(j.state in PENDING for j in (await all_jobs(w)).values()):
        assert time.monotonic() < deadline, "the queue never emptied"
        await asyncio.sleep(0.05)


async def cancel_all(w: World, ids: list[str]) -> None:
    for job_id in ids:
        await call(w, "CancelIngestJob", S.CancelIngestJobRequest(job_id=job_id))


def survey(plots: int, mark: str) -> str:
    """A document that takes seconds to embed (a job that runs long enough to be attacked)."""
    return f"# Survey {mark}\n\n" + "\n\n".join(
        f"## Plot {i}\n\n"
        + " ".join(
            f"Plot {i} transect {j} recorded banksia and hakea shrubs by the creek." for j in range(30)
        )
        for i in range(plots)
    )


async def blocker(w: World, who: str = "cat", mark: str = "") -> str:
    """A long job of `who`, running."""
    job_id = await submit(w, who, f"blk{next(w.salt)}", survey(60, mark or uuid.uuid4().hex))
    await until_state(w, job_id, {S.INGEST_JOB_STATE_RUNNING})
    return job_id


def at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def ended_between(got: dict[str, Any], ids: list[str], after: str, before: str) -> list[str]:
    """Those of `ids` that were done after `after` and before `before` (both RFC 3339)."""
    return [
        i
        for i in ids
        if got[i].state == S.INGEST_JOB_STATE_DONE and at(after) < at(got[i].updated_at) < at(before)
    ]


def kept_order(got: dict[str, Any], ids: list[str]) -> None:
    """A caller's jobs that were done, done in the order submitted, and the first ones submitted."""
    done = [i for i in ids if got[i].state == S.INGEST_JOB_STATE_DONE]
    assert sorted(done, key=lambda i: at(got[i].updated_at)) == done, "a caller's jobs ran out of order"
    assert done == ids[: len(done)], "a later job of a caller ran while an earlier one waited"


# --- 1. callers take turns (through the real service) ------------------------------------------------


@pytest.mark.slow
async def test_a_flood_delays_another_callers_first_job_by_about_one_job(world: World) -> None:
    await idle(world)
    flood = [await submit(world, "ann", "flood-a") for _ in range(20)]
    late = await submit(world, "bob", "late-b")
    await until_state(world, late, ENDED)
    await cancel_all(world, flood)
    await idle(world)
    got = await all_jobs(world)
    assert got[late].state == S.INGEST_JOB_STATE_DONE, got[late]
    ahead = ended_between(got, flood, got[late].submitted_at, got[late].updated_at)
    assert len(ahead) <= 2, f"bob's first job waited for {len(ahead)} of ann's"
    kept_order(got, flood)


@pytest.mark.slow
async def test_three_callers_over_several_libraries_take_turns(world: World) -> None:
    await idle(world)
    ann = [await submit(world, "ann", f"turn{i % 6}") for i in range(12)]
    bob = [await submit(world, "bob", f"turn{(i + 3) % 6}") for i in range(12)]
    cat = await submit(world, "cat", "turn-cat")
    await until_state(world, cat, ENDED)
    await until_state(world, bob[1], ENDED)
    await cancel_all(world, ann + bob)
    await idle(world)
    got = await all_jobs(world)
    assert got[cat].state == S.INGEST_JOB_STATE_DONE
    before_cat = ended_between(got, ann + bob, got[cat].submitted_at, got[cat].updated_at)
    assert len(before_cat) <= 3, f"cat's job waited for {len(before_cat)} jobs"
    before_bob = ended_between(got, ann, got[bob[0]].submitted_at, got[bob[0]].updated_at)
    assert len(before_bob) <= 2, f"bob's first job waited for {len(before_bob)} of ann's"
    kept_order(got, ann)
    kept_order(got, bob)


@pytest.mark.slow
@pytest.mark.parametrize("which", ["queued", "all"])
async def test_cancelling_and_resubmitting_does_not_jump_the_turns(world: World, which: str) -> None:
    """Ann floods, bob queues one, then ann cancels her waiting jobs (or all of them, the running one
    too) and queues them again: her new jobs are queued behind bob's turn, not ahead of it."""
    await idle(world)
    first = [await submit(world, "ann", "again-a") for _ in range(10)]
    late = await submit(world, "bob", "again-b")
    for job_id in first:
        if which == "all" or (await job(world, job_id)).state == S.INGEST_JOB_STATE_QUEUED:
            await call(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=job_id), "ann")
    second = [await submit(world, "ann", "again-a") for _ in range(10)]
    await until_state(world, late, ENDED)
    await cancel_all(world, first + second)
    await idle(world)
    got = await all_jobs(world)
    assert got[late].state == S.INGEST_JOB_STATE_DONE
    ahead = ended_between(got, first + second, got[late].submitted_at, got[late].updated_at)
    assert len(ahead) <= 2, f"bob's job waited for {len(ahead)} of ann's"
    kept_order(got, second)


@pytest.mark.slow
async def test_syncs_asked_for_by_hand_count_against_the_callers_limit(world: World) -> None:
    """SubmitIngest naming a source is a caller's request like any other: one writer cannot queue
    more than `ingest.job_pending_limit` jobs by asking for the same sync again and again."""
    await idle(world)
    folder = world.inbox / "hand"
    folder.mkdir()
    (folder / "a.md").write_text("# Hand\n\nA file synced by hand.\n")
    spec = S.SourceSpec(name="hand", kind=S.SOURCE_KIND_FOLDER, url=str(folder), library="hand")
    spec.interval_s = 3600
    await ok(world, "AddSource", S.AddSourceRequest(spec=spec))
    await ok(world, "PauseSource", S.PauseSourceRequest(name="hand"))
    held = await blocker(world)
    ids: list[str] = []
    refused: tuple[Any, str] | None = None
    try:
        for _ in range(PENDING_LIMIT + 10):
            code, details, reply = await call(
                world, "SubmitIngest", S.SubmitIngestRequest(request=S.IngestRequest(source="hand")), "ann"
            )
            if code != OK:
                refused = (code, details)
                break
            ids.append(reply.job.job_id)
        assert len(set(ids)) <= PENDING_LIMIT, f"{len(set(ids))} jobs queued by one caller"
        if refused is not None:
            assert refused[0] == EXHAUSTED and "ingest.job_pending_limit" in refused[1], refused
    finally:
        await cancel_all(world, [*ids, held])
        await call(world, "RemoveSource", S.RemoveSourceRequest(name="hand"))
        await idle(world)


# --- 2. an ended job keeps no request -----------------------------------------------------------------


def files_holding(folder: Path, needle: bytes) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()
    )


@pytest.mark.slow
async def test_every_way_a_job_ends_drops_its_request(world: World) -> None:
    """Cancelled while queued, failed (its path gone by the time it runs), done, and cancelled while
    running: each job's request, with its uploaded bytes, is gone from the jobs store; what the
    job's record says stays readable."""
    await idle(world)
    marks = {k: f"MARK{k.upper()}{uuid.uuid4().hex}" for k in ("queued", "failed", "done", "running")}
    running = await blocker(world, mark=marks["running"])
    gone = world.inbox / "gone.md"
    gone.write_text("# Gone\n\nThis file is removed before its job runs.\n")
    queued = await ok(
        world, "SubmitIngest", uploading("keep", {"q.md": f"# Q\n\n{marks['queued']} text.\n"}), "ann"
    )
    failed = await ok(
        world,
        "SubmitIngest",
        uploading("keep", {"f.md": f"# F\n\n{marks['failed']} text.\n"}, [str(gone)]),
        "ann",
    )
    done = await ok(
        world, "SubmitIngest", uploading("keep", {"d.md": f"# D\n\n{marks['done']} text.\n"}), "ann"
    )
    ids = {
        "queued": queued.job.job_id,
        "failed": failed.job.job_id,
        "done": done.job.job_id,
        "running": running,
    }
    cancelled = await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=ids["queued"]), "ann")
    assert cancelled.job.state == S.INGEST_JOB_STATE_CANCELLED
    gone.unlink()
    stopped = await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=running))
    assert stopped.job.state == S.INGEST_JOB_STATE_CANCELLED
    ends = {k: await until_state(world, v, ENDED) for k, v in ids.items()}
    assert ends["done"].state == S.INGEST_JOB_STATE_DONE and ends["done"].summary.indexed == 1
    assert ends["failed"].state == S.INGEST_JOB_STATE_FAILED and "gone.md" in ends["failed"].error, ends[
        "failed"
    ]
    assert ends["running"].state == S.INGEST_JOB_STATE_CANCELLED
    with sqlite3.connect(f"file:{world.data / 'jobs.sqlite'}?mode=ro", uri=True) as db:
        sizes = dict(db.execute("SELECT job_id, length(request) FROM jobs").fetchall())
    assert {k: sizes[v] or 0 for k, v in ids.items()} == dict.fromkeys(ids, 0), sizes
    # Nothing needs the request any more: the record reads, lists and cancels as it ended.
    listed = await all_jobs(world)
    for k, v in ids.items():
        assert listed[v].state == ends[k].state and listed[v].library
        again = await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=v))
        assert again.job.state == ends[k].state
    # What was never indexed (cancelled while queued) is nowhere in the data but the jobs store.
    elsewhere = [
        f for f in files_holding(world.data, marks["queued"].encode()) if not f.startswith("jobs.sqlite")
    ]
    assert elsewhere == [], elsewhere


@pytest.mark.slow
async def test_an_ended_jobs_uploaded_bytes_are_gone_from_the_jobs_file(world: World) -> None:
    """Not only the column: once the write-ahead log is checkpointed, no page of jobs.sqlite holds the
    bytes of a cancelled upload (its freed pages are overwritten). Until then the log still holds the
    frames written while the job was queued."""
    await idle(world)
    mark = f"SECRETUPLOAD{uuid.uuid4().hex}"
    held = await blocker(world)
    job_id = (
        await ok(world, "SubmitIngest", uploading("keep", {"s.md": f"# S\n\n{mark} " * 200}), "ann")
    ).job.job_id
    await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=job_id), "ann")
    await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=held))
    await idle(world)
    with sqlite3.connect(world.data / "jobs.sqlite") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert files_holding(world.data, mark.encode()) == []


# --- 3. sources: the bound on a whole scan ------------------------------------------------------------


async def source(w: World, name: str) -> Any:
    return (await ok(w, "GetSource", S.GetSourceRequest(name=name))).source


async def until_error(w: World, name: str, limit_s: float) -> tuple[str, float]:
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        found = await source(w, name)
        if found.last_error:
            return found.last_error, time.monotonic() - started
        await asyncio.sleep(0.05)
    return "", time.monotonic() - started


@pytest.mark.slow
async def test_a_sitemap_scan_past_the_bound_fails_naming_the_setting(world: World) -> None:
    """30 pages that answer in half a second each: the scan passes its bound of 1.5 s, the poll fails
    naming ingest.source_scan_timeout_s, and no page is asked for long after the bound."""
    spec = S.SourceSpec(
        name="slowmap", kind=S.SOURCE_KIND_SITEMAP, url=world.site.url("/sitemap.xml"), library="web"
    )
    spec.interval_s = 3600
    first = len(world.site.requests)
    added = time.monotonic()
    await ok(world, "AddSource", S.AddSourceRequest(spec=spec))
    try:
        error, _ = await until_error(world, "slowmap", 15)
        assert "ingest.source_scan_timeout_s" in error, error
        asked = [t - added for t, path in world.site.requests[first:] if path.startswith("/p")]
        assert asked and max(asked) < SCAN_S + 2.0, asked
    finally:
        await call(world, "PauseSource", S.PauseSourceRequest(name="slowmap"))


@pytest.mark.slow
async def test_a_sync_past_the_bound_fails_naming_the_setting(world: World) -> None:
    await idle(world)
    started = time.monotonic()
    code, details, reply = await call(
        world, "SubmitIngest", S.SubmitIngestRequest(request=S.IngestRequest(source="slowmap"))
    )
    assert code == OK, details
    ended = await until_state(world, reply.job.job_id, ENDED, 20)
    took = time.monotonic() - started
    await call(world, "RemoveSource", S.RemoveSourceRequest(name="slowmap"))
    assert ended.state in (S.INGEST_JOB_STATE_FAILED, S.INGEST_JOB_STATE_DEAD), ended
    assert "ingest.source_scan_timeout_s" in ended.error, ended.error
    assert took < SCAN_S + 4, took


@pytest.mark.slow
async def test_one_slow_answer_holds_a_poll_for_the_bound_and_that_request(world: World) -> None:
    """An http source whose one page answers after 6 s (within the page's own deadline of 15 s):
    the scan's bound of 1.5 s is looked at between requests, as the README says, so the poll fails
    naming it once that request is answered, and asks for nothing more."""
    spec = S.SourceSpec(name="slowpage", kind=S.SOURCE_KIND_HTTP, url=world.site.url("/slow.html"))
    spec.library, spec.interval_s = "web", 3600
    await ok(world, "AddSource", S.AddSourceRequest(spec=spec))
    try:
        error, took = await until_error(world, "slowpage", 12)
        assert "ingest.source_scan_timeout_s" in error, (error, took)
        assert took < SCAN_S + 6 + 2.5, took  # the bound, the one request in flight, and a margin
    finally:
        await call(world, "RemoveSource", S.RemoveSourceRequest(name="slowpage"))


# --- 4. Vacuum of ended jobs --------------------------------------------------------------------------


@pytest.mark.slow
async def test_vacuum_is_for_admins_and_its_window_is_bounded(world: World) -> None:
    await idle(world)
    before = set(await all_jobs(world))
    for who in ("rita", "ann"):
        code, details, _ = await call(world, "Vacuum", S.VacuumRequest(older_than_days=0), who)
        assert code == DENIED, (who, code, details)
    for days in (-1, 36_501, 2**31 - 1, -(2**31)):
        code, details, _ = await call(world, "Vacuum", S.VacuumRequest(older_than_days=days))
        assert code == INVALID and "older_than_days" in details, (days, code, details)
    assert set(await all_jobs(world)) == before  # nothing removed by a refused call
    default = await ok(world, "Vacuum", S.VacuumRequest())
    assert default.older_than_days == 7 and default.jobs_removed == 0
    for days in (1, 36_500):  # every job here ended within the last day
        reply = await ok(world, "Vacuum", S.VacuumRequest(older_than_days=days))
        assert reply.older_than_days == days and reply.jobs_removed == 0, reply
    assert set(await all_jobs(world)) == before


@pytest.mark.slow
async def test_vacuum_removes_every_ended_job_and_no_pending_one(world: World) -> None:
    """Vacuum(0) while jobs are pending: it waits for the ingest writing (a short job of bob's), and
    then removes exactly the jobs that had ended (done, failed, cancelled, dead, of every caller, bob's
    short job included), counts them, and leaves the pending ones (cat's long job, ann's and bob's
    behind it): they still run, with their requests, and read NOT_FOUND only once ended and vacuumed."""
    await idle(world)
    await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=await submit(world, "ann", "x")))
    short = await submit(world, "bob", "before-vacuum")
    await until_state(world, short, {S.INGEST_JOB_STATE_RUNNING, *ENDED})
    long = await submit(world, "cat", f"blk{next(world.salt)}", survey(60, uuid.uuid4().hex))
    queued = [await submit(world, "ann", "after-vacuum"), await submit(world, "bob", "after-vacuum2")]
    listed = await all_jobs(world)
    ended = [i for i, j in listed.items() if j.state in ENDED]
    states = {listed[i].state for i in ended}
    assert {S.INGEST_JOB_STATE_DONE, S.INGEST_JOB_STATE_CANCELLED} <= states, states
    reply = await ok(world, "Vacuum", S.VacuumRequest(older_than_days=0))
    assert reply.jobs_removed == len({*ended, short}), (reply.jobs_removed, len(ended))
    for job_id in [short, *ended[:20]]:
        for method, req in (
            ("GetIngestJob", S.GetIngestJobRequest(job_id=job_id)),
            ("CancelIngestJob", S.CancelIngestJobRequest(job_id=job_id)),
        ):
            code, details, _ = await call(world, method, req)
            assert code == NOT_FOUND, (method, code, details)
    assert (await job(world, long)).state in PENDING
    assert [(await job(world, q)).state for q in queued] == [S.INGEST_JOB_STATE_QUEUED] * 2
    assert set(await all_jobs(world)) == {long, *queued}
    await until_state(world, long, {S.INGEST_JOB_STATE_RUNNING})
    await ok(world, "CancelIngestJob", S.CancelIngestJobRequest(job_id=long))
    for q in queued:
        finished = await until_state(world, q, ENDED)
        assert finished.state == S.INGEST_JOB_STATE_DONE and finished.summary.indexed == 1, finished
    again = await ok(world, "Vacuum", S.VacuumRequest(older_than_days=0))
    assert again.jobs_removed == 3


# --- 5. MCP over HTTP: ids and bodies -----------------------------------------------------------------

MCP_HEADERS = {"x-api-key": READER_KEY, "accept": "application/json, text/event-stream"}
JSON_TYPE = {"content-type": "application/json"}


def clean(response: httpx2.Response) -> None:
    """Never a server error or a traceback."""
    assert response.status_code < 500, (response.status_code, response.text[:300])
    assert "Traceback" not in response.text and 'File "' not in response.text, response.text[:300]


def invalid_request(response: httpx2.Response, *codes: int) -> None:
    """JSON-RPC's Invalid Request (or another code given) with HTTP 400, short: no echo of the input."""
    clean(response)
    assert len(response.content) < 4000, len(response.content)
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["code"] in (codes or (-32600,)), error


@pytest.fixture
async def mcp(world: World) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=world.stack.gateway_url, headers=MCP_HEADERS, timeout=30) as http:
        yield http


def listing(ident: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}


VALID_IDS: list[Any] = [
    0,
    -1,
    2**53 + 1,
    2**63,
    2**64 + 7,
    -(2**63) - 1,
    "",
    "1",
    "ид-🙂",
    "\x00",
    "x" * 20_000,
]


@pytest.mark.slow
@pytest.mark.parametrize("ident", VALID_IDS, ids=[repr(i)[:16] for i in VALID_IDS])
async def test_mcp_string_and_integer_ids_are_answered_with_the_same_id(
    mcp: httpx2.AsyncClient, ident: Any
) -> None:
    response = await mcp.post("/mcp", json=listing(ident))
    assert response.status_code == 200, (response.status_code, response.text[:300])
    body = response.json()
    assert body["id"] == ident and type(body["id"]) is type(ident), body.get("id")
    assert body["result"]["tools"]


BAD_IDS: list[tuple[str, bytes]] = [
    ("array", b"[]"),
    ("array of one", b"[1]"),
    ("false", b"false"),
    ("empty object", b"{}"),
    ("nested", b'{"a": {"b": [1, {"c": null}]}}'),
    ("NaN", b"NaN"),
    ("Infinity", b"Infinity"),
    ("-Infinity", b"-Infinity"),
    ("exponent fraction", b"1.5e0"),
    ("deep array", b"[" * 5000 + b"]" * 5000),
    ("huge object", b'{"x": "' + b"A" * 60_000 + b'"}'),
]


@pytest.mark.slow
@pytest.mark.parametrize("raw", [r for _, r in BAD_IDS], ids=[n for n, _ in BAD_IDS])
async def test_mcp_other_ids_are_invalid_requests(mcp: httpx2.AsyncClient, raw: bytes) -> None:
    body = b'{"jsonrpc": "2.0", "id": ' + raw + b', "method": "tools/list"}'
    response = await mcp.post("/mcp", content=body, headers=JSON_TYPE)
    invalid_request(response, -32600, -32700)
    after = await mcp.post("/mcp", json=listing("after"))
    assert after.status_code == 200 and after.json()["id"] == "after"


@pytest.mark.slow
async def test_mcp_integral_fractions_are_not_taken_for_notifications(mcp: httpx2.AsyncClient) -> None:
    """1.0 and 1e2 are JSON numbers written as fractions: refused, or answered with that number, but
    never taken for a notification (202 with nothing)."""
    for raw, number in ((b"1.0", 1), (b"1e2", 100), (b"-0.0", 0)):
        body = b'{"jsonrpc": "2.0", "id": ' + raw + b', "method": "tools/list"}'
        response = await mcp.post("/mcp", content=body, headers=JSON_TYPE)
        clean(response)
        if response.status_code == 200:
            assert response.json()["id"] == number, response.json()["id"]
        else:
            invalid_request(response)


DUPLICATES = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "id": {"a": 1}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "id": null}',
    b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list", "id": 7}',
    b'{"jsonrpc": "2.0", "id": true, "id": "s", "method": "tools/list"}',
]


@pytest.mark.slow
@pytest.mark.parametrize("body", DUPLICATES, ids=[str(n) for n in range(len(DUPLICATES))])
async def test_mcp_duplicate_id_keys_are_judged_as_the_server_reads_them(
    mcp: httpx2.AsyncClient, body: bytes
) -> None:
    """The guard and the SDK must read the same id: an answer carries the id the message ends with,
    a refusal is Invalid Request, and it is never a silent 202."""
    response = await mcp.post("/mcp", content=body, headers=JSON_TYPE)
    clean(response)
    last = json.loads(body)["id"]
    if isinstance(last, int | str) and not isinstance(last, bool):
        assert response.status_code in (200, 400), response.text[:300]
        if response.status_code == 200:
            assert response.json()["id"] == last
        else:
            invalid_request(response)
    else:
        invalid_request(response)


NOT_OBJECTS = [b'"tools/list"', b"5", b"null", b"true", b'""', b"[]", b"[[]]", b"[1, 2]"]
NOT_OBJECTS += [b'[{"jsonrpc": "2.0", "method": "notifications/initialized"}]']


@pytest.mark.slow
@pytest.mark.parametrize("body", NOT_OBJECTS, ids=[b.decode()[:20] for b in NOT_OBJECTS])
async def test_mcp_a_body_that_is_not_one_message_is_an_invalid_request(
    mcp: httpx2.AsyncClient, body: bytes
) -> None:
    invalid_request(await mcp.post("/mcp", content=body, headers=JSON_TYPE))


BROKEN = [
    ("invalid utf-8", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "\xff\xfe"}'),
    ("lone surrogate", b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list"}'),
    ("deep array", b"[" * 60_000),
    ("deep params", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + b'{"a":' * 10_000),
    (
        "deep closed params",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"a": '
        + b"[" * 20_000
        + b"]" * 20_000
        + b"}}",
    ),
    ("no method", b'{"jsonrpc": "2.0", "id": 3}'),
    ("method not a string", b'{"jsonrpc": "2.0", "id": 3, "method": 5}'),
    ("old version", b'{"jsonrpc": "1.0", "id": 3, "method": "tools/list"}'),
    ("two messages", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}' * 2),
    ("trailing junk", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"} x'),
    ("empty", b""),
    ("whitespace", b"  \n "),
]


@pytest.mark.slow
@pytest.mark.parametrize("body", [b for _, b in BROKEN], ids=[n for n, _ in BROKEN])
async def test_mcp_broken_bodies_are_refused_cleanly(mcp: httpx2.AsyncClient, body: bytes) -> None:
    started = time.monotonic()
    response = await mcp.post("/mcp", content=body, headers=JSON_TYPE)
    clean(response)
    assert response.status_code in (400, 422), (response.status_code, response.text[:300])
    assert time.monotonic() - started < 5
    after = await mcp.post("/mcp", json=listing(9))
    assert after.status_code == 200 and after.json()["id"] == 9


ENCODED = [
    ("utf-8 bom", b"\xef\xbb\xbf" + json.dumps(listing(True)).encode()),
    ("utf-16", json.dumps(listing(True)).encode("utf-16")),
    ("utf-16-le", json.dumps(listing(True)).encode("utf-16-le")),
    ("utf-32", json.dumps(listing(True)).encode("utf-32")),
]


@pytest.mark.slow
@pytest.mark.parametrize("body", [b for _, b in ENCODED], ids=[n for n, _ in ENCODED])
async def test_mcp_other_encodings_do_not_get_a_bad_id_past_the_rule(
    mcp: httpx2.AsyncClient, body: bytes
) -> None:
    """A message with a bad id, encoded so that one JSON reader may decode it and another not: it is
    refused (Invalid Request or a parse error), never answered nor taken for a notification."""
    response = await mcp.post("/mcp", content=body, headers=JSON_TYPE)
    invalid_request(response, -32600, -32700)


CONTENT_TYPES = [
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    "Application/Json ; charset=UTF-8",
    "application/json-patch+json",
    "text/plain",
    "",
    "application/x-www-form-urlencoded",
]


@pytest.mark.slow
@pytest.mark.parametrize("kind", CONTENT_TYPES)
async def test_mcp_content_types_do_not_get_a_bad_id_past_the_rule(
    mcp: httpx2.AsyncClient, kind: str
) -> None:
    """Whatever content type the server reads a message with, the id rule is applied to it too."""
    headers = {"content-type": kind}
    good = await mcp.post("/mcp", content=json.dumps(listing(4)).encode(), headers=headers)
    clean(good)
    bad = await mcp.post("/mcp", content=json.dumps(listing(True)).encode(), headers=headers)
    clean(bad)
    assert bad.status_code != 202 and bad.status_code != 200, (kind, bad.status_code, bad.text[:300])
    if good.status_code == 200:  # a content type the server reads: the rule applies
        invalid_request(bad)


@pytest.mark.slow
async def test_mcp_notifications_and_responses(mcp: httpx2.AsyncClient) -> None:
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}},
    ):
        response = await mcp.post("/mcp", json=message)
        assert response.status_code == 202, (message, response.status_code, response.text[:300])
    for message in (
        {"jsonrpc": "2.0", "id": True, "result": {}},
        {"jsonrpc": "2.0", "id": {"a": 1}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 2.5, "method": "notifications/initialized"},
    ):
        invalid_request(await mcp.post("/mcp", json=message))


@pytest.mark.slow
async def test_mcp_body_limit_holds_for_any_framing(mcp: httpx2.AsyncClient) -> None:
    """64 KB in all, whether the length is announced or the body comes chunked."""
    limit = 64 * 1024

    def padded(size: int) -> bytes:
        head = json.dumps({**listing(11), "params": {"pad": ""}}).encode()
        return head.replace(b'"pad": ""', b'"pad": "' + b"p" * (size - len(head)) + b'"')

    at_limit = await mcp.post("/mcp", content=padded(limit), headers=JSON_TYPE)
    assert at_limit.status_code != 413 and at_limit.status_code < 500, at_limit.text[:300]
    over = await mcp.post("/mcp", content=padded(limit + 1), headers=JSON_TYPE)
    assert over.status_code == 413, over.status_code

    async def chunks() -> AsyncIterator[bytes]:
        body = padded(4 * limit)
        for start in range(0, len(body), 8192):
            yield body[start : start + 8192]

    chunked = await mcp.post("/mcp", content=chunks(), headers=JSON_TYPE)
    assert chunked.status_code == 413, (chunked.status_code, chunked.text[:300])


# --- 6. the agent's cut at what an answer may hold ---------------------------------------------------


def llm_at(server: OllamaServer) -> LLM:
    return LLM(LLMConfig(host=server.url, model="test", timeout_s=20.0, max_output_tokens=131072))


@pytest.mark.parametrize(
    "pieces",
    [
        ["Tomas Brek painted night scenes [1]. " * 3000],  # one piece past the limit
        [("Tomas Brek filmed " + "夜景と港、" * 1000 + "in Prague [1]。") * 4] * 4,  # non-ASCII
        ["Tomas Brek is known for night scenes [1].", " " + "a" * 100_000],
    ],
    ids=["one-huge-piece", "non-ascii", "then-no-sentence-end"],
)
async def test_a_draft_never_streams_past_what_an_answer_may_hold(
    tmp_path: Path, embedder: Any, pieces: list[str]
) -> None:
    assert d.MAX_ANSWER_CHARS == 64_000
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    with OllamaServer("test", lambda request: iter(pieces)).serve() as server:
        a = agent(tmp_path, embedder, retriever, llm_at(server), llm_router=False)
        events = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)]
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.cut_by == "max_answer_chars", getattr(done, "cut_by", done)
    streamed = "".join(e.text for e in events if isinstance(e, d.DeltaEvent))
    assert len(streamed) <= d.MAX_ANSWER_CHARS, len(streamed)
    assert len(done.answer) <= d.MAX_ANSWER_CHARS


# --- 7. the queue itself, on SQLite and PostgreSQL ----------------------------------------------------


def request_sizes(cfg: StateConfig, tmp: Path) -> dict[str, int]:
    with closing(state_tools.store(cfg, tmp, jobs)) as reader:
        return {job_id: size or 0 for job_id, size in reader.all("SELECT job_id, length(request) FROM jobs")}


UPLOAD = b"%PDF-" + b"u" * 50_000


def run_all(store: JobStore, leave: int = 0) -> list[str]:
    """Claims and finishes the jobs in the order the queue gives them: until `leave` are still
    queued (each of those runs then due), or, with `leave` 0, until none is due."""
    order = []
    while len([j for j in store.list(limit=500) if j.state == QUEUED]) > leave:
        taken = store.claim()
        if taken is None:
            assert not leave, "a job that should be due was not"
            break
        order.append(taken[0].job_id)
        store.finish(taken[0].job_id, b"")
        store.release(taken[0].job_id)
    return order


def test_store_a_job_dead_lettered_at_a_claim_keeps_no_request(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """A job whose worker died and that has no start left is dead-lettered by the next claim: its
    request goes as for any other end."""
    clock = Clock()
    with closing(worker(state_config, tmp_path, clock, lease_s=10, attempts=1)) as dying:
        job = dying.submit("x", UPLOAD)
        assert dying.claim() is not None
    clock.advance(11)
    with closing(worker(state_config, tmp_path, clock, lease_s=10, attempts=1)) as other:
        assert other.claim() is None
        assert other.get(job.job_id).state == DEAD  # type: ignore[union-attr]
    assert request_sizes(state_config, tmp_path)[job.job_id] == 0


def test_store_a_retry_and_a_hand_back_keep_the_request(state_config: StateConfig, tmp_path: Path) -> None:
    clock = Clock()
    with closing(worker(state_config, tmp_path, clock, attempts=3, backoff_s=10)) as store:
        job = store.submit("x", UPLOAD)
        assert store.claim()[1] == UPLOAD  # type: ignore[index]
        store.fail(job.job_id, "Unavailable: the embedder is down", retry=True)
        store.release(job.job_id)
        assert request_sizes(state_config, tmp_path)[job.job_id] == len(UPLOAD)
        clock.advance(10)
        again = store.claim()
        assert again is not None and again[1] == UPLOAD
        store.release(job.job_id)  # the service stops mid-job
        last = store.claim()
        assert last is not None and last[1] == UPLOAD


def test_store_cancelling_a_running_or_retry_waiting_job_drops_its_request(
    state_config: StateConfig, tmp_path: Path
) -> None:
    clock = Clock()
    with closing(worker(state_config, tmp_path, clock, attempts=3, backoff_s=10)) as store:
        running, waiting = store.submit("x", UPLOAD), store.submit("y", UPLOAD)
        assert store.claim()[0].job_id == running.job_id  # type: ignore[index]
        assert store.claim()[0].job_id == waiting.job_id  # type: ignore[index]
        store.fail(waiting.job_id, "Unavailable: down", retry=True)
        store.release(waiting.job_id)
        assert store.get(waiting.job_id).state == QUEUED  # type: ignore[union-attr]
        assert store.cancel(running.job_id).state == CANCELLED  # type: ignore[union-attr]
        assert store.cancel(waiting.job_id).state == CANCELLED  # type: ignore[union-attr]
        store.finish(running.job_id, b"late")  # the worker ends it after the cancel: stays cancelled
        store.release(running.job_id)
        assert store.get(running.job_id).state == CANCELLED  # type: ignore[union-attr]
    sizes = request_sizes(state_config, tmp_path)
    assert (sizes[running.job_id], sizes[waiting.job_id]) == (0, 0)


def test_store_prune_never_removes_a_pending_job_however_old(
    state_config: StateConfig, tmp_path: Path
) -> None:
    clock = Clock()
    with closing(worker(state_config, tmp_path, clock, attempts=3, backoff_s=10, lease_s=10)) as store:
        running = store.submit("a", b"r")
        assert store.claim()[0].job_id == running.job_id  # type: ignore[index]
        retrying = store.submit("b", b"r")
        assert store.claim()[0].job_id == retrying.job_id  # type: ignore[index]
        store.fail(retrying.job_id, "Unavailable: down", retry=True)  # queued again, for a retry
        store.release(retrying.job_id)
        failed = store.submit("c", b"r")
        assert store.claim()[0].job_id == failed.job_id  # type: ignore[index]
        store.fail(failed.job_id, "InvalidArgument: bad", retry=False)
        store.release(failed.job_id)
        with closing(worker(state_config, tmp_path, clock, attempts=1, backoff_s=10, lease_s=10)) as once:
            dead = once.submit("d", b"r")
            assert once.claim()[0].job_id == dead.job_id  # type: ignore[index]
            once.fail(dead.job_id, "Unavailable: down", retry=True)  # its one start used: dead
            once.release(dead.job_id)
        states = {j.job_id: j.state for j in store.list()}
        expected = [RUNNING, QUEUED, FAILED, DEAD]
        assert [states[j.job_id] for j in (running, retrying, failed, dead)] == expected
        clock.advance(30 * 86_400)  # a month on: the running job's lease long run out, untouched
        assert store.prune(7) == 2
        left = {j.job_id: j.state for j in store.list()}
        assert left == {running.job_id: RUNNING, retrying.job_id: QUEUED}
        assert store.prune(0) == 0


def test_store_prune_does_not_let_a_newcomer_jump_the_turns(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Ann's 12 jobs, 8 of them done and vacuumed, none running for now (between two jobs, or her
    next one backing off): bob then queues 6. Ann's next job waits for one of bob's at most, as it
    would have without the vacuum."""
    with closing(worker(state_config, tmp_path)) as store:
        ann = [store.submit(f"a{i}", b"", principal="ann").job_id for i in range(12)]
        assert len(run_all(store, 4)) == 8
        assert store.prune(0) == 8
        bob = [store.submit(f"b{i}", b"", principal="bob").job_id for i in range(6)]
        order = run_all(store)
        assert [i for i in order if i in ann] == ann[8:] and [i for i in order if i in bob] == bob
        assert order.index(ann[8]) <= 1, ["ann" if i in ann else "bob" for i in order]


def test_store_a_comeback_after_a_restart_queues_behind_the_turns_given(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Turns survive a new worker: bob's job, submitted through another worker's connection while
    ann's flood runs, waits for one of ann's at most."""
    with closing(worker(state_config, tmp_path)) as first:
        ann = [first.submit(f"a{i}", b"", principal="ann").job_id for i in range(10)]
        run_all(first, 6)
    with closing(worker(state_config, tmp_path)) as second:
        bob = second.submit("b", b"", principal="bob").job_id
        order = run_all(second)
    assert order.index(bob) <= 1 and [i for i in order if i != bob] == ann[4:], order


def test_store_a_job_started_out_of_turn_does_not_put_a_newcomer_behind_a_flood(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Two workers. Ann queues 9 jobs for library x and then one for z; worker one writes x (ann's
    first), so worker two takes ann's z job, the tenth turn. Bob then queues one job for x: it should
    wait for one of ann's x jobs, not for all eight."""
    with closing(worker(state_config, tmp_path)) as one, closing(worker(state_config, tmp_path)) as two:
        xs = [one.submit("x", b"", principal="ann").job_id for _ in range(9)]
        z = one.submit("z", b"", principal="ann").job_id
        assert one.claim()[0].job_id == xs[0]  # type: ignore[index]
        assert two.claim()[0].job_id == z  # type: ignore[index]  # x is being written
        bob = two.submit("x", b"", principal="bob").job_id
        for store, job_id in ((two, z), (one, xs[0])):
            store.finish(job_id, b"")
            store.release(job_id)
        order = run_all(one)
    assert [i for i in order if i != bob] == xs[1:]
    assert order.index(bob) <= 1, ["bob" if i == bob else "ann" for i in order]


def test_store_concurrent_submissions_cannot_pass_the_pending_limit(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Eight ingest processes (a connection each) take one caller's submissions at the same moment:
    at most `pending_limit` of them are queued, the rest refused naming the setting."""
    stores = [worker(state_config, tmp_path, pending_limit=2) for _ in range(8)]
    gate = threading.Barrier(len(stores))
    accepted: list[str] = []
    refused: list[str] = []
    errors: list[BaseException] = []

    def submit_one(store: JobStore) -> None:
        try:
            gate.wait(10)
            for _ in range(5):
                try:
                    accepted.append(store.submit("x", b"", "ann", bounded=True).job_id)
                except ResourceExhausted as err:
                    refused.append(str(err))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=submit_one, args=(s,)) for s in stores]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for store in stores:
            store.close()
    assert not errors, errors
    assert len(accepted) <= 2, f"{len(accepted)} jobs queued for a caller limited to 2"
    assert all("ingest.job_pending_limit" in r for r in refused), refused


def test_store_jobs_queued_before_the_turns_are_not_starved_after_migrating(tmp_path: Path) -> None:
    """Jobs a release before schema 2 queued (ann's three, then bob's) keep their order after the
    migration, and a caller who comes later does not queue all its jobs ahead of them."""
    old = sqlite3.connect(tmp_path / "jobs.sqlite")
    old.execute(
        "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, library TEXT NOT NULL, request BLOB NOT NULL,"
        " state TEXT NOT NULL, submitted_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
        " files_done INTEGER NOT NULL DEFAULT 0, summary BLOB, error TEXT NOT NULL DEFAULT '',"
        " attempts INTEGER NOT NULL DEFAULT 0, principal TEXT NOT NULL DEFAULT '')"
    )
    rows = [("ann1", "ann"), ("ann2", "ann"), ("ann3", "ann"), ("bob1", "bob")]
    for n, (job_id, who) in enumerate(rows):
        stamp = f"2024-05-01T00:00:0{n}+00:00"
        old.execute(
            "INSERT INTO jobs (job_id, library, request, state, submitted_at, updated_at, principal)"
            " VALUES (?, ?, ?, 'queued', ?, ?, ?)",
            (job_id, f"lib{n}", job_id.encode(), stamp, stamp, who),
        )
    old.commit()
    old.close()
    with closing(JobStore(state_tools.store(StateConfig(auto_migrate=True), tmp_path, jobs))) as store:
        carl = [store.submit(f"c{i}", b"", principal="carl").job_id for i in range(4)]
        order = []
        while (taken := store.claim()) is not None:
            order.append(taken[0].job_id)
            assert taken[1] == taken[0].job_id.encode() or taken[0].job_id in carl  # requests kept
            store.finish(taken[0].job_id, b"")
            store.release(taken[0].job_id)
    assert [i for i in order if i.startswith("ann")] == ["ann1", "ann2", "ann3"]
    assert order.index("bob1") < order.index(carl[1]), order
    assert order.index("ann3") < order.index(carl[3]), order
