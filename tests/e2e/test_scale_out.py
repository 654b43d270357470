"""Past one machine, on one: PostgreSQL for the shared state, a real S3 server (moto) for LanceDB and
the lexical snapshots, and 2 ingest workers, 2 retrieve replicas, 2 agents, 1 verify and 2 gateways,
each `ragstack serve --service X` in a process of its own with a data_dir of its own (ragstack/bench/
cluster.py). Peers dial every replica (`services.<name>.dial: ipv4:...`).

Jobs submitted through either gateway run exactly once; questions through either gateway spread
over both retrieve replicas; SIGKILL to an ingest worker mid-job, to a retrieve replica and to an
agent loses no job (the other worker takes it once its lease ran out) and fails no question."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragstack import domain as d
from ragstack.bench.cluster import Cluster
from ragstack.bench.postgres import PostgresServer, unavailable_reason
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from tests.conftest import MODEL_DIR, SAMPLES
from tests.tools.s3 import s3_storage

# The cluster's start (nine processes) is part of the first test's time.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SEARCH = "/ragstack.v1.RetrieveService/Search"
ASK = "/ragstack.v1.AgentService/Ask"
LEASE_S = 5.0
QUESTIONS = [
    "How does reciprocal rank fusion combine lexical and dense rankings?",
    "What does BM25 score?",
    "Why rerank with a cross-encoder?",
    "How are documents chunked?",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"PostgreSQL is needed: {reason}")
    root = tmp_path_factory.mktemp("scale")
    with PostgresServer(max_connections=200) as pg, s3_storage() as storage:
        base: dict[str, Any] = {
            "models": {"embedder_dir": str(MODEL_DIR), "threads": 1},  # 9 processes on few cores
            "llm": {"enabled": False},
            "state": {"url": pg.database("state")},
            "storage": storage,
            "ingest": {
                "graph": False,
                "source_polling": False,
                "job_lease_s": LEASE_S,
                "job_backoff_s": 0.5,
                "allowed_roots": [str(root), str(SAMPLES)],
            },
            "retrieve": {"max_staleness_s": 1.0},
            "services": {"grace_s": 2.0},
        }
        replicas = {"ingest": 2, "retrieve": 2, "agent": 2, "verify": 1, "gateway": 2}
        with Cluster(root, base, replicas) as running:
            running.start_all()
            # Something to ask about, ingested by a streamed call (one worker).
            asyncio.run(_ingest_stream(running, [str(SAMPLES)], "default"))
            yield running


async def _ingest_stream(cluster: Cluster, paths: list[str], library: str) -> d.IngestSummary:
    channel = open_channel(cluster.target("ingest"))
    summary = d.IngestSummary()
    try:
        async for event in IngestClient(channel, 600).ingest(paths=paths, library=library):
            if isinstance(event, d.IngestSummary):
                summary = event
    finally:
        await channel.close()
    assert summary.indexed and not summary.failed, summary
    return summary


def _files(folder: Path, tag: str, copies: int = 1) -> list[Path]:
    """The samples under names (and with a line) of their own: `copies` documents each."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for copy in range(copies):
        for sample in sorted(SAMPLES.glob("*.md")):
            path = folder / f"{sample.stem}-{tag}-{copy}.md"
            path.write_text(sample.read_text() + f"\n\nCopy {copy} of {sample.stem} for {tag}.\n")
            out.append(path)
    return out


def _submit(gateway: str, library: str, files: list[Path]) -> dict[str, Any]:
    payload = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in files]
    resp = httpx.post(f"{gateway}/v1/ingest/jobs", data={"library": library}, files=payload, timeout=60)
    assert resp.status_code == 202, resp.text
    return dict(resp.json())


def _job(gateway: str, job_id: str) -> dict[str, Any]:
    resp = httpx.get(f"{gateway}/v1/ingest/jobs/{job_id}", timeout=30)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _until_finished(gateways: list[str], job_ids: list[str], limit_s: float = 300) -> list[dict[str, Any]]:
    deadline = time.monotonic() + limit_s
    while True:
        jobs = [_job(gateways[i % len(gateways)], j) for i, j in enumerate(job_ids)]
        if all(j["state"] in ("done", "failed", "cancelled") for j in jobs):
            return jobs
        assert time.monotonic() < deadline, [(j["job_id"], j["state"], j["attempts"]) for j in jobs]
        time.sleep(0.2)


