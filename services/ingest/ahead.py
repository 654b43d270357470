"""Work done ahead on a thread of its own: the next items are prepared while the caller handles
the ones before, handed over in order, and never more than a bounded weight ahead (so memory
stays bounded however fast the worker is)."""

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
    handed over in place of its result. The worker waits while the results not yet taken weigh
    `limit` or more (one result of any weight may always wait). Closing stops the worker after the
    item in hand."""

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
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def __iter__(self) -> Iterator[tuple[T, R | Exception]]:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._ready) or self._done)
                if not self._ready:
                    if self._fatal is not None:
                        raise self._fatal
                    return
                item, result, weight = self._ready.popleft()
                self._held -= weight
                self._cond.notify_all()
            yield item, result

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
