"""The offline checker with the real embedder."""

from __future__ import annotations

import pytest

from ragstack.domain import Evidence, Verdict
from ragstack.errors import InvalidArgument
from services.verify.checker import OfflineChecker, Verifier
from services.verify.claims import split_claims

EVIDENCE = [
    Evidence("1", "bm25:0", "BM25 has two parameters. Lucene and tantivy default to k1 = 1.2 and b = 0.75."),
    Evidence(
        "2", "rrf:0", "Reciprocal rank fusion uses a constant k, usually 60. It needs no score calibration."
    ),
]


@pytest.fixture(scope="module")
def verifier(embedder) -> Verifier:  # type: ignore[no-untyped-def]
    return Verifier(OfflineChecker(embedder, 0.55, 0.4), abstain_threshold=0.5)


def test_claims_keep_their_refs() -> None:
    claims = split_claims("BM25 defaults to k1 = 1.2 [1]. RRF uses k = 60 [2, 1]. Trailing style. [2] Bare.")
    assert [(c.claim_id, c.refs) for c in claims] == [
        ("c1", ("1",)),
        ("c2", ("2", "1")),
        ("c3", ("2",)),
        ("c4", ()),
    ]
    assert claims[0].text == "BM25 defaults to k1 = 1.2."


def test_markdown_links_and_images_are_not_citations() -> None:
    """A quoted document's `[text](url)` and `![alt](url)` stay text; only bare markers cite."""
    claims = split_claims(
        "See [the guide](https://x.example/g) for setup [2]. A chart ![x](http://h/p.png) [1, 3]."
    )
    assert [c.refs for c in claims] == [("2",), ("1", "3")]
    assert claims[0].text == "See [the guide](https://x.example/g) for setup."
    assert "![x](http://h/p.png)" in claims[1].text


def test_supported_answer_is_delivered(verifier: Verifier) -> None:
    v = verifier.verify(
        "Tantivy defaults to k1 = 1.2 and b = 0.75 [1]. RRF usually uses k = 60 [2].",
        EVIDENCE,
        evidence_score=0.8,
    )
    assert [c.verdict for c in v.manifest.claims] == [Verdict.SUPPORTED, Verdict.SUPPORTED]
    assert v.manifest.supported_ratio == 1.0 and not v.abstain and v.confidence > 0.8


def test_changed_number_is_never_supported(verifier: Verifier) -> None:
    v = verifier.verify("Tantivy defaults to k1 = 1.5 and b = 0.75 [1].", EVIDENCE, 0.9)
    claim = v.manifest.claims[0]
    assert claim.verdict == Verdict.UNSUPPORTED and "1.5" in claim.reason


def test_negation_flip_is_not_supported(verifier: Verifier) -> None:
    v = verifier.verify("Reciprocal rank fusion does not use a constant k [2].", EVIDENCE, 0.9)
    assert v.manifest.claims[0].verdict == Verdict.UNSUPPORTED


def test_fail_closed_without_refs_or_with_unknown_refs(verifier: Verifier) -> None:
    v = verifier.verify("BM25 has two parameters. BM25 has two parameters [7].", EVIDENCE, 0.9)
    assert [c.verdict for c in v.manifest.claims] == [Verdict.UNSUPPORTED, Verdict.UNSUPPORTED]
    assert (
        "cites no evidence" in v.manifest.claims[0].reason
        and "match no evidence" in v.manifest.claims[1].reason
    )


def test_unsupported_answer_is_withheld_with_capped_confidence(verifier: Verifier) -> None:
    v = verifier.verify("The Eiffel Tower is in Paris [1]. Cats purr when content [2].", EVIDENCE, 1.0)
    assert all(c.verdict == Verdict.UNSUPPORTED for c in v.manifest.claims)
    assert v.abstain and v.confidence <= 0.25 and v.manifest.supported_ratio == 0.0


def test_irrelevant_evidence_lowers_confidence(verifier: Verifier) -> None:
    good = verifier.verify("BM25 has two parameters [1].", EVIDENCE, evidence_score=0.9)
    weak = verifier.verify("BM25 has two parameters [1].", EVIDENCE, evidence_score=0.1)
    assert weak.confidence < good.confidence


