from __future__ import annotations

import pytest

from ragstack.domain import Candidate, Chunk
from services.retrieve.fusion import cap_per_document, normalized_score_fusion, reciprocal_rank_fusion


def c(cid: str, document: str = "d") -> Candidate:
    return Candidate.of(Chunk(chunk_id=cid, document_id=document, library="default", text=cid))


def ids(fused) -> list[str]:  # type: ignore[no-untyped-def]
    return [f.candidate.chunk.chunk_id for f in fused]


def test_hand_computed_rrf() -> None:
    # lexical: a(1) b(2) c(3); dense: b(1) d(2) a(3); k = 60.
    fused = reciprocal_rank_fusion(
        {
            "lexical": [(c("a"), 9.0), (c("b"), 7.0), (c("c"), 1.0)],
            "dense": [(c("b"), 0.9), (c("d"), 0.8), (c("a"), 0.7)],
        },
        k=60,
    )
    scores = {f.candidate.chunk.chunk_id: f.score for f in fused}
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["d"] == pytest.approx(1 / 62)
    assert scores["c"] == pytest.approx(1 / 63)
    assert ids(fused) == ["b", "a", "d", "c"]
    b = fused[0]
    assert [(s.signal, s.score, s.rank) for s in b.signals][:2] == [("lexical", 7.0, 2), ("dense", 0.9, 1)]
    d = next(f for f in fused if f.candidate.chunk.chunk_id == "d")
    assert ("lexical", 0.0, 0) == (d.signals[0].signal, d.signals[0].score, d.signals[0].rank)


def test_ties_are_deterministic_and_duplicates_ignored() -> None:
    z, m = c("z"), c("m")
    fused = reciprocal_rank_fusion({"x": [(z, 1.0), (z, 0.5)], "y": [(m, 1.0)]}, k=1)
    assert [f.candidate for f in fused] == sorted([z, m], key=lambda x: x.key)  # a tie: by key
    assert [f.score for f in fused] == pytest.approx([0.5, 0.5])
    again = reciprocal_rank_fusion({"y": [(m, 1.0)], "x": [(z, 1.0)]}, k=1)
    assert [f.candidate for f in again] == [f.candidate for f in fused]


def test_candidates_without_chunks_fuse_by_key() -> None:
    """A lexical candidate carries only its keys; it meets the dense list's candidate of the same
    chunk and the per-document cap counts it."""
    a, b = c("a", "d1"), c("b", "d1")
    bare = Candidate(a.key, a.document_key, at="somewhere")
    fused = normalized_score_fusion(
        {"lexical": [(bare, 5.0), (b, 1.0)], "dense": [(a, 0.9), (b, 0.1)]},
        {"lexical": 0.5, "dense": 0.5},
        cap=1,
    )
    assert len(fused) == 1 and fused[0].candidate is bare and fused[0].score == pytest.approx(1.0)


def test_hand_computed_score_fusion() -> None:
    # lexical 9, 7, 1 -> 1, 0.75, 0; dense 0.9, 0.8, 0.7 -> 1, 0.5, 0. Weights 0.5 / 0.5.
    fused = normalized_score_fusion(
        {
            "lexical": [(c("a"), 9.0), (c("b"), 7.0), (c("c"), 1.0)],
            "dense": [(c("b"), 0.9), (c("d"), 0.8), (c("a"), 0.7)],
        },
        {"lexical": 0.5, "dense": 0.5},
    )
    scores = {f.candidate.chunk.chunk_id: f.score for f in fused}
    assert scores == pytest.approx({"a": 0.5, "b": 0.875, "c": 0.0, "d": 0.25})
    assert ids(fused) == ["b", "a", "d", "c"]
    single = normalized_score_fusion({"lexical": [(c("z"), 3.0)]}, {"lexical": 1.0})
    assert single[0].score == 1.0


def test_cap_per_document_keeps_order() -> None:
    items = [("x", 1), ("y", 2), ("x", 3), ("x", 4), ("y", 5)]
    assert cap_per_document(items, 2, lambda i: i[0]) == [("x", 1), ("y", 2), ("x", 3), ("y", 5)]
    assert cap_per_document(items, 0, lambda i: i[0]) == items
