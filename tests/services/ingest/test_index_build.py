"""A document's index build (services/ingest/build.py): one whose bytes and groups are unchanged is
indexed again when a pipeline with another version or other chunk settings ingests it, and says
why; the same pipeline skips it. Real LanceDB, tantivy and state (both backends), the real embedder."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragstack.cli.main import cli
from ragstack.config import SourceConfig, StateConfig
from ragstack.domain import FileProgress, FileStage, IngestSummary
from ragstack.guard.paths import PathGuard
from ragstack.state import open_state
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest import build
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import collect_paths
from services.ingest.syncing import state as source_state
from services.ingest.syncing.backends import Backend, Checkpoint, FolderBackend
from services.ingest.syncing.state import Retries, SourceStore
from services.ingest.syncing.sync import SourceSync
from tests.conftest import SAMPLES, make_config
from tests.tools import state as state_tools

EVERYWHERE = PathGuard([Path("/")])
# Long enough that 64 word pieces a chunk split it where 512 do not.
LONG = "# Tides\n\n" + " ".join(
    f"Tide table {i} lists the harbour's high water at dawn and the low water at dusk." for i in range(15)
)


class Stores:
    def __init__(self, tmp_path: Path, state: StateConfig, embedder) -> None:  # type: ignore[no-untyped-def]
        self.tmp = tmp_path
        self.state = state
        self.embedder = embedder
        self.docs = tmp_path / "docs"
        self.docs.mkdir()
        for name in ("bm25.md", "chunking.md"):
            shutil.copy(SAMPLES / name, self.docs)
        (self.docs / "tides.md").write_text(LONG)
        self.catalog = Catalog(open_state(state, tmp_path, catalog_store.STORE, catalog_store.MIGRATIONS))
        self.dense = VectorStore(tmp_path / "lance", embedder.dimension, writer=True)
        self.lexical = LexicalStore(tmp_path / "tantivy", writer=True)

    def pipeline(self, chunk_tokens: int = 512, overlap: int = 1, rebuild: bool = True) -> IngestPipeline:
        return IngestPipeline(
            self.catalog,
            self.dense,
            self.lexical,
            self.embedder,
            chunk_tokens,
            overlap,
            max_file_bytes=200_000,
            rebuild=rebuild,
        )

    def ingest(
        self, pipeline: IngestPipeline, groups: tuple[str, ...] = ()
    ) -> tuple[list[FileProgress], IngestSummary]:
        events = list(pipeline.run(collect_paths([str(self.docs)], EVERYWHERE), "default", groups=groups))
        summary = events[-1]
        assert isinstance(summary, IngestSummary)
        return [e for e in events if isinstance(e, FileProgress)], summary

    def chunks_of(self, name: str) -> int:
        (doc,) = [d for d in self.catalog.list("default") if Path(d.source).name == name]
        return doc.chunk_count


@pytest.fixture
def stores(tmp_path: Path, state_config: StateConfig, embedder):  # type: ignore[no-untyped-def]
    made = Stores(tmp_path, state_config, embedder)
    yield made
    made.catalog.close()


def test_other_chunk_settings_index_every_document_again_and_say_why(stores: Stores) -> None:
    _, first = stores.ingest(stores.pipeline())
    files = first.indexed
    assert files == first.files == 3 and first.rebuilt == 0 and not first.notes
    assert {d.build for d in stores.catalog.list("default")} == {f"p{build.PIPELINE}-c512-o1"}
    assert stores.chunks_of("tides.md") == 1

    _, same = stores.ingest(stores.pipeline())
    assert same.unchanged == files and same.indexed == 0

    smaller = stores.pipeline(chunk_tokens=64, overlap=0)
    events, again = stores.ingest(smaller)
    assert again.indexed == again.rebuilt == files and again.unchanged == 0
    reasons = {e.reason for e in events if e.stage is FileStage.INDEXED}
    assert reasons == {f"indexed again: built as p{build.PIPELINE}-c512-o1, now p{build.PIPELINE}-c64-o0"}
    (note,) = again.notes
    assert f"{files} documents with unchanged bytes were indexed again" in note
    assert "ingest.chunk_tokens" in note
    # What the new settings make, not the old chunks kept.
    assert stores.chunks_of("tides.md") > 1
    assert stores.dense.count("default") == sum(d.chunk_count for d in stores.catalog.list("default"))
    assert {d.build for d in stores.catalog.list("default")} == {f"p{build.PIPELINE}-c64-o0"}

    _, settled = stores.ingest(smaller)
    assert settled.unchanged == files and settled.indexed == settled.rebuilt == 0


def test_a_new_pipeline_version_reaches_old_documents(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, first = stores.ingest(stores.pipeline())
    monkeypatch.setattr(build, "PIPELINE", build.PIPELINE + 1)
    _, again = stores.ingest(stores.pipeline())
    assert again.rebuilt == again.indexed == first.indexed


def test_changed_bytes_and_new_groups_are_not_counted_as_rebuilt(stores: Stores) -> None:
    stores.ingest(stores.pipeline())
    (stores.docs / "tides.md").write_text(LONG + "\n\nThe pier closes at spring tide.\n")
    events, changed = stores.ingest(stores.pipeline(), groups=("crew",))
    assert changed.indexed == changed.files and changed.rebuilt == 0 and not changed.notes
    assert all(not e.reason for e in events)


def test_documents_indexed_before_builds_were_recorded_are_indexed_again(
    stores: Stores, state_config: StateConfig, tmp_path: Path
) -> None:
    """A catalog of the release before (schema version 2, no build column) is migrated; its documents
    get the empty build, and the next ingest indexes them again."""
    old, before = tmp_path / "old", state_tools.config_for("postgres" if state_config.url else "sqlite")
    old.mkdir()
    db = open_state(before, old, catalog_store.STORE, catalog_store.MIGRATIONS[:2])
    db.execute(
        "INSERT INTO documents (document_id, library, source, fingerprint) VALUES ('d', 'lib', 's', 'f')"
    )
    db.close()
    migrated = Catalog(open_state(before, old, catalog_store.STORE, catalog_store.MIGRATIONS, migrate=True))
    assert migrated.states("lib") == {"d": ("f", (), "")}
    assert migrated.get("lib", "d").build == ""  # type: ignore[union-attr]
    migrated.close()

    pipeline = stores.pipeline()
    _, first = stores.ingest(pipeline)
    stores.catalog.upsert([replace(d, build="") for d in stores.catalog.list("default")])
    events, again = stores.ingest(pipeline)
    assert again.rebuilt == again.indexed == first.indexed
    assert {e.reason for e in events if e.reason} == {
        f"indexed again: built as before builds were recorded, now p{build.PIPELINE}-c512-o1"
    }


def test_a_backup_from_before_builds_restores_the_empty_build(stores: Stores, tmp_path: Path) -> None:
    stores.ingest(stores.pipeline())
    backup = tmp_path / "backup.sqlite"
    stores.catalog.backup_to(backup)
    with sqlite3.connect(backup) as conn:  # as a release before builds wrote it
        conn.execute("ALTER TABLE documents DROP COLUMN build")
    stores.catalog.restore_from(backup)
    assert {d.build for d in stores.catalog.list("default")} == {""}
    _, again = stores.ingest(stores.pipeline())
    assert again.rebuilt == again.indexed == again.files


def test_stats_count_each_build_and_the_cli_says_what_its_next_ingest_redoes(tmp_path: Path) -> None:
    """Through `ragstack ingest` and `ragstack store stats` (embedded services, real gRPC): a platform
    team sees how many documents a new chunk size will index again before it does, and after."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "tides.md").write_text(LONG)
    shutil.copy(SAMPLES / "bm25.md", docs)
    make_config(tmp_path / "data")
    config = ["--config", str(tmp_path / "data.yaml")]
    smaller = {"RAGSTACK__INGEST__CHUNK_TOKENS": "64"}
    now, then = f"p{build.PIPELINE}-c512-o1", f"p{build.PIPELINE}-c64-o1"

    assert CliRunner().invoke(cli, [*config, "ingest", str(docs)]).exit_code == 0
    stats = CliRunner().invoke(cli, [*config, "store", "stats", "--json"])
    assert stats.exit_code == 0, stats.output
    shown = json.loads(stats.output)
    assert shown["build"] == now and shown["libraries"][0]["builds"] == {now: 2}

    before = CliRunner().invoke(cli, [*config, "store", "stats"], env=smaller)
    assert before.exit_code == 0, before.output
    assert f"2 documents were built other than this ingest service's {then}" in " ".join(
        before.output.split()
    )
    again = CliRunner().invoke(cli, [*config, "ingest", str(docs)], env=smaller)
    assert again.exit_code == 0, again.output
    assert "2 indexed, 0 unchanged" in again.output
    assert "2 documents with unchanged bytes were indexed again" in " ".join(again.output.split())
    after = CliRunner().invoke(cli, [*config, "store", "stats", "--json"], env=smaller)
    assert json.loads(after.output)["libraries"][0]["builds"] == {then: 2}


