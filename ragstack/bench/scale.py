"""`ragstack bench scale`: what a second process buys, on this machine. Query throughput with 1 and 2
retrieve replicas, and ingest throughput with 1 and 2 ingest workers, side by side with the ratio.

Every replica and worker is `ragstack serve --service X` in a process of its own (ragstack/bench/
cluster.py), as in a deployment: the shared state in PostgreSQL (a throwaway server, ragstack/
bench/postgres.py, unless `state_url` names one), LanceDB and the lexical snapshots in folders all of
them share. Ingest: the first `documents` documents of a BEIR corpus, split into two libraries,
submitted as two jobs to the shared queue; the clock runs from submission until both are done.
Queries: the dataset's queries, searched once each by `concurrency` clients in a process of their
own, over one channel that dials every replica (round-robin).

On a machine with few cores the processes share the same cores: the ratio then shows what the second
process costs (memory, a second model, contention), not what it gains on a machine of its own."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.bench.cluster import Cluster
from ragstack.bench.postgres import PostgresError, PostgresServer, unavailable_reason
from ragstack.bench.query import run_clients
from ragstack.config import Config
from ragstack.evals import beir
from ragstack.rpc.clients import IngestClient, open_channel

LIBRARIES = ("scale-a", "scale-b")
SEARCH = "/ragstack.v1.RetrieveService/Search"


@contextmanager
def _state(state_url: str) -> Iterator[Callable[[str], dict[str, Any]]]:
    """The shared state of each case, by name: a database of its own on a throwaway server, or a
    schema prefix of its own in the database `state_url` names (left there afterwards)."""
    if state_url:
        run = secrets.token_hex(3)
        yield lambda case: {"url": state_url, "schema_prefix": f"bench{run}_{case}"}
        return
    reason = unavailable_reason()
    if reason:
        raise PostgresError(f"{reason}; or give the URL of a server of yours (--state-url)")
    with PostgresServer(max_connections=200) as pg:
        urls: dict[str, str] = {}
        yield lambda case: {"url": urls.get(case) or urls.setdefault(case, pg.database(case))}


def _split(corpus: Path, documents: int, folder: Path) -> list[Path]:
    """The corpus's first `documents` lines, alternately into one file per library."""
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[list[str]] = [[] for _ in LIBRARIES]
    with corpus.open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i == documents:
                break
            lines[i % len(LIBRARIES)].append(line.rstrip("\n"))
    out = []
    for name, part in zip(LIBRARIES, lines, strict=True):
        path = folder / f"{name}.jsonl"
        path.write_text("\n".join(part) + "\n", encoding="utf-8")
        out.append(path)
    return out


def _base(cfg: Config, stores: Path, readable: Path, state: dict[str, Any]) -> dict[str, Any]:
    """The config every process of a case gets: this one's models and ingest settings, the stores
    under `stores` shared by all, the jobs' files readable under `readable`."""
    raw: dict[str, Any] = json.loads(
        cfg.model_dump_json(include={"models", "ingest", "retrieve", "llm", "deadlines"})
    )
    raw["ingest"].update(source_polling=False, allowed_roots=[str(readable)])
    raw["services"] = {"token": cfg.services.token}
    raw["state"] = state
    raw["storage"] = {
        "lancedb_uri": str(stores / "lancedb"),
        "lexical_snapshots": f"file://{stores / 'lexical'}",
        "snapshot_poll_s": 0.5,
    }
    return raw


async def _run_jobs(
    target: str, token: str, files: list[Path], limit_s: float
) -> tuple[float, list[d.IngestJob]]:
    """Both libraries' jobs submitted at once: seconds until both are done, and the jobs."""
    channel = open_channel(target, token=token)
    client = IngestClient(channel, 60)
    try:
        start = time.perf_counter()
        ids = [
            (await client.submit(paths=[str(p)], library=lib)).job_id
            for p, lib in zip(files, LIBRARIES, strict=True)
        ]
        while True:
            jobs = [await client.job(j) for j in ids]
            if all(j.state in ("done", "failed", "cancelled") for j in jobs):
                return time.perf_counter() - start, jobs
            if time.perf_counter() - start > limit_s:
                raise TimeoutError(f"ingest jobs not done after {limit_s:.0f} s: {[j.state for j in jobs]}")
            await asyncio.sleep(0.1)
    finally:
        await channel.close()


