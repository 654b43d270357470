"""The parsers that can run away (PDF, Office documents, HTML, images: Docling, pdfium, OCR) run in
a small pool of worker processes (`ingest.parse_workers`), each with an address-space limit
(`ingest.parse_memory_mb`) and a deadline (`ingest.parse_timeout_s`). A parser past either is killed
and reported as that file's failure, never the service's; a fresh worker takes the next file. A
worker that has grown large after a file exits, so its memory goes back to the operating system.
Text formats are parsed in the service itself: their readers are linear and bounded by
`ingest.max_chars`.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import queue
import resource
import threading
import time
from multiprocessing.connection import Connection
from pathlib import PurePath
from typing import Any

from ragstack import extras
from ragstack.errors import Cancelled, RagstackError, UnsupportedFormat
from services.ingest import readers
from services.ingest.budgets import Budgets, OverBudget

log = logging.getLogger(__name__)

HEAVY = set(readers.DOCLING) | set(readers.IMAGES) | {".pdf"}
_START_TIMEOUT_S = 120.0  # a worker's interpreter and parsers loading (not the file's time)
_RECYCLE_RSS_MB = 1024  # a worker this large after a file exits and is replaced
_POLL_S = 0.05  # how soon a parse, or a wait for a worker, sees its run stopped
CANCELLED = "the parse was stopped: its ingest was cancelled or the service is stopping"


def is_heavy(name: str, kind: str) -> bool:
    return kind == "html" or (kind != "beir" and PurePath(name).suffix.lower() in HEAVY)


class ParseWorker:
    """One worker process, started when first needed; `parse` blocks its caller (the pipeline's
    parsing thread) and serves one file at a time."""

    def __init__(self, budgets: Budgets) -> None:
        self._budgets = budgets
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Connection | None = None
        self._stopping = False  # the process is being killed on purpose (close)
        self._closed = False

    def parse(
        self, name: str, data: bytes, kind: str = "", stop: threading.Event | None = None
    ) -> readers.Parsed:
        """Once `stop` is set (its ingest was cancelled), the parse fails with Cancelled within
        _POLL_S, its process killed if it was parsing or starting (a fresh one takes the next file)."""
        with self._lock:
            return self._parse(name, data, kind, stop or threading.Event())

    def _parse(self, name: str, data: bytes, kind: str, stop: threading.Event) -> readers.Parsed:
        if stop.is_set() or self._closed:  # no process started for a run already stopped
            raise Cancelled(CANCELLED)
        conn = self._ready(stop)
        if stop.is_set():
            raise Cancelled(CANCELLED)
        timeout = self._budgets.parse_timeout_s
        try:
            conn.send((name, data, kind))
            answered = self._answered(conn, timeout, stop)
        except (EOFError, OSError):
            raise self._died() from None
        if not answered:
            self._stop()
            raise OverBudget(
                f"parsing took more than {timeout:g} s, over ingest.parse_timeout_s ({timeout:g})"
            )
        try:
            status, payload = conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        if status == "exit":  # it answered, then left to give its memory back
            self._stop()
            status, payload = payload
        if status == "ok":
            assert isinstance(payload, readers.Parsed)
            return payload
        assert isinstance(payload, Exception)
        raise payload

    def _answered(self, conn: Connection, seconds: float, stop: threading.Event) -> bool:
        """Whether the process says something within `seconds`; once `stop` is set (or the worker
        closed), it is killed and the parse is Cancelled."""
        deadline = time.monotonic() + seconds
        while not conn.poll(_POLL_S):
            if stop.is_set() or self._closed:
                self._stop()
                raise Cancelled(CANCELLED)
            if time.monotonic() >= deadline:
                return False
        return True

    def close(self) -> None:
        """Stops the worker; a parse in flight fails at once, and any later one (the service is
        stopping)."""
        self._closed = True
        process = self._process
        if process is not None and process.is_alive():
            self._stopping = True
            process.kill()  # without the lock, which a parse in flight holds: it sees the end and fails
        with self._lock:
            self._stop()

    def _ready(self, stop: threading.Event) -> Connection:
        if self._process is not None and self._process.is_alive() and self._conn is not None:
            return self._conn
        self._stop()
        context = multiprocessing.get_context("spawn")  # a clean interpreter: no threads forked
        parent, child = context.Pipe()
        process = context.Process(
            target=_serve, args=(child, self._budgets), name="ragstack-parse", daemon=True
        )
        process.start()
        child.close()
        self._process, self._conn = process, parent  # so that close() can stop it while it starts
        try:
            ready = self._answered(parent, _START_TIMEOUT_S, stop) and parent.recv() == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            stopping = self._stopping
            self._stop()
            if stopping:
                raise Cancelled(CANCELLED)
            raise UnsupportedFormat("the parser process did not start; see the service log")
        return parent

    def _died(self) -> RagstackError:
        process, stopping = self._process, self._stopping
        self._stop()
        if stopping:
            return Cancelled(CANCELLED)
        code = process.exitcode if process is not None else None
        log.warning("the parser process ended with exit code %s", code)
        return OverBudget(
            f"the parser stopped (exit code {code}): most likely past ingest.parse_memory_mb "
            f"({self._budgets.parse_memory_mb})"
        )

    def _stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(timeout=10)
        self._process, self._conn = None, None
        self._stopping = False


def _serve(conn: Connection, budgets: Budgets) -> None:
    """The worker's loop: (name, data, kind) in; ("ok", Parsed) or ("error", exception) out, or
    ("exit", answer) when it leaves after answering."""
    limit = budgets.parse_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _few_malloc_arenas()
    _preload()
    conn.send("ready")
    while True:
        try:
            name, data, kind = conn.recv()
        except (EOFError, OSError):
            return
        leave = False
        try:
            answer: tuple[str, Any] = ("ok", readers.parse(name, data, kind, budgets))
        except Exception as err:
            # Refused allocations surface as MemoryError, wrapped in a parser's own errors, or as
            # odder failures from C code: any failure with the address space near its limit counts
            # (and finding that out may itself find no memory left).
            try:
                exhausted = _out_of_memory(err) or _peak_address_space() >= 0.9 * limit
            except MemoryError:
                exhausted = True
            if exhausted:
                leave = True
                message = f"parsing needed more than ingest.parse_memory_mb ({budgets.parse_memory_mb})"
                answer = ("error", OverBudget(message))
            elif isinstance(err, RagstackError):
                answer = ("error", err)
            else:  # a parser's own bug fails the file, with its type and message
                answer = ("error", UnsupportedFormat(f"{type(err).__name__}: {err}"[:500]))
        del data
        leave = leave or _rss_mb() > _RECYCLE_RSS_MB
        try:
            conn.send(("exit", answer) if leave else answer)
        except Exception:  # an answer that cannot be sent (unpicklable): the file fails
            conn.send(("error", UnsupportedFormat("the parser's answer could not be returned")))
        if leave:
            return


def _out_of_memory(err: BaseException) -> bool:
    seen: set[int] = set()
    found: BaseException | None = err
    while found is not None and id(found) not in seen:
        if isinstance(found, MemoryError):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


def _preload() -> None:
    """Docling's converters loaded before the first file, so a file's deadline is its own time
    (without the docling extra, each file it would read fails naming the extra)."""
    if not extras.installed("docling"):
        return
    from services.ingest import docling_reader, pdf_reader

    docling_reader._converter()
    pdf_reader._converter()


def _few_malloc_arenas() -> None:
    """glibc gives each thread a 64 MB arena of address space: with the parsers' threads that alone
    can reach the limit, so at most two (as MALLOC_ARENA_MAX=2 would, had it been set at start)."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-8, 2)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def _rss_mb() -> float:
    return _status_kb("VmRSS") / 1024


def _peak_address_space() -> int:
    return _status_kb("VmPeak") * 1024


def _status_kb(field: str) -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class ParsePool:
    """A few workers (`ingest.parse_workers`), each started when first needed: parses of runs going
    on side by side do not wait for each other, up to the pool's size."""

    def __init__(self, budgets: Budgets, size: int) -> None:
        self._workers = [ParseWorker(budgets) for _ in range(size)]
        self._idle: queue.SimpleQueue[ParseWorker] = queue.SimpleQueue()
        for worker in self._workers:
            self._idle.put(worker)

    def parse(
        self, name: str, data: bytes, kind: str = "", stop: threading.Event | None = None
    ) -> readers.Parsed:
        """As ParseWorker.parse; a parse waiting for a worker is Cancelled too once `stop` is set."""
        worker = self._take(stop)
        try:
            return worker.parse(name, data, kind, stop)
        finally:
            self._idle.put(worker)

    def _take(self, stop: threading.Event | None) -> ParseWorker:
        while True:
            try:
                return self._idle.get(timeout=None if stop is None else _POLL_S)
            except queue.Empty:
                if stop is not None and stop.is_set():
                    raise Cancelled(CANCELLED) from None

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
