"""Work done ahead on a thread of its own: the next items are prepared while the caller handles
the ones before, handed over in order, and never more than a bounded weight ahead (so memory
stays bounded however fast the worker is). The pipeline parses documents ahead of the embedder
with it; the Ingest RPC reads the pipeline's events through it, in bursts."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Ahead(Generic[T, R]):
    """Iterates `(item, work(item))` in the items' order; an Exception that `work` raises is
    handed over in place of its result, one that the items raise reaches the reader after the
    results before it. The worker waits while the results not yet taken weigh `limit` or more (one
    result of any weight may always wait). Closing stops the worker after the item in hand and
    closes the items (a generator) on the worker's thread, where they ran."""

    def __init__(
        self, items: Iterable[T], work: Callable[[T], R], weight: Callable[[R], int], limit: int, name: str
    ) -> None:
        self._items = items
        self._work = work
        self._weight = weight
        self._limit = limit
        self._cond = threading.Condition()
        self._ready: deque[tuple[T, R | Exception, int]] = deque()
        self._held = 0  # weight of the results not yet taken
        self._stopped = False
        self._done = False
        self._fatal: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self._items:
                with self._cond:
                    self._cond.wait_for(lambda: self._stopped or self._held < self._limit)
                    if self._stopped:
                        return
                result: R | Exception
                try:
                    result = self._work(item)
                    weight = self._weight(result)
                except Exception as err:
                    result, weight = err, 0
                with self._cond:
                    self._ready.append((item, result, weight))
                    self._held += weight
                    self._cond.notify_all()
        except BaseException as err:  # the reader must not wait for ever
            self._fatal = err
        finally:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
            with self._cond:
                self._done = True
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
