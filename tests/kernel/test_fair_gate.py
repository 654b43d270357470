"""The fair gate (ragstack/fair_gate.py): so many slots, and owners waiting for one take turns."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from prometheus_client import REGISTRY

from ragstack.config import LLMConfig
from ragstack.fair_gate import FairGate, GateBusy
from ragstack.llm import LLM, waited_for_at_most


def _queued(gate: FairGate, n: int) -> None:
    """Waits until `n` wait at the gate."""
    until = time.monotonic() + 5.0
    while gate.waiting() < n:
        assert time.monotonic() < until, "timed out"
        time.sleep(0.005)


def test_waiting_owners_take_turns_and_each_owners_waiters_keep_their_order() -> None:
    gate = FairGate(1, "test gate (x.slots)")
    served: list[str] = []

    def one(name: str) -> None:
        with gate.hold(name[0], 5.0):
            served.append(name)

    threads = []
    with gate.hold("someone", 1.0):
        for name in ["a1", "a2", "a3", "a4", "b1", "c1", "b2"]:  # ana queues four, then ben and carl come
            threads.append(threading.Thread(target=one, args=(name,)))
            threads[-1].start()
            _queued(gate, len(threads))
    for t in threads:
        t.join(5)
    assert served == ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]
    assert gate.waiting() == 0
    with gate.hold("x", 0.0):  # every slot came back
        pass


def test_a_wait_past_its_time_is_refused_naming_the_setting_and_leaves_the_queue() -> None:
    gate = FairGate(2, "the LLM is busy (llm.max_concurrent)")
    with gate.hold("ana", 1.0), gate.hold("ana", 1.0):
        started = time.monotonic()
        with pytest.raises(GateBusy, match=r"llm.max_concurrent\): no slot of 2 came free in 0.05 s"):
            with gate.hold("ben", 0.05):
                pass
        assert 0.04 < time.monotonic() - started < 2.0
        assert gate.waiting() == 0
    with gate.hold("ben", 0.0), gate.hold("carl", 0.0):  # both slots free again
        pass


async def test_coroutines_and_threads_share_the_gate_and_a_cancelled_wait_leaves_it() -> None:
    gate = FairGate(1, "test gate (x.slots)")
    served: list[str] = []

    async def one(name: str) -> None:
        async with gate.hold_async(name[0], 5.0):
            served.append(name)
            await asyncio.sleep(0)

    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with gate.hold("t", 1.0):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    await asyncio.to_thread(held.wait, 5)
    first = asyncio.create_task(one("a1"))
    gone = asyncio.create_task(one("b1"))
    later = asyncio.create_task(one("a2"))
    await asyncio.to_thread(_queued, gate, 3)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert gate.waiting() == 2
    release.set()  # the thread's slot goes to a coroutine
    await asyncio.wait_for(asyncio.gather(first, later), 5)
    thread.join(5)
    assert served == ["a1", "a2"]
    with pytest.raises(GateBusy):
        async with gate.hold_async("x", 0.0), gate.hold_async("y", 0.01):
            pass


async def test_a_slot_granted_as_its_waiter_is_cancelled_goes_to_the_next() -> None:
    gate = FairGate(1, "test gate (x.slots)")
    async with gate.hold_async("ana", 1.0):
        waiter = asyncio.create_task(gate.hold_async("ben", 5.0).__aenter__())
        next_one = asyncio.create_task(gate.hold_async("carl", 5.0).__aenter__())
        await asyncio.to_thread(_queued, gate, 2)
    waiter.cancel()  # in the same step as the grant to ben: ben hands it on
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.wait_for(next_one, 5)  # carl holds it now
    assert gate.waiting() == 0


async def test_the_llm_waits_for_a_slot_and_past_its_timeout_takes_the_offline_path() -> None:
    """The gate comes before any connection: no server is needed to see it refuse."""
    llm = LLM(LLMConfig(host="http://127.0.0.1:9", max_concurrent=1, timeout_s=0.5))
    with llm._gate.hold("someone", 1.0):
        waiting = asyncio.create_task(asyncio.to_thread(llm.chat, [{"role": "user", "content": "hi"}]))
        await asyncio.to_thread(_queued, llm._gate, 1)
        assert REGISTRY.get_sample_value("ragstack_llm_waiting") == 1.0  # /metrics shows the queue
        with pytest.raises(GateBusy, match=r"llm.max_concurrent"):
            await waiting
        with pytest.raises(GateBusy, match=r"llm.max_concurrent"):
            async for _ in llm.stream_chat([{"role": "user", "content": "hi"}]):
                pass
    assert llm._gate.waiting() == 0


async def test_a_call_its_caller_gave_up_on_leaves_the_queue_then() -> None:
    """A thread left behind by `wait_for` gives up its place when its caller stopped waiting, not
    after `llm.timeout_s`: it would hold a slot for an answer nobody reads."""
    llm = LLM(LLMConfig(host="http://127.0.0.1:9", max_concurrent=1, timeout_s=30.0))
    with llm._gate.hold("someone", 1.0):
        started = time.monotonic()
        with waited_for_at_most(0.3), pytest.raises(GateBusy, match=r"came free in 0(\.\d+)? s"):
            await asyncio.to_thread(llm.chat, [{"role": "user", "content": "hi"}])
        assert time.monotonic() - started < 5.0