def test_a_source_sync_indexes_documents_of_another_build_again(stores: Stores) -> None:
    """A source's scan skips what it holds at the same revision; one built otherwise is not held."""

    def sync_on(pipeline: IngestPipeline) -> tuple[SourceSync, SourceStore]:
        state = SourceStore(
            open_state(stores.state, stores.tmp, source_state.STORE, source_state.MIGRATIONS),
            Retries(attempts=3, backoff_s=10, breaker_failures=3, breaker_cooldown_s=60),
        )

        def opener(spec: SourceConfig, checkpoint: Checkpoint) -> Backend:
            return FolderBackend(spec.url, PathGuard([stores.tmp]), 1000, checkpoint)

        return SourceSync(state, pipeline, opener, "default"), state

    def synced(sync: SourceSync) -> IngestSummary:
        (summary,) = [e for e in sync.run("notes") if isinstance(e, IngestSummary)]
        return summary

    sync, state = sync_on(stores.pipeline())
    try:
        state.add(SourceConfig(name="notes", kind="folder", url=str(stores.docs), library="notes"))
        assert synced(sync).indexed == 3
        assert not sync.look("notes").work
    finally:
        state.close()

    sync, state = sync_on(stores.pipeline(chunk_tokens=64))
    try:
        assert sync.look("notes").work
        again = synced(sync)
        assert again.indexed == again.rebuilt == 3 and again.notes
        assert {d.build for d in stores.catalog.list("notes")} == {f"p{build.PIPELINE}-c64-o1"}
        assert not sync.look("notes").work and synced(sync).unchanged == 3
    finally:
        state.close()


