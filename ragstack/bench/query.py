"""`ragstack bench query`: search latency per mode through gRPC, at several concurrencies, and QPS."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import connect, ingest_with_progress
from ragstack.config import Config
from ragstack.evals import beir
from ragstack.evals.metrics import percentile
from ragstack.rpc.clients import RetrieveClient


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
    async with connect(
        cfg, needed=("ingest", "retrieve"), start=("retrieve", "ingest"), allow_paths=[str(data.corpus)]
    ) as session:
        summary = await ingest_with_progress(
            cfg, session.channels["ingest"], [str(data.corpus)], data.library, on_progress
        )
        client = RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s)
        for mode in modes:
            await client.search(queries[0], data.library, top_k, d.SearchMode(mode))  # warm-up
            for workers in concurrencies:
                rows.append(await _run(client, data.library, queries, d.SearchMode(mode), workers, top_k))
                on_progress("bench", len(rows), len(modes) * len(concurrencies))
    return {
        "dataset": data.name,
        "documents": summary.indexed + summary.unchanged,
        "queries": len(queries),
        "top_k": top_k,
        "embedded": session.embedded,
        "results": rows,
    }


async def _run(
    client: RetrieveClient, library: str, queries: Sequence[str], mode: d.SearchMode, workers: int, top_k: int
) -> dict[str, Any]:
    latencies: list[float] = []
    pending = list(queries)

    async def worker() -> None:
        while pending:
            q = pending.pop()
            start = time.perf_counter()
            await client.search(q, library, top_k, mode)
            latencies.append((time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    wall = time.perf_counter() - start
    return {
        "mode": mode.value,
        "concurrency": workers,
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "qps": round(len(latencies) / wall, 1),
    }
