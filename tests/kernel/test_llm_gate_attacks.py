"""Attacks on the LLM's fair gate (ragstack/fair_gate.py) and on the LLM calls that pass it
(ragstack/llm.py): slot leaks on every exit path, cancellation and timeouts at the moment of a grant,
dead event loops, floods of waiters, round-robin fairness against a reference model, recursive
acquisition, abandoned threads and the waiting gauge. The LLM calls go through the real `ollama`
client to a small scripted Ollama server of this module whose timing each request sets.

Written by a helper against the interface before it read the code. It found three defects, fixed
since: an exception raised into a waiting thread (a signal's) left a ghost waiter that swallowed a
slot; an `llm.timeout_s` past threading.TIMEOUT_MAX overflowed the wait (now capped, and the setting
bounded to a day); a call started after its caller stopped waiting still took a free slot."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel, ValidationError

from ragstack import auth
from ragstack.config import LLMConfig
from ragstack.errors import ResourceExhausted
from ragstack.fair_gate import FairGate, GateBusy
from ragstack.llm import LLM, TIMEOUT, GenerationCut, ask_validated, waited_for_at_most
from tests.tools.http_serve import serving, write_chunk

BUSY = "the LLM is busy (llm.max_concurrent)"


# ---------------------------------------------------------------------------------------------------
# Helpers


def _exactly_free(gate: FairGate) -> None:
    """Nobody waits, every slot is free, and there is no slot more than `slots` (no phantom)."""
    assert gate.waiting() == 0
    with contextlib.ExitStack() as stack:
        for k in range(gate.slots):
            stack.enter_context(gate.hold(f"probe{k}", 0.0))
        with pytest.raises(GateBusy), gate.hold("probe-extra", 0.0):
            pass
    assert gate.waiting() == 0


def _until(pred: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


async def _auntil(pred: Callable[[], bool], timeout_s: float = 5.0) -> float:
    """Waits (polling) until `pred()`; the seconds it took."""
    started = time.monotonic()
    while not pred():
        assert time.monotonic() - started < timeout_s, "timed out"
        await asyncio.sleep(0.002)
    return time.monotonic() - started


async def _settle(steps: int = 10) -> None:
    """Lets the loop run the callbacks a grant schedules (wake, grant, the task's step)."""
    for _ in range(steps):
        await asyncio.sleep(0)


@contextlib.contextmanager
def _as(name: str) -> Iterator[None]:
    token = auth.PRINCIPAL.set(auth.Principal(name, auth.Role.READER))
    try:
        yield
    finally:
        auth.PRINCIPAL.reset(token)


class _Holders:
    """Counts the holders of a gate at once (threads and coroutines)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0

    @contextlib.contextmanager
    def inside(self) -> Iterator[None]:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            yield
        finally:
            with self._lock:
                self.now -= 1


class _RoundRobin:
    """The reference: owners with waiters take turns, each owner's waiters in their order."""

    def __init__(self, slots: int) -> None:
        self.free = slots
        self.turns: deque[str] = deque()
        self.queues: dict[str, deque[int]] = {}

    def enter(self, owner: str, who: int) -> bool:
        """True: holds at once."""
        if self.free > 0 and not self.turns:
            self.free -= 1
            return True
        if owner not in self.queues:
            self.queues[owner] = deque()
            self.turns.append(owner)
        self.queues[owner].append(who)
        return False

    def leave(self) -> int | None:
        """Who is granted the slot given back (None: it goes back to the free ones)."""
        if not self.turns:
            self.free += 1
            return None
        owner = self.turns.popleft()
        queue = self.queues[owner]
        who = queue.popleft()
        if queue:
            self.turns.append(owner)
        else:
            del self.queues[owner]
        return who

    def abandon(self, owner: str, who: int) -> None:
        queue = self.queues[owner]
        queue.remove(who)
        if not queue:
            del self.queues[owner]
            self.turns.remove(owner)

    def waiting(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def queued(self) -> list[int]:
        return sorted(w for q in self.queues.values() for w in q)


# ---------------------------------------------------------------------------------------------------
# A scripted Ollama server: POST /api/chat, streamed (chunked NDJSON) or whole. The last message's
# content is a JSON script: tag, head_s (before the reply starts), pieces, piece_s (before each),
# status (an HTTP error instead), drop_after (the connection cut after so many pieces), text (a
# whole reply's content).


class FakeOllama:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.active = 0
        self.most_active = 0
        self.arrivals: list[str] = []
        self.aborted: list[str] = []
        self.url = ""

    @contextlib.contextmanager
    def serve(self) -> Iterator[FakeOllama]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                script = _script(request["messages"])
                tag = script.get("tag", "")
                with fake._lock:
                    fake.active += 1
                    fake.most_active = max(fake.most_active, fake.active)
                    fake.arrivals.append(tag)
                try:
                    self._answer(request, script)
                except (BrokenPipeError, ConnectionResetError):
                    with fake._lock:
                        fake.aborted.append(tag)
                    self.close_connection = True
                finally:
                    with fake._lock:
                        fake.active -= 1

            def _answer(self, request: dict[str, Any], script: dict[str, Any]) -> None:
                time.sleep(script.get("head_s", 0.0))
                if script.get("status", 200) != 200:
                    self._whole(script["status"], {"error": "scripted failure"})
                    return
                pieces = [f"p{k} " for k in range(script.get("pieces", 2))]
                if not request.get("stream", True):
                    time.sleep(script.get("piece_s", 0.0) * len(pieces))
                    text = script.get("text", "".join(pieces))
                    self._whole(200, self._line(text, done=True))
                    return
                self.send_response(200)
                self.send_header("content-type", "application/x-ndjson")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for k, piece in enumerate(pieces):
                    if k == script.get("drop_after", -1):
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        self.close_connection = True
                        return
                    time.sleep(script.get("piece_s", 0.0))
                    self._chunk(self._line(piece, done=False))
                self._chunk(self._line("", done=True))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            @staticmethod
            def _line(text: str, done: bool) -> dict[str, Any]:
                line: dict[str, Any] = {
                    "model": "test",
                    "created_at": "2026-11-30T00:00:00Z",
                    "message": {"role": "assistant", "content": text},
                    "done": done,
                }
                if done:
                    line["done_reason"] = "stop"
                return line

            def _whole(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, body: dict[str, Any]) -> None:
                write_chunk(self, (json.dumps(body) + "\n").encode())

        with serving(Handler) as server:
            self.url = f"http://127.0.0.1:{server.server_port}"
            yield self


def _script(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The last message that is a script (a retry's last message is the caller's complaint)."""
    for message in reversed(messages):
        with contextlib.suppress(ValueError):
            script = json.loads(message["content"])
            if isinstance(script, dict):
                return script
    return {}


def _msg(tag: str = "", **script: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": json.dumps({"tag": tag, **script})}]


def _llm(server: FakeOllama | None, **cfg: Any) -> LLM:
    host = server.url if server is not None else "http://127.0.0.1:9"
    return LLM(LLMConfig(host=host, model="test", **{"timeout_s": 10.0, **cfg}))


async def _streamed(llm: LLM, owner: str, messages: list[dict[str, str]]) -> str:
    with _as(owner):
        return "".join([piece async for piece in llm.stream_chat(messages)])


def _gauge() -> float | None:
    return REGISTRY.get_sample_value("ragstack_llm_waiting")


@contextlib.contextmanager
def _held(gate: FairGate, n: int) -> Iterator[list[contextlib.AbstractContextManager[None]]]:
    """`n` slots held by a driver that can give them back one by one, synchronously (`_give`)."""
    held: list[contextlib.AbstractContextManager[None]] = []
    for _ in range(n):
        cm = gate.hold("driver", 0.0)
        cm.__enter__()
        held.append(cm)
    try:
        yield held
    finally:
        while held:
            held.pop().__exit__(None, None, None)


def _give(held: list[contextlib.AbstractContextManager[None]]) -> None:
    held.pop().__exit__(None, None, None)


# ---------------------------------------------------------------------------------------------------
# The gate: every exit path gives its slot back


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt, SystemExit, GeneratorExit, GateBusy])
async def test_any_exception_inside_a_held_block_gives_the_slot_back(error: type[BaseException]) -> None:
    gate = FairGate(2, "test gate (x.slots)")
    for _ in range(3):
        with pytest.raises(error), gate.hold("ana", 1.0):
            raise error("inside")
        with pytest.raises(error):
            async with gate.hold_async("ana", 1.0):
                raise error("inside")
    _exactly_free(gate)
    # and while another waits: the slot goes on to that waiter, not back to nobody
    ben = gate.hold_async("ben", 5.0)
    with _held(gate, 1):
        with pytest.raises(error):
            async with gate.hold_async("ana", 0.0):
                waiter = asyncio.create_task(ben.__aenter__())
                await _queued_async(gate, 1)
                raise error("inside")
        await asyncio.wait_for(waiter, 5)
        assert gate.waiting() == 0
    await ben.__aexit__(None, None, None)
    _exactly_free(gate)


class _Interrupted(Exception):
    """What a signal handler raises in the main thread (as Ctrl-C's KeyboardInterrupt, or
    pytest-timeout's signal method, would)."""


def test_an_exception_raised_into_a_waiting_thread_leaves_no_ghost_waiter_and_loses_no_slot() -> None:
    assert threading.current_thread() is threading.main_thread()
    gate = FairGate(1, "test gate (x.slots)")
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with gate.hold("ana", 1.0):
            held.set()
            release.wait(5)

    def interrupt(*_: Any) -> None:
        raise _Interrupted()

    thread = threading.Thread(target=holder)
    thread.start()
    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        held.wait(5)
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with pytest.raises(_Interrupted), gate.hold("ben", 5.0):
            pytest.fail("ben must not get the slot: ana holds it")
        ghost = gate.waiting()
    finally:
        signal.signal(signal.SIGUSR1, previous)
        release.set()
        thread.join(5)
    assert ghost == 0, "the interrupted waiter is still queued"
    _exactly_free(gate)  # the slot ana gave back went to nobody


async def test_a_very_long_llm_timeout_leaves_no_ghost_waiter_and_loses_no_slot() -> None:
    try:
        cfg = LLMConfig(host="http://127.0.0.1:9", model="test", max_concurrent=1, timeout_s=1e10)
    except ValidationError:
        return  # refusing the setting is a fix too
    llm = LLM(cfg)
    caught: list[BaseException] = []

    def call() -> None:
        with _as("ben"):
            try:
                llm.chat(_msg())
            except BaseException as err:  # whatever it fails with, it must not leak
                caught.append(err)

    with _held(llm._gate, 1) as held:
        thread = threading.Thread(target=call)
        thread.start()
        await _auntil(lambda: llm._gate.waiting() == 1 or not thread.is_alive())
        await asyncio.sleep(0.1)  # a wait that works goes on waiting; one that overflows is over
        ghost = not thread.is_alive() and llm._gate.waiting() > 0
        _give(held)
    await asyncio.to_thread(thread.join, 5)
    assert caught and not thread.is_alive()
    assert not ghost, f"the call failed with {caught[0]!r} and left its waiter queued"
    _exactly_free(llm._gate)


async def test_cancelling_and_timing_out_coroutines_at_random_points_loses_no_slot() -> None:
    rng = random.Random(20261130)
    gate = FairGate(2, "test gate (x.slots)")
    holders = _Holders()
    events: list[tuple[str, int]] = []  # ("arrive" | "serve", who), in the order they happen
    owner_of: dict[int, str] = {}
    loop = asyncio.get_running_loop()

    async def one(owner: str, n: int, delay: float, timeout_s: float, hold_s: float) -> str:
        await asyncio.sleep(delay)
        events.append(("arrive", n))  # in the same step as its place in the queue
        try:
            async with gate.hold_async(owner, timeout_s):
                with holders.inside():
                    events.append(("serve", n))
                    await asyncio.sleep(hold_s)
        except GateBusy:
            return "busy"
        return "ran"

    tasks = []
    for n in range(300):
        owner = rng.choice(["ana"] * 4 + ["ben", "carl", "dora", "eve"])
        timeout_s = rng.choice([0.0, 0.001, 0.01, 0.05, 5.0, 5.0])
        owner_of[n] = owner
        task = asyncio.create_task(one(owner, n, rng.uniform(0, 0.2), timeout_s, rng.uniform(0, 0.004)))
        if rng.random() < 0.4:
            loop.call_later(rng.uniform(0, 0.25), task.cancel)
        tasks.append(task)
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)
    outcomes = {r if isinstance(r, str) else type(r).__name__ for r in results}
    assert outcomes <= {"ran", "busy", "CancelledError"}
    assert {"ran", "busy", "CancelledError"} <= outcomes  # every path was taken
    assert holders.peak <= 2
    # Each owner's waiters that waited are served in their order of arrival. (One that found a slot
    # free and nobody queued enters at once, in the same step: it may enter before a waiter granted
    # earlier whose task has not run yet.)
    at_once = {
        n for (e1, n), (e2, m) in itertools.pairwise(events) if e1 == "arrive" and (e2, m) == ("serve", n)
    }
    arrival = [n for e, n in events if e == "arrive" and n not in at_once]
    served = [n for e, n in events if e == "serve" and n not in at_once]
    for owner in set(owner_of.values()):
        mine = [n for n in served if owner_of[n] == owner]
        assert mine == [n for n in arrival if n in set(mine)]
    assert len(served) > 20
    _exactly_free(gate)


async def test_a_coroutine_wait_timing_out_at_the_moment_of_its_grant_loses_no_slot() -> None:
    rng = random.Random(7)
    gate = FairGate(1, "test gate (x.slots)")
    holders = _Holders()
    loop = asyncio.get_running_loop()
    tally = {"ran": 0, "busy": 0}

    async def one(owner: str, timeout_s: float, log: list[str]) -> str:
        try:
            async with gate.hold_async(owner, timeout_s):
                with holders.inside():
                    log.append(owner)
                    await asyncio.sleep(0)
        except GateBusy:
            return "busy"
        return "ran"

    for _ in range(150):
        log: list[str] = []
        with _held(gate, 1) as held:
            first = asyncio.create_task(one("w1", 0.004, log))
            second = asyncio.create_task(one("w2", 5.0, log))
            await _settle(2)
            assert gate.waiting() == 2
            loop.call_later(0.004 + rng.uniform(-0.0015, 0.0015), _give, held)
            got1, got2 = await asyncio.wait_for(asyncio.gather(first, second), 5)
        tally[got1] += 1
        assert got2 == "ran"  # the slot was never lost
        assert log == (["w1", "w2"] if got1 == "ran" else ["w2"])
        _exactly_free(gate)
    assert holders.peak == 1
    assert sum(tally.values()) == 150
    assert min(tally.values()) > 0  # both sides of the race were hit


def test_a_thread_wait_timing_out_at_the_moment_of_its_grant_loses_no_slot() -> None:
    rng = random.Random(11)
    gate = FairGate(1, "test gate (x.slots)")
    holders = _Holders()

    def one(owner: str, timeout_s: float, out: dict[str, str]) -> None:
        try:
            with gate.hold(owner, timeout_s), holders.inside():
                out[owner] = "ran"
        except GateBusy:
            out[owner] = "busy"

    tally = {"ran": 0, "busy": 0}
    for _ in range(80):
        out: dict[str, str] = {}
        with _held(gate, 1) as held:
            first = threading.Thread(target=one, args=("w1", 0.01, out))
            first.start()
            # w1 may time out before a poll sees it wait (a loaded machine): it is out then, not queued
            _until(lambda out=out: gate.waiting() == 1 or "w1" in out)
            queued_at = time.monotonic()
            second = threading.Thread(target=one, args=("w2", 5.0, out))
            second.start()
            # w2 waits, and w1 with it unless w1 is out (read first: once out, it never queues again)
            _until(lambda out=out: ("w1" in out and gate.waiting() == 1) or gate.waiting() == 2)
            time.sleep(max(0.0, queued_at + 0.01 + rng.uniform(-0.002, 0.002) - time.monotonic()))
            _give(held)
        first.join(5)
        second.join(5)
        assert out["w2"] == "ran" and out["w1"] in ("ran", "busy")
        tally[out["w1"]] += 1
        _exactly_free(gate)
    assert holders.peak == 1
    assert min(tally.values()) > 0  # both sides of the race were hit


# ---------------------------------------------------------------------------------------------------
# Dead event loops


async def test_a_waiter_whose_event_loop_was_closed_passes_the_slot_on() -> None:
    gate = FairGate(1, "test gate (x.slots)")
    tasks: list[asyncio.Task[None]] = []

    def dead_loop() -> None:
        """A loop that queues a coroutine at the gate, then stops and is closed under it."""
        loop = asyncio.new_event_loop()

        async def wait() -> None:
            async with gate.hold_async("dead", 30.0):
                pytest.fail("a coroutine of a closed loop ran")

        async def main() -> None:
            tasks.append(asyncio.ensure_future(wait()))
            await _auntil(lambda: gate.waiting() >= 1)

        loop.run_until_complete(main())
        loop.close()

    served: list[str] = []

    def next_one() -> None:
        with gate.hold("next", 5.0):
            served.append("next")

    with _held(gate, 1) as held:
        await asyncio.to_thread(dead_loop)
        assert gate.waiting() == 1
        thread = threading.Thread(target=next_one)
        thread.start()
        await _auntil(lambda: gate.waiting() == 2)
        _give(held)  # woken from this thread: the dead loop refuses the wake, the next one gets it
        await asyncio.to_thread(thread.join, 5)
    assert served == ["next"]
    _exactly_free(gate)

    # the only waiter, in a dead loop: the slot goes back to the free ones
    with _held(gate, 1) as held:
        await asyncio.to_thread(dead_loop)
        _give(held)
    _exactly_free(gate)
    tasks.clear()  # (the dead tasks are destroyed pending: asyncio logs it, nothing more)


async def test_asyncio_run_ending_with_a_task_still_waiting_takes_it_out_of_the_queue() -> None:
    gate = FairGate(1, "test gate (x.slots)")

    async def main() -> None:
        async def wait() -> None:
            async with gate.hold_async("gone", 30.0):
                pytest.fail("ran after its loop ended")

        task = asyncio.get_running_loop().create_task(wait())
        await _auntil(lambda: gate.waiting() >= 1)
        assert not task.done()

    with _held(gate, 1):
        await asyncio.to_thread(asyncio.run, main())  # asyncio.run cancels the waiting task
        assert gate.waiting() == 0
    _exactly_free(gate)


# ---------------------------------------------------------------------------------------------------
# Fairness


async def _model_step(state: dict[str, Any], rng: random.Random) -> None:
    gate: FairGate = state["gate"]
    model: _RoundRobin = state["model"]
    tasks: dict[int, asyncio.Task[None]] = state["tasks"]
    holding: set[int] = state["holding"]
    expected: list[int] = state["expected"]
    op = rng.choices(
        ["arrive", "release", "cancel_waiter", "cancel_holder", "driver_take", "driver_give"],
        [40, 25, 10, 5, 10, 10],
    )[0]
    if op == "arrive":
        who = len(tasks)
        owner = rng.choice(["ana"] * 5 + ["ben"] * 2 + ["carl", "dora", "eve"])
        state["owner"][who] = owner
        state["release"][who] = asyncio.Event()
        tasks[who] = asyncio.create_task(_model_worker(state, who, owner))
        await _settle()
        if model.enter(owner, who):
            expected.append(who)
    elif op == "release" and holding:
        state["release"][rng.choice(sorted(holding))].set()
        await _settle()
        granted = model.leave()
        if granted is not None:
            expected.append(granted)
    elif op == "cancel_holder" and holding:
        tasks[rng.choice(sorted(holding))].cancel()
        await _settle()
        granted = model.leave()
        if granted is not None:
            expected.append(granted)
    elif op == "cancel_waiter" and model.queued():
        who = rng.choice(model.queued())
        tasks[who].cancel()
        await _settle()
        model.abandon(state["owner"][who], who)
    elif op == "driver_take" and model.free > 0 and not model.turns:
        cm = gate.hold("driver", 0.0)
        cm.__enter__()
        state["driver"].append(cm)
        assert model.enter("driver", -1)
    elif op == "driver_give" and state["driver"]:
        _give(state["driver"])  # synchronous: the grant is made, its wake not yet run
        granted = model.leave()
        if granted is not None and rng.random() < 0.5:
            state["races"] += 1
            tasks[granted].cancel()  # cancelled in the same step as its grant: it hands the slot on
            granted = model.leave()
        await _settle()
        if granted is not None:
            expected.append(granted)


async def _model_worker(state: dict[str, Any], who: int, owner: str) -> None:
    async with state["gate"].hold_async(owner, 60.0):
        with state["holders"].inside():
            state["log"].append(who)
            state["holding"].add(who)
            try:
                await state["release"][who].wait()
            finally:
                state["holding"].discard(who)


@pytest.mark.parametrize("slots", [1, 2, 3])
async def test_grants_follow_a_round_robin_reference_under_random_arrivals_cancels_and_releases(
    slots: int,
) -> None:
    races = 0
    for seed in range(4):
        rng = random.Random(seed * 100 + slots)
        gate = FairGate(slots, "test gate (x.slots)")
        log: list[int] = []
        holders = _Holders()
        state: dict[str, Any] = {
            "gate": gate,
            "model": _RoundRobin(slots),
            "tasks": {},
            "holding": set(),
            "expected": [],
            "owner": {},
            "release": {},
            "driver": [],
            "log": log,
            "holders": holders,
            "races": 0,
        }
        for _ in range(slots):  # the driver starts with every slot: the first ones to come queue
            cm = gate.hold("driver", 0.0)
            cm.__enter__()
            state["driver"].append(cm)
            assert state["model"].enter("driver", -1)
        for _ in range(250):
            await _model_step(state, rng)
            assert log == state["expected"]
            assert gate.waiting() == state["model"].waiting()
            assert holders.peak <= slots
        # drain: every waiter not cancelled is served in the end (no starvation)
        while state["driver"]:
            _give(state["driver"])
        while state["holding"] or gate.waiting():
            for who in list(state["holding"]):
                state["release"][who].set()
            await _settle()
        cancelled = {who for who, t in state["tasks"].items() if t.cancelled()}
        assert set(state["tasks"]) - cancelled <= set(log)
        for owner in set(state["owner"].values()):  # per owner: first come, first served
            mine = [who for who in log if state["owner"][who] == owner]
            assert mine == sorted(mine)
        races += state["races"]
        _exactly_free(gate)
    assert races > 0  # waiters were cancelled in the very step their slot was granted


async def test_thousands_of_waiters_from_many_owners_are_served_in_exact_turns() -> None:
    rng = random.Random(3)
    gate = FairGate(4, "test gate (x.slots)")
    arrivals = ["flood"] * 500 + [f"o{k:03}" for k in range(150) for _ in range(1 + k * 7 % 23)]
    rng.shuffle(arrivals)
    log: list[int] = []
    holders = _Holders()

    async def one(who: int, owner: str) -> None:
        async with gate.hold_async(owner, 60.0):
            with holders.inside():
                log.append(who)
                await asyncio.sleep(0)

    model = _RoundRobin(4)
    for _ in range(4):
        model.enter("driver", -1)
    with _held(gate, 4) as held:
        tasks = [asyncio.create_task(one(who, owner)) for who, owner in enumerate(arrivals)]
        await _auntil(lambda: gate.waiting() == len(arrivals))
        for who, owner in enumerate(arrivals):
            model.enter(owner, who)
        while held:
            _give(held)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    expected = [model.leave() for _ in range(len(arrivals))]
    assert len(arrivals) > 2000
    assert log == expected
    assert holders.peak == 4
    _exactly_free(gate)


@pytest.mark.parametrize("slots", [1, 4])
async def test_a_lone_owner_is_served_within_one_turn_of_a_500_waiter_flood(slots: int) -> None:
    gate = FairGate(slots, "test gate (x.slots)")
    log: list[str] = []
    arrival: dict[str, int] = {}
    late: list[asyncio.Task[None]] = []

    async def one(owner: str, tag: str) -> None:
        arrival[tag] = len(log)  # in the same step as its place in the queue
        async with gate.hold_async(owner, 60.0):
            log.append(tag)
            if len(log) == 200:  # in the midst of the flood, another lone one comes
                late.append(asyncio.create_task(one("late", "late")))
            await asyncio.sleep(0)

    with _held(gate, slots) as held:
        flood = [asyncio.create_task(one("flood", f"f{k}")) for k in range(500)]
        await _queued_async(gate, 500)
        lone = asyncio.create_task(one("lone", "lone"))
        await _queued_async(gate, 501)
        while held:
            _give(held)
        await asyncio.wait_for(asyncio.gather(*flood, lone), 30)
        await asyncio.wait_for(late[0], 5)
    assert log.index("lone") <= 1  # after at most one of the flood's
    assert log.index("late") - arrival["late"] <= slots + 2  # about one turn, whatever was under way
    assert [t for t in log if t.startswith("f")] == [f"f{k}" for k in range(500)]
    _exactly_free(gate)


async def _queued_async(gate: FairGate, n: int) -> None:
    await _auntil(lambda: gate.waiting() == n)


async def test_thousands_of_waiters_timing_out_together_all_leave_the_queue_quickly() -> None:
    gate = FairGate(2, "what times out (x.slots)")
    owners = ["flood"] * 2000 + [f"o{k}" for k in range(100) for _ in range(10)]

    async def one(owner: str) -> None:
        async with gate.hold_async(owner, 0.3):
            pytest.fail("nobody gives a slot back")

    with _held(gate, 2):
        started = time.monotonic()
        results = await asyncio.wait_for(
            asyncio.gather(*(one(o) for o in owners), return_exceptions=True), 20
        )
        elapsed = time.monotonic() - started
        assert gate.waiting() == 0
    assert all(isinstance(r, GateBusy) for r in results)
    assert str(results[0]).startswith("what times out (x.slots)")
    assert elapsed < 5.0
    _exactly_free(gate)


def test_threads_and_coroutines_in_random_interleavings_keep_every_invariant() -> None:
    rng = random.Random(5)
    gate = FairGate(3, "test gate (x.slots)")
    holders = _Holders()
    outcomes: list[str] = []
    lock = threading.Lock()

    def record(outcome: str) -> None:
        with lock:
            outcomes.append(outcome)

    def thread_one(owner: str, delay: float, timeout_s: float, hold_s: float) -> None:
        time.sleep(delay)
        try:
            with gate.hold(owner, timeout_s), holders.inside():
                time.sleep(hold_s)
            record("ran")
        except GateBusy:
            record("busy")

    async def coro_one(owner: str, delay: float, timeout_s: float, hold_s: float) -> None:
        await asyncio.sleep(delay)
        try:
            async with gate.hold_async(owner, timeout_s):
                with holders.inside():
                    await asyncio.sleep(hold_s)
            record("ran")
        except GateBusy:
            record("busy")

    def plan() -> tuple[str, float, float, float]:
        owner = rng.choice(["ana", "ana", "ana", "ben", "carl", "dora"])
        return owner, rng.uniform(0, 0.3), rng.choice([0.002, 0.02, 10.0, 10.0]), rng.uniform(0, 0.01)

    async def coroutines() -> None:
        await asyncio.gather(*(coro_one(*plan()) for _ in range(80)))

    threads = [threading.Thread(target=thread_one, args=plan()) for _ in range(60)]
    runner = threading.Thread(target=asyncio.run, args=(coroutines(),))
    for t in [*threads, runner]:
        t.start()
    for t in [*threads, runner]:
        t.join(20)
    assert len(outcomes) == 140
    assert "ran" in outcomes and "busy" in outcomes
    assert holders.peak <= 3
    _exactly_free(gate)


# ---------------------------------------------------------------------------------------------------
# Recursive acquisition: a deadlock bounded by the timeout, never a hang


async def test_recursive_acquisition_by_the_same_owner_with_one_slot_waits_only_until_its_timeout() -> None:
    """Documented behaviour: the gate is not reentrant. An owner holding the only slot and asking
    again waits behind itself until its timeout, then GateBusy; the outer hold goes on and gives its
    slot back."""
    gate = FairGate(1, "test gate (x.slots)")
    with gate.hold("ana", 1.0):
        started = time.monotonic()
        with pytest.raises(GateBusy, match=r"^test gate \(x.slots\): no slot of 1"), gate.hold("ana", 0.2):
            pass
        assert 0.15 < time.monotonic() - started < 2.0
        assert gate.waiting() == 0
    async with gate.hold_async("ana", 1.0):
        started = time.monotonic()
        with pytest.raises(GateBusy):
            async with gate.hold_async("ana", 0.2):
                pass
        assert 0.15 < time.monotonic() - started < 2.0
    _exactly_free(gate)
    # with another owner waiting in between, the inner request queues behind ben and times out
    served: list[str] = []

    def ben() -> None:
        with gate.hold("ben", 5.0):
            served.append("ben")

    async with gate.hold_async("ana", 1.0):
        thread = threading.Thread(target=ben)
        thread.start()
        await _queued_async(gate, 1)
        with pytest.raises(GateBusy):
            async with gate.hold_async("ana", 0.1):
                pass
        assert served == []
    await asyncio.to_thread(thread.join, 5)
    assert served == ["ben"]
    _exactly_free(gate)


async def test_an_llm_call_made_while_its_owner_streams_on_the_only_slot_fails_at_its_timeout() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1, timeout_s=0.4)
        pieces: list[str] = []
        with _as("ana"):
            async with contextlib.aclosing(llm.stream_chat(_msg("outer", pieces=3))) as stream:
                async for piece in stream:
                    pieces.append(piece)
                    if len(pieces) == 1:
                        started = time.monotonic()
                        with pytest.raises(GateBusy) as refused:  # the same owner, nested: not a hang
                            await asyncio.to_thread(llm.chat, _msg("inner"))
                        assert 0.3 < time.monotonic() - started < 3.0
                        assert str(refused.value).startswith(BUSY)
                        assert isinstance(refused.value, ResourceExhausted)
        assert pieces == ["p0 ", "p1 ", "p2 "]
        assert server.arrivals == ["outer"]
    _exactly_free(llm._gate)


# ---------------------------------------------------------------------------------------------------
# The LLM: generations through the gate


async def test_the_server_never_sees_more_generations_at_once_than_max_concurrent() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=2)
        replies: list[str] = []

        def chat(owner: str, tag: str) -> None:
            with _as(owner):
                replies.append(llm.chat(_msg(tag, pieces=3, piece_s=0.02)))

        threads = [
            threading.Thread(target=chat, args=(owner, f"{owner}-t{k}"))
            for owner in ("ana", "ben", "carl")
            for k in range(2)
        ]
        for t in threads:
            t.start()
        streams = [
            _streamed(llm, owner, _msg(f"{owner}-s{k}", pieces=3, piece_s=0.02))
            for owner in ("ana", "ben", "carl")
            for k in range(3)
        ]
        replies += await asyncio.wait_for(asyncio.gather(*streams), 20)
        for t in threads:
            await asyncio.to_thread(t.join, 10)
        assert replies == ["p0 p1 p2 "] * 15
        assert server.most_active == 2
        assert len(server.arrivals) == 15
    assert _gauge() == 0.0
    _exactly_free(llm._gate)


async def test_a_stream_its_consumer_stops_gives_the_slot_back_at_once() -> None:
    long = {"pieces": 60, "piece_s": 0.02}  # over a second of pieces left when it is stopped
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1)
        with _as("ana"):
            # break inside aclosing
            async with contextlib.aclosing(llm.stream_chat(_msg("broken", **long))) as stream:
                async for _ in stream:
                    break
            _exactly_free(llm._gate)
            # aclose mid-stream (GeneratorExit at the yield)
            stream = llm.stream_chat(_msg("closed", **long))
            await anext(stream)
            await anext(stream)
            await stream.aclose()
            _exactly_free(llm._gate)
            # an exception thrown in at the yield
            stream = llm.stream_chat(_msg("thrown", **long))
            await anext(stream)
            with pytest.raises(ValueError):
                await stream.athrow(ValueError("the consumer failed"))
            _exactly_free(llm._gate)
            # a waiter gets the slot as soon as the stream is closed, not when it would have ended
            first = llm.stream_chat(_msg("first", **long))
            await anext(first)
            waiter = asyncio.create_task(_streamed(llm, "ben", _msg("waiter", pieces=1)))
            await _queued_async(llm._gate, 1)
            closed_at = time.monotonic()
            await first.aclose()
            assert await asyncio.wait_for(waiter, 5) == "p0 "
            assert time.monotonic() - closed_at < 0.5
        # the server sees each stopped generation's connection go (its next writes fail)
        await _auntil(lambda: {"broken", "closed", "thrown", "first"} <= set(server.aborted))
    _exactly_free(llm._gate)


