"""`ragstack bench load`: concurrent questions through the HTTP gateway while an ingest runs, on a
stack of its own (fresh stores). Half the folder is ingested first; the other half is ingested while
`clients` callers ask questions and a checker reads every document the catalog lists back from the
vector store. Reports answer latency (p50/p95), throughput and errors, and partial reads: a listed
document whose chunks did not all come back (the catalog row is written after the stores, so there
must be none)."""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from ragstack import domain as d
from ragstack.cli.session import embedded_config
from ragstack.config import Config
from ragstack.evals.metrics import percentile
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.serve import start_stack

_SUFFIXES = {".md", ".txt", ".html", ".htm", ".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".py", ".log"}


async def bench_load(
    cfg: Config,
    folder: Path,
    clients: int = 4,
    on_progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
) -> dict[str, Any]:
    files = await asyncio.to_thread(_documents, folder)
    if len(files) < 2:
        raise ValueError(f"{folder} needs at least two documents")
    first, second = files[: len(files) // 2], files[len(files) // 2 :]
    questions = [f"What does {p.stem.replace('-', ' ').replace('_', ' ')} say?" for p in files]
    with tempfile.TemporaryDirectory(prefix="ragstack-load-") as tmp:
        local = embedded_config(cfg, Path(tmp) / "data", allow_paths=[str(folder)])
        local.services.gateway.port = 0
        stack = await start_stack(local)
        channels = [open_channel(stack.peers[n], token=local.services.token) for n in ("ingest", "retrieve")]
        ingest = IngestClient(channels[0], local.deadlines.ingest_s)
        retrieve = RetrieveClient(channels[1], local.deadlines.retrieve_s)
        try:
            await _ingest(ingest, first)
            on_progress("first half", len(first), len(files))
            return await _measure(
                stack.gateway_url, ingest, retrieve, second, questions, clients, local, on_progress
            )
        finally:
            for channel in channels:
                await channel.close()
            await stack.stop()


def _documents(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES)


async def _ingest(client: IngestClient, paths: list[Path]) -> d.IngestSummary:
    summary = d.IngestSummary()
    async for event in client.ingest(paths=[str(p.resolve()) for p in paths]):
        if isinstance(event, d.IngestSummary):
            summary = event
    return summary


async def _measure(
    gateway: str,
    ingest: IngestClient,
    retrieve: RetrieveClient,
    second: list[Path],
    questions: list[str],
    clients: int,
    cfg: Config,
    on_progress: Callable[[str, int, int], None],
) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    checks = partial = 0
    ingest_done = asyncio.Event()
    rng = random.Random(7)

    async def asker(http: httpx.AsyncClient) -> None:
        while not ingest_done.is_set():
            start = time.perf_counter()
            try:
                resp = await http.post("/v1/query", json={"question": rng.choice(questions), "stream": False})
                if resp.status_code != 200 or not resp.json().get("trace_id"):
                    errors.append(f"HTTP {resp.status_code}: {resp.text[:200]}")
            except httpx.HTTPError as err:
                errors.append(f"{type(err).__name__}: {err}")
            latencies.append((time.perf_counter() - start) * 1000)

    async def checker() -> None:
        nonlocal checks, partial
        while not ingest_done.is_set():
            for doc in await ingest.list_documents():
                want = min(doc.chunk_count, cfg.retrieve.max_top_k)
                hits, _ = await retrieve.search(
                    doc.title or doc.source,
                    "",
                    want,
                    d.SearchMode.DENSE,
                    d.SearchFilter(document_ids=(doc.document_id,)),
                    max_per_document=want,
                )
                checks += 1
                if len({h.chunk.chunk_id for h in hits}) != want:
                    partial += 1
                    errors.append(f"partial read of {doc.source}: {len(hits)} of {want} chunks")
            await asyncio.sleep(0.05)

    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=gateway, timeout=300) as http:
        workers = [asyncio.create_task(asker(http)) for _ in range(clients)]
        workers.append(asyncio.create_task(checker()))
        summary = await _ingest(ingest, second)
        ingest_s = time.perf_counter() - start
        ingest_done.set()
        await asyncio.gather(*workers)
    wall = time.perf_counter() - start
    on_progress("second half", len(second), len(second))
    return {
        "clients": clients,
        "documents": {"before": len(questions) - len(second), "during": len(second)},
        "ingest_during_s": round(ingest_s, 1),
        "ingest_failed": summary.failed,
        "queries": len(latencies),
        "errors": len(errors),
        "error_examples": errors[:5],
        "qps": round(len(latencies) / wall, 2) if wall else 0.0,
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 1),
            "p95": round(percentile(latencies, 95), 1),
        },
        "consistency_checks": checks,
        "partial_reads": partial,
    }
