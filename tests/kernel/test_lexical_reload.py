"""A reader of the lexical index (another LexicalStore on the folder, as a retrieve service is)
reloads only when the folder changed, and then always: every commit, however close together, and a
restore that swapped the folder."""

from __future__ import annotations

from pathlib import Path

from ragstack.domain import Chunk, SearchFilter
from ragstack.stores.lexical import LexicalStore


def chunk(doc: str, text: str) -> Chunk:
    return Chunk(f"{doc}:0", doc, "lib", text, title=doc)


def found(reader: LexicalStore, word: str) -> list[str]:
    return [c.document_id for c, _ in reader.search(word, "lib", 10, SearchFilter())]


def test_a_reader_sees_each_commit_and_a_restore(tmp_path: Path) -> None:
    writer = LexicalStore(tmp_path / "index", writer=True)
    reader = LexicalStore(tmp_path / "index")
    writer.replace_documents("lib", ["a"], [chunk("a", "okapi stripes")])
    assert found(reader, "okapi") == ["a"]
    seen = reader._seen
    assert found(reader, "okapi") == ["a"] and reader._seen == seen  # nothing changed: no reload
    for i in range(5):  # commits within the same instant
        writer.replace_documents("lib", [f"b{i}"], [chunk(f"b{i}", f"heron{i} wading")])
        assert found(reader, f"heron{i}") == [f"b{i}"]

    writer.copy_to(tmp_path / "copy")
    writer.replace_documents("lib", ["c"], [chunk("c", "walrus tusks")])
    assert found(reader, "walrus") == ["c"]
    writer.replace_with(tmp_path / "copy")  # the folder swapped for the copy: "c" is gone
    assert found(reader, "walrus") == [] and found(reader, "okapi") == ["a"]
    writer.close()
