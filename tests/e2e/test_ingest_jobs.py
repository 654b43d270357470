"""The durable ingest queue over gRPC: jobs submitted return at once and run in order; a job a
stopped service left running, and one still queued, are run when the service starts again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ragstack.errors import RpcError
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, open_channel
from ragstack.v1 import ingest_pb2
from services.ingest.jobs import RUNNING, JobStore
from tests.conftest import SAMPLES, make_config, start_with


async def _until_done(client: IngestClient, job_id: str) -> str:
    for _ in range(600):
        job = await client.job(job_id)
        if job.state in ("done", "failed"):
            return job.state
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


async def test_jobs_queue_run_and_survive_a_restart(tmp_path: Path, resources: Resources) -> None:
    cfg = make_config(tmp_path / "data", ingest={"graph": False})
    # A service that stopped mid-job left this one running, and one more queued behind it.
    store = JobStore(cfg.data_dir / "jobs.sqlite")
    left = store.submit(
        "default", ingest_pb2.IngestRequest(paths=[str(SAMPLES / "bm25.md")]).SerializeToString()
    )
    queued = store.submit(
        "default", ingest_pb2.IngestRequest(paths=[str(SAMPLES / "reranking.md")]).SerializeToString()
    )
    assert store.claim() is not None and store.get(left.job_id).state == RUNNING  # type: ignore[union-attr]
    store.close()

    stack = await start_with(cfg, resources, services=("ingest",), gateway=False)
    client = IngestClient(open_channel(stack.peers["ingest"]), 60)
    try:
        assert await _until_done(client, left.job_id) == "done"
        assert await _until_done(client, queued.job_id) == "done"
        again = await client.job(left.job_id)
        assert again.attempts == 2 and again.summary is not None and again.summary.indexed == 1

        submitted = await client.submit(paths=[str(SAMPLES / "chunking.md"), str(SAMPLES / "bm25.md")])
        assert submitted.state == "queued" and submitted.summary is None
        assert await _until_done(client, submitted.job_id) == "done"
        finished = await client.job(submitted.job_id)
        assert finished.files_done == 2 and finished.summary is not None
        assert (finished.summary.indexed, finished.summary.unchanged) == (1, 1)
        listed = await client.jobs()
        assert listed[0].job_id == submitted.job_id and len(listed) == 3
        assert len(await client.list_documents()) == 3

        with pytest.raises(RpcError) as err:
            await client.submit(paths=[str(tmp_path / "missing.md")])
        assert err.value.code == "INVALID_ARGUMENT" and "does not exist" in err.value.message
        with pytest.raises(RpcError) as err:
            await client.job("nope")
        assert err.value.code == "NOT_FOUND"
    finally:
        await stack.stop()
