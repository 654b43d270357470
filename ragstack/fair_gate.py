"""A gate of so many slots that callers waiting for one take turns: each owner with waiters gets one
slot in turn (round-robin), each owner's own waiters in the order they came. So one caller's many
requests wait behind each other, not in front of everyone else's. Threads (`hold`) and coroutines
(`hold_async`) share one gate."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from ragstack.errors import ResourceExhausted


class GateBusy(ResourceExhausted):
    """No slot came free within the wait allowed."""


class _Waiter:
    __slots__ = ("granted", "owner", "wake")

    def __init__(self, owner: str, wake: Callable[[], None]) -> None:
        self.owner = owner
        self.wake = wake
        self.granted = False


class FairGate:
    def __init__(self, slots: int, what: str) -> None:
        """`what` names the gate and its setting in a refusal."""
        self.slots = slots
        self._what = what
        self._free = slots
        self._lock = threading.Lock()
        self._queues: dict[str, deque[_Waiter]] = {}
        self._turns: deque[str] = deque()  # the owners with waiters, in the order they are served

    @contextmanager
    def hold(self, owner: str, timeout_s: float) -> Iterator[None]:
        """One slot for the block, waited for at most `timeout_s` (then GateBusy)."""
        woken = threading.Event()
        waiter = self._enter(owner, woken.set)
        if waiter is not None:
            try:
                done = woken.wait(min(timeout_s, threading.TIMEOUT_MAX))
            except BaseException:  # a signal's exception in the main thread: out of the queue
                if not self._abandon(waiter):
                    self._leave()  # granted meanwhile: hand it on
                raise
            if not done and self._abandon(waiter):
                raise self._busy(timeout_s)
        try:
            yield
        finally:
            self._leave()

    @asynccontextmanager
    async def hold_async(self, owner: str, timeout_s: float) -> AsyncIterator[None]:
        """`hold` for a coroutine; a cancelled wait leaves the queue."""
        loop = asyncio.get_running_loop()
        granted: asyncio.Future[None] = loop.create_future()

        def grant() -> None:
            if not granted.done():  # a cancelled wait's future is done already
                granted.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(grant)

        waiter = self._enter(owner, wake)
        if waiter is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await granted
            except BaseException as err:
                if self._abandon(waiter):
                    if isinstance(err, TimeoutError):
                        raise self._busy(timeout_s) from None
                    raise
                if not isinstance(err, TimeoutError):  # granted as it was cancelled: hand it on
                    self._leave()
                    raise
        try:
            yield
        finally:
            self._leave()

    def waiting(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def _enter(self, owner: str, wake: Callable[[], None]) -> _Waiter | None:
        """None: a slot is held at once; else the waiter queued."""
        with self._lock:
            if self._free > 0 and not self._turns:
                self._free -= 1
                return None
            waiter = _Waiter(owner, wake)
            queue = self._queues.get(owner)
            if queue is None:
                queue = self._queues[owner] = deque()
                self._turns.append(owner)
            queue.append(waiter)
            return waiter

    def _leave(self) -> None:
        """A holder is done: its slot goes to the next owner in turn, or back to the free ones."""
        with self._lock:
            while self._turns:
                owner = self._turns.popleft()
                queue = self._queues[owner]
                waiter = queue.popleft()
                if queue:
                    self._turns.append(owner)
                else:
                    del self._queues[owner]
                waiter.granted = True
                try:
                    waiter.wake()
                    return
                except RuntimeError:  # its event loop is gone: the slot goes to the next
                    continue
            self._free += 1

    def _abandon(self, waiter: _Waiter) -> bool:
        """Takes a waiter that stopped waiting out of the queue; False when it was granted a slot
        meanwhile (it holds one then)."""
        with self._lock:
            if waiter.granted:
                return False
            queue = self._queues[waiter.owner]
            queue.remove(waiter)
            if not queue:
                del self._queues[waiter.owner]
                self._turns.remove(waiter.owner)
            return True

    def _busy(self, timeout_s: float) -> GateBusy:
        return GateBusy(f"{self._what}: no slot of {self.slots} came free in {timeout_s:.3g} s")
