from __future__ import annotations

import pytest

from ragstack.domain import Chunk
from services.retrieve.fusion import normalized_score_fusion, reciprocal_rank_fusion


def c(cid: str) -> Chunk:
    return Chunk(chunk_id=cid, document_id="d", library="default", text=cid)


def test_hand_computed_rrf() -> None:
    # lexical: a(1) b(2) c(3); dense: b(1) d(2) a(3); k = 60.
    fused = reciprocal_rank_fusion(
        {
            "lexical": [(c("a"), 9.0), (c("b"), 7.0), (c("c"), 1.0)],
            "dense": [(c("b"), 0.9), (c("d"), 0.8), (c("a"), 0.7)],
        },
        k=60,
    )
    scores = {h.chunk.chunk_id: h.score for h in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["d"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63)
    assert [h.chunk.chunk_id for h in fused] == ["b", "a", "d", "c"]
    b = fused[0]
    assert [(s.signal, s.score, s.rank) for s in b.signals][:2] == [("lexical", 7.0, 2), ("dense", 0.9, 1)]
    d = next(h for h in fused if h.chunk.chunk_id == "d")
    assert ("lexical", 0.0, 0) == (d.signals[0].signal, d.signals[0].score, d.signals[0].rank)


def test_ties_are_deterministic_and_duplicates_ignored() -> None:
    fused = reciprocal_rank_fusion({"x": [(c("z"), 1.0), (c("z"), 0.5)], "y": [(c("m"), 1.0)]}, k=1)
    assert [h.chunk.chunk_id for h in fused] == ["m", "z"]
    assert fused[1].score == pytest.approx(0.5)


def test_hand_computed_score_fusion() -> None:
    # lexical 9, 7, 1 -> 1, 0.75, 0; dense 0.9, 0.8, 0.7 -> 1, 0.5, 0. Weights 0.5 / 0.5.
    fused = normalized_score_fusion(
        {
            "lexical": [(c("a"), 9.0), (c("b"), 7.0), (c("c"), 1.0)],
            "dense": [(c("b"), 0.9), (c("d"), 0.8), (c("a"), 0.7)],
        },
        {"lexical": 0.5, "dense": 0.5},
    )
    scores = {h.chunk.chunk_id: h.score for h in fused}
    assert scores == pytest.approx({"a": 0.5, "b": 0.875, "c": 0.0, "d": 0.25})
    assert [h.chunk.chunk_id for h in fused] == ["b", "a", "d", "c"]
    single = normalized_score_fusion({"lexical": [(c("z"), 3.0)]}, {"lexical": 1.0})
    assert single[0].score == 1.0
