"""The ingester's clock: polls the sources that are due, a few at a time, and queues a sync job for
each that changed; folders are also watched, so a change makes their source due at once.

A poll is a scan and a comparison (`SourceSync.look`): it writes no document. A source with a job
still queued or running is not polled again until the job ends. A failed poll counts against the
source's circuit breaker (services/ingest/syncing/state.py); a poll whose source is paused or removed
meanwhile stops at its next request or item, and counts for nothing. The breaker's state, the polls
and the items waiting are exported as Prometheus metrics, beside the RPC metrics."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client import Counter, Gauge

from ragstack import auth, convert
from ragstack.errors import NotFound
from services.ingest.jobs import JobStore
from services.ingest.syncing.backends import ScanStopped
from services.ingest.syncing.state import HALF_OPEN, OPEN, SourceState, SourceStore
from services.ingest.syncing.sync import SourceSync

log = logging.getLogger(__name__)

BREAKER = Gauge(
    "ragstack_source_breaker_state", "A source's circuit breaker: 0 closed, 1 half-open, 2 open.", ["source"]
)
POLLS = Counter(
    "ragstack_source_polls_total",
    "Polls of a source by outcome: changed, unchanged, failed or stopped (paused or removed meanwhile).",
    ["source", "outcome"],
)
DEAD_LETTERS = Gauge(
    "ragstack_source_dead_letters", "Items of a source that failed every attempt.", ["source"]
)
RETRYING = Gauge("ragstack_source_retrying", "Items of a source waiting for a retry.", ["source"])
_BREAKER_VALUE = {OPEN: 2, HALF_OPEN: 1}


def publish(store: SourceStore, state: SourceState) -> None:
    """The source's gauges, as the store has them now."""
    name = state.spec.name
    failures = store.failures(name).values()
    BREAKER.labels(name).set(_BREAKER_VALUE.get(state.breaker, 0))
    DEAD_LETTERS.labels(name).set(sum(1 for f in failures if f.dead))
    RETRYING.labels(name).set(sum(1 for f in failures if not f.dead))


