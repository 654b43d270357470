"""`ragstack bench rerank`: latency of reranking N candidates with an ONNX cross-encoder, per query
and per pair."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ragstack.bench.embed import sample_texts
from ragstack.config import Config
from ragstack.evals.metrics import percentile
from ragstack.reranking import CrossEncoder


def bench_rerank(
    cfg: Config, model_dir: Path, folder: Path | None, candidates: int, n_queries: int
) -> dict[str, Any]:
    queries, passages = sample_texts(folder, n_queries, candidates * 4)
    ce = CrossEncoder(model_dir, cfg.models.provider, cfg.models.batch_size)
    ce.score(queries[0], passages[:candidates])  # warm-up
    times = []
    for i, q in enumerate(queries):
        batch = [passages[(i + j) % len(passages)] for j in range(candidates)]
        start = time.perf_counter()
        ce.score(q, batch)
        times.append((time.perf_counter() - start) * 1000)
    p50 = percentile(times, 50)
    return {
        "model": ce.name,
        "providers": ce.providers,
        "candidates": candidates,
        "queries": len(queries),
        "p50_ms": round(p50, 1),
        "p95_ms": round(percentile(times, 95), 1),
        "ms_per_pair": round(p50 / candidates, 2),
    }
