"""The parser processes: a parse beside a stuck one is not held up, a run's stop (its `cancelled`
event) stops its own parse only, also while it waits for a worker or for the worker to start, and a
killed worker is replaced for the next file."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from ragstack.bench import hostile_files as files
from ragstack.errors import Cancelled
from services.ingest import parse_worker
from services.ingest.budgets import Budgets, OverBudget
from services.ingest.parse_worker import ParsePool, ParseWorker

PAGE = b"<html><head><title>Okapi</title></head><body><main><h1>Okapi</h1><p>A giraffid.</p></main></html>"


def start_stuck_parse(parse: Callable[..., Any], stop: threading.Event) -> tuple[threading.Thread, list[str]]:
    """A parse of a file Docling gets stuck on, stopped by `stop`, in a thread of its own; the list
    gets the Cancelled error it ends with when it is stopped."""
    errors: list[str] = []

    def runaway() -> None:
        try:
            parse("empty.docx", files.docx(1_000_000), stop=stop)
        except Cancelled as err:
            errors.append(str(err))

    thread = threading.Thread(target=runaway)
    thread.start()
    return thread, errors


def test_a_parse_beside_a_stuck_one_goes_on_and_its_run_stop_stops_only_its_own() -> None:
    # The stuck parse is stopped below, long before its deadline: a parse that waited for it would
    # wait past the test's timeout. The other worker's start (loading Docling) takes seconds, and
    # on a loaded machine most of a minute (47 s was seen).
    pool = ParsePool(Budgets(parse_timeout_s=600, parse_memory_mb=2048), size=2)
    stuck = threading.Event()
    thread, errors = start_stuck_parse(pool.parse, stuck)
    try:
        time.sleep(1)
        start = time.monotonic()
        parsed = pool.parse("page.html", PAGE, stop=threading.Event())  # the other worker
        assert "giraffid" in parsed.markdown and time.monotonic() - start < 150
        assert thread.is_alive() and not errors  # the first is still stuck in Docling
        stuck.set()
        thread.join(timeout=10)
        assert not thread.is_alive() and "its ingest was cancelled" in errors[0]
        assert "Okapi" in pool.parse("again.html", PAGE).title  # a fresh worker for the next
    finally:
        pool.close()
        thread.join(timeout=10)


def test_a_parse_waiting_for_a_worker_stops_with_its_run() -> None:
    """One worker, held by another run's stuck parse: a run cancelled while it waits for the worker
    leaves at once, not when the stuck parse ends; the stuck one goes on until the pool closes."""
    pool = ParsePool(Budgets(parse_timeout_s=60, parse_memory_mb=2048), size=1)
    stuck, waiting = threading.Event(), threading.Event()
    thread, errors = start_stuck_parse(pool.parse, stuck)
    deadline = time.monotonic() + 10
    while not pool._idle.empty() and time.monotonic() < deadline:  # the first has the worker
        time.sleep(0.01)
    other, other_errors = start_stuck_parse(pool.parse, waiting)
    try:
        time.sleep(1)
        waiting.set()
        other.join(timeout=10)
        assert not other.is_alive() and "its ingest was cancelled" in other_errors[0]
        assert thread.is_alive() and not errors
        pool.close()  # the service stopping: the stuck parse fails, and any parse after it
        thread.join(timeout=10)
        assert not thread.is_alive() and errors
        with pytest.raises(Cancelled):
            pool.parse("page.html", PAGE)
    finally:
        stuck.set()
        pool.close()
        thread.join(timeout=10)
        other.join(timeout=10)


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
    """The process still loading its parsers is stopped with the run (not the 60 s the stuck file
    would take once sent), and the next parse starts a fresh one."""
    worker = ParseWorker(Budgets(parse_timeout_s=60, parse_memory_mb=2048))
    monkeypatch.setattr(parse_worker, "_serve", slow_start)
    stop = threading.Event()
    thread, errors = start_stuck_parse(worker.parse, stop)
    try:
        time.sleep(1)
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive() and "its ingest was cancelled" in errors[0]
        monkeypatch.undo()
        assert "giraffid" in worker.parse("page.html", PAGE).markdown
    finally:
        worker.close()
        thread.join(timeout=10)


def slow_start(conn: Any, budgets: Budgets) -> None:
    """The worker process's loop after 30 s of loading (it runs in the spawned process, which
    imports it from here)."""
    time.sleep(30)
    parse_worker._serve(conn, budgets)
