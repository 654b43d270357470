"""A disk that fills while a run writes. The room check (`ingest.min_free_mb`) stops a run before a
batch that would go below its floor (the last test). Past it, the stores on a real small tmpfs, so
LanceDB, tantivy and SQLite each meet ENOSPC in the middle of their own writes: the run stops with the
cause named, the batch it was writing is rolled back, the stores agree with the catalog, and once
there is room a run indexes only the rest. (The room check is off there: these are the writes it
could not foresee, another process filling the disk during a batch.)"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragstack import disk
from ragstack.config import StateConfig
from ragstack.disk import full_disk
from ragstack.domain import IngestSummary
from ragstack.errors import ResourceExhausted
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest.pipeline import IngestPipeline
from tests.conftest import SAMPLES
from tests.services.ingest.test_pipeline import run
from tests.tools import state as state_tools

FULL = r"a disk the stores write to is full \(no space left on device\).*undone.*ingest\.min_free_mb"


def test_what_says_a_disk_is_full() -> None:
    fd = os.open("/dev/full", os.O_WRONLY)
    try:
        with pytest.raises(OSError) as enospc:
            os.write(fd, b"x")
    finally:
        os.close(fd)
    assert full_disk(enospc.value) == "no space left on device"
    try:  # wrapped, as a store's own error raised while handling it
        try:
            raise enospc.value
        except OSError as inner:
            raise RuntimeError("the write failed") from inner
    except RuntimeError as outer:
        assert full_disk(outer) == "no space left on device"

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x TEXT)")
    db.execute("PRAGMA max_page_count = 2")  # SQLite's own SQLITE_FULL, without filling a disk
    with pytest.raises(sqlite3.OperationalError) as sqlite_full:
        for _ in range(100):
            db.execute("INSERT INTO t VALUES (?)", ("x" * 1000,))
    assert full_disk(sqlite_full.value) == "database or disk is full"

    assert full_disk(ValueError("not a valid PDF")) is None
    assert full_disk(OSError(13, "Permission denied")) is None


def _pipeline(data: Path, embedder: Any, room: Callable[[], None] = lambda: None) -> IngestPipeline:
    return IngestPipeline(
        Catalog(state_tools.store(StateConfig(), data, catalog_store)),
        VectorStore(data / "lance", embedder.dimension, writer=True),
        LexicalStore(data / "tantivy", writer=True),
        embedder,
        chunk_tokens=256,
        overlap_sentences=1,
        max_file_bytes=200_000,
        batch_chunks=4,  # many batches: the disk fills in the middle of the run
        room=room,
    )


def _run(pipeline: IngestPipeline, docs: Path) -> IngestSummary:
    return run(pipeline, [docs])[1]


def _agree(data: Path, embedder: Any) -> int:
    """The catalog's documents, after checking that LanceDB and tantivy hold their chunks and no
    others (read as a retrieve replica would)."""
    docs = Catalog(state_tools.store(StateConfig(), data, catalog_store)).list("default")
    chunks = sum(d.chunk_count for d in docs)
    assert VectorStore(data / "lance", embedder.dimension).count("default") == chunks
    assert LexicalStore(data / "tantivy").count("default") == chunks
    return len(docs)


# (the folder that gets the small disk, its size): every store on it, or tantivy alone
@pytest.mark.parametrize(("where", "size"), [(".", "700k"), ("tantivy", "100k")], ids=["all", "tantivy"])
def test_a_disk_that_fills_mid_run_stops_it_and_loses_nothing(
    tmp_path: Path, embedder: Any, small_disk: Any, where: str, size: str
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    data = small_disk(tmp_path / "data", "64m" if where != "." else size)
    tight = small_disk(data / where, size) if where != "." else data
    pipeline = _pipeline(data, embedder)

    with pytest.raises(ResourceExhausted, match=FULL):
        _run(pipeline, docs)
    written = _agree(data, embedder)
    assert 0 < written < 12  # the batches before stay indexed

    small_disk(tight, "64m")  # room again: the same pipeline (a service) goes on
    summary = _run(pipeline, docs)
    assert (summary.unchanged, summary.indexed, summary.failed) == (written, 12 - written, 0)
    assert _agree(data, embedder) == 12
    assert Catalog(state_tools.store(StateConfig(), data, catalog_store)).pending_batch() is None
    assert LexicalStore(data / "tantivy").search("retrieval", "default", 3)


def test_the_room_check_stops_a_run_before_a_batch_and_loses_nothing(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The room check runs before a run and before each batch: a disk that fills up mid-run stops it
    with the limit named, the batches before stay written, and a run once there is room again indexes
    only the rest."""
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    real = shutil.disk_usage(tmp_path)
    checks = {"n": 0, "room_for": 3}  # the run's own check and two batches, then full

    def usage(path: object) -> object:
        checks["n"] += 1
        return real._replace(free=2**40 if checks["n"] <= checks["room_for"] else 2**20)

    monkeypatch.setattr(disk.shutil, "disk_usage", usage)
    pipeline = _pipeline(tmp_path, embedder, lambda: disk.require_free(tmp_path, 256 * 2**20, "the ingest"))
    with pytest.raises(ResourceExhausted, match=r"the ingest refused: 1 MiB are free .*ingest.min_free_mb"):
        _run(pipeline, docs)
    written = _agree(tmp_path, embedder)
    assert 0 < written < 12  # the batches before the full disk are indexed whole

    checks["room_for"] = 10**9  # room again
    summary = _run(pipeline, docs)
    assert summary.unchanged == written and summary.indexed == 12 - written and summary.failed == 0

    checks["room_for"] = 0  # a full disk refuses a run before it parses anything
    with pytest.raises(ResourceExhausted, match=r"ingest\.min_free_mb"):
        _run(pipeline, docs)
