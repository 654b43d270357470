"""`ragstack eval retrieval`: ingest a BEIR corpus into its own library (unchanged documents are
skipped), run every judged query through the retrieve service over gRPC, report the metrics."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import connect, ingest_with_progress
from ragstack.config import Config
from ragstack.evals import beir
from ragstack.evals.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k, unique_in_order
from ragstack.rpc.clients import RetrieveClient

HALVES = ("a", "b")


def query_half(query_id: str) -> str:
    """`a` or `b`, fixed by a hash of the query id: two halves of a split that any run draws
    alike, so that settings chosen on one can be reported on the other."""
    return HALVES[hashlib.sha1(query_id.encode()).digest()[0] % 2]


async def evaluate(
    cfg: Config,
    folder: Path,
    split: str,
    mode: str,
    on_progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
    half: str | None = None,
) -> dict[str, Any]:
    data = beir.load(folder, split)
    queries = {q: t for q, t in data.queries.items() if half is None or query_half(q) == half}
    depth = min(100, cfg.retrieve.max_top_k)
    async with connect(
        cfg, needed=("ingest", "retrieve"), start=("retrieve", "ingest"), allow_paths=[str(data.corpus)]
    ) as session:
        summary = await ingest_with_progress(
            cfg, session.channels["ingest"], [str(data.corpus)], data.library, on_progress
        )
        retrieve = RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s)
        per_query: dict[str, dict[str, float]] = {}
        latencies: list[float] = []
        for n, (qid, text) in enumerate(queries.items(), start=1):
            start = time.perf_counter()
            hits, _ = await retrieve.search(text, data.library, depth, d.SearchMode(mode))
            latencies.append((time.perf_counter() - start) * 1000)
            ranked = unique_in_order([h.chunk.document_id for h in hits])
            judged = data.qrels[qid]
            per_query[qid] = {
                "ndcg@10": ndcg_at_k(ranked, judged, 10),
                "recall@10": recall_at_k(ranked, judged, 10),
                "recall@100": recall_at_k(ranked, judged, 100),
                "mrr@10": mrr_at_k(ranked, judged, 10),
            }
            on_progress("queries", n, len(queries))
    count = len(per_query)
    means = {
        m: round(sum(q[m] for q in per_query.values()) / count, 4) for m in next(iter(per_query.values()))
    }
    return {
        "dataset": data.name,
        "split": split if half is None else f"{split}, half {half}",
        "mode": mode,
        "library": data.library,
        "queries": count,
        "documents_indexed": summary.indexed,
        "documents_unchanged": summary.unchanged,
        "documents_rebuilt": summary.rebuilt,  # of those indexed: unchanged bytes, a new build
        "documents_failed": summary.failed,
        "ingest_seconds": round(summary.seconds, 1),
        **means,
        "latency_ms_p50": round(percentile(latencies, 50), 1),
        "latency_ms_p95": round(percentile(latencies, 95), 1),
        "search_depth": depth,
        "embedded": session.embedded,
        # The settings the README's rows vary (as this process sees them; a running server's own).
        "settings": {
            k: getattr(cfg.retrieve, k)
            for k in (
                "fusion",
                "dense_weight",
                "heading_boost",
                "proximity_weight",
                "proximity_slop",
                "page_search",
                "graph_weight",
                "feedback_documents",
                "feedback_terms",
                "feedback_lexical_weight",
                "feedback_dense_weight",
            )
        },
    }
