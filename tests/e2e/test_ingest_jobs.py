"""The durable ingest queue over gRPC: jobs submitted return at once and run in order; a job a
dead service left running (once its lease ran out), and one still queued, are run when the service
starts again."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from ragstack.errors import RpcError
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, open_channel
from ragstack.v1 import ingest_pb2
from services.ingest import jobs
from services.ingest.jobs import RUNNING, JobStore
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools import state as state_tools


async def _until_done(client: IngestClient, job_id: str) -> str:
    for _ in range(600):
        job = await client.job(job_id)
        if job.state in ("done", "failed", "cancelled", "dead"):
            return job.state
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


async def test_jobs_queue_run_and_survive_a_restart(tmp_path: Path, resources: Resources) -> None:
    cfg = make_config(tmp_path / "data", ingest={"graph": False})
    # A service that died mid-job (its lease has run out since) left this one running, and one
    # more queued behind it.
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    store = JobStore(state_tools.store(cfg.state, cfg.data_dir, jobs), now=lambda: an_hour_ago)
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


async def test_a_job_is_cancelled_queued_or_running(tmp_path: Path, resources: Resources) -> None:
    from ragstack.bench import hostile_files

    cfg = make_config(
        tmp_path / "data", ingest={"graph": False, "parse_timeout_s": 120, "parse_memory_mb": 2048}
    )
    runaway = tmp_path / "empty.docx"  # Docling takes minutes over a million empty paragraphs
    runaway.write_bytes(hostile_files.docx(1_000_000))
    stack = await start_with(cfg, resources, services=("ingest",), gateway=False)
    client = IngestClient(open_channel(stack.peers["ingest"]), 60)
    try:
        running = await client.submit(paths=[str(runaway)])
        behind = await client.submit(paths=[str(SAMPLES / "bm25.md")])
        never = await client.submit(paths=[str(SAMPLES / "chunking.md")])
        for _ in range(100):
            if (await client.job(running.job_id)).state == "running":
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(8)  # the parser process has started and is deep in the file

        assert (await client.cancel_job(never.job_id)).state == "cancelled"  # queued: never runs
        asked = asyncio.get_running_loop().time()
        stopped = await client.cancel_job(running.job_id)
        assert stopped.state == "cancelled" and stopped.summary is None
        assert asyncio.get_running_loop().time() - asked < cfg.services.grace_s + 5
        assert await _until_done(client, behind.job_id) == "done"  # the queue goes on
        assert (await client.job(never.job_id)).state == "cancelled"
        assert [d.source for d in await client.list_documents()] == [str(SAMPLES / "bm25.md")]
        assert (await client.cancel_job(behind.job_id)).state == "done"  # an ended job stays as it ended
        with pytest.raises(RpcError) as err:
            await client.cancel_job("nope")
        assert err.value.code == "NOT_FOUND"
    finally:
        await stack.stop()


async def test_a_cancel_between_the_claim_and_the_start_is_kept(
    tmp_path: Path, resources: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CancelIngestJob landing after a worker claimed the job but before it started it (no task to
    stop yet): the job never runs, and the queue goes on."""
    cfg = make_config(tmp_path / "data", ingest={"graph": False})
    claim, cancelled = JobStore.claim, []

    def claim_then_cancel(self: JobStore) -> tuple[jobs.Job, bytes, str] | None:
        claimed = claim(self)
        if claimed is not None and not cancelled:
            cancelled.append(self.cancel(claimed[0].job_id))  # as the RPC would, in that window
        return claimed

    monkeypatch.setattr(JobStore, "claim", claim_then_cancel)
    stack = await start_with(cfg, resources, services=("ingest",), gateway=False)
    client = IngestClient(open_channel(stack.peers["ingest"]), 60)
    try:
        first = await client.submit(paths=[str(SAMPLES / "bm25.md")])
        assert await _until_done(client, first.job_id) == "cancelled"
        second = await client.submit(paths=[str(SAMPLES / "chunking.md")])
        assert await _until_done(client, second.job_id) == "done"
        assert [d.source for d in await client.list_documents()] == [str(SAMPLES / "chunking.md")]
    finally:
        await stack.stop()


@pytest.mark.parametrize("graph", [False, True])
async def test_a_cancel_while_the_batch_is_embedded_returns_within_a_slice(
    tmp_path: Path, resources: Resources, graph: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CancelIngestJob while the job's batch of chunks is being embedded (about ten seconds of it
    on two cores) and, with the graph on, its entities extracted beside: the call returns once
    the slice in hand is done, not after the batch (it took seven seconds before, five with the
    graph once the embedding stopped), nothing of the batch is indexed, and the queue goes on."""
    cfg = make_config(tmp_path / "data", ingest={"graph": graph})
    survey = tmp_path / "survey.md"
    survey.write_text(
        "# Survey\n\n"
        + "\n\n".join(
            f"## Plot {i}\n\n"
            + " ".join(
                f"Plot {i} transect {j} recorded banksia and hakea shrubs by the creek." for j in range(30)
            )
            for i in range(160)
        )
    )
    slices: list[float] = []  # the seconds each slice of the survey's embedding took
    embedding = threading.Event()  # a slice of the survey is embedded: its batch is being embedded
    embed = resources.embedder.embed

    def timed(texts: Sequence[str]) -> np.ndarray:
        started = time.monotonic()
        try:
            return embed(texts)
        finally:
            if any("transect" in text for text in texts):
                slices.append(time.monotonic() - started)
                embedding.set()

    monkeypatch.setattr(resources.embedder, "embed", timed)
    stack = await start_with(cfg, resources, services=("ingest",), gateway=False)
    client = IngestClient(open_channel(stack.peers["ingest"]), 60)
    try:
        long = await client.submit(paths=[str(survey)])
        behind = await client.submit(paths=[str(SAMPLES / "bm25.md")])
        # Parsed and chunked in about a second on two cores doing nothing else; waited for, not
        # slept for, as a loaded machine takes longer.
        assert await asyncio.to_thread(embedding.wait, 120), "the survey was never embedded"
        asked = asyncio.get_running_loop().time()
        stopped = await client.cancel_job(long.job_id)
        took = asyncio.get_running_loop().time() - asked
        assert stopped.state == "cancelled" and stopped.summary is None
        # 4 s on two cores that do nothing else (a slice takes a second or two there, the batch
        # seven); a loaded machine is slower at every slice, so the bound grows with the first.
        bound = max(4.0, 3 * slices[0])
        assert took < bound, f"the cancel took {took:.1f} s, the first slice {slices[0]:.1f} s"
        assert await _until_done(client, behind.job_id) == "done"
        assert [d.source for d in await client.list_documents()] == [str(SAMPLES / "bm25.md")]
    finally:
        await stack.stop()
