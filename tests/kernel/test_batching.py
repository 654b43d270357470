"""The model batcher: concurrent callers share model runs, results go back to the right caller,
and abandoned or late requests cost the model nothing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from ragstack.batching import DEADLINE, Batcher
from ragstack.errors import DeadlineExceeded


class Recorder:
    """A model that records each run's inputs; `gate` holds the first run until it is set."""

    def __init__(self, hold_first: bool = False) -> None:
        self.runs: list[list[str]] = []
        self.gate = threading.Event()
        if not hold_first:
            self.gate.set()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.gate.wait(10)
        self.runs.append(list(texts))
        if "boom" in texts:
            raise ValueError("the model failed on this batch")
        return np.array([[float(len(t))] for t in texts])


async def held(max_items: int = 64) -> tuple[Recorder, Batcher[str], asyncio.Future[np.ndarray]]:
    """A batcher whose first run ("first") has taken the model and waits on the gate."""
    model = Recorder(hold_first=True)
    batcher = Batcher(model, "test", max_items)
    first = asyncio.ensure_future(batcher(["first"]))
    await asyncio.sleep(0.05)
    return model, batcher, first


@pytest.mark.parametrize("model", ["embedder", "query_embedder"])
async def test_concurrent_queries_share_runs_and_get_their_own_vectors(resources, model: str) -> None:
    # The query embedder's int8 weights would give a text another vector beside others
    # (ragstack/onnx.py, batch_dependent): a caller's hits must not depend on other callers.
    embedder = getattr(resources, model)
    texts = [f"question number {i} about retrieval and ranking" + " words" * (i % 5) for i in range(24)]
    runs: list[int] = []

    def embed(batch: list[str]) -> np.ndarray:
        runs.append(len(batch))
        return embedder.embed(batch)

    batcher = Batcher(embed, "test-embedder", max_items=8)
    together = await asyncio.gather(*(batcher([t]) for t in texts))
    for text, rows in zip(texts, together, strict=True):
        assert rows.shape == (1, 384)
        assert np.abs(rows[0] - embedder.embed([text])[0]).max() < 1e-6  # as if it had run alone
    assert len(runs) < len(texts) and max(runs) <= 8 and sum(runs) == len(texts)
    batcher.close()


async def test_requests_waiting_behind_a_run_go_together_in_the_next() -> None:
    model, batcher, first = await held(max_items=4)
    rest = [asyncio.ensure_future(batcher([t])) for t in ("bb", "ccc", "dddd", "eeeee", "ffffff")]
    await asyncio.sleep(0.01)
    model.gate.set()
    await first
    results = await asyncio.gather(*rest)
    assert model.runs == [["first"], ["bb", "ccc", "dddd", "eeeee"], ["ffffff"]]  # at most max_items a run
    assert [float(r[0][0]) for r in results] == [2.0, 3.0, 4.0, 5.0, 6.0]
    batcher.close()


async def test_a_request_larger_than_a_batch_runs_alone() -> None:
    model = Recorder()
    batcher = Batcher(model, "test", max_items=2)
    rows = await batcher(["x", "yy", "zzz"])
    assert model.runs == [["x", "yy", "zzz"]] and rows.shape == (3, 1)
    batcher.close()


async def test_an_abandoned_request_is_never_run() -> None:
    model, batcher, first = await held()
    gone = asyncio.ensure_future(batcher(["abandoned"]))
    kept = asyncio.ensure_future(batcher(["kept"]))
    await asyncio.sleep(0.01)
    gone.cancel()  # as gRPC cancels a handler whose caller went away or whose deadline passed
    model.gate.set()
    await first
    assert float((await kept)[0][0]) == 4.0
    assert model.runs == [["first"], ["kept"]]
    batcher.close()


async def test_a_request_past_its_deadline_is_refused_before_the_model_runs() -> None:
    model, batcher, first = await held()
    token = DEADLINE.set(time.monotonic() + 0.02)
    late = asyncio.ensure_future(batcher(["late"]))
    DEADLINE.reset(token)
    on_time = asyncio.ensure_future(batcher(["on time"]))
    await asyncio.sleep(0.1)  # the deadline passes while the first run holds the model
    model.gate.set()
    await first
    with pytest.raises(DeadlineExceeded, match="deadline passed before the test model ran"):
        await late
    await on_time
    assert model.runs == [["first"], ["on time"]]
    batcher.close()


async def test_a_failing_run_fails_its_callers_only() -> None:
    model, batcher, first = await held()
    together = [asyncio.ensure_future(batcher([t])) for t in ("boom", "bystander")]
    model.gate.set()
    await first
    for request in together:
        with pytest.raises(ValueError, match="the model failed"):
            await request
    assert float((await batcher(["after"]))[0][0]) == 5.0  # the batcher goes on
    batcher.close()


async def test_a_window_gathers_requests_that_arrive_close_together() -> None:
    model = Recorder()
    batcher = Batcher(model, "test", max_items=16, window_s=0.05)

    async def later(text: str, delay: float) -> np.ndarray:
        await asyncio.sleep(delay)
        return await batcher([text])

    await asyncio.gather(later("a", 0), later("b", 0.01), later("c", 0.02))
    assert model.runs == [["a", "b", "c"]]
    batcher.close()


def test_a_batcher_outlives_the_event_loop_it_first_ran_in() -> None:
    model = Recorder()
    batcher = Batcher(model, "test")
    assert asyncio.run(batcher(["one"])).shape == (1, 1)
    assert float(asyncio.run(batcher(["three"]))[0][0]) == 5.0
    batcher.close()
