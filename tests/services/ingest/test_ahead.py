"""The parse-ahead worker: order, errors in place, a bounded lead, and a clean stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from services.ingest.ahead import Ahead


def test_results_in_order_with_errors_in_place() -> None:
    def work(i: int) -> int:
        if i == 3:
            raise ValueError("three")
        time.sleep(0.001 * (i % 3))  # uneven work, same order
        return i * i

    with Ahead(range(8), work, lambda _: 1, 2, "test") as ahead:
        got = list(ahead)
    assert [i for i, _ in got] == list(range(8))
    assert [r for i, r in got if i != 3] == [i * i for i in range(8) if i != 3]
    assert isinstance(got[3][1], ValueError) and str(got[3][1]) == "three"


def test_the_worker_stays_a_bounded_weight_ahead() -> None:
    started: list[int] = []
    with Ahead(range(50), lambda i: started.append(i) or i, lambda _: 2, 6, "test") as ahead:
        for taken, (i, _) in enumerate(ahead, start=1):
            time.sleep(0.002)  # a slow reader
            # Results not taken weigh under 6 before the next is started: 3 at most, plus one in hand.
            assert len(started) - taken <= 3 + 1, (i, len(started))


def test_closing_stops_the_worker() -> None:
    started: list[int] = []
    ahead = Ahead(range(10_000), lambda i: started.append(i) or i, lambda _: 1, 4, "test")
    taken = [next(iter(ahead)) for _ in range(2)]
    ahead.close()
    assert [i for i, _ in taken] == [0, 1]
    assert len(started) <= 2 + 4 + 1
    assert not any(t.name == "test" for t in threading.enumerate())


class Stop(BaseException):
    pass


def test_a_failing_source_reaches_the_reader() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise Stop

    with Ahead(items(), lambda i: i, lambda _: 1, 4, "test") as ahead:
        reader = iter(ahead)
        assert next(reader) == (1, 1)
        with pytest.raises(Stop):
            next(reader)
