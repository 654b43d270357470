"""A unit of writes across LanceDB, tantivy and the catalog (an ingest batch, a delete, a prune)
succeeds everywhere or nowhere, on real stores: a write that fails rolls LanceDB back; a unit a
crash stopped before tantivy's commit is rolled back at the next start, one stopped after it is
finished (only the catalog rows were missing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import StateConfig
from ragstack.domain import IngestSummary
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore, sql_str
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import upload_items
from tests.conftest import MODEL_DIR
from tests.tools import state as state_tools


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs, no `except Exception` catches it."""


def pipeline(tmp_path: Path, embedder: Any, lexical: LexicalStore | None = None) -> IngestPipeline:
    return IngestPipeline(
        Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)),
        VectorStore(tmp_path / "lance", embedder.dimension, writer=True),
        lexical or LexicalStore(tmp_path / "tantivy", writer=True),
        embedder,
        chunk_tokens=256,
        overlap_sentences=0,
        max_file_bytes=200_000,
    )


def ingest(p: IngestPipeline, text: str, name: str = "okapi.md", prune: bool = False) -> IngestSummary:
    """Uploads `text` as `name`; with `prune`, the library's other uploads are removed."""
    roots = ["upload://default"] if prune else []
    events = list(p.run(upload_items("default", [(name, text.encode())]), "default", roots))
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    return summary


def state(tmp_path: Path, embedder: Any) -> tuple[list[str], list[str], list[str]]:
    """(the document's chunk texts in LanceDB, in tantivy, the catalog's documents)."""
    table = VectorStore(tmp_path / "lance", embedder.dimension)._open()
    if table is None:
        return [], [], []
    lance = sorted(r["text"] for r in table.search().where(f"library = {sql_str('default')}").to_list())
    lexical = sorted(c.text for c, _ in LexicalStore(tmp_path / "tantivy").search("okapi", "default", 10))
    catalog = [
        d.source for d in Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)).list("default")
    ]
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


TAPIR = "# Tapir\n\nThe okapi is not a tapir; the tapir browses in the rainforest.\n"
WINDOWS = ("before tantivy commits", "after tantivy commits")

# Another process builds the pipeline, ingests two documents, then deletes one (or prunes it) and
# is killed with SIGKILL inside the unit's window: nothing unwinds, no handler runs.
_KILLED = """
import os, signal, sys
from pathlib import Path
from ragstack.embedding import Embedder
from tests.services.ingest.test_journal import OLD, TAPIR, ingest, pipeline

folder, operation, where = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
p = pipeline(folder, Embedder(Path(sys.argv[4])))
ingest(p, OLD)
ingest(p, TAPIR, "tapir.md")
print(p.list_documents("default")[0].document_id, flush=True)

def kill(*args, **kw):
    os.kill(os.getpid(), signal.SIGKILL)

if where == "before tantivy commits":
    p._lexical.replace_documents = kill
else:
    p._catalog.end_batch = kill
if operation == "delete":
    p.delete_document("default", p.list_documents("default")[0].document_id)
else:
    ingest(p, TAPIR, "tapir.md", prune=True)  # okapi.md is no longer uploaded: pruned
"""


def okapi_state(tmp_path: Path, embedder: Any) -> tuple[bool, bool, bool]:
    """Whether okapi.md's chunks are in LanceDB, in tantivy, and it is in the catalog."""
    lance, lexical, catalog = state(tmp_path, embedder)
    return (
        any("Congo" in t for t in lance),
        any("Congo" in t for t in lexical),
        "upload://default/okapi.md" in catalog,
    )


@pytest.mark.parametrize("operation", ["delete", "prune"])
@pytest.mark.parametrize("where", WINDOWS)
def test_kill_9_during_a_delete_or_prune_is_finished_or_undone_at_the_next_start(
    tmp_path: Path, embedder, operation: str, where: str
) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(tmp_path), operation, where, str(MODEL_DIR)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[3],
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    if where == "before tantivy commits":  # the window: LanceDB without okapi, tantivy with it
        assert okapi_state(tmp_path, embedder)[:2] == (False, True)
    else:  # tantivy without it, the catalog still listing it
        assert okapi_state(tmp_path, embedder)[1:] == (False, True)

    again = pipeline(tmp_path, embedder)  # the next start
    gone = where == "after tantivy commits"
    assert okapi_state(tmp_path, embedder) == (not gone,) * 3  # every store agrees
    lance, lexical, catalog = state(tmp_path, embedder)
    assert any("tapir" in t for t in lance) and any("tapir" in t for t in lexical)
    assert "upload://default/tapir.md" in catalog  # the other document was never touched
    if not gone:  # undone: the delete can simply be asked again
        again.delete_document("default", again.list_documents("default")[0].document_id)
        assert okapi_state(tmp_path, embedder) == (False, False, False)


