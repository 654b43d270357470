"""Ingest workers of several processes writing the same stores (PostgreSQL state): their units take
turns under the shared commit lock, each starting from what the last writer left, so every batch of
both ends up whole in LanceDB, tantivy and the catalog; a unit a dead worker left half-written is
undone by the next worker's turn. Each pipeline here has its own connections and store objects, as
a process of its own would (tests/e2e/test_scale_out.py runs real processes)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import StateConfig
from ragstack.domain import IngestSummary
from ragstack.state.locks import SharedLock
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.lexical_snapshots import SnapshotPublisher, SnapshotReader, open_store
from ragstack.stores.vectors import VectorStore, sql_str
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import upload_items
from tests.tools import state as state_tools

WORDS = "okapi zebra giraffe heron walrus lemur otter tapir gecko marmot".split()


class Crash(BaseException):
    """Stands for kill -9 inside a unit: no `except Exception` catches it."""


OPENED: list[Any] = []  # connections to close at each test's end (psycopg warns of unclosed ones)


@pytest.fixture(autouse=True)
def _close() -> Any:
    yield
    while OPENED:
        OPENED.pop().close()


def catalog_of(cfg: StateConfig, data: Path) -> Catalog:
    catalog = Catalog(state_tools.store(cfg, data, catalog_store))
    OPENED.append(catalog)
    return catalog


def worker(
    cfg: StateConfig, data: Path, embedder: Any, own: Path | None = None, snapshots: str = ""
) -> tuple[IngestPipeline, LexicalStore]:
    """A worker on the stores in `data`; with `own`, its tantivy folder is there instead, and it
    publishes to (and continues from) the lexical snapshots at `snapshots`."""
    publisher = SnapshotPublisher(own / "tantivy", open_store(snapshots)) if own else None
    lexical = LexicalStore((own or data) / "tantivy", writer=True, shared=True, publisher=publisher)
    lock = SharedLock(cfg, data, "ingest-commit")
    OPENED.append(lock)
    pipeline = IngestPipeline(
        catalog_of(cfg, data),
        VectorStore(data / "lance", embedder.dimension, writer=True),
        lexical,
        embedder,
        chunk_tokens=64,
        overlap_sentences=0,
        max_file_bytes=200_000,
        batch_chunks=2,  # several units per run, interleaved with the other worker's
        shared=lock,
    )
    return pipeline, lexical


def documents(prefix: str, n: int) -> list[tuple[str, bytes]]:
    return [
        (
            f"{prefix}-{i}.md",
            f"# {prefix} {i}\n\nThe {WORDS[i % len(WORDS)]} note {prefix}{i} is here.".encode(),
        )
        for i in range(n)
    ]


def run(p: IngestPipeline, files: list[tuple[str, bytes]]) -> IngestSummary:
    summary = list(p.run(upload_items("default", files), "default", []))[-1]
    assert isinstance(summary, IngestSummary)
    return summary


def test_two_workers_writing_at_once_lose_nothing(tmp_path: Path, embedder: Any) -> None:
    cfg = state_tools.config_for("postgres")
    (a, _), (b, _) = worker(cfg, tmp_path, embedder), worker(cfg, tmp_path, embedder)
    summaries: dict[str, IngestSummary] = {}
    threads = [
        threading.Thread(target=lambda: summaries.__setitem__("a", run(a, documents("alpha", 12)))),
        threading.Thread(target=lambda: summaries.__setitem__("b", run(b, documents("beta", 12)))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert summaries["a"].indexed == 12 and summaries["b"].indexed == 12
    assert summaries["a"].failed == 0 and summaries["b"].failed == 0

    catalog = catalog_of(cfg, tmp_path)
    docs = catalog.list("default")
    assert len(docs) == 24
    table = VectorStore(tmp_path / "lance", embedder.dimension)._open()
    assert table is not None
    rows = table.search().where(f"library = {sql_str('default')}").limit(1000).to_list()
    assert len(rows) == sum(d.chunk_count or 0 for d in docs)  # every chunk once
    reader = LexicalStore(tmp_path / "tantivy")
    assert reader.count("default") == len(rows)
    for name in ("alpha7", "beta11"):
        assert next(c.source for c, _ in reader.search(name, "default", 3)).endswith(
            name.replace("alpha", "alpha-").replace("beta", "beta-") + ".md"
        )


def test_workers_with_folders_of_their_own_continue_from_the_newest_snapshot(
    tmp_path: Path, embedder: Any
) -> None:
    cfg = state_tools.config_for("postgres")
    bucket = f"file://{tmp_path / 'bucket'}"
    a, _ = worker(cfg, tmp_path, embedder, own=tmp_path / "a", snapshots=bucket)
    b, _ = worker(cfg, tmp_path, embedder, own=tmp_path / "b", snapshots=bucket)
    run(a, documents("alpha", 3))
    run(b, documents("beta", 3))  # b's folder held nothing: its turn starts from a's snapshot
    run(a, documents("gamma", 2))  # and a's from b's
    reader = LexicalStore(
        tmp_path / "replica", snapshots=SnapshotReader(open_store(bucket), tmp_path / "cache")
    )
    assert reader.count("default") == sum(
        d.chunk_count or 0 for d in catalog_of(cfg, tmp_path).list("default")
    )
    for word in ("alpha2", "beta1", "gamma0"):
        assert reader.search(word, "default", 1), word


def test_workers_sharing_a_folder_and_publishing_copy_nothing(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = state_tools.config_for("postgres")
    bucket = f"file://{tmp_path / 'bucket'}"
    a, _ = worker(cfg, tmp_path, embedder, own=tmp_path / "shared", snapshots=bucket)
    b, _ = worker(cfg, tmp_path, embedder, own=tmp_path / "shared", snapshots=bucket)
    installed: list[Path] = []
    monkeypatch.setattr(LexicalStore, "_install", lambda self, source: installed.append(source))
    run(a, documents("alpha", 2))
    run(b, documents("beta", 2))
    run(a, documents("gamma", 2))
    assert installed == []  # the folder already held each newest commit
    reader = LexicalStore(
        tmp_path / "replica", snapshots=SnapshotReader(open_store(bucket), tmp_path / "cache")
    )
    assert all(reader.search(word, "default", 1) for word in ("alpha1", "beta0", "gamma1"))


def test_a_unit_a_dead_worker_left_half_written_is_undone_by_the_next_turn(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = state_tools.config_for("postgres")
    (dying, dying_lexical), (b, _) = worker(cfg, tmp_path, embedder), worker(cfg, tmp_path, embedder)
    run(b, documents("base", 1))

    def crash(*_: object, **__: object) -> None:
        raise Crash  # after LanceDB was written, before tantivy's commit and the catalog's rows

    monkeypatch.setattr(dying_lexical, "replace_documents", crash)
    with pytest.raises(Crash):
        run(dying, documents("lost", 1))
    assert catalog_of(cfg, tmp_path).pending_batch() is not None

    run(b, documents("next", 1))  # its turn rolls the dead worker's unit back first
    catalog = catalog_of(cfg, tmp_path)
    assert catalog.pending_batch() is None
    assert sorted(d.source.rsplit("/", 1)[-1] for d in catalog.list("default")) == ["base-0.md", "next-0.md"]
    table = VectorStore(tmp_path / "lance", embedder.dimension)._open()
    assert table is not None
    texts = [r["text"] for r in table.search().limit(100).to_list()]
    assert not any("lost0" in t for t in texts) and any("next0" in t for t in texts)


def test_workers_starting_at_once_on_new_stores_both_open_them(tmp_path: Path, embedder: Any) -> None:
    from ragstack.stores.graph import GraphStore

    errors: list[BaseException] = []
    together = threading.Barrier(4)

    def start() -> None:
        try:
            for round in range(3):  # each round on a new folder: the creates race
                together.wait()
                VectorStore(tmp_path / f"lance{round}", embedder.dimension, writer=True)
                GraphStore(tmp_path / f"lance{round}", embedder.dimension, writer=True)
        except BaseException as err:
            errors.append(err)
            together.abort()  # the others stop waiting for this one

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