async def test_a_stream_dropped_without_aclose_gives_the_slot_back_soon() -> None:
    """`break` out of `async for` over an unreferenced stream: the generator is finalized by
    asyncio's async-generator hook, which closes it on the next turns of the loop."""
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1)
        with _as("ana"):
            async for _ in llm.stream_chat(_msg("dropped", pieces=60, piece_s=0.02)):
                break
        took = await _auntil(lambda: llm._gate.waiting() == 0 and _free_now(llm._gate), 2.0)
        assert took < 0.5
        await _auntil(lambda: "dropped" in server.aborted)
    _exactly_free(llm._gate)


def _free_now(gate: FairGate) -> bool:
    try:
        _exactly_free(gate)
    except GateBusy:
        return False
    return True


async def test_a_stream_cancelled_at_every_await_point_gives_the_slot_back() -> None:
    """The consumer's task cancelled while the stream waits for the gate (a driver holds the slot for
    0.03 s), for the client, for the server's headers (0.05 s), for each piece, and after the end."""
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1)
        outcomes = set()
        for k, at in enumerate([0.0, 0.01, 0.025, 0.04, 0.06, 0.09, 0.12, 0.15, 0.19, 0.6]):
            tag = f"c{k}"
            given = asyncio.Event()
            with _held(llm._gate, 1) as held:

                def give(held: list[Any] = held, given: asyncio.Event = given) -> None:
                    _give(held)
                    given.set()

                asyncio.get_running_loop().call_later(0.03, give)
                task = asyncio.create_task(
                    _streamed(llm, "ana", _msg(tag, head_s=0.05, pieces=4, piece_s=0.03))
                )
                await asyncio.sleep(at)
                task.cancel()
                try:
                    outcomes.add(await task)
                except asyncio.CancelledError:
                    outcomes.add("cancelled")
                await given.wait()
                _exactly_free(llm._gate)  # at once: no wait for a finalizer
        assert outcomes == {"cancelled", "p0 p1 p2 p3 "}
        assert "c0" not in server.arrivals and "c9" in server.arrivals
    assert _gauge() == 0.0


