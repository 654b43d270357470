"""A batch's writes across LanceDB, tantivy and the catalog succeed together or not at all, on real
stores: a write that fails rolls LanceDB back; a batch a crash stopped before tantivy's commit is
rolled back at the next start, one stopped after it is finished (only the catalog rows were missing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragstack.domain import IngestSummary
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore, sql_str
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import upload_items


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs, no `except Exception` catches it."""


def pipeline(tmp_path: Path, embedder: Any, lexical: LexicalStore | None = None) -> IngestPipeline:
    return IngestPipeline(
        Catalog(tmp_path / "catalog.sqlite"),
        VectorStore(tmp_path / "lance", embedder.dimension, writer=True),
        lexical or LexicalStore(tmp_path / "tantivy", writer=True),
        embedder,
        chunk_tokens=256,
        overlap_sentences=0,
        max_file_bytes=200_000,
    )


def ingest(p: IngestPipeline, text: str) -> IngestSummary:
    events = list(p.run(upload_items("default", [("okapi.md", text.encode())]), "default"))
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    return summary


def state(tmp_path: Path, embedder: Any) -> tuple[list[str], list[str], list[str]]:
    """(the document's chunk texts in LanceDB, in tantivy, the catalog's documents)."""
    table = VectorStore(tmp_path / "lance", embedder.dimension)._open()
    lance = sorted(r["text"] for r in table.search().where(f"library = {sql_str('default')}").to_list())
    lexical = sorted(c.text for c, _ in LexicalStore(tmp_path / "tantivy").search("okapi", "default", 10))
    catalog = [d.source for d in Catalog(tmp_path / "catalog.sqlite").list("default")]
    return lance, lexical, catalog


OLD = "# Okapi\n\nThe okapi lives in the Congo rainforest.\n"
NEW = "# Okapi\n\nThe okapi is a relative of the giraffe.\n"


def test_a_failed_tantivy_write_rolls_lancedb_back(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    first = pipeline(tmp_path, embedder)
    ingest(first, OLD)
    before = state(tmp_path, embedder)

    lexical = first._lexical
    real = lexical.replace_documents

    def broken(*args: Any, **kw: Any) -> None:
        raise OSError("disk full")

    lexical.replace_documents = broken  # type: ignore[method-assign]
    summary = ingest(first, NEW)
    assert summary.failed == 1 and "disk full" in summary.failures[0]
    assert state(tmp_path, embedder) == before  # LanceDB holds the old chunks again
    lexical.replace_documents = real  # type: ignore[method-assign]
    assert ingest(first, NEW).indexed == 1  # and the next run writes the new version


@pytest.mark.parametrize("where", ["before tantivy commits", "after tantivy commits"])
def test_a_crash_between_the_commits_is_finished_at_the_next_start(
    tmp_path: Path, embedder, where: str
) -> None:  # type: ignore[no-untyped-def]
    first = pipeline(tmp_path, embedder)
    ingest(first, OLD)
    old = state(tmp_path, embedder)

    def crash(*args: Any, **kw: Any) -> None:
        raise Crash

    if where == "before tantivy commits":
        first._lexical.replace_documents = crash  # type: ignore[method-assign]
    else:
        first._catalog.end_batch = crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        ingest(first, NEW)
    lance, lexical, _ = state(tmp_path, embedder)
    if where == "before tantivy commits":
        assert lance != old[0] and lexical == old[1]  # the window: LanceDB new, tantivy old
    first._lexical.close()

    again = pipeline(tmp_path, embedder)  # the next start
    lance, lexical, catalog = state(tmp_path, embedder)
    assert lance == lexical and catalog == ["upload://default/okapi.md"]  # the stores agree again
    if where == "before tantivy commits":
        assert (lance, lexical) == old[:2]  # rolled back: the last committed version
        assert ingest(again, NEW).indexed == 1  # and the next run redoes it
    else:
        assert "giraffe" in " ".join(lance)  # finished: the new version, now in the catalog too
        assert ingest(again, NEW).unchanged == 1
