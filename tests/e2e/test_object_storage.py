"""Beyond one machine, on a real S3-compatible server (moto): ingest writes LanceDB to the bucket and
publishes the lexical index there; a retrieve replica with a data dir of its own (no shared volume)
searches both, and follows a later ingest without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ragstack import domain as d
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools.s3 import s3_storage


async def test_a_replica_reads_what_ingest_put_in_object_storage(
    tmp_path: Path, resources: Resources
) -> None:
    with s3_storage() as storage:
        writer_cfg = make_config(tmp_path / "writer", storage=storage, ingest={"graph": False})
        replica_cfg = make_config(tmp_path / "replica", storage=storage, retrieve={"max_staleness_s": 0.2})
        stacks = []
        for cfg, services in ((writer_cfg, ("ingest",)), (replica_cfg, ("retrieve",))):
            stacks.append(await start_with(cfg, resources, services=services, gateway=False))
        writer, replica = stacks
        ingest = IngestClient(open_channel(writer.peers["ingest"]), 300)
        retrieve = RetrieveClient(open_channel(replica.peers["retrieve"]), 30)
        try:
            [
                e
                async for e in ingest.ingest(
                    paths=[str(SAMPLES / "bm25.md"), str(SAMPLES / "hybrid-search.md")]
                )
            ]
            await asyncio.sleep(0.3)  # one look for new versions (retrieve.max_staleness_s)
            for mode in (d.SearchMode.LEXICAL, d.SearchMode.DENSE, d.SearchMode.HYBRID):
                hits, _ = await retrieve.search("reciprocal rank fusion", "default", 3, mode)
                assert hits and hits[0].chunk.source.endswith("hybrid-search.md"), mode
            assert not (tmp_path / "replica" / "lancedb").exists()  # nothing of LanceDB on the replica's disk

            [e async for e in ingest.ingest(paths=[str(SAMPLES / "reranking.md")])]
            await asyncio.sleep(0.3)  # one poll
            lexical, _ = await retrieve.search("cross-encoder reranking", "default", 3, d.SearchMode.LEXICAL)
            dense, _ = await retrieve.search("cross-encoder reranking", "default", 3, d.SearchMode.DENSE)
            assert {lexical[0].chunk.source, dense[0].chunk.source} == {str(SAMPLES / "reranking.md")}
        finally:
            for stack in stacks:
                await stack.stop()