class SourcePoller:
    def __init__(
        self,
        store: SourceStore,
        sync: SourceSync,
        jobs: JobStore,
        wake_worker: Callable[[], None],
        tick_s: float = 1.0,
        watch: bool = True,
        parallel: int = 8,
        leads: Callable[[], bool] = lambda: True,
    ) -> None:
        """`leads`: whether this process is the one that polls among the ingest workers sharing
        the state (asked every tick; another takes over when the leader dies)."""
        self._store = store
        self._sync = sync
        self._jobs = jobs
        self._wake_worker = wake_worker
        self._tick_s = tick_s
        self._watch = watch
        self._slots = asyncio.Semaphore(parallel)
        # Polls wait on the network: threads of their own, not the loop's default ones, which the
        # service's calls need.
        self._threads = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="source-poll")
        self._in_flight: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._watcher: FolderWatch | None = None
        self._leads = leads

    def wake(self) -> None:
        """Look for due sources now (after AddSource, RetrySource, a watched change)."""
        self._wake.set()

    async def run(self) -> None:
        """Polls for as long as the service runs."""
        loop = asyncio.get_running_loop()
        if self._watch:

            def changed(names: set[str]) -> None:
                loop.call_soon_threadsafe(self._changed, names)

            self._watcher = FolderWatch(changed)
        try:
            while True:
                self._wake.clear()
                if not await asyncio.to_thread(self._leads):
                    await asyncio.sleep(self._tick_s)
                    continue
                states = await asyncio.to_thread(self._store.list)
                if self._watcher is not None:
                    self._watcher.follow(
                        {
                            s.spec.name: Path(s.spec.url)
                            for s in states
                            if s.spec.kind == "folder" and not s.paused
                        }
                    )
                due = await asyncio.to_thread(self._store.due)
                # Each poll is a task of its own: a slow source holds its own slot, not the clock.
                for state in due:
                    self._start(state)
                try:
                    await asyncio.wait_for(self._wake.wait(), self._tick_s)
                except TimeoutError:
                    pass
        finally:
            for task in list(self._in_flight.values()):
                task.cancel()
            self._threads.shutdown(wait=False, cancel_futures=True)
            if self._watcher is not None:
                self._watcher.close()

    def _start(self, state: SourceState) -> None:
        name = state.spec.name
        if name in self._in_flight:
            return
        task = asyncio.create_task(self._poll(state), name=f"poll-{name}")
        self._in_flight[name] = task
        task.add_done_callback(functools.partial(self._ended, name))

    def _ended(self, name: str, _: object) -> None:
        self._in_flight.pop(name, None)

    def _changed(self, names: set[str]) -> None:
        for name in names:
            self._store.poll_now(name)
        self._wake.set()

    async def _poll(self, state: SourceState) -> None:
        name = state.spec.name
        if self._jobs.active(name) is not None:
            return  # its job runs from a scan of its own; the source is polled again after
        async with self._slots:
            await asyncio.get_running_loop().run_in_executor(self._threads, self.poll, name)

    def poll(self, name: str) -> str:
        """One poll: scan, compare, queue a job when there is work. Returns the job id ("" when
        nothing changed). A failure is recorded (the breaker counts it), never raised."""
        self._store.polling(name)
        try:
            scan = self._sync.look(name)
        except ScanStopped as stopped:
            log.info("%s", stopped)
            return self._stopped(name)
        except Exception as err:  # the source is down, refused, misconfigured: its breaker counts it
            log.warning("polling source %s failed: %s", name, err)
            self._store.poll_failed(name, str(err) or type(err).__name__)
            POLLS.labels(name, "failed").inc()
            self._publish(name)
            return ""
        job_id = ""
        if scan.work:
            job = self._jobs.submit(
                scan.library,
                convert.source_job_request(name),
                poll_principal(name),
                auth.LOCAL.to_header(),
                source=name,
            )
            # A pause or removal since the scan's last look: PauseSource may have looked for this
            # job before it was queued, and whichever of the two looks second sees the other.
            try:
                self._sync.confirm(name)
            except ScanStopped as stopped:
                log.info("%s", stopped)
                self._jobs.cancel(job.job_id)
                return self._stopped(name)
            job_id = job.job_id
            self._wake_worker()
        POLLS.labels(name, "changed" if job_id else "unchanged").inc()
        self._store.poll_succeeded(name, job_id)
        self._publish(name)
        return job_id

    def _stopped(self, name: str) -> str:
        """A poll whose source was paused or removed meanwhile: counted, no failure, no job."""
        POLLS.labels(name, "stopped").inc()
        self._publish(name)
        return ""

    def _publish(self, name: str) -> None:
        try:
            publish(self._store, self._store.get(name))
        except NotFound:  # removed meanwhile
            forget(name)


def poll_principal(name: str) -> str:
    """Who the sync jobs a poll queues are submitted as: pausing the source cancels them."""
    return f"source:{name}"


def forget(name: str) -> None:
    """A removed source's gauges."""
    for gauge in (BREAKER, DEAD_LETTERS, RETRYING):
        with contextlib.suppress(KeyError):
            gauge.remove(name)


class FolderWatch:
    """Watches the folder sources' folders (inotify through watchfiles) on a thread of its own;
    a change calls `on_change` with the names of the sources whose folder it is in. Best effort:
    a folder that cannot be watched is still polled on its schedule."""

    def __init__(self, on_change: Callable[[set[str]], None]) -> None:
        self._on_change = on_change
        self._folders: dict[str, Path] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, folders: dict[str, Path]) -> None:
        """Watches these folders (name -> folder); restarts the watch when the set changed."""
        folders = {n: p for n, p in folders.items() if p.is_dir()}
        if folders == self._folders:
            return
        self.close()
        self._folders = folders
        if not folders:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(dict(folders), self._stop), name="source-watch", daemon=True
        )
        self._thread.start()

    def _watch(self, folders: dict[str, Path], stop: threading.Event) -> None:
        import watchfiles

        roots = {name: folder.resolve() for name, folder in folders.items()}
        try:
            for changes in watchfiles.watch(
                *set(roots.values()), stop_event=stop, debounce=200, step=50, raise_interrupt=False
            ):
                touched = {
                    name
                    for _, path in changes
                    for name, root in roots.items()
                    if Path(path).is_relative_to(root)
                }
                if touched:
                    self._on_change(touched)
        except Exception:  # inotify limits, a folder removed: polling goes on
            log.exception("watching the source folders failed; they are polled on their schedule")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._folders = {}