def test_a_corpus_line_whose_id_came_before_fails_alone(stores: Stores, tmp_path: Path) -> None:
    """Two lines with one `_id` would write one document twice in a batch (LanceDB refuses, and the
    batch's other documents fail with it, at every run): the later line fails, named."""
    corpus = tmp_path / "lines" / "corpus.jsonl"
    corpus.parent.mkdir()
    line = {"_id": "kelp", "title": "Kelp", "text": "Kelp forests grow along cold rocky coasts."}
    other = {"_id": "reef", "title": "Reef", "text": "Coral reefs grow in warm shallow water."}
    corpus.write_text("\n".join(json.dumps(x) for x in (line, line, other)) + "\n")
    for pipeline in (stores.pipeline(), stores.pipeline(chunk_tokens=64)):
        events = list(pipeline.run(collect_paths([str(corpus)], EVERYWHERE), "lines"))
        summary = events[-1]
        assert isinstance(summary, IngestSummary)
        assert summary.failed == 1 and summary.indexed + summary.unchanged == 2, summary
        (failure,) = summary.failures
        assert failure.startswith(f"{corpus}:2: ") and "`_id` 'kelp'" in failure and "line 1" in failure
    assert {d.document_id for d in stores.catalog.list("lines")} == {"kelp", "reef"}
    assert stores.dense.count("lines") == 2


def test_with_rebuild_off_old_builds_wait_for_their_bytes_to_change(stores: Stores) -> None:
    """`ingest.rebuild: false` defers a new release's re-index: what is built otherwise keeps its
    chunks until its bytes change (a source's sync asks the same `holds`)."""
    stores.ingest(stores.pipeline())
    deferred = stores.pipeline(chunk_tokens=64, rebuild=False)
    _, summary = stores.ingest(deferred)
    assert summary.unchanged == 3 and summary.indexed == summary.rebuilt == 0 and not summary.notes
    (tides,) = [d for d in stores.catalog.list("default") if d.source.endswith("tides.md")]
    assert deferred.holds(tides.build) and not stores.pipeline(chunk_tokens=64).holds(tides.build)

    (stores.docs / "tides.md").write_text(LONG + "\n\nThe pier closes at spring tide.\n")
    _, changed = stores.ingest(deferred)
    assert changed.indexed == 1 and changed.unchanged == 2 and changed.rebuilt == 0
    builds = {Path(d.source).name: d.build for d in stores.catalog.list("default")}
    assert builds["tides.md"] == f"p{build.PIPELINE}-c64-o1"
    assert builds["bm25.md"] == f"p{build.PIPELINE}-c512-o1"
