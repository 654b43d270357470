"""`ragstack bench query`: search latency per mode through gRPC, at several concurrencies, QPS, and
the CPU each query cost the serving process and the clients' (on a machine whose cores the two
share, QPS is bounded by their sum), from clients in a process of their own; and a calibration
figure beside them, so that runs from different hours (this machine's speed drifts by more than
most changes) can be compared. Each run's hits are compared with the same mode's first run: a
search must find the same under load as alone (`hits_changed`, 0)."""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import connect, ingest_with_progress
from ragstack.config import Config
from ragstack.evals import beir
from ragstack.evals.metrics import percentile
from ragstack.rpc.clients import RetrieveClient, open_channel


async def bench_query(
    cfg: Config,
    folder: Path,
    split: str,
    modes: Sequence[str],
    concurrencies: Sequence[int],
    limit: int,
    top_k: int,
    on_progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
) -> dict[str, Any]:
    data = beir.load(folder, split)
    queries = list(data.queries.values())[:limit]
    rows: list[dict[str, Any]] = []
    # The clients run in a process of their own, as real callers do: in the server's process their
    # gRPC and protobuf work would take the server's interpreter lock. The calibration runs there
    # too, before the services start and after they stop, so that nothing else is running.
    loop = asyncio.get_running_loop()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as clients:
        before = await loop.run_in_executor(clients, calibrate, cfg)
        async with connect(
            cfg, needed=("ingest", "retrieve"), start=("retrieve", "ingest"), allow_paths=[str(data.corpus)]
        ) as session:
            summary = await ingest_with_progress(
                cfg, session.channels["ingest"], [str(data.corpus)], data.library, on_progress
            )
            run = partial(
                run_clients,
                session.addresses["retrieve"],
                cfg.services.token,
                cfg.deadlines.retrieve_s,
                data.library,
            )
            for mode in modes:
                first: list[list[str]] | None = None  # each query's hits in the mode's first run
                for workers in concurrencies:
                    used = _cpu_s()  # this process serves the queries: the CPU they cost it
                    row = await loop.run_in_executor(clients, run, queries, mode, workers, top_k)
                    row["server_cpu"] = round((_cpu_s() - used) * 1000 / (len(queries) + 1), 2)
                    hits = row.pop("hits")
                    first = first or hits
                    row["hits_changed"] = sum(a != b for a, b in zip(hits, first, strict=True))
                    rows.append(row)
                    on_progress("bench", len(rows), len(modes) * len(concurrencies))
        after = await loop.run_in_executor(clients, calibrate, cfg)
    return {
        "dataset": data.name,
        "documents": summary.indexed + summary.unchanged,
        "queries": len(queries),
        "top_k": top_k,
        "embedded": session.embedded,
        "calibration": {"before": before, "after": after},
        "results": rows,
    }


# Fixed texts of our own, so the calibration is the same work on any data set.
CALIBRATION_TEXTS = (
    "how do glaciers shape the valleys they move through",
    "which enzyme breaks down starch in the small intestine",
    "what limits the range of an electric delivery van in winter",
    "why does a suspension bridge sway in strong wind",
    "who maintains the index when two writers commit at once",
    "does regular exercise lower resting blood pressure in older adults",
    "what happens to unsold tickets after the event is cancelled",
    "how long is the warranty on a replacement compressor",
)
CALIBRATION_ROUNDS = 25


def calibrate(cfg: Config) -> dict[str, float]:
    """The search queries' embedder on fixed texts with none of the bench's services running: one
    at a time (p50 ms: one client's share) and eight at once (texts per second: what concurrent
    searches share, ragstack/batching.py), measured as `bench embed` measures. It is the largest
    part of a search's CPU, so it says how fast the machine ran the work that matters, then."""
    from ragstack.bench.embed import QUERY_BATCH, measure
    from ragstack.resources import Resources

    texts = CALIBRATION_TEXTS * CALIBRATION_ROUNDS
    measured = measure(Resources(cfg).query_embedder.embed, texts, texts, QUERY_BATCH)
    return {"query_p50_ms": measured["query_p50_ms"], "batch_texts_per_s": measured["batch_texts_per_s"]}


def run_clients(
    address: str,
    token: str,
    deadline_s: float,
    library: str,
    queries: Sequence[str],
    mode: str,
    workers: int,
    top_k: int,
) -> dict[str, Any]:
    """`workers` concurrent clients searching `queries` once each (after one warm-up query), in
    this process: latencies and throughput, and each query's hits (chunk ids, in order)."""
    return asyncio.run(_run(address, token, deadline_s, library, queries, d.SearchMode(mode), workers, top_k))


async def _run(
    address: str,
    token: str,
    deadline_s: float,
    library: str,
    queries: Sequence[str],
    mode: d.SearchMode,
    workers: int,
    top_k: int,
) -> dict[str, Any]:
    channel = open_channel(address, token=token)
    client = RetrieveClient(channel, deadline_s)
    await client.search(queries[0], library, top_k, mode)  # warm-up
    latencies: list[float] = []
    found: list[list[str]] = [[] for _ in queries]
    pending = list(enumerate(queries))

    async def worker() -> None:
        while pending:
            i, q = pending.pop()
            start = time.perf_counter()
            hits, _ = await client.search(q, library, top_k, mode)
            latencies.append((time.perf_counter() - start) * 1000)
            found[i] = [h.chunk.chunk_id for h in hits]

    start, used = time.perf_counter(), _cpu_s()
    await asyncio.gather(*(worker() for _ in range(workers)))
    wall, used = time.perf_counter() - start, _cpu_s() - used
    await channel.close()
    return {
        "mode": mode.value,
        "concurrency": workers,
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "qps": round(len(latencies) / wall, 1),
        "client_cpu": round(used * 1000 / len(latencies), 2),
        "hits": found,
    }


def _cpu_s() -> float:
    """CPU seconds this process has used, all its threads (the model's among them)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