def test_a_unit_whose_rollback_failed_is_undone_before_the_next_begins(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A rollback can fail too (the disk that failed the write is still full): the journal stays,
    and the next unit, in the same process, undoes it before writing its own entry over it."""
    p = pipeline(tmp_path, embedder)
    ingest(p, OLD)
    before = state(tmp_path, embedder)
    lexical = p._lexical
    write, rollback = lexical.replace_documents, lexical.rollback

    def broken(*args: Any, **kw: Any) -> None:
        raise OSError("the write failed")

    def rollback_broken() -> None:
        raise OSError("the rollback failed")

    lexical.replace_documents = broken  # type: ignore[method-assign]
    lexical.rollback = rollback_broken  # type: ignore[method-assign]
    assert ingest(p, NEW).failed == 1
    assert state(tmp_path, embedder)[0] != before[0]  # LanceDB still holds the failed unit's rows

    lexical.replace_documents, lexical.rollback = write, rollback  # type: ignore[method-assign]
    assert ingest(p, TAPIR, "tapir.md").indexed == 1  # another document: nothing rewrites okapi.md
    tapir = TAPIR.split("\n\n")[1].strip()
    lance, in_tantivy, catalog = state(tmp_path, embedder)
    for store, had in ((lance, before[0]), (in_tantivy, before[1])):  # the okapi's old chunks, and the tapir
        assert store == sorted([*had, tapir])
    assert len(catalog) == 2


def test_a_failed_delete_changes_no_store(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    p = pipeline(tmp_path, embedder)
    ingest(p, OLD)
    ingest(p, TAPIR, "tapir.md")
    before = state(tmp_path, embedder)

    def broken(*args: Any, **kw: Any) -> None:
        raise OSError("disk full")

    p._lexical.replace_documents = broken  # type: ignore[method-assign]
    with pytest.raises(OSError, match="disk full"):
        p.delete_document("default", p.list_documents("default")[0].document_id)
    with pytest.raises(OSError, match="disk full"):
        ingest(p, TAPIR, "tapir.md", prune=True)
    assert state(tmp_path, embedder) == before


def test_a_failed_unit_rolls_the_kept_pdf_back(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """The PDFs kept for their pictures are in the unit: a batch that fails after writing them
    leaves the previous PDF and layout, and a later success replaces them."""
    from ragstack.stores.originals import Originals
    from tests.conftest import SHARED

    pdfs = SHARED / "data" / "documents" / "pdf"
    vectors = VectorStore(tmp_path / "lance", embedder.dimension, writer=True)
    originals = Originals(vectors.connection())
    lexical = LexicalStore(tmp_path / "tantivy", writer=True)
    p = IngestPipeline(
        Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)),
        vectors,
        lexical,
        embedder,
        256,
        0,
        5_000_000,
        originals=originals,
    )
    first, second = (pdfs / "multi_page.pdf").read_bytes(), (pdfs / "2305.03393v1-pg9.pdf").read_bytes()

    def run(data: bytes) -> IngestSummary:
        events = list(p.run(upload_items("default", [("report.pdf", data)]), "default"))
        assert isinstance(events[-1], IngestSummary)
        return events[-1]

    real = lexical.replace_documents

    def broken(*args: Any, **kw: Any) -> None:
        raise OSError("disk full")

    # The first unit that keeps a PDF makes the table; failing, it leaves it empty.
    lexical.replace_documents = broken  # type: ignore[method-assign]
    assert run(first).failed == 1
    assert Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)).list("default") == []
    assert vectors.connection().open_table("originals").count_rows() == 0
    lexical.replace_documents = real  # type: ignore[method-assign]
    assert run(first).indexed == 1
    doc = Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)).list("default")[0].document_id
    layout = originals.layout("default", doc)
    lexical.replace_documents = broken  # type: ignore[method-assign]
    assert run(second).failed == 1
    assert originals.data("default", doc) == first and originals.layout("default", doc) == layout
    lexical.replace_documents = real  # type: ignore[method-assign]
    assert run(second).indexed == 1
    assert originals.data("default", doc) == second
