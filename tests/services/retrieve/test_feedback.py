"""Pseudo-relevance feedback: RM3 term weights, Rocchio, the lexical store's part, the searcher's
second search."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from ragstack.domain import Candidate, Chunk, SearchFilter, SearchMode
from ragstack.stores.lexical import LexicalStore
from services.retrieve.feedback import expansion_terms, rocchio
from services.retrieve.searcher import Feedback, Query, Searcher


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_relevance_model_weights_by_hand() -> None:
    # P(D|q): 3/4 and 1/4. P(t|R): lava 3/4 * 2/4 = 0.375, vent 3/4 * 1/4 + 1/4 * 1/2 = 0.3125,
    # reef 1/4 * 1/2 = 0.125; "the", "7" and "x" are never picked.
    feedback = [(["lava", "lava", "vent", "the", "7", "x"][:4], 3.0), (["vent", "reef"], 1.0)]
    df = {"lava": 1, "vent": 1, "reef": 1}
    terms = expansion_terms(feedback, df, documents=10, terms=5, stopwords=frozenset({"the"}))
    assert set(terms) == {"lava", "vent", "reef"}
    assert sum(terms.values()) == pytest.approx(1.0)
    assert terms["lava"] / terms["vent"] == pytest.approx(0.375 / 0.3125)
    assert terms["vent"] / terms["reef"] == pytest.approx(0.3125 / 0.125)
    only = expansion_terms([(["7", "x", "the"], 1.0)], {}, 10, 5, frozenset({"the"}))
    assert only == {}


def test_terms_are_picked_by_idf_too_but_weighted_without_it() -> None:
    # "cell" is twice as frequent in the feedback as "axon", but nearly every entry has it.
    feedback = [(["cell", "cell", "axon", "glia"], 1.0)]
    df = {"cell": 95, "axon": 2, "glia": 3}
    assert 2 / 4 * idf(95, 100) < 1 / 4 * idf(3, 100)
    terms = expansion_terms(feedback, df, documents=100, terms=2)
    assert list(terms) == ["axon", "glia"] and terms["axon"] == pytest.approx(0.5)
    assert expansion_terms(feedback, df, documents=100, terms=0) == {}
    assert expansion_terms([], df, documents=100, terms=3) == {}


def test_rocchio_moves_the_query_towards_the_feedback_mean() -> None:
    query = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    docs = [np.array([0.0, 1.0, 0.0], dtype=np.float32), np.array([0.0, 0.0, 1.0], dtype=np.float32)]
    moved = rocchio(query, docs, 0.5)  # 0.5 q + 0.5 (0, .5, .5), normalised
    assert moved == pytest.approx(np.array([0.5, 0.25, 0.25]) / math.sqrt(0.375))
    assert np.linalg.norm(moved) == pytest.approx(1.0) and moved.dtype == np.float32
    assert rocchio(query, docs, 0.0) is query
    assert rocchio(query, [], 0.5) is query


def chunk(doc: str, text: str, pos: int = 0) -> Chunk:
    return Chunk(f"{doc}:{pos}", doc, "default", text, ("T",), (), pos, "T", "s", "text/plain")


def test_lexical_store_analyses_counts_and_searches_expanded_queries(tmp_path: Path) -> None:
    store = LexicalStore(tmp_path / "index", writer=True)
    store.replace_documents(
        "default",
        ["a", "b", "c"],
        [
            chunk("a", "Volcanoes erupt basaltic lava."),
            chunk("b", "Hydrothermal vents host tubeworms near lava flows."),
            chunk("c", "Tubeworms feed on bacteria."),
        ],
    )
    assert store.analyze(["Volcanoes Erupting", ""]) == [["volcano", "erupt"], []]
    frequencies, entries = store.document_frequencies(["lava", "tubeworm", "absent"])
    assert frequencies == {"lava": 2, "tubeworm": 2, "absent": 0} and entries >= 3

    def ids(expansion: Mapping[str, float] | None) -> list[str]:
        return [c.document_id for c, _ in store.search("volcano", "default", 10, expansion=expansion)]

    assert ids(None) == ["a"]
    expanded = ids({"lava": 0.5, "tubeworm": 0.5})
    assert expanded[0] == "a" and set(expanded) == {"a", "b", "c"}  # c: from the added terms alone
    assert ids({"tubeworm": 0.0}) == ["a"]  # weightless terms are not added
    hidden = store.search("volcano", "default", 10, SearchFilter(document_ids=("c",)), {"tubeworm": 1.0})
    assert [c.document_id for c, _ in hidden] == ["c"]  # filters still hold


CHUNKS = [chunk("a", "seed word alpha"), chunk("b", "alpha beta"), chunk("c", "gamma")]


class Lexical:
    """BM25's shape without BM25: a chunk scores the summed weights of the query words it holds
    (each query word 1, each expansion term its weight). Records the expansions it was given."""

    def __init__(self) -> None:
        self.expansions: list[Mapping[str, float] | None] = []

    def search(self, query, library, k, where=None, expansion=None):
        self.expansions.append(expansion)
        weights = {w: 1.0 for w in query.split()} | dict(expansion or {})
        scored = [(c, sum(weights.get(w, 0.0) for w in c.text.split())) for c in CHUNKS]
        return sorted([x for x in scored if x[1] > 0], key=lambda x: -x[1])[:k]

    def search_candidates(self, query, library, k, where=None, expansion=None):
        return [(Candidate.of(c), s) for c, s in self.search(query, library, k, where, expansion)]

    def search_pages(self, query, library, k, where=None):
        return []

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        return [t.split() for t in texts]

    def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        return {t: 1 for t in terms}, 100


class Dense:
    """Each chunk's vector is a unit axis; search ranks by dot product. Records its queries."""

    axes: ClassVar[dict[str, int]] = {"a:0": 0, "b:0": 1, "c:0": 2}

    def __init__(self) -> None:
        self.queries: list[np.ndarray] = []

    def search(self, vector, library, k, where=None, embedder=None):
        self.queries.append(vector)
        return sorted(((c, float(vector[self.axes[c.chunk_id]])) for c in CHUNKS), key=lambda x: -x[1])[:k]

    def search_candidates(self, vector, library, k, where=None, embedder=None):
        return [(Candidate.of(c), s) for c, s in self.search(vector, library, k, where, embedder)]

    def vectors_by_id(self, library, chunk_ids):
        return {c: np.eye(3, dtype=np.float32)[self.axes[c]] for c in chunk_ids}