async def test_a_stream_whose_connection_breaks_fails_or_is_cut_gives_the_slot_back() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1, timeout_s=0.3)
        with pytest.raises(Exception) as dropped:  # the server cuts the connection mid-stream
            await _streamed(llm, "ana", _msg("drop", pieces=5, drop_after=2))
        assert not isinstance(dropped.value, GateBusy)
        _exactly_free(llm._gate)
        with pytest.raises(Exception, match="scripted failure"):  # an HTTP 500 before any piece
            await _streamed(llm, "ana", _msg("fail", status=500))
        _exactly_free(llm._gate)
        with _as("ana"):
            pieces = []
            with pytest.raises(GenerationCut) as cut:  # llm.timeout_s in all, though each piece is in time
                async for piece in llm.stream_chat(_msg("slow", pieces=20, piece_s=0.05)):
                    pieces.append(piece)
        assert cut.value.limit == TIMEOUT and 0 < len(pieces) < 20
        _exactly_free(llm._gate)
    # no server at all: refused at the connection
    llm = _llm(None, max_concurrent=1)
    for _ in range(3):
        with pytest.raises(Exception, match=r"(?i)connect") as refused:
            await _streamed(llm, "ana", _msg())
        assert not isinstance(refused.value, GateBusy)
    _exactly_free(llm._gate)


