"""Bounded staleness of retrieve replicas (retrieve.max_staleness_s): a writer's stores and a
replica's, opened apart on one S3-compatible bucket (moto) or one data dir, as two processes would.
What the writer commits reaches the replica's searches, and the replica reports per store the
version it serves and a staleness under the bound, in Stats and on /metrics.

No assertion on wall time: each waits with a generous deadline, and the bound is checked on the
numbers the replica reports (and once a check started after the write, the write must be seen)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import obstore
from prometheus_client import REGISTRY

from ragstack import domain as d
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.stores.graph import GraphStore
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.lexical_snapshots import SnapshotPublisher, SnapshotReader, open_store
from ragstack.stores.vectors import VectorStore
from services.retrieve.freshness import Freshness
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools.s3 import s3_bucket, s3_storage

DIM = 8
MAX_STALENESS = 1.0
SLACK = 3.0  # for a check's own requests on a loaded machine
DEADLINE = 30.0


def _chunk(doc: str, text: str) -> d.Chunk:
    return d.Chunk(f"{doc}:0", doc, "default", text, (doc,), (), 0, doc, f"{doc}.md", "text/markdown")


def _until(what: Callable[[], bool], deadline: float = DEADLINE) -> float:
    """Seconds until `what` held, polled; fails past the deadline."""
    start = time.time()
    while not what():
        assert time.time() - start < deadline, "not within the deadline"
        time.sleep(0.05)
    return time.time() - start


def _checked_since(fresh: Freshness, since: float) -> bool:
    """Every store was checked by a check that started after `since`."""
    stats = fresh.stats()
    now = time.time()
    return bool(stats.stores) and all(now - s.staleness_s > since for s in stats.stores)


def _metric(name: str, store: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"store": store})


def _published_after_check(fresh: Freshness, versions: dict[str, int]) -> bool:
    fresh.check()
    return all(_metric("ragstack_retrieve_store_version", s) == v for s, v in versions.items())


def test_a_replica_on_object_storage_sees_a_commit_within_the_bound(tmp_path: Path) -> None:
    with s3_bucket() as (url, options):
        lance, lexical_url = f"{url}/lancedb", f"{url}/lexical"
        writer_index = tmp_path / "writer" / "chunks"
        vectors_w = VectorStore(lance, DIM, writer=True, storage_options=options)
        lexical_w = LexicalStore(
            writer_index,
            writer=True,
            publisher=SnapshotPublisher(writer_index, open_store(lexical_url, options)),
        )
        # The replica: its own handles and its own disk, as in another process.
        vectors = VectorStore(lance, DIM, storage_options=options, max_staleness_s=MAX_STALENESS)
        graph = GraphStore(lance, DIM, storage_options=options, max_staleness_s=MAX_STALENESS)
        snapshots = SnapshotReader(
            open_store(lexical_url, options), tmp_path / "replica" / "cache", MAX_STALENESS
        )
        lexical = LexicalStore(tmp_path / "replica" / "unused", snapshots=snapshots)
        fresh = Freshness(
            [vectors.refresh, graph.refresh, lambda: {"lexical": lexical.refresh()}], MAX_STALENESS
        )
        fresh.start()
        try:
            okapi = np.eye(DIM, dtype=np.float32)[:1]
            assert (
                vectors.search(okapi[0], "default", 3) == [] and lexical.search("okapi", "default", 3) == []
            )

            vectors_w.replace_documents("default", ["okapi"], [_chunk("okapi", "The okapi.")], okapi)
            lexical_w.replace_documents("default", ["okapi"], [_chunk("okapi", "The okapi.")])
            written = time.time()

            seen_after = _until(
                lambda: (
                    bool(vectors.search(okapi[0], "default", 3))
                    and bool(lexical.search("okapi", "default", 3))
                )
            )
            print(f"the replica's searches saw the commit after {seen_after:.2f} s")

            _until(lambda: _checked_since(fresh, written))
            # A check after the commit confirmed it: the searches see it now, whatever the timing.
            assert vectors.search(okapi[0], "default", 3)[0][0].document_id == "okapi"
            assert lexical.search("okapi", "default", 3)[0][0].document_id == "okapi"

            stats = fresh.stats()
            by_store = {s.store: s for s in stats.stores}
            table_version = int(vectors_w._open().version)
            generation = int(bytes(obstore.get(open_store(lexical_url, options), "CURRENT").bytes()))
            assert by_store["chunks"].version == table_version
            assert by_store["lexical"].version == generation == 1
            assert by_store["graph_entities"].version == 0  # no graph written: checked, absent
            assert stats.max_staleness_s == MAX_STALENESS
            assert all(0 <= s.staleness_s <= MAX_STALENESS + SLACK for s in stats.stores), stats

            time.sleep(MAX_STALENESS * 1.5)  # the checks keep it under the bound while idle too
            stats = fresh.stats()
            assert all(s.staleness_s <= MAX_STALENESS + SLACK for s in stats.stores), stats
            for store in ("chunks", "lexical"):
                staleness = _metric("ragstack_retrieve_staleness_seconds", store)
                assert staleness is not None and 0 <= staleness <= MAX_STALENESS + SLACK
            # The gauges are the process's: the session's shared stack, when it runs, sets them too
            # (every half of its own bound). Right after this replica's check, they show its versions.
            _until(lambda: _published_after_check(fresh, {"chunks": table_version, "lexical": generation}))
            assert REGISTRY.get_sample_value("ragstack_retrieve_max_staleness_seconds") == MAX_STALENESS
        finally:
            fresh.close()
            lexical_w.close()


def test_a_replica_on_the_same_data_dir_reports_the_commit_it_serves(tmp_path: Path) -> None:
    """On a folder the replica checks on every read; its report names the writer's commit."""
    vectors_w = VectorStore(tmp_path / "lancedb", DIM, writer=True)
    lexical_w = LexicalStore(tmp_path / "tantivy", writer=True)
    vectors = VectorStore(tmp_path / "lancedb", DIM, max_staleness_s=MAX_STALENESS)
    lexical = LexicalStore(tmp_path / "tantivy")
    fresh = Freshness([vectors.refresh, lambda: {"lexical": lexical.refresh()}], MAX_STALENESS)
    fresh.start()
    try:
        v = np.eye(DIM, dtype=np.float32)[:1]
        vectors_w.replace_documents("default", ["tapir"], [_chunk("tapir", "The tapir.")], v)
        lexical_w.replace_documents("default", ["tapir"], [_chunk("tapir", "The tapir.")])
        assert vectors.search(v[0], "default", 1)[0][0].document_id == "tapir"  # at once
        assert lexical.search("tapir", "default", 1)[0][0].document_id == "tapir"
        written = time.time()
        _until(lambda: _checked_since(fresh, written))
        by_store = {s.store: s for s in fresh.stats().stores}
        assert by_store["chunks"].version == int(vectors_w._open().version)
        assert by_store["lexical"].version == lexical_w.opstamp() > 0
    finally:
        fresh.close()
        lexical_w.close()