class Embedder:
    name = "fake"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[0.6, 0.0, 0.8]] * len(texts), dtype=np.float32)


def searcher(lexical: Lexical, dense: Dense, feedback: Feedback) -> Searcher:
    return Searcher(
        Embedder(),
        dense,  # type: ignore[arg-type]
        lexical,
        default_top_k=3,
        max_top_k=10,
        candidates=3,
        rrf_k=60,
        feedback=feedback,
    )


async def test_feedback_searches_again_with_the_first_searchs_best_document() -> None:
    lexical, dense = Lexical(), Dense()
    fb = Feedback(documents=1, terms=2, lexical_weight=0.5, dense_weight=0.5)
    hits = (await searcher(lexical, dense, fb).search(Query("seed", "default", mode=SearchMode.HYBRID))).hits
    # First pass: lexical a (1.0); dense c 0.8, a 0.6, b 0 (min-max 1, 0.75, 0); fused a 0.875
    # first. Its words seed, word, alpha: the expansion has two of them, weighing
    # (0.5 / 0.5) x 1 query word = 1 in all. Rocchio: 0.5 (0.6, 0, 0.8) + 0.5 a's (1, 0, 0).
    assert lexical.expansions[0] is None and len(lexical.expansions) == 2
    expansion = lexical.expansions[1]
    assert expansion is not None and len(expansion) == 2 and sum(expansion.values()) == pytest.approx(1.0)
    assert dense.queries[1] == pytest.approx(np.array([0.8, 0.0, 0.4]) / np.linalg.norm([0.8, 0.0, 0.4]))
    assert hits[0].chunk.document_id == "a"


async def test_feedback_off_or_in_lexical_mode() -> None:
    lexical, dense = Lexical(), Dense()
    await searcher(lexical, dense, Feedback()).search(Query("seed", "default"))
    assert lexical.expansions == [None] and len(dense.queries) == 1
    fb = Feedback(documents=2, terms=5, lexical_weight=0.5, dense_weight=0.5)
    hits = (await searcher(lexical, dense, fb).search(Query("seed", "default", mode=SearchMode.LEXICAL))).hits
    # Lexical mode: feedback from the lexical list (a only), no dense search at all.
    assert len(dense.queries) == 1 and lexical.expansions[-1] is not None
    assert [h.chunk.document_id for h in hits] == ["a", "b"]  # b: through "alpha" alone