def test_threshold_override_and_empty_answer(verifier: Verifier) -> None:
    half = "BM25 has two parameters [1]. The moon is made of cheese [2]."
    assert not verifier.verify(half, EVIDENCE, 0.5).abstain
    assert verifier.verify(half, EVIDENCE, 0.5, abstain_threshold=0.9).abstain
    with pytest.raises(InvalidArgument):
        verifier.verify("  ", EVIDENCE, 0.5)


def test_effect_going_the_other_way_is_not_supported(verifier: Verifier) -> None:
    evidence = [Evidence("1", "d:0", "Ticket sales rose sharply after the festival moved to July.")]
    same = verifier.verify("Ticket sales grew after the festival moved to July [1].", evidence, 0.9)
    other = verifier.verify("Ticket sales fell after the festival moved to July [1].", evidence, 0.9)
    assert same.manifest.claims[0].verdict == Verdict.SUPPORTED
    assert (
        other.manifest.claims[0].verdict == Verdict.UNSUPPORTED
        and "other way" in other.manifest.claims[0].reason
    )


def test_a_coded_name_missing_from_the_evidence_is_not_supported(verifier: Verifier) -> None:
    v = verifier.verify("Tantivy defaults to k1 = 1.2 and b = 0.75 in BM25F [1].", EVIDENCE, 0.9)
    assert v.manifest.claims[0].verdict == Verdict.UNSUPPORTED and "BM25F" in v.manifest.claims[0].reason


def test_a_date_that_differs_is_not_supported(verifier: Verifier) -> None:
    evidence = [Evidence("1", "d:0", "The index was rebuilt in March 2024 after the upgrade.")]
    same = verifier.verify("The index was rebuilt in March 2024 [1].", evidence, 0.9)
    other = verifier.verify("The index was rebuilt in April 2024 [1].", evidence, 0.9)
    assert same.manifest.claims[0].verdict == Verdict.SUPPORTED
    assert (
        other.manifest.claims[0].verdict == Verdict.UNSUPPORTED and "April" in other.manifest.claims[0].reason
    )


@pytest.mark.parametrize(
    ("answer", "evidence", "score", "threshold", "said"),
    [
        ("x [1]. " * 10_000, EVIDENCE, 0.5, 0.0, "answer is 70000 characters, over the limit of 64000"),
        ("BM25 [1].", [Evidence("1", "c:0", "k1. " * 250_001)], 0.5, 0.0, "over the limit of 1000000"),
        ("BM25 [1].", EVIDENCE, float("nan"), 0.0, "evidence_score nan is not between 0 and 1"),
        ("BM25 [1].", EVIDENCE, 0.5, 1.5, "abstain_threshold 1.5 is not between 0 and 1"),
    ],
    ids=["long answer", "much evidence", "NaN grade", "threshold over 1"],
)
def test_requests_past_a_limit_are_refused_naming_it(
    verifier: Verifier, answer: str, evidence: list[Evidence], score: float, threshold: float, said: str
) -> None:
    with pytest.raises(InvalidArgument, match=said):
        verifier.verify(answer, evidence, score, threshold)


def test_each_evidence_sentence_is_embedded_once_however_many_claims_cite_it(embedder) -> None:  # type: ignore[no-untyped-def]
    embedded: list[str] = []

    class Counting:
        def embed(self, texts):  # type: ignore[no-untyped-def]
            embedded.extend(texts)
            return embedder.embed(texts)

    alone = Verifier(OfflineChecker(embedder, 0.55, 0.4), abstain_threshold=0.5)
    counted = Verifier(OfflineChecker(Counting(), 0.55, 0.4), abstain_threshold=0.5)
    answer = "BM25 has two parameters [1]. Tantivy defaults to b = 0.75 [1]. RRF uses k = 60 [1][2]."
    assert counted.verify(answer, EVIDENCE, 0.5) == alone.verify(answer, EVIDENCE, 0.5)
    assert len(embedded) == 3 + 4  # each claim, and the 4 evidence sentences once (not 2 + 2 + 4)
