"""`ragstack eval retrieval --half`: a fixed, even split of a query set for tune/report."""

from __future__ import annotations

from collections import Counter

from ragstack.evals.retrieval import query_half


def test_halves_are_fixed_by_the_id_and_about_even() -> None:
    # sha1("2") starts with 0xda (even): a; sha1("1") with 0x35 (odd): b.
    assert query_half("2") == "a" and query_half("1") == "b"
    assert [query_half("q-17") for _ in range(3)] == ["b"] * 3
    counts = Counter(query_half(f"claim-{i}") for i in range(2000))
    assert set(counts) == {"a", "b"} and abs(counts["a"] - counts["b"]) < 200
