"""Fusion of ranked lists: reciprocal rank (Cormack, Clarke and Büttcher, 2009) or normalised scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragstack.domain import Chunk, SearchHit, SignalScore


def reciprocal_rank_fusion(
    ranked: Mapping[str, Sequence[tuple[Chunk, float]]], k: int = 60, limit: int = 0, cap: int = 0
) -> list[SearchHit]:
    """Fuses each signal's ranked (chunk, score) list: score = sum over signals of 1 / (k + rank).

    Every hit keeps each signal's raw score and rank (rank 0, score 0 where a signal missed it).
    Ties are broken by chunk id, so the order is deterministic. `limit` and `cap`: see `_hits`.
    """
    chunks: dict[str, Chunk] = {}
    per_signal: dict[str, dict[str, tuple[float, int]]] = {}
    fused: dict[str, float] = {}
    for signal, hits in ranked.items():
        seen = per_signal.setdefault(signal, {})
        for rank, (chunk, score) in enumerate(hits, start=1):
            if chunk.chunk_id in seen:
                continue
            seen[chunk.chunk_id] = (score, rank)
            chunks.setdefault(chunk.chunk_id, chunk)
            fused[chunk.chunk_id] = fused.get(chunk.chunk_id, 0.0) + 1.0 / (k + rank)
    return _hits(ranked, chunks, per_signal, fused, limit, cap)


def _hits(
    ranked: Mapping[str, object],
    chunks: dict[str, Chunk],
    per_signal: dict[str, dict[str, tuple[float, int]]],
    fused: dict[str, float],
    limit: int,
    cap: int,
) -> list[SearchHit]:
    """The first `limit` hits (0: all) in fused order, at most `cap` per document (0: no cap).
    Only those are built: a search fuses about a hundred candidates to return ten."""
    out: list[SearchHit] = []
    per_document: dict[str, int] = {}
    for cid in sorted(fused, key=lambda cid: (-fused[cid], cid)):
        if limit and len(out) == limit:
            break
        if cap:
            document = chunks[cid].document_id
            if per_document.get(document, 0) == cap:
                continue
            per_document[document] = per_document.get(document, 0) + 1
        signals = [SignalScore(signal, *per_signal[signal].get(cid, (0.0, 0))) for signal in ranked]
        signals.append(SignalScore("fusion", fused[cid], 0))
        out.append(SearchHit(chunk=chunks[cid], score=fused[cid], signals=tuple(signals)))
    return out


def normalized_score_fusion(
    ranked: Mapping[str, Sequence[tuple[Chunk, float]]],
    weights: Mapping[str, float],
    limit: int = 0,
    cap: int = 0,
) -> list[SearchHit]:
    """Min-max normalises each signal's scores over its own list, then sums them with `weights`;
    a signal that missed a chunk contributes 0. Ties are broken by chunk id. `limit` and `cap`:
    see `_hits`."""
    chunks: dict[str, Chunk] = {}
    per_signal: dict[str, dict[str, tuple[float, int]]] = {}
    fused: dict[str, float] = {}
    for signal, hits in ranked.items():
        seen = per_signal.setdefault(signal, {})
        scores = [s for _, s in hits]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        for rank, (chunk, score) in enumerate(hits, start=1):
            if chunk.chunk_id in seen:
                continue
            seen[chunk.chunk_id] = (score, rank)
            chunks.setdefault(chunk.chunk_id, chunk)
            norm = (score - lo) / (hi - lo) if hi > lo else 1.0
            fused[chunk.chunk_id] = fused.get(chunk.chunk_id, 0.0) + weights.get(signal, 1.0) * norm
    return _hits(ranked, chunks, per_signal, fused, limit, cap)
