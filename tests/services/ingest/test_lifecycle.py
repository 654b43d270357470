"""Store lifecycle on real stores in a temp dir (LanceDB, tantivy, SQLite, the graph tables), written
by the real pipeline with the real embedder: stats against what was ingested, snapshots that restore
every store together (seen by a retrieve Searcher on the same data dir without a restart), vacuum of
old versions that keeps what snapshots pin, and the errors."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import StateConfig
from ragstack.domain import FileProgress, FileStage, IngestSummary, LibraryStats, SearchFilter, SearchMode
from ragstack.errors import AlreadyExists, InvalidArgument, NotFound, ResourceExhausted
from ragstack.guard.paths import PathGuard
from ragstack.stores import catalog as catalog_store
from ragstack.stores import snapshots
from ragstack.stores.catalog import EVERY_COMMUNITY, Catalog
from ragstack.stores.graph import GraphStore
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.snapshots import SnapshotUnusable, StoreLifecycle
from ragstack.stores.vectors import VectorStore
from services.ingest.graph_extract import EntityExtractor
from services.ingest.graph_index import GraphIndex
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import collect_paths
from services.retrieve.searcher import Query, Searcher
from tests.conftest import SAMPLES
from tests.tools import state as state_tools

FLOOR = 256 * 2**20  # the default of ingest.min_free_mb, in bytes

FILES = ["bm25.md", "chunking.md", "dense-retrieval.md", "hybrid-search.md", "reranking.md"]
ONLY_BM25 = "Okapi"  # of these files, only bm25.md names it
ABOUT_BM25 = "the Okapi information retrieval system at City University London"

EVERYWHERE = PathGuard([Path("/")])  # these tests read their own temp folders


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


@dataclass
class Stores:
    data: Path
    docs: Path
    catalog: Catalog
    vectors: VectorStore
    lexical: LexicalStore
    graph: GraphStore
    pipeline: IngestPipeline
    lifecycle: StoreLifecycle
    searcher: Searcher  # a reader, as the retrieve service opens the same data dir

    def ingest(self) -> IngestSummary:
        events = list(self.pipeline.run(collect_paths([str(self.docs)], EVERYWHERE), "default"))
        summary = events[-1]
        assert isinstance(summary, IngestSummary) and summary.failed == 0, summary
        return summary

    def doc_id(self, name: str) -> str:
        return next(d.document_id for d in self.catalog.list("default") if d.source.endswith("/" + name))

    def state(self) -> dict[str, Any]:
        """What each store holds, read through fresh handles (no cache of the writer's)."""
        table = VectorStore(self.data / "lancedb", self.vectors.dimension)._open()
        rows = table.search().select(["document_id"]).limit(None).to_arrow()["document_id"].to_pylist()
        lexical = LexicalStore(self.data / "tantivy" / "chunks")
        graph = GraphStore(self.data / "lancedb")
        return {
            "catalog": {(d.document_id, d.fingerprint, d.chunk_count) for d in self.catalog.list("default")},
            "vectors": {d: rows.count(d) for d in set(rows)},
            "lexical": (lexical.count("default", "chunk"), lexical.count("default", "page")),
            "graph": graph.counts("default"),
        }

    async def hits(self, text: str, mode: SearchMode, **where: Any) -> list[str]:
        found = await self.searcher.search(
            Query(text, "default", top_k=5, mode=mode, where=SearchFilter(**where), max_per_document=5)
        )
        return [h.chunk.document_id for h in found.hits]


@pytest.fixture
def stores(tmp_path: Path, embedder, extractor: EntityExtractor) -> Stores:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in FILES:
        shutil.copy(SAMPLES / name, docs / name)
    data = tmp_path / "data"
    catalog = Catalog(state_tools.store(StateConfig(), data, catalog_store))
    vectors = VectorStore(data / "lancedb", embedder.dimension, writer=True)
    lexical = LexicalStore(data / "tantivy" / "chunks", writer=True)
    graph = GraphStore(data / "lancedb", embedder.dimension, writer=True)
    pipeline = IngestPipeline(
        catalog,
        vectors,
        lexical,
        embedder,
        chunk_tokens=256,
        overlap_sentences=1,
        max_file_bytes=200_000,
        batch_chunks=32,  # several commits per run: several versions per table
        graph=GraphIndex(graph, extractor, vectors, seed=7),
    )
    searcher = Searcher(
        embedder,
        VectorStore(data / "lancedb", embedder.dimension),
        LexicalStore(data / "tantivy" / "chunks"),
        default_top_k=5,
        max_top_k=20,
        candidates=20,
        rrf_k=60,
        max_per_document=5,
    )
    lifecycle = StoreLifecycle(data, catalog, vectors, lexical, graph)
    return Stores(data, docs, catalog, vectors, lexical, graph, pipeline, lifecycle, searcher)


def test_stats_count_what_was_ingested(stores: Stores) -> None:
    summary = stores.ingest()
    stats = stores.lifecycle.stats()
    assert [lib.name for lib in stats.libraries] == ["default"]
    lib = stats.libraries[0]
    docs = stores.catalog.list("default")
    assert lib.documents == summary.indexed == len(FILES)
    assert lib.chunks == lib.vector_chunks == lib.lexical_chunks == summary.chunks
    # The chunks longer than one dense window keep a vector per window (dense_windows.py).
    table = VectorStore(stores.data / "lancedb", stores.vectors.dimension)._open().to_arrow()
    windows = [len(w) for w in table["windows"].to_pylist() if w]
    assert lib.vector_windows == sum(windows) and windows and min(windows) >= 2
    # Markdown has no pages: a document of several chunks also goes whole, as page 0.
    assert lib.lexical_pages == sum(1 for d in docs if d.chunk_count > 1) > 0
    assert lib.media_types == {"text/markdown": len(FILES)}
    assert (lib.entities, lib.relations, lib.communities) == (
        summary.entities,
        summary.relations,
        summary.communities,
    )
    assert lib.entities > 0 and lib.communities > 0
    assert lib.last_indexed_at == max(d.indexed_at for d in docs)
    assert stats.table_versions["chunks"] == stores.vectors._open().version
    assert set(stats.table_versions) == {"chunks", "graph_entities", "graph_relations", "graph_communities"}
    assert stats.lancedb_bytes > 0 and stats.tantivy_bytes > 0 and stats.catalog_bytes > 0
    assert (stats.snapshots, stats.snapshots_bytes) == (0, 0)

    only = stores.lifecycle.stats("default")
    assert only.libraries == stats.libraries
    assert stores.lifecycle.stats("nothing-here").libraries == [LibraryStats("nothing-here")]

    stores.lifecycle.create("one")
    again = stores.lifecycle.stats()
    assert again.snapshots == 1 and again.snapshots_bytes > 0


def test_a_snapshot_past_the_limit_or_the_free_disk_is_refused_and_leaves_nothing(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores.ingest()
    s = stores
    bounded = StoreLifecycle(s.data, s.catalog, s.vectors, s.lexical, s.graph, max_snapshots=2)
    bounded.create("one")
    bounded.create("two")
    with pytest.raises(
        ResourceExhausted, match=r"2 snapshots exist, the limit is 2 \(ingest.max_snapshots\)"
    ):
        bounded.create("three")
    bounded.delete("one")
    bounded.create("three")

    bounded.delete("two")
    real = shutil.disk_usage(s.data)
    copied = sum(f.stat().st_size for f in (s.data / "tantivy").rglob("*") if f.is_file())
    tight = real._replace(free=copied + FLOOR - 1)
    monkeypatch.setattr(snapshots.shutil, "disk_usage", lambda _path: tight)
    with pytest.raises(
        ResourceExhausted, match=r"MiB are free on the disk of .* at least 256 MiB must stay free"
    ):
        bounded.create("four")
    assert [x.name for x in bounded.snapshots()] == ["three"]
    assert sorted(p.name for p in (s.data / "snapshots").iterdir()) == ["three"]
    branches = list(s.vectors._open().branches.list())
    assert "snapshot-three" in branches and "snapshot-four" not in branches


async def test_restore_puts_every_store_back_and_a_reader_follows(stores: Stores) -> None:
    stores.ingest()
    before = stores.state()
    bm25 = stores.doc_id("bm25.md")
    assert bm25 in await stores.hits(ONLY_BM25, SearchMode.LEXICAL)
    assert (await stores.hits(ABOUT_BM25, SearchMode.DENSE))[0] == bm25
    snap = stores.lifecycle.create("before-changes")
    assert snap.documents == len(FILES) and snap.chunks == sum(before["vectors"].values())
    assert snap.table_versions["chunks"] == stores.vectors._open().version

    # Change one document, delete one, add one.
    chunking = stores.docs / "chunking.md"
    chunking.write_text(chunking.read_text() + "\n\n## Zebrafish\n\nZebrafish chunks are a made-up topic.\n")
    stores.pipeline.delete_document("default", bm25)
    (stores.docs / "bm25.md").unlink()
    shutil.copy(SAMPLES / "vector-databases.md", stores.docs / "vector-databases.md")
    stores.ingest()
    changed = stores.state()
    assert changed != before and bm25 not in changed["vectors"]
    added = stores.doc_id("vector-databases.md")
    assert await stores.hits(ONLY_BM25, SearchMode.LEXICAL) == []
    assert await stores.hits(ABOUT_BM25, SearchMode.DENSE, document_ids=(bm25,)) == []
    assert stores.doc_id("chunking.md") in await stores.hits("zebrafish", SearchMode.LEXICAL)

    info, versions = stores.lifecycle.restore("before-changes")
    assert info.name == "before-changes"
    assert versions["chunks"] > snap.table_versions["chunks"]  # a new version with the old rows
    assert stores.state() == before
    # The same reader, no restart: the lexical index was swapped, LanceDB moved to a new version.
    assert bm25 in await stores.hits(ONLY_BM25, SearchMode.LEXICAL)
    assert (await stores.hits(ABOUT_BM25, SearchMode.DENSE))[0] == bm25
    assert await stores.hits("zebrafish", SearchMode.LEXICAL) == []
    assert await stores.hits("vector databases", SearchMode.HYBRID, document_ids=(added,)) == []
    assert stores.lifecycle.stats().libraries[0].documents == len(FILES)

    # The ingest side goes on writing through its reopened handles: the catalog says what changed.
    summary = stores.ingest()
    assert (summary.indexed, summary.unchanged) == (2, len(FILES) - 2)  # chunking.md, vector-databases.md
    lib = stores.lifecycle.stats().libraries[0]
    assert lib.documents == len(FILES) + 1 and lib.chunks == lib.vector_chunks == lib.lexical_chunks
    assert stores.doc_id("chunking.md") in await stores.hits("zebrafish", SearchMode.LEXICAL)
    assert bm25 in await stores.hits(ONLY_BM25, SearchMode.LEXICAL)  # restored, and its file is gone: kept

    # A snapshot survives its restore and can be restored again.
    assert [s.name for s in stores.lifecycle.snapshots()] == ["before-changes"]
    stores.lifecycle.restore("before-changes")
    assert stores.state() == before


async def test_vacuum_removes_old_versions_and_keeps_what_snapshots_pin(stores: Stores) -> None:
    stores.ingest()
    base = stores.state()
    stores.lifecycle.create("base")
    chunking = stores.docs / "chunking.md"
    original = chunking.read_text()
    for i in range(3):
        chunking.write_text(original + f"\n\nRevision marker{i} of the chunking notes.\n")
        assert stores.ingest().indexed == 1
    table = stores.vectors.connection().open_table("chunks")
    versions = len(table.list_versions())
    assert versions >= 5

    kept = stores.lifecycle.vacuum(7)  # everything is younger than a week
    assert kept.versions_removed == 0 and kept.older_than_days == 7

    report = stores.lifecycle.vacuum(0)
    left = [v["version"] for v in table.list_versions()]
    assert report.table_versions_removed["chunks"] == versions + (max(left) - table.version) - len(left) > 0
    assert len(left) == 2 and min(left) == stores.lifecycle.get("base").table_versions["chunks"]
    assert report.versions_removed == sum(report.table_versions_removed.values())
    assert report.lancedb_bytes_freed > 0
    assert await stores.hits("marker2", SearchMode.LEXICAL) == [stores.doc_id("chunking.md")]

    # Still written and read after the compaction: the handles followed it.
    chunking.write_text(original + "\n\nRevision marker9 of the chunking notes.\n")
    assert stores.ingest().indexed == 1
    assert await stores.hits("marker9", SearchMode.LEXICAL) == [stores.doc_id("chunking.md")]

    stores.lifecycle.restore("base")
    assert stores.state() == base
    assert await stores.hits("marker9", SearchMode.LEXICAL) == []

    # Unpinned, the snapshot's version goes at the next vacuum.
    stores.lifecycle.delete("base")
    stores.lifecycle.vacuum(0)
    assert len(table.list_versions()) == 1
    assert stores.state() == base  # the latest version is the restored one


def test_names_errors_and_deletion(stores: Stores) -> None:
    stores.ingest()
    life = stores.lifecycle
    for bad in ["", ".", "..", ".hidden", "a..b", "end.", "x.lock", "a/b", "a b", "x" * 65, "é"]:
        with pytest.raises(InvalidArgument):
            life.create(bad)
    for good in ["a", "v1.2-rc_3", "_", "X" * 64]:
        assert life.create(good).name == good
    with pytest.raises(AlreadyExists):
        life.create("a")
    with pytest.raises(NotFound):
        life.restore("missing")
    with pytest.raises(NotFound):
        life.delete("missing")
    with pytest.raises(InvalidArgument):
        life.restore("../a")
    for days in (-1, 2**31 - 1):  # the largest a request may send overflowed the date arithmetic
        with pytest.raises(InvalidArgument, match="must be 0 to 36500"):
            life.vacuum(days)
    assert [s.name for s in life.snapshots()] == ["a", "v1.2-rc_3", "_", "X" * 64]  # oldest first

    life.delete("a")
    assert "a" not in {s.name for s in life.snapshots()} and not (stores.data / "snapshots" / "a").exists()
    table = stores.vectors.connection().open_table("chunks")
    assert "snapshot-a" not in table.branches.list() and "snapshot-_" in table.branches.list()
    with pytest.raises(NotFound):
        life.restore("a")
    assert life.create("a").name == "a"  # the name is free again


def test_an_interrupted_restore_is_finished_at_start_and_leftovers_cleared(stores: Stores) -> None:
    stores.ingest()
    before = stores.state()
    stores.lifecycle.create("safe")
    bm25 = stores.doc_id("bm25.md")
    stores.pipeline.delete_document("default", bm25)
    assert stores.state() != before
    # A crash after the restore began: the marker is there, the stores are not restored.
    (stores.data / "snapshots" / ".restoring.json").write_text(json.dumps({"name": "safe"}))
    # And a create that died half way: its staging folder and its branch.
    (stores.data / "snapshots" / ".new-half-1234").mkdir()
    table = stores.vectors.connection().open_table("chunks")
    table.branches.create("snapshot-half", from_version=table.version)

    assert stores.lifecycle.resume() == "safe"
    assert stores.state() == before
    assert not (stores.data / "snapshots" / ".restoring.json").exists()
    assert not (stores.data / "snapshots" / ".new-half-1234").exists()
    assert set(table.branches.list()) == {"snapshot-safe"}
    assert stores.lifecycle.resume() == ""


def test_a_snapshot_whose_version_is_gone_is_refused_without_changes(stores: Stores) -> None:
    stores.ingest()
    stores.lifecycle.create("fragile")
    table = stores.vectors.connection().open_table("chunks")
    table.branches.delete("snapshot-fragile")  # someone removed the pin by hand
    stores.pipeline.delete_document("default", stores.doc_id("bm25.md"))
    stores.lifecycle.vacuum(0)
    now = stores.state()
    with pytest.raises(SnapshotUnusable, match="is gone"):
        stores.lifecycle.restore("fragile")
    assert stores.state() == now
    assert not (stores.data / "snapshots" / ".restoring.json").exists()


@pytest.mark.parametrize("atomic", [True, False], ids=["renameat2", "three-renames"])
def test_a_replaced_lexical_index_is_seen_whole_by_an_open_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, atomic: bool
) -> None:
    from ragstack.domain import Chunk
    from ragstack.stores import lexical as lexical_module

    if not atomic:
        monkeypatch.setattr(lexical_module, "_exchange", lambda a, b: False)

    def chunk(doc: str, text: str) -> Chunk:
        return Chunk(f"{doc}:0", doc, "lib", text, ("T",), (), 0, "T", "s", "text/markdown")

    writer = LexicalStore(tmp_path / "tantivy" / "chunks", writer=True)
    reader = LexicalStore(tmp_path / "tantivy" / "chunks")
    writer.replace_documents("lib", ["a"], [chunk("a", "apples and pears")])
    writer.copy_to(tmp_path / "copy")
    writer.replace_documents("lib", ["b"], [chunk("b", "bananas and pears")])
    writer.replace_documents("lib", ["a"], [])  # removed
    assert [c.document_id for c, _ in reader.search("pears", "lib", 5)] == ["b"]

    writer.replace_with(tmp_path / "copy")
    assert [c.document_id for c, _ in reader.search("pears", "lib", 5)] == ["a"]
    assert reader.count("lib") == writer.count("lib") == 1
    assert sorted(p.name for p in (tmp_path / "tantivy").iterdir()) == ["chunks"]  # nothing left beside it
    writer.replace_documents("lib", ["c"], [chunk("c", "cherries and pears")])  # the writer reopened
    assert sorted(c.document_id for c, _ in reader.search("pears", "lib", 5)) == ["a", "c"]
    assert (tmp_path / "copy" / "meta.json").exists()  # the copy is untouched


def test_a_restored_lexical_index_is_published_to_replicas(tmp_path: Path) -> None:
    from ragstack.domain import Chunk
    from ragstack.stores.lexical_snapshots import SnapshotPublisher, SnapshotReader, open_store

    def chunk(doc: str, text: str) -> Chunk:
        return Chunk(f"{doc}:0", doc, "lib", text, ("T",), (), 0, "T", "s", "text/markdown")

    store = open_store((tmp_path / "bucket").as_uri())
    index = tmp_path / "tantivy" / "chunks"
    writer = LexicalStore(index, writer=True, publisher=SnapshotPublisher(index, store))
    replica = LexicalStore(
        tmp_path / "replica" / "unused", snapshots=SnapshotReader(store, tmp_path / "cache", 0.01)
    )
    writer.replace_documents("lib", ["a"], [chunk("a", "apples and pears")])
    writer.copy_to(tmp_path / "copy")
    writer.replace_documents("lib", ["b"], [chunk("b", "bananas and pears")])
    writer.replace_documents("lib", ["a"], [])  # removed
    assert [c.document_id for c, _ in replica.search("pears", "lib", 5)] == ["b"]
    writer.replace_with(tmp_path / "copy")  # published as the next generation
    time.sleep(0.02)  # the replica's poll interval
    assert [c.document_id for c, _ in replica.search("pears", "lib", 5)] == ["a"]


def test_a_snapshot_taken_while_communities_are_due_restores_them_due(stores: Stores) -> None:
    """A run stopped once a batch was written leaves the communities due; a snapshot then, restored
    after they were made, brings back the graph as it was and what was due with it, so the next
    run makes the communities again."""
    events = stores.pipeline.run(collect_paths([str(stores.docs)], EVERYWHERE), "default")
    for event in events:
        if isinstance(event, FileProgress) and event.stage is FileStage.INDEXED:
            break
    events.close()  # stopped before its refresh
    assert stores.catalog.graph_touched("default") and stores.graph.counts("default")[2] == 0
    stores.lifecycle.create("due")
    assert stores.ingest().communities > 0 and not stores.catalog.graph_touched("default")
    stores.lifecycle.restore("due")
    assert stores.catalog.graph_touched("default")
    summary = stores.ingest()
    assert summary.communities == summary.communities_summarized > 0


def test_a_catalog_backup_from_before_pending_refreshes_leaves_every_community_due(
    tmp_path: Path, state_config: StateConfig
) -> None:
    catalog = Catalog(state_tools.store(state_config, tmp_path, catalog_store))
    old = tmp_path / "old.sqlite"
    catalog.backup_to(old)
    with sqlite3.connect(old) as conn:  # as a release before them wrote it
        conn.execute("DROP TABLE graph_touched")
        conn.execute(
            "INSERT INTO documents (document_id, library, source, fingerprint) VALUES ('d', 'lib', 's', 'f')"
        )
    catalog.restore_from(old)
    assert catalog.graph_touched("lib") == {EVERY_COMMUNITY}
    catalog.close()