async def test_chat_and_chat_json_failures_give_the_slot_back() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=2)
        for _ in range(3):
            with pytest.raises(Exception, match="scripted failure"):
                await asyncio.to_thread(llm.chat, _msg("500", status=500))
            with pytest.raises(Exception, match="scripted failure"):
                await asyncio.to_thread(llm.chat_json, _msg("500j", status=500), {"type": "object"})
        _exactly_free(llm._gate)
        assert await asyncio.to_thread(llm.chat_json, _msg("ok", text='{"a": 1}'), {"type": "object"}) == (
            '{"a": 1}'
        )
    llm = _llm(None, max_concurrent=1)  # refused
    for _ in range(3):
        with pytest.raises(ConnectionError):
            await asyncio.to_thread(llm.chat, _msg())
    _exactly_free(llm._gate)


async def test_a_lone_caller_is_served_within_one_turn_of_another_callers_flood_through_the_llm() -> None:
    """500 streams of one principal wait; another principal's one call comes last; it reaches the
    server second, after one of the flood's."""
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1)
        with _held(llm._gate, 1) as held:
            flood = [
                asyncio.create_task(_streamed(llm, "flood", _msg(f"f{k}", pieces=1))) for k in range(500)
            ]
            await _queued_async(llm._gate, 500)
            lone: list[str] = []

            def call() -> None:
                with _as("lone"):
                    lone.append(llm.chat(_msg("lone", pieces=1)))

            thread = threading.Thread(target=call)
            thread.start()
            await _queued_async(llm._gate, 501)
            assert _gauge() == 501.0
            _give(held)
            await asyncio.to_thread(thread.join, 5)
            assert lone == ["p0 "]
            for task in flood:
                task.cancel()
            await asyncio.gather(*flood, return_exceptions=True)
        assert server.arrivals[:2] == ["f0", "lone"]
        assert server.most_active == 1
    assert _gauge() == 0.0
    _exactly_free(llm._gate)


