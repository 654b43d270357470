"""Term proximity in the lexical store (retrieve.proximity_weight): neighbouring query words found
near each other, in order, raise an entry; a real tantivy index in a temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstack.domain import Chunk
from ragstack.stores.lexical import LexicalStore

FILLER = "river stone moss fern"  # words no query asks for, so entries differ only in word order


def chunk(doc: str, text: str) -> Chunk:
    return Chunk(f"{doc}:0", doc, "default", text, (), (), 0, "", f"{doc}.md", "text/markdown")


@pytest.fixture
def entries() -> list[Chunk]:
    return [
        chunk("apart", f"shock {FILLER} {FILLER} {FILLER} heat"),  # both words, reversed and far apart
        chunk("near", f"heat {FILLER} shock {FILLER} {FILLER}"),  # in order, four words between
        chunk("adjacent", f"heat shock {FILLER} {FILLER} {FILLER}"),
    ]


def ranked(tmp_path: Path, entries: list[Chunk], query: str, **proximity: float) -> list[tuple[str, float]]:
    store = LexicalStore(tmp_path / "index", writer=True, **proximity)  # type: ignore[arg-type]
    store.replace_documents("default", [c.document_id for c in entries], entries)
    found = store.search(query, "default", 10)
    store.close()
    return [(c.document_id, round(s, 4)) for c, s in found]


def test_off_the_word_order_does_not_count(tmp_path: Path, entries: list[Chunk]) -> None:
    found = ranked(tmp_path, entries, "heat shock")
    assert {doc for doc, _ in found} == {"apart", "near", "adjacent"}
    assert len({s for _, s in found}) == 1  # a tie: the same words, the same lengths


def test_pairs_in_order_within_the_slop_rank_first(tmp_path: Path, entries: list[Chunk]) -> None:
    found = ranked(tmp_path, entries, "heat shock", proximity=0.5, proximity_slop=4)
    assert [doc for doc, _ in found][2] == "apart"
    assert found[0][1] > found[2][1] and found[1][1] > found[2][1]
    tight = ranked(tmp_path, entries, "heat shock", proximity=0.5, proximity_slop=0)
    assert tight[0][0] == "adjacent" and tight[0][1] > tight[1][1] == tight[2][1]


def test_stopwords_between_the_query_words_are_skipped(tmp_path: Path, entries: list[Chunk]) -> None:
    """ "heat of shock" pairs heat with shock (stems, stopwords out); a query of one content word
    has no pair, so it ranks as without proximity."""
    found = ranked(tmp_path, entries, "the heat of shock", proximity=0.5, proximity_slop=4)
    assert [doc for doc, _ in found][2] == "apart" and found[1][1] > found[2][1]
    alone = ranked(tmp_path, entries, "the heat", proximity=0.5)
    assert len({s for _, s in alone}) == 1
