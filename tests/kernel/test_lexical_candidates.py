"""Lexical candidates (ragstack/stores/lexical.py): keys from the fast fields, stored fields read
only for the candidates kept, from the searcher that found them; an index written before keys is
searched through its stored fields and rewritten with keys by the writer, its ACL groups kept."""

from __future__ import annotations

import json
from pathlib import Path

import tantivy

from ragstack.domain import Candidate, Chunk, SearchFilter, chunk_key, document_key, read_chunks
from ragstack.stores.lexical import PUBLIC, LexicalStore, _schema, doc_key

LIB = "lib"


def chunk(doc: str, position: int, text: str, groups: tuple[str, ...] = ()) -> Chunk:
    return Chunk(f"{doc}:{position}", doc, LIB, text, ("H",), (1,), position, doc, "src", "text/x", groups)


def test_candidates_carry_keys_and_read_their_chunks_later(tmp_path: Path) -> None:
    writer = LexicalStore(tmp_path, writer=True)
    chunks = [chunk("a", 0, "okapi ranking"), chunk("a", 1, "okapi weights"), chunk("b", 0, "okapi")]
    writer.replace_documents(LIB, ["a", "b"], chunks)
    reader = LexicalStore(tmp_path)
    found = reader.search_candidates("okapi", LIB, 10, SearchFilter())
    assert len(found) == 3 and all(c.chunk is None and c.at is not None for c, _ in found)
    by_key = {chunk_key(c.chunk_id): c for c in chunks}
    assert {c.key for c, _ in found} == set(by_key)
    assert all(c.document_key == document_key(by_key[c.key].document_id) for c, _ in found)
    # A commit (and the reader's reload) after the search does not move the candidates' addresses.
    writer.replace_documents(LIB, ["c"], [chunk("c", 0, "okapi too")])
    writer.replace_documents(LIB, ["b"], [])
    assert reader.search("okapi", LIB, 10, SearchFilter())  # reloads
    assert read_chunks([c for c, _ in found]) == [by_key[c.key] for c, _ in found]
    assert [c for c, _ in reader.search("okapi", LIB, 10)] == read_chunks(
        [c for c, _ in reader.search_candidates("okapi", LIB, 10)]
    )
    given = Candidate.of(chunks[0])  # a candidate with its chunk is returned as it is
    assert read_chunks([given]) == [chunks[0]]
    writer.close()


def test_an_index_from_before_keys_is_searched_then_rewritten_with_its_groups(tmp_path: Path) -> None:
    index = tantivy.Index(_schema(keys=False), path=str(tmp_path))
    w = index.writer(heap_size=15_000_000, num_threads=1)
    for c in (chunk("pub", 0, "okapi public"), chunk("hr", 0, "okapi salaries", ("hr",))):
        meta = {"heading_path": ["H"], "pages": [1], "position": 0, "source": "src", "media_type": "text/x"}
        w.add_document(
            tantivy.Document(
                chunk_id=c.chunk_id,
                document_id=c.document_id,
                doc_key=doc_key(LIB, c.document_id),
                kind="chunk",
                media_type="text/x",
                heading_key="H\x1f",
                library=LIB,
                title=c.title,
                heading="H",
                text=c.text,
                meta=json.dumps(meta),
                group=list(c.groups) or [PUBLIC],
            )
        )
    w.commit()
    w.wait_merging_threads()
    del w, index

    reader = LexicalStore(tmp_path)
    found = reader.search_candidates("okapi", LIB, 10, SearchFilter(acl=()))
    assert [c.chunk.chunk_id for c, _ in found if c.chunk] == ["pub:0"]  # read at once, ACL applied
    assert found[0][0].key == chunk_key("pub:0")

    writer = LexicalStore(tmp_path, writer=True)  # rewrites it in the current schema
    for store in (writer, reader):
        public = store.search_candidates("okapi", LIB, 10, SearchFilter(acl=()))
        assert [c.chunk for c, _ in public] == [None]  # keys now: chunks read later
        assert [c.chunk_id for c in read_chunks([c for c, _ in public])] == ["pub:0"]
        hr = store.search("okapi", LIB, 10, SearchFilter(acl=("hr",)))
        assert {c.chunk_id for c, _ in hr} == {"pub:0", "hr:0"}
        assert next(c for c, _ in hr if c.chunk_id == "hr:0").groups == ("hr",)  # the group kept
    writer.close()