def _ingest_with(
    cfg: Config, base: dict[str, Any], root: Path, files: list[Path], workers: int
) -> dict[str, Any]:
    with Cluster(root, base, {"ingest": workers}) as cluster:
        cluster.start_all()
        wall, jobs = asyncio.run(
            _run_jobs(cluster.target("ingest"), cfg.services.token, files, cfg.deadlines.ingest_s)
        )
    failed = [f"{j.library}: {j.state} {j.error}" for j in jobs if j.state != "done"]
    if failed:
        raise RuntimeError(f"ingest jobs did not finish: {failed}")
    summaries = [j.summary or d.IngestSummary() for j in jobs]
    documents = sum(s.indexed for s in summaries)
    chunks = sum(s.chunks for s in summaries)
    return {
        "documents": documents,
        "chunks": chunks,
        "wall_s": round(wall, 1),
        "documents_per_s": round(documents / wall, 1),
        "chunks_per_s": round(chunks / wall, 1),
    }


def _queries_with(
    cfg: Config,
    base: dict[str, Any],
    root: Path,
    replicas: int,
    queries: list[str],
    mode: str,
    clients: int,
    top_k: int,
) -> dict[str, Any]:
    with Cluster(root, base, {"retrieve": replicas}) as cluster:
        cluster.start_all()
        target = cluster.target("retrieve")
        run = partial(run_clients, target, cfg.services.token, cfg.deadlines.retrieve_s, LIBRARIES[0])
        # The clients run in a process of their own, as real callers do (ragstack/bench/query.py).
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pool.submit(run, queries[: 8 * replicas], mode, 2 * replicas, top_k).result()  # warm each
            before = [r.rpcs_served(SEARCH) for r in cluster.procs["retrieve"]]
            row = pool.submit(run, queries, mode, clients, top_k).result()
        row.pop("hits")  # bench query compares them; here only the speed counts
        shares = [r.rpcs_served(SEARCH) - b for r, b in zip(cluster.procs["retrieve"], before, strict=True)]
    return {**row, "searches_per_replica": shares}


def _ratio(one: float, two: float) -> float:
    return round(two / one, 2) if one else 0.0


def bench_scale(
    cfg: Config,
    folder: Path,
    split: str,
    documents: int,
    limit: int,
    mode: str,
    clients: int,
    top_k: int,
    state_url: str = "",
    say: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    data = beir.load(folder, split)
    queries = list(data.queries.values())[:limit]
    with tempfile.TemporaryDirectory(prefix="ragstack-scale-") as tmp, _state(state_url) as state_of:
        root = Path(tmp)
        files = _split(data.corpus, documents, root / "corpus")
        ingest: dict[int, dict[str, Any]] = {}
        for workers in (1, 2):
            say(f"ingest: {documents} documents in 2 libraries (2 jobs), {workers} worker(s)")
            stores = root / f"stores-{workers}"
            base = _base(cfg, stores, root / "corpus", state_of(f"ingest{workers}"))
            ingest[workers] = _ingest_with(cfg, base, root / f"ingest-{workers}", files, workers)
            say(f"  {ingest[workers]['documents_per_s']} documents/s")
        # The replicas search what the two workers wrote: their state and stores.
        base = _base(cfg, root / "stores-2", root / "corpus", state_of("ingest2"))
        query: dict[int, dict[str, Any]] = {}
        for replicas in (1, 2):
            say(f"queries: {len(queries)} {mode} searches, {clients} clients, {replicas} replica(s)")
            run = _queries_with(
                cfg, base, root / f"retrieve-{replicas}", replicas, queries, mode, clients, top_k
            )
            query[replicas] = run
            say(f"  {run['qps']} queries/s, per replica {run['searches_per_replica']}")
    cores = os.cpu_count() or 1
    rows = [
        _row(f"query QPS ({mode}, {clients} clients)", query[1]["qps"], query[2]["qps"]),
        _row("query p50 ms", query[1]["p50_ms"], query[2]["p50_ms"]),
        _row("query p95 ms", query[1]["p95_ms"], query[2]["p95_ms"]),
        _row("ingest documents/s (2 jobs)", ingest[1]["documents_per_s"], ingest[2]["documents_per_s"]),
        _row("ingest chunks/s", ingest[1]["chunks_per_s"], ingest[2]["chunks_per_s"]),
        _row("ingest wall s", ingest[1]["wall_s"], ingest[2]["wall_s"]),
    ]
    return {
        "dataset": data.name,
        "documents": documents,
        "queries": len(queries),
        "top_k": top_k,
        "cores": cores,
        "rows": rows,
        "ingest": {str(k): v for k, v in ingest.items()},
        "query": {str(k): v for k, v in query.items()},
        "note": (
            f"{cores} cores here: every process shares them, so the ratio shows what a second process "
            "costs, not what it gains on a machine of its own"
            if cores <= 2
            else f"{cores} cores here, shared by every process of both cases"
        ),
    }


def _row(what: str, one: float, two: float) -> dict[str, Any]:
    return {"what": what, "1 process": one, "2 processes": two, "2 / 1": _ratio(one, two)}