async def test_threads_their_callers_abandoned_leave_the_queue_when_their_callers_gave_up() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1, timeout_s=30.0)

        async def caller(owner: str) -> None:
            with _as(owner), waited_for_at_most(0.3):
                await asyncio.wait_for(asyncio.to_thread(llm.chat, _msg(owner)), 0.3)

        with _held(llm._gate, 1) as held:
            started = time.monotonic()
            results = await asyncio.gather(
                *(caller(o) for o in ("ana", "ben", "carl", "dora")), return_exceptions=True
            )
            # the caller's wait_for, or the gate's refusal at the same deadline, whichever is first
            assert all(isinstance(r, (TimeoutError, GateBusy)) for r in results), results
            await _auntil(lambda: llm._gate.waiting() == 0, 2.0)
            assert time.monotonic() - started < 0.6  # then, not after llm.timeout_s (30 s)
            assert _gauge() == 0.0
            _give(held)
        await asyncio.sleep(0.1)
        assert server.arrivals == []  # none of them took the slot once it was free
    _exactly_free(llm._gate)


class _Answer(BaseModel):
    a: int


async def test_a_call_made_after_its_caller_gave_up_takes_no_slot() -> None:
    with FakeOllama().serve() as server:
        llm = _llm(server, max_concurrent=1, timeout_s=30.0)
        # the first answer is slow and invalid, so ask_validated asks again, after the caller left
        messages = _msg("ask", text="not json", piece_s=0.4, pieces=1)

        def ask() -> _Answer | None:
            return ask_validated(llm, _Answer, "system", messages[0]["content"])

        with _as("ana"), waited_for_at_most(0.2), pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.to_thread(ask), 0.2)
        await asyncio.sleep(1.0)  # the first generation ends at 0.4 s; a retry would be done by now
        assert server.arrivals == ["ask"], "a second generation ran for a caller gone for 0.2 s"
    _exactly_free(llm._gate)


async def test_the_waiting_gauge_counts_the_waiters_and_returns_to_zero() -> None:
    llm = _llm(None, max_concurrent=1, timeout_s=0.5)
    assert _gauge() == 0.0  # the gauge shows the last LLM made
    with _held(llm._gate, 1):
        streams = [asyncio.create_task(_streamed(llm, f"s{k % 2}", _msg())) for k in range(5)]

        def chat(owner: str) -> None:
            with _as(owner), contextlib.suppress(GateBusy):
                llm.chat(_msg())

        threads = [threading.Thread(target=chat, args=(f"t{k}",)) for k in range(2)]
        for t in threads:
            t.start()
        await _queued_async(llm._gate, 7)
        assert _gauge() == 7.0
        for task in streams[:3]:
            task.cancel()
        await _auntil(lambda: _gauge() == 4.0, 1.0)
        results = await asyncio.gather(*streams, return_exceptions=True)
        for t in threads:
            await asyncio.to_thread(t.join, 5)
        assert [type(r) for r in results[3:]] == [GateBusy, GateBusy]
        assert _gauge() == 0.0
    _exactly_free(llm._gate)
