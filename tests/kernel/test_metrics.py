"""The metric code against hand-computed values."""

from __future__ import annotations

import math

import pytest

from ragstack.evals.metrics import mrr_at_k, ndcg_at_k, percentile, recall_at_k, unique_in_order


def test_ndcg_hand_computed() -> None:
    # Ranked: d3 (rel 2), d1 (0), d2 (1); judged: d2=1, d3=2, d4=1.
    ranked = ["d3", "d1", "d2"]
    qrels = {"d2": 1, "d3": 2, "d4": 1}
    dcg = 2 / math.log2(2) + 0 + 1 / math.log2(4)  # 2 + 0.5 = 2.5
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)  # 2 + 0.6309 + 0.5
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(0.7985, abs=1e-4)
    assert ndcg_at_k(ranked, qrels, 1) == pytest.approx(1.0)
    assert ndcg_at_k(["x"], qrels, 10) == 0.0
    assert ndcg_at_k(ranked, {}, 10) == 0.0


def test_recall_and_mrr_hand_computed() -> None:
    qrels = {"a": 1, "b": 1, "c": 0}
    assert recall_at_k(["x", "a", "c"], qrels, 2) == 0.5
    assert recall_at_k(["b", "a"], qrels, 10) == 1.0
    assert mrr_at_k(["x", "c", "b"], qrels, 10) == pytest.approx(1 / 3)
    assert mrr_at_k(["x", "c", "b"], qrels, 2) == 0.0


def test_percentile_and_dedup() -> None:
    assert percentile([10, 20, 30, 40], 50) == 25
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    assert percentile([], 50) == 0.0
    assert unique_in_order(["d1", "d2", "d1", "d3"]) == ["d1", "d2", "d3"]
