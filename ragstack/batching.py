"""One model, many concurrent callers: their inputs run together, one batch at a time, on a thread of
the model's own.

Requests that arrive while a batch runs wait and go together into the next one, up to `max_items`
inputs (natural batching: at low load nothing waits; under load the model runs fewer, fuller
batches). With `window_s` the first request of a batch also waits that long for company, which pays
on a GPU. Running one batch at a time also stops N concurrent calls from each starting the model's
own thread pool on the same few cores.

A request whose caller has gone (cancelled, as gRPC does when the deadline passes) is dropped before
its batch runs; one whose deadline (`DEADLINE`, set by the RPC layer) has passed is refused with
DEADLINE_EXCEEDED instead of costing the model.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from prometheus_client import Histogram

from ragstack.errors import DeadlineExceeded

T = TypeVar("T")

# When the current call must be answered by (time.monotonic()); None: no deadline.
DEADLINE: ContextVar[float | None] = ContextVar("deadline", default=None)

BATCH_INPUTS = Histogram(
    "ragstack_model_batch_inputs",
    "Inputs per model run of a batching model (queries embedded together, pairs scored together).",
    ["model"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
)


@dataclass
class _Request(Generic[T]):
    items: Sequence[T]
    future: asyncio.Future[np.ndarray]
    deadline: float | None


class Batcher(Generic[T]):
    def __init__(
        self, run: Callable[[list[T]], np.ndarray], name: str, max_items: int = 64, window_s: float = 0.0
    ) -> None:
        """`run` maps inputs to one result row each, in order (an embedder's `embed`)."""
        self._run = run
        self.name = name
        self._max_items = max_items
        self._window_s = window_s
        self._pending: deque[_Request[T]] = deque()
        self._drainer: asyncio.Task[None] | None = None  # a reference, so it is not collected mid-run
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{name}")

    async def __call__(self, items: Sequence[T]) -> np.ndarray:
        """Rows for `items`, computed in some batch together with other callers' items."""
        loop = asyncio.get_running_loop()
        request = _Request(items, loop.create_future(), DEADLINE.get())
        self._pending.append(request)
        if self._drainer is None or self._drainer.get_loop() is not loop:  # (a loop that has ended)
            self._pending = deque(r for r in self._pending if r.future.get_loop() is loop)
            self._drainer = loop.create_task(self._drain())
        return await request.future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                if self._window_s and sum(len(r.items) for r in self._pending) < self._max_items:
                    await asyncio.sleep(self._window_s)
                batch = self._take()
                if not batch:
                    continue
                flat = [item for r in batch for item in r.items]
                BATCH_INPUTS.labels(self.name).observe(len(flat))
                try:
                    rows = await loop.run_in_executor(self._thread, self._run, flat)
                except Exception as err:  # every caller of the batch gets the model's error
                    for r in batch:
                        _settle(r.future, error=err)
                    continue
                start = 0
                for r in batch:
                    _settle(r.future, rows[start : start + len(r.items)])
                    start += len(r.items)
        finally:
            if self._drainer is asyncio.current_task():
                self._drainer = None

    def _take(self) -> list[_Request[T]]:
        """The next batch: waiting requests in arrival order up to `max_items` inputs (at least one
        request, however large); the abandoned left out, the late refused."""
        batch: list[_Request[T]] = []
        size = 0
        now = time.monotonic()
        while self._pending:
            r = self._pending[0]
            if r.future.done():  # cancelled by its caller
                self._pending.popleft()
                continue
            if r.deadline is not None and r.deadline <= now:
                self._pending.popleft()
                _settle(r.future, error=DeadlineExceeded(f"deadline passed before the {self.name} model ran"))
                continue
            if batch and size + len(r.items) > self._max_items:
                break
            self._pending.popleft()
            batch.append(r)
            size += len(r.items)
        return batch

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)


def _settle(future: asyncio.Future[Any], rows: Any = None, error: Exception | None = None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(rows)
