"""Work done ahead on threads of its own: the next items are prepared while the caller handles
the ones before, handed over in order, and never more than a bounded weight ahead (so memory
stays bounded however fast the workers are). The pipeline parses documents ahead of the embedder
with it (several at once when a docling-serve server converts them); the Ingest RPC reads the
pipeline's events through it, in bursts."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Ahead(Generic[T, R]):
    """Iterates `(item, work(item))` in the items' order; an Exception that `work` raises is
    handed over in place of its result, one that the items raise reaches the reader after the
    results before it. An item is started only while the results not yet taken (those done out of
    order included) weigh less than `limit`, and while fewer than `workers` are in hand: at most
    `limit` plus the weight of the `workers` results in hand are ever held (one result of any
    weight may always wait). With one worker (the default) the work runs on the thread that
    iterates the items; with more, on that many threads beside it, started in the items' order
    and handed over in it. Closing stops starting items, waits for those in hand and closes the
    items (a generator) on the thread where they ran."""

    def __init__(
        self,
        items: Iterable[T],
        work: Callable[[T], R],
        weight: Callable[[R], int],
        limit: int,
        name: str,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self._items = items
        self._work = work
        self._weight = weight
        self._limit = limit
        self._name = name
        self._workers = workers
        self._cond = threading.Condition()
        self._ready: deque[tuple[T, R | Exception, int]] = deque()
        self._early: dict[int, tuple[T, R | Exception, int]] = {}  # done before one started earlier
        self._started = 0  # items started, numbered in their order
        self._next = 0  # the number of the next result to hand over
        self._running = 0
        self._held = 0  # weight of the results not yet taken
        self._stopped = False
        self._done = False
        self._fatal: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pool = None
        if self._workers > 1:
            pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
        try:
            for item in self._items:
                with self._cond:
                    self._cond.wait_for(
                        lambda: (
                            self._stopped
                            or self._fatal is not None
                            or (self._held < self._limit and self._running < self._workers)
                        )
                    )
                    if self._stopped or self._fatal is not None:
                        return
                    number = self._started
                    self._started += 1
                    self._running += 1
                if pool is None:
                    self._one(number, item)
                else:
                    pool.submit(self._guarded, number, item)
        except BaseException as err:  # the reader must not wait for ever
            with self._cond:
                if self._fatal is None:
                    self._fatal = err
        finally:
            if pool is not None:
                pool.shutdown(wait=True)  # the items in hand are finished first
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def _one(self, number: int, item: T) -> None:
        result: R | Exception
        try:
            result = self._work(item)
            weight = self._weight(result)
        except Exception as err:
            result, weight = err, 0
        with self._cond:
            self._running -= 1
            self._early[number] = (item, result, weight)
            self._held += weight
            while self._next in self._early:  # handed over in the items' order
                self._ready.append(self._early.pop(self._next))
                self._next += 1
            self._cond.notify_all()

    def _guarded(self, number: int, item: T) -> None:
        """`_one` on a worker thread: what is not an Exception stops the starting of items and
        reaches the reader after the results before it."""
        try:
            self._one(number, item)
        except BaseException as err:
            with self._cond:
                self._running -= 1
                if self._fatal is None:
                    self._fatal = err
                self._cond.notify_all()

    def _take(self, most: int | None) -> list[tuple[T, R | Exception]]:
        """Up to `most` results (None: all ready), waiting for one; none once the items are done."""
        with self._cond:
            self._cond.wait_for(lambda: bool(self._ready) or self._done)
            if not self._ready and self._fatal is not None:
                raise self._fatal
            n = len(self._ready) if most is None else min(most, len(self._ready))
            taken = [self._ready.popleft() for _ in range(n)]
            self._held -= sum(weight for _, _, weight in taken)
            self._cond.notify_all()
        return [(item, result) for item, result, _ in taken]

    def __iter__(self) -> Iterator[tuple[T, R | Exception]]:
        while taken := self._take(1):
            yield taken[0]

    def burst(self) -> list[tuple[T, R | Exception]]:
        """Every result ready, waiting for one; none once the items are done."""
        return self._take(None)

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join()

    def __enter__(self) -> Ahead[T, R]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
