"""`ragstack bench ann`: recall@10 of the LanceDB ANN path (IVF_PQ with refinement) against exact
search, on a BEIR corpus's vectors copied into a scratch table, with the corpus's own queries."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragstack.config import Config
from ragstack.evals import beir
from ragstack.evals.metrics import percentile
from ragstack.resources import Resources
from ragstack.stores.vectors import VectorStore


def bench_ann(cfg: Config, folder: Path, split: str, limit: int, k: int = 10) -> dict[str, Any]:
    """The corpus must have been ingested (`ragstack eval retrieval` does it)."""
    data = beir.load(folder, split)
    res = Resources(cfg)
    embedder = res.embedder
    source = VectorStore(cfg.data_dir / "lancedb", embedder.dimension)
    table = source._open()
    if table is None or source.count(data.library) == 0:
        raise RuntimeError(f"library {data.library} is empty: run `ragstack eval retrieval {folder}` first")
    rows = table.search().where(f"library = '{data.library}'").limit(None).to_arrow()
    queries = list(data.queries.values())[:limit]
    vectors = embedder.embed(queries)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = VectorStore(
            Path(tmp),
            embedder.dimension,
            writer=True,
            memory_rows=0,
            nprobes=cfg.retrieve.ann_nprobes,
            refine_factor=cfg.retrieve.ann_refine_factor,
        )
        scratch._open().add(rows)
        start = time.perf_counter()
        built = scratch.build_ann_index(min_rows=1)
        build_s = time.perf_counter() - start
        recalls, ann_ms, exact_ms = [], [], []
        for v in vectors:
            t0 = time.perf_counter()
            exact = {c.chunk_id for c, _ in scratch.exact_search(v, data.library, k)}
            t1 = time.perf_counter()
            ann = {c.chunk_id for c, _ in scratch.search(v, data.library, k)}
            t2 = time.perf_counter()
            exact_ms.append((t1 - t0) * 1000)
            ann_ms.append((t2 - t1) * 1000)
            recalls.append(len(exact & ann) / len(exact) if exact else 1.0)
    return {
        "dataset": data.name,
        "vectors": rows.num_rows,
        "queries": len(queries),
        "index": "IVF_PQ" if built else "none",
        "nprobes": cfg.retrieve.ann_nprobes,
        "refine_factor": cfg.retrieve.ann_refine_factor,
        "index_build_s": round(build_s, 1),
        f"recall@{k}_vs_exact": round(float(np.mean(recalls)), 4),
        "ann_p50_ms": round(percentile(ann_ms, 50), 2),
        "exact_lancedb_p50_ms": round(percentile(exact_ms, 50), 2),
    }