async def _whole_once(cluster: Cluster, library: str, sources: set[str]) -> None:
    """Every document of `library` listed once, its chunks stored once in LanceDB, and its words
    found in the lexical snapshot the replicas read, once the replicas caught up (within
    retrieve.max_staleness_s)."""
    ingest_ch, retrieve_ch = open_channel(cluster.target("ingest")), open_channel(cluster.target("retrieve"))
    ingest, retrieve = IngestClient(ingest_ch, 60), RetrieveClient(retrieve_ch, 30)

    async def seen(query: str, doc: d.Document, k: int, mode: d.SearchMode) -> list[str]:
        where = d.SearchFilter(document_ids=(doc.document_id,))
        deadline = time.monotonic() + 30
        while True:  # both replicas, round-robin, until one answers with the document
            hits, _ = await retrieve.search(query, library, k, mode, where, k)
            if hits or time.monotonic() > deadline:
                return [h.chunk.chunk_id for h in hits]
            await asyncio.sleep(0.5)

    try:
        docs = await ingest.list_documents(library)
        assert sorted(Path(x.source).name for x in docs) == sorted(sources)
        for doc in docs:
            ids = await seen(doc.title, doc, doc.chunk_count + 5, d.SearchMode.DENSE)  # room for duplicates
            assert len(ids) == len(set(ids)) == doc.chunk_count, (doc.source, len(ids), doc.chunk_count)
            # The lexical snapshot (published by whichever worker wrote last) holds every worker's.
            stem, tag, copy = Path(doc.source).stem.rsplit("-", 2)
            assert await seen(f"Copy {copy} of {stem} for {tag}", doc, 3, d.SearchMode.LEXICAL), doc.source
    finally:
        await ingest_ch.close()
        await retrieve_ch.close()


def test_jobs_through_both_gateways_run_exactly_once(cluster: Cluster, tmp_path: Path) -> None:
    gateways = [g.url for g in cluster.procs["gateway"]]
    files = _files(tmp_path / "jobs", "jobs")
    pairs = [files[i : i + 2] for i in range(0, len(files), 2)]
    submitted = [_submit(gateways[i % 2], "jobs", pair) for i, pair in enumerate(pairs)]
    jobs = _until_finished(gateways, [j["job_id"] for j in submitted])
    for job in jobs:
        assert job["state"] == "done" and job["attempts"] == 1, job
        assert (job["summary"]["indexed"], job["summary"]["failed"]) == (2, 0), job
    asyncio.run(_whole_once(cluster, "jobs", {p.name for p in files}))


def _ask(gateway: str, question: str) -> str:
    """'' when answered, else what went wrong."""
    try:
        resp = httpx.post(f"{gateway}/v1/query", json={"question": question, "stream": False}, timeout=120)
    except httpx.HTTPError as err:
        return f"{type(err).__name__}: {err}"
    if resp.status_code != 200 or not resp.json().get("trace_id"):
        return f"HTTP {resp.status_code}: {resp.text[:300]}"
    return ""


def test_questions_through_both_gateways_spread_over_both_replicas(cluster: Cluster) -> None:
    gateways = [g.url for g in cluster.procs["gateway"]]
    retrieves, agents = cluster.procs["retrieve"], cluster.procs["agent"]
    searches_before = [r.rpcs_served(SEARCH) for r in retrieves]
    asks_before = [a.rpcs_served(ASK) for a in agents]
    errors = [_ask(gateways[i % 2], QUESTIONS[i % len(QUESTIONS)]) for i in range(16)]
    assert not any(errors), errors
    searches = [r.rpcs_served(SEARCH) - b for r, b in zip(retrieves, searches_before, strict=True)]
    asks = [a.rpcs_served(ASK) - b for a, b in zip(agents, asks_before, strict=True)]
    assert sum(asks) == 16 and min(asks) >= 4, asks  # both gateways' calls spread over both agents
    assert sum(searches) >= 16 and min(searches) >= 4, searches


def test_kills_lose_no_job_and_fail_no_question(cluster: Cluster, tmp_path: Path) -> None:
    gateways = [g.url for g in cluster.procs["gateway"]]
    # Both workers busy with a job of their own (libraries of their own: no lock between them),
    # then one of them killed: whichever it was, a job is left running with a dead worker.
    crash_a, crash_b = _files(tmp_path / "a", "crasha", 3), _files(tmp_path / "b", "crashb", 3)
    jobs = [_submit(gateways[0], "crash-a", crash_a), _submit(gateways[1], "crash-b", crash_b)]
    ids = [j["job_id"] for j in jobs]
    deadline = time.monotonic() + 120
    while not all(_job(gateways[0], j)["state"] == "running" for j in ids):
        assert time.monotonic() < deadline, [_job(gateways[0], j) for j in ids]
        time.sleep(0.05)
    victim = cluster.procs["ingest"][0]
    victim.kill()

    # Questions all along, through both gateways, while a retrieve replica and an agent die.
    errors: list[str] = []
    asked = 0
    for round_ in range(3):
        if round_ == 1:
            cluster.procs["retrieve"][0].kill()
        if round_ == 2:
            cluster.procs["agent"][0].kill()
        for i in range(8):
            errors.append(_ask(gateways[i % 2], QUESTIONS[i % len(QUESTIONS)]))
            asked += 1
    assert not any(errors), [e for e in errors if e]
    live = cluster.procs["retrieve"][1]
    assert live.rpcs_served(SEARCH) > 0

    finished = _until_finished(gateways, ids, limit_s=300)
    for job in finished:
        assert job["state"] == "done" and job["summary"]["failed"] == 0, job
    # The dead worker's job ran twice (once cut short), the other once.
    assert sorted(j["attempts"] for j in finished) == [1, 2], finished
    asyncio.run(_whole_once(cluster, "crash-a", {p.name for p in crash_a}))
    asyncio.run(_whole_once(cluster, "crash-b", {p.name for p in crash_b}))
