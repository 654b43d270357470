"""`ragstack bench rerank`: latency of reranking N candidates with an ONNX cross-encoder, per query
and per pair; with its int8 weights too when installed, and how closely they rank as fp32 does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from ragstack.bench.embed import sample_texts
from ragstack.config import Config
from ragstack.evals.metrics import percentile
from ragstack.models import QUANTIZED
from ragstack.reranking import CrossEncoder

TOP = 10  # the hits a search returns by default: which of them int8 keeps


def bench_rerank(
    cfg: Config, model_dir: Path, folder: Path | None, candidates: int, n_queries: int
) -> dict[str, Any]:
    queries, passages = sample_texts(folder, n_queries, candidates * 4)
    lists = [[passages[(i + j) % len(passages)] for j in range(candidates)] for i in range(len(queries))]
    ce = CrossEncoder(model_dir, cfg.models.provider, cfg.models.batch_size)
    timing, scores = _timed(ce, queries, lists)
    report: dict[str, Any] = {
        "model": ce.name,
        "providers": ce.providers,
        "candidates": candidates,
        "queries": len(queries),
        **timing,
    }
    if (model_dir / QUANTIZED).is_file():
        int8 = CrossEncoder(model_dir, cfg.models.provider, cfg.models.batch_size, file=QUANTIZED)
        timing, scores8 = _timed(int8, queries, lists)
        agreement = [_spearman(a, b) for a, b in zip(scores, scores8, strict=True)]
        kept = [len(_top(a) & _top(b)) for a, b in zip(scores, scores8, strict=True)]
        report["int8"] = {
            **timing,
            "spearman_to_fp32_min": round(min(agreement), 4),
            "spearman_to_fp32_mean": round(float(np.mean(agreement)), 4),
            f"fp32_top{TOP}_kept_min": min(kept),
            f"fp32_top{TOP}_kept_mean": round(float(np.mean(kept)), 2),
        }
    return report


Timing = dict[str, float]


def _timed(ce: CrossEncoder, queries: list[str], lists: list[list[str]]) -> tuple[Timing, list[np.ndarray]]:
    ce.score(queries[0], lists[0])  # warm-up
    times, scores = [], []
    for q, batch in zip(queries, lists, strict=True):
        start = time.perf_counter()
        scores.append(ce.score(q, batch))
        times.append((time.perf_counter() - start) * 1000)
    p50 = percentile(times, 50)
    timing = {
        "p50_ms": round(p50, 1),
        "p95_ms": round(percentile(times, 95), 1),
        "ms_per_pair": round(p50 / len(lists[0]), 2),
    }
    return timing, scores


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of two score lists over the same candidates."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 1 else 1.0


def _top(scores: np.ndarray) -> set[int]:
    return set(np.argsort(-scores, kind="stable")[:TOP].tolist())
