"""The parser processes: a parse beside a stuck one is not held up, cancelling a run stops its own
parse only, and a killed worker is replaced for the next file."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ragstack.bench import hostile_files as files
from ragstack.errors import Cancelled
from services.ingest.budgets import Budgets, OverBudget
from services.ingest.parse_worker import ParsePool, ParseWorker

PAGE = b"<html><head><title>Okapi</title></head><body><main><h1>Okapi</h1><p>A giraffid.</p></main></html>"


def start_stuck_parse(parse: Callable[..., Any], owner: object) -> tuple[threading.Thread, list[str]]:
    """`owner`'s parse of a file Docling gets stuck on, in a thread of its own; the list gets the
    Cancelled error it ends with when it is stopped."""
    errors: list[str] = []

    def runaway() -> None:
        try:
            parse("empty.docx", files.docx(1_000_000), owner=owner)
        except Cancelled as err:
            errors.append(str(err))

    thread = threading.Thread(target=runaway)
    thread.start()
    return thread, errors


def test_a_parse_beside_a_stuck_one_goes_on_and_cancel_stops_its_own() -> None:
    pool = ParsePool(Budgets(parse_timeout_s=60, parse_memory_mb=2048), size=2)
    stuck = object()
    thread, errors = start_stuck_parse(pool.parse, stuck)
    try:
        time.sleep(1)
        start = time.monotonic()
        parsed = pool.parse("page.html", PAGE, owner=object())  # the other worker: its own start, then this
        assert "giraffid" in parsed.markdown and time.monotonic() - start < 30
        assert thread.is_alive()  # the first is still stuck in Docling
        pool.cancel(object())  # nobody's parse: nothing stops
        assert thread.is_alive()
        pool.cancel(stuck)
        thread.join(timeout=10)
        assert not thread.is_alive() and "its ingest was cancelled" in errors[0]
        assert "Okapi" in pool.parse("again.html", PAGE).title  # a fresh worker for the next
    finally:
        pool.close()
        thread.join(timeout=10)


def test_a_worker_past_its_deadline_is_killed_and_replaced() -> None:
    pool = ParsePool(Budgets(parse_timeout_s=3, parse_memory_mb=2048), size=1)
    try:
        with pytest.raises(OverBudget, match=r"over ingest.parse_timeout_s \(3\)"):
            pool.parse("empty.docx", files.docx(1_000_000))
        assert "giraffid" in pool.parse("page.html", PAGE).markdown
    finally:
        pool.close()


def test_a_cancel_while_the_worker_starts_stops_the_parse_before_its_file_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = ParseWorker(Budgets(parse_timeout_s=60, parse_memory_mb=2048))
    starting, cancelled = threading.Event(), threading.Event()
    start = ParseWorker._ready

    def held_start(self: ParseWorker) -> Any:  # the process starts only once the cancel is in
        starting.set()
        cancelled.wait(10)
        return start(self)

    monkeypatch.setattr(ParseWorker, "_ready", held_start)
    stuck = object()
    thread, errors = start_stuck_parse(worker.parse, stuck)
    try:
        assert starting.wait(10)
        worker.cancel(stuck)  # no process to kill yet
        cancelled.set()
        thread.join(timeout=30)  # not the 60 s the stuck file would take
        assert not thread.is_alive() and "its ingest was cancelled" in errors[0]
        monkeypatch.undo()
        assert "giraffid" in worker.parse("page.html", PAGE).markdown  # the started process serves on
    finally:
        worker.close()
        thread.join(timeout=10)
