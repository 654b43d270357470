"""The ingest servicer reads the pipeline's events on one worker thread, in bursts: every item
arrives in order, an error reaches the reader, and a reader that leaves closes the pipeline on its
own thread before the call returns, its run's cancel set (so the batch being written finishes, and
nothing runs on)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from services.ingest.servicer import _READ_AHEAD, _read_ahead


async def test_every_item_in_order() -> None:
    items = [i async for i in _read_ahead(iter_range(3 * _READ_AHEAD), threading.Event())]
    assert items == list(range(3 * _READ_AHEAD))


async def test_an_error_reaches_the_reader_after_the_items_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("corrupt batch")

    seen: list[int] = []
    with pytest.raises(ValueError, match="corrupt batch"):
        async for i in _read_ahead(failing(), threading.Event()):
            seen.append(i)
    assert seen == [1]


async def test_a_reader_that_leaves_closes_the_generator_on_its_thread() -> None:
    produced: list[int] = []
    closed_on: list[str] = []

    def pipeline() -> Iterator[int]:
        try:
            for i in range(100 * _READ_AHEAD):
                produced.append(i)
                yield i
        finally:
            closed_on.append(threading.current_thread().name)

    cancelled = threading.Event()
    reader = _read_ahead(pipeline(), cancelled)
    assert [await anext(reader) for _ in range(3)] == [0, 1, 2]
    await reader.aclose()
    assert cancelled.is_set()  # what the run's parsing, embedding and extraction watch
    assert closed_on and closed_on[0] != threading.main_thread().name
    assert len(produced) <= 2 * _READ_AHEAD + 2  # it waited for the reader, then stopped


def iter_range(n: int) -> Iterator[int]:
    yield from range(n)
