"""Fusion of ranked lists: reciprocal rank (Cormack, Clarke and Büttcher, 2009) or normalised scores.

Lists hold candidates (ragstack.domain.Candidate), fused by their keys before any chunk is read:
the searcher reads the chunks of the few fused hits it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ragstack.domain import Candidate, SignalScore

Ranked = Mapping[str, Sequence[tuple[Candidate, float]]]


@dataclass(frozen=True, slots=True)
class Fused:
    """A fused candidate: its score and each signal's raw score and rank."""

    candidate: Candidate
    score: float
    signals: tuple[SignalScore, ...]


def reciprocal_rank_fusion(ranked: Ranked, k: int = 60, limit: int = 0, cap: int = 0) -> list[Fused]:
    """Fuses each signal's ranked (candidate, score) list: score = sum over signals of 1 / (k + rank).

    Every hit keeps each signal's raw score and rank (rank 0, score 0 where a signal missed it).
    Ties are broken by key, so the order is deterministic. `limit` and `cap`: see `_fused`.
    """
    candidates: dict[int, Candidate] = {}
    per_signal: dict[str, dict[int, tuple[float, int]]] = {}
    fused: dict[int, float] = {}
    for signal, hits in ranked.items():
        seen = per_signal.setdefault(signal, {})
        for rank, (candidate, score) in enumerate(hits, start=1):
            key = candidate.key
            if key in seen:
                continue
            seen[key] = (score, rank)
            candidates.setdefault(key, candidate)
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return _fused(ranked, candidates, per_signal, fused, limit, cap)


def normalized_score_fusion(
    ranked: Ranked, weights: Mapping[str, float], limit: int = 0, cap: int = 0
) -> list[Fused]:
    """Min-max normalises each signal's scores over its own list, then sums them with `weights`;
    a signal that missed a candidate contributes 0. Ties are broken by key. `limit` and `cap`:
    see `_fused`."""
    candidates: dict[int, Candidate] = {}
    per_signal: dict[str, dict[int, tuple[float, int]]] = {}
    fused: dict[int, float] = {}
    for signal, hits in ranked.items():
        seen = per_signal.setdefault(signal, {})
        scores = [s for _, s in hits]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 0.0)
        weight = weights.get(signal, 1.0)
        for rank, (candidate, score) in enumerate(hits, start=1):
            key = candidate.key
            if key in seen:
                continue
            seen[key] = (score, rank)
            candidates.setdefault(key, candidate)
            norm = (score - lo) / (hi - lo) if hi > lo else 1.0
            fused[key] = fused.get(key, 0.0) + weight * norm
    return _fused(ranked, candidates, per_signal, fused, limit, cap)


def ranked_alone(signal: str, hits: Sequence[tuple[Candidate, float]]) -> list[Fused]:
    """One signal's list as it ranked it: its raw scores, no fusion."""
    return [Fused(c, s, (SignalScore(signal, s, rank),)) for rank, (c, s) in enumerate(hits, start=1)]


T = TypeVar("T")


def cap_per_document(items: Sequence[T], cap: int, document: Callable[[T], object]) -> list[T]:
    """At most `cap` items per document (`document` names an item's), in order (0: no cap)."""
    if cap <= 0:
        return list(items)
    seen: dict[object, int] = {}
    out = []
    for item in items:
        d = document(item)
        n = seen.get(d, 0)
        if n < cap:
            seen[d] = n + 1
            out.append(item)
    return out


def _fused(
    ranked: Mapping[str, object],
    candidates: dict[int, Candidate],
    per_signal: dict[str, dict[int, tuple[float, int]]],
    fused: dict[int, float],
    limit: int,
    cap: int,
) -> list[Fused]:
    """The first `limit` candidates (0: all) in fused order, at most `cap` per document (0: no
    cap). Only those are built: a search fuses about a hundred candidates to return ten."""
    out: list[Fused] = []
    per_document: dict[int, int] = {}
    for key in sorted(fused, key=lambda key: (-fused[key], key)):
        if limit and len(out) == limit:
            break
        if cap:
            document = candidates[key].document_key
            if per_document.get(document, 0) == cap:
                continue
            per_document[document] = per_document.get(document, 0) + 1
        signals = [SignalScore(signal, *per_signal[signal].get(key, (0.0, 0))) for signal in ranked]
        signals.append(SignalScore("fusion", fused[key], 0))
        out.append(Fused(candidates[key], fused[key], tuple(signals)))
    return out
