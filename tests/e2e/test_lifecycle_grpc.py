"""The store lifecycle over real gRPC servers: Stats, snapshots created, listed, restored (the retrieve
service sees the restored stores at once) and deleted, Vacuum with the configured default window, and
the status codes of every refusal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ragstack import domain as d
from ragstack.errors import RpcError
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.serve import Stack
from tests.conftest import SAMPLES, make_config, start_with

FILES = ["bm25.md", "chunking.md", "reranking.md"]


async def _start(folder: Path, resources: Resources, **sections: dict[str, Any]) -> Stack:
    return await start_with(make_config(folder / "data", **sections), resources, gateway=False)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    stack = await _start(tmp_path_factory.mktemp("lifecycle"), resources, ingest={"graph": False})
    yield stack
    await stack.stop()


async def _fails(code: str, call: Any) -> str:
    with pytest.raises(RpcError) as err:
        await call
    assert err.value.code == code, err.value
    return err.value.message


async def test_snapshot_restore_vacuum_and_their_errors(stack: Stack) -> None:
    ingest = IngestClient(open_channel(stack.peers["ingest"]), 120)
    retrieve = RetrieveClient(open_channel(stack.peers["retrieve"]), 30)
    events = [e async for e in ingest.ingest(files=[(n, (SAMPLES / n).read_bytes()) for n in FILES])]
    summary = events[-1]
    assert isinstance(summary, d.IngestSummary) and summary.indexed == len(FILES)

    async def lexical(term: str) -> list[str]:
        hits, _ = await retrieve.search(term, "default", 5, d.SearchMode.LEXICAL)
        return [h.chunk.document_id for h in hits]

    stats = await ingest.stats()
    (lib,) = stats.libraries
    assert lib.documents == len(FILES)
    assert lib.chunks == lib.vector_chunks == lib.lexical_chunks == summary.chunks
    assert lib.vector_windows > lib.chunks // 2  # the samples' 256-word-piece chunks: most in windows
    assert lib.media_types == {"text/markdown": len(FILES)} and lib.entities == 0  # graph off
    assert set(stats.table_versions) == {"chunks"} and stats.snapshots == 0  # no PDF: no originals

    snap = await ingest.create_snapshot("v1")
    assert (snap.name, snap.documents, snap.chunks) == ("v1", len(FILES), summary.chunks)
    assert snap.table_versions == stats.table_versions and snap.bytes > 0
    assert "exists" in await _fails("ALREADY_EXISTS", ingest.create_snapshot("v1"))
    for bad in ["", "../up", "a/b", ".hidden", "x.lock", "x" * 65]:
        assert "invalid snapshot name" in await _fails("INVALID_ARGUMENT", ingest.create_snapshot(bad))
    assert [s.name for s in await ingest.list_snapshots()] == ["v1"]

    bm25 = next(
        x.document_id for x in await ingest.list_documents() if x.source == "upload://default/bm25.md"
    )
    assert bm25 in await lexical("Okapi")
    await ingest.delete_document(bm25)
    assert await lexical("Okapi") == []

    restored, versions = await ingest.restore_snapshot("v1")
    assert restored.name == "v1" and versions["chunks"] > snap.table_versions["chunks"]
    assert bm25 in await lexical("Okapi")  # the running retrieve service follows
    hits, _ = await retrieve.search(
        "Okapi City University", "default", 5, d.SearchMode.DENSE, d.SearchFilter(document_ids=(bm25,))
    )
    assert hits and hits[0].chunk.document_id == bm25
    after = await ingest.stats()
    assert after.libraries == stats.libraries and after.snapshots == 1

    await _fails("NOT_FOUND", ingest.restore_snapshot("nope"))
    await _fails("NOT_FOUND", ingest.delete_snapshot("nope"))
    await _fails("INVALID_ARGUMENT", ingest.restore_snapshot("../v1"))
    await _fails("INVALID_ARGUMENT", ingest.stats("bad library!"))

    queued = await ingest.submit(files=[("late.md", b"# Late\n\nThe ferry was late on Tuesday.")])
    await ingest.cancel_job(queued.job_id)  # it ends one way or the other: cancelled, or done
    ended = await ingest.job(queued.job_id)
    assert ended.state in ("cancelled", "done")
    kept = await ingest.vacuum()  # ingest.retention_days: 7 by default
    assert kept.older_than_days == 7 and kept.versions_removed == 0 and kept.jobs_removed == 0
    assert (await ingest.job(queued.job_id)).state == ended.state  # younger than the window
    report = await ingest.vacuum(0)
    assert report.older_than_days == 0 and report.versions_removed > 0 and report.jobs_removed == 1
    await _fails("NOT_FOUND", ingest.job(queued.job_id))  # the queue's history went with the window
    assert sum(report.table_versions_removed.values()) == report.versions_removed
    assert "must be 0 to 36500" in await _fails("INVALID_ARGUMENT", ingest.vacuum(-1))
    assert bm25 in await lexical("Okapi")

    await ingest.delete_document(bm25)
    await ingest.restore_snapshot("v1")  # its pinned version outlived the vacuum
    assert bm25 in await lexical("Okapi")

    await ingest.delete_snapshot("v1")
    assert await ingest.list_snapshots() == []
    await _fails("NOT_FOUND", ingest.restore_snapshot("v1"))


async def test_restore_and_vacuum_with_lancedb_on_object_storage_and_a_replica(
    tmp_path: Path, resources: Resources
) -> None:
    """LanceDB in an S3 bucket (moto), the lexical index published there: a restore reaches the
    replica (its own data dir) through both, and vacuum works on the bucket's tables."""
    import asyncio

    from tests.tools.s3 import s3_storage

    with s3_storage() as storage:
        stacks = []
        for name, services in (("writer", ("ingest",)), ("replica", ("retrieve",))):
            # The replica looks for new versions every 0.2 s (retrieve.max_staleness_s).
            cfg = make_config(
                tmp_path / name, storage=storage, ingest={"graph": False}, retrieve={"max_staleness_s": 0.2}
            )
            stacks.append(await start_with(cfg, resources, services=services, gateway=False))
        writer, replica = stacks
        ingest = IngestClient(open_channel(writer.peers["ingest"]), 300)
        retrieve = RetrieveClient(open_channel(replica.peers["retrieve"]), 30)

        async def found(term: str, mode: d.SearchMode) -> set[str]:
            await asyncio.sleep(0.3)  # one poll of the replica
            hits, _ = await retrieve.search(term, "default", 5, mode)
            return {h.chunk.source.rsplit("/", 1)[-1] for h in hits}

        try:
            [e async for e in ingest.ingest(paths=[str(SAMPLES / n) for n in FILES])]
            await ingest.create_snapshot("s3")
            bm25 = next(x.document_id for x in await ingest.list_documents() if x.source.endswith("bm25.md"))
            await ingest.delete_document(bm25)
            assert "bm25.md" not in await found("Okapi", d.SearchMode.LEXICAL)
            await ingest.restore_snapshot("s3")
            assert "bm25.md" in await found("Okapi", d.SearchMode.LEXICAL)
            assert "bm25.md" in await found("Okapi City University London", d.SearchMode.DENSE)
            stats = await ingest.stats()
            assert stats.lancedb_bytes == 0 and stats.libraries[0].vector_chunks == stats.libraries[0].chunks
            report = await ingest.vacuum(0)
            assert report.versions_removed > 0
            await ingest.delete_document(bm25)
            await ingest.restore_snapshot("s3")  # its version survived the vacuum in the bucket
            assert "bm25.md" in await found("Okapi", d.SearchMode.LEXICAL)
        finally:
            for stack in stacks:
                await stack.stop()