def test_a_store_that_cannot_be_checked_shows_its_growing_staleness() -> None:
    now = [1000.0]
    reachable = [True]

    def check() -> dict[str, int]:
        if not reachable[0]:
            raise OSError("bucket unreachable")
        return {"chunks": 7}

    fresh = Freshness([check], 10.0, clock=lambda: now[0])
    fresh.check()
    now[0] += 4
    [s] = fresh.stats().stores
    assert (s.version, s.staleness_s, s.checked_at) == (7, 4.0, "1970-01-01T00:16:40+00:00")
    reachable[0] = False
    now[0] += 30
    fresh.check()
    assert fresh.stats().stores[0].staleness_s == 34.0  # over the bound, and shows it


async def test_stats_and_metrics_of_a_retrieve_replica(tmp_path: Path, resources: Resources) -> None:
    """Over gRPC: ingest in one stack, a retrieve replica in another (own data dir, one bucket)."""
    import asyncio

    with s3_storage() as storage:
        writer_cfg = make_config(tmp_path / "writer", storage=storage, ingest={"graph": False})
        replica_cfg = make_config(
            tmp_path / "replica", storage=storage, retrieve={"max_staleness_s": MAX_STALENESS}
        )
        stacks = []
        for cfg, services in ((writer_cfg, ("ingest",)), (replica_cfg, ("retrieve",))):
            stacks.append(await start_with(cfg, resources, services=services, gateway=False))
        writer, replica = stacks
        ingest = IngestClient(open_channel(writer.peers["ingest"]), 300)
        retrieve = RetrieveClient(open_channel(replica.peers["retrieve"]), 30)
        try:
            [e async for e in ingest.ingest(paths=[str(SAMPLES / "bm25.md")])]
            written = time.time()

            async def seen(mode: d.SearchMode) -> bool:
                hits, _ = await retrieve.search("Okapi BM25", "default", 3, mode)
                return bool(hits)

            start = time.time()
            while not (await seen(d.SearchMode.LEXICAL) and await seen(d.SearchMode.DENSE)):
                assert time.time() - start < DEADLINE
                await asyncio.sleep(0.05)
            print(f"the replica's searches saw the ingest after {time.time() - written:.2f} s")

            stats = await retrieve.stats()
            by_store = {s.store: s for s in stats.stores}
            versions = (await ingest.stats()).table_versions
            assert stats.max_staleness_s == MAX_STALENESS
            assert set(by_store) >= {"chunks", "graph_entities", "lexical"}
            assert by_store["chunks"].version == versions["chunks"] and by_store["lexical"].version >= 1
            assert all(0 <= s.staleness_s <= MAX_STALENESS + SLACK for s in stats.stores), stats
            staleness = _metric("ragstack_retrieve_staleness_seconds", "lexical")
            assert staleness is not None and staleness <= MAX_STALENESS + SLACK
        finally:
            for stack in reversed(stacks):
                await stack.stop()
