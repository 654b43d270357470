"""The ingest job queue shared by several workers, on SQLite and PostgreSQL: each JobStore has its
own connection, as each worker process would. A job is claimed by one worker, one worker writes a
library at a time, a dead worker's job is taken again once its lease runs out, failures are retried
with backoff and then dead-lettered."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest

from ragstack.config import StateConfig
from ragstack.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from ragstack.state.db import StateDB
from ragstack.state.migrations import MigrationRequired, version
from services.ingest import jobs
from services.ingest.jobs import CANCELLED, DEAD, DONE, FAILED, QUEUED, RUNNING, JobStore, retryable
from tests.tools import state as state_tools


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


OPENED: list[StateDB] = []  # the workers' connections, closed at each test's end


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    """A test stopped by a failed assertion leaves no connection open: psycopg's warning of an
    unclosed one would fail whichever test runs when it is collected."""
    yield
    while OPENED:
        OPENED.pop().close()  # a second close does nothing


def worker(cfg: StateConfig, tmp: Path, clock: Clock | None = None, **options: object) -> JobStore:
    """A worker's queue: its own connection to the state, as another process would have."""
    db = state_tools.store(cfg, tmp, jobs)
    OPENED.append(db)
    return JobStore(db, now=clock or (lambda: datetime.now(UTC)), **options)  # type: ignore[arg-type]


def test_workers_never_claim_the_same_job_and_never_write_one_library_at_once(
    state_config: StateConfig, tmp_path: Path
) -> None:
    first = worker(state_config, tmp_path)
    total = 48
    submitted = [first.submit(f"lib{i % 6}", b"r%d" % i).job_id for i in range(total)]
    stores = [first] + [worker(state_config, tmp_path) for _ in range(3)]
    claims: list[tuple[str, str]] = []
    writing: set[str] = set()
    clash: list[str] = []
    guard = threading.Lock()
    errors: list[BaseException] = []

    def run(store: JobStore) -> None:
        try:
            while True:
                with guard:
                    if len(claims) == total:
                        return
                claimed = store.claim()
                if claimed is None:
                    time.sleep(0.005)
                    continue
                job = claimed[0]
                with guard:
                    claims.append((job.job_id, store.worker))
                    if job.library in writing:
                        clash.append(job.library)
                    writing.add(job.library)
                time.sleep(0.002)  # "ingesting"
                with guard:
                    writing.discard(job.library)
                store.finish(job.job_id, b"summary")
                store.release(job.job_id)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not clash, f"two workers wrote {clash} at once"
    assert sorted(Counter(j for j, _ in claims).values()) == [1] * total  # each job claimed once
    assert sorted(j for j, _ in claims) == sorted(submitted)
    assert len({w for _, w in claims}) > 1  # the work was shared
    assert {(j.state, j.attempts) for j in first.list(limit=100)} == {(DONE, 1)}
    for s in stores:
        s.close()


def test_one_library_has_one_writer_while_another_library_runs_alongside(
    state_config: StateConfig, tmp_path: Path
) -> None:
    a, b = worker(state_config, tmp_path), worker(state_config, tmp_path)
    first = a.submit("x", b"1")
    second = a.submit("x", b"2")
    other = a.submit("y", b"3")
    assert a.claim()[0].job_id == first.job_id  # type: ignore[index]
    assert b.claim()[0].job_id == other.job_id  # type: ignore[index]  # x is being written
    assert b.claim() is None  # x still is; b runs y
    b.finish(other.job_id, b"")
    b.release(other.job_id)
    assert b.claim() is None
    a.finish(first.job_id, b"")
    a.release(first.job_id)
    taken = b.claim()
    assert taken is not None and taken[0].job_id == second.job_id and taken[1] == b"2"
    a.close()
    b.close()


def test_jobs_are_claimed_in_submission_order(state_config: StateConfig, tmp_path: Path) -> None:
    store = worker(state_config, tmp_path)
    ids = [store.submit(f"lib{i}", b"", principal="ann").job_id for i in range(5)]
    claimed = [store.claim()[0].job_id for _ in ids]  # type: ignore[index]
    assert claimed == ids and store.claim() is None
    assert [j.job_id for j in store.list(principal="ann")] == ids[::-1]  # newest first
    assert store.list(principal="bob") == []
    store.close()


def test_an_ended_job_keeps_no_request(state_config: StateConfig, tmp_path: Path) -> None:
    """A request may hold uploaded files' bytes: once its job has ended (done, failed, dead or
    cancelled) it is dropped, so the state does not grow by every upload for good."""
    store = worker(state_config, tmp_path, attempts=1)
    upload = b"%PDF-" + b"x" * 100_000
    done, failed, dead, cancelled, running, queued = (store.submit(f"lib{i}", upload) for i in range(6))
    for job, end in ((done, store.finish), (failed, store.fail), (dead, store.fail)):
        claimed = store.claim()
        assert claimed is not None and claimed[0].job_id == job.job_id and claimed[1] == upload
        if job is dead:
            store.fail(job.job_id, "flaky", retry=True)  # its one attempt used: dead
        else:
            end(job.job_id, b"")  # type: ignore[operator]
    store.cancel(cancelled.job_id)
    assert store.claim()[0].job_id == running.job_id  # type: ignore[index]
    reader = state_tools.store(state_config, tmp_path, jobs)
    sizes = dict(reader.all("SELECT job_id, length(request) FROM jobs"))
    reader.close()
    states = {j.job_id: j.state for j in store.list()}
    assert [states[j.job_id] for j in (done, failed, dead, cancelled)] == [DONE, FAILED, DEAD, CANCELLED]
    assert [sizes[j.job_id] for j in (done, failed, dead, cancelled)] == [0, 0, 0, 0]
    assert sizes[running.job_id] == sizes[queued.job_id] == len(upload)  # still to be read: kept
    store.close()


def test_vacuum_prunes_the_jobs_that_ended_before_the_window(
    state_config: StateConfig, tmp_path: Path
) -> None:
    clock = Clock()
    store = worker(state_config, tmp_path, clock)
    old_done, old_queued = store.submit("a", b""), store.submit("b", b"")
    assert store.claim()[0].job_id == old_done.job_id  # type: ignore[index]
    store.finish(old_done.job_id, b"")
    store.release(old_done.job_id)
    old_cancelled = store.submit("c", b"")
    store.cancel(old_cancelled.job_id)
    clock.advance(8 * 86_400)
    recent = store.submit("d", b"")
    store.cancel(recent.job_id)
    assert store.prune(7) == 2  # ended more than a week ago: done and cancelled
    assert {j.job_id for j in store.list()} == {old_queued.job_id, recent.job_id}  # waiting: kept
    assert store.prune(0) == 1 and [j.job_id for j in store.list()] == [old_queued.job_id]
    store.close()


def test_submitters_take_turns(state_config: StateConfig, tmp_path: Path) -> None:
    """A caller who queued many jobs delays another caller's first job by one job, not by all of
    them; each caller's own jobs still run in the order submitted, and a caller who comes back
    later queues behind the turns already given, not ahead of them."""
    store = worker(state_config, tmp_path)
    flood = [store.submit(f"bulk{i}", b"", principal="ann").job_id for i in range(4)]
    order = [store.claim()[0].job_id]  # type: ignore[index]
    late = [store.submit("notes", b"", principal="bob").job_id for _ in range(2)]
    store.finish(order[0], b"")
    store.release(order[0])
    while (taken := store.claim()) is not None:
        order.append(taken[0].job_id)
        store.finish(taken[0].job_id, b"")
        store.release(taken[0].job_id)  # bob's two share a library: one writer at a time
        if len(order) == 3:  # ann queues again while her second job runs: behind bob's second
            flood.append(store.submit("bulk4", b"", principal="ann").job_id)
    assert order == [flood[0], late[0], flood[1], late[1], flood[2], flood[3], flood[4]]
    idle = store.submit("notes", b"", principal="bob").job_id  # an idle queue: at once
    assert store.claim()[0].job_id == idle  # type: ignore[index]
    store.close()


def test_a_dead_workers_job_is_taken_again_once_its_lease_runs_out(
    state_config: StateConfig, tmp_path: Path
) -> None:
    clock = Clock()
    dying = worker(state_config, tmp_path, clock, lease_s=30)
    job = dying.submit("x", b"request", caller="caller-header")
    behind = dying.submit("x", b"next")
    assert dying.claim() is not None
    dying.close()  # the process stopped: its library lock went with it (in PostgreSQL, with the session)
    other = worker(state_config, tmp_path, clock, lease_s=30)
    assert other.claim() is None  # the lease still runs: x is still being written
    clock.advance(31)
    again = other.claim()
    assert again is not None
    assert (again[0].job_id, again[0].attempts, again[1], again[2]) == (
        job.job_id,
        2,
        b"request",
        "caller-header",
    )
    assert other.claim() is None  # `behind` waits: x is this worker's now
    # The dead worker's id, on a new connection, owns nothing any more.
    ghost = worker(state_config, tmp_path, clock, lease_s=30, worker=dying.worker)
    assert not ghost.renew(job.job_id) and not ghost.progress(job.job_id, 5)
    ghost.finish(job.job_id, b"late")
    assert other.get(job.job_id).state == RUNNING  # type: ignore[union-attr]
    clock.advance(20)
    assert other.renew(job.job_id)  # renewed in time: nobody takes it
    clock.advance(20)
    assert other.progress(job.job_id, 3)
    assert ghost.claim() is None
    other.finish(job.job_id, b"done")
    other.release(job.job_id)
    assert other.get(job.job_id).state == DONE  # type: ignore[union-attr]
    assert ghost.claim()[0].job_id == behind.job_id  # type: ignore[index]
    ghost.close()
    other.close()


def test_a_job_whose_workers_keep_dying_is_dead_lettered(state_config: StateConfig, tmp_path: Path) -> None:
    clock = Clock()
    submitter = worker(state_config, tmp_path, clock)
    job = submitter.submit("x", b"")
    submitter.close()
    for _ in range(2):
        store = worker(state_config, tmp_path, clock, lease_s=10, attempts=2)
        assert store.claim() is not None
        store.close()
        clock.advance(11)
    last = worker(state_config, tmp_path, clock, lease_s=10, attempts=2)
    assert last.claim() is None
    dead = last.get(job.job_id)
    assert dead is not None and dead.state == DEAD and dead.attempts == 2
    assert "gave up after 2 starts: its worker died" in dead.error
    last.close()


def test_a_failure_that_may_pass_is_retried_with_backoff_then_dead_lettered(
    state_config: StateConfig, tmp_path: Path
) -> None:
    clock = Clock()
    store = worker(state_config, tmp_path, clock, attempts=3, backoff_s=10)
    job = store.submit("x", b"")
    assert store.claim() is not None
    store.fail(job.job_id, "Unavailable: the embedder is down", retry=True)
    store.release(job.job_id)
    waiting = store.get(job.job_id)
    assert waiting is not None and (waiting.state, waiting.attempts) == (QUEUED, 1)
    assert waiting.error == "Unavailable: the embedder is down"
    assert store.claim() is None and store.due_in() == 10
    clock.advance(10)
    assert store.claim()[0].attempts == 2  # type: ignore[index]
    store.fail(job.job_id, "Unavailable: still down", retry=True)
    store.release(job.job_id)
    clock.advance(19)
    assert store.claim() is None  # the second backoff doubles
    clock.advance(1)
    assert store.claim()[0].attempts == 3  # type: ignore[index]
    store.fail(job.job_id, "Unavailable: down for good", retry=True)
    store.release(job.job_id)
    dead = store.get(job.job_id)
    assert dead is not None and (dead.state, dead.error) == (DEAD, "Unavailable: down for good")
    clock.advance(3600)
    assert store.claim() is None and store.due_in() is None
    store.close()


def test_a_bad_request_fails_at_once(state_config: StateConfig, tmp_path: Path) -> None:
    store = worker(state_config, tmp_path)
    job = store.submit("x", b"")
    assert store.claim() is not None
    store.fail(job.job_id, "InvalidArgument: no such path", retry=False)
    store.release(job.job_id)
    failed = store.get(job.job_id)
    assert failed is not None and (failed.state, failed.attempts) == (FAILED, 1)
    assert store.claim() is None
    store.close()
    for bad in (InvalidArgument("x"), PermissionDenied("x"), NotFound("x"), FailedPrecondition("x")):
        assert not retryable(bad)
    assert retryable(Unavailable("x")) and retryable(RuntimeError("x")) and retryable(OSError("x"))


def test_cancel_stops_a_queued_job_and_tells_the_running_worker(
    state_config: StateConfig, tmp_path: Path
) -> None:
    runner, elsewhere = worker(state_config, tmp_path), worker(state_config, tmp_path)
    running = runner.submit("x", b"")
    queued = runner.submit("y", b"")
    behind = runner.submit("x", b"")
    assert runner.claim()[0].job_id == running.job_id  # type: ignore[index]
    assert elsewhere.cancel(queued.job_id).state == CANCELLED  # type: ignore[union-attr]
    assert elsewhere.cancel(running.job_id).state == CANCELLED  # type: ignore[union-attr]
    assert not runner.renew(running.job_id) and not runner.progress(running.job_id, 1)
    runner.finish(running.job_id, b"")  # too late: it stays cancelled
    runner.release(running.job_id)
    assert runner.get(running.job_id).state == CANCELLED  # type: ignore[union-attr]
    assert elsewhere.cancel("nope") is None
    assert elsewhere.claim()[0].job_id == behind.job_id  # type: ignore[index]
    assert elsewhere.cancel(running.job_id).state == CANCELLED  # type: ignore[union-attr]
    elsewhere.finish(behind.job_id, b"s")
    assert elsewhere.cancel(behind.job_id).state == DONE  # type: ignore[union-attr]  # ended stays ended
    runner.close()
    elsewhere.close()


def test_a_caller_may_have_so_many_jobs_pending_and_no_more(
    state_config: StateConfig, tmp_path: Path
) -> None:
    queue = worker(state_config, tmp_path, pending_limit=2)
    first = queue.submit("x", b"", "ann", bounded=True)
    queue.submit("y", b"", "ann", bounded=True)
    with pytest.raises(
        ResourceExhausted, match=r"ann has 2 ingest jobs queued or running.*job_pending_limit"
    ):
        queue.submit("z", b"", "ann", bounded=True)
    queue.submit("z", b"", "bob", bounded=True)  # another caller's room is its own
    queue.submit("z", b"", "ann")  # a source's poll is not a caller's request
    assert queue.claim()[0].job_id == first.job_id  # type: ignore[index]  # running counts too
    queue.finish(first.job_id, b"")
    queue.cancel(queue.submit("w", b"", "bob", bounded=True).job_id)  # ended jobs make room
    assert queue.submit("z", b"", "ann", bounded=False).state == QUEUED
    assert [j.library for j in queue.list(10, "ann")][:1] == ["z"]
    queue.close()


def test_a_caller_may_hold_so_many_bytes_of_requests_pending_and_no_more(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Uploaded files ride in the queued request: one caller's pending requests are bounded in bytes
    too, so a writer cannot park its whole job allowance of large uploads in the state."""
    queue = worker(state_config, tmp_path, pending_bytes=3_000)
    first = queue.submit("x", b"a" * 1_500, "ann", bounded=True)
    queue.submit("x", b"b" * 1_000, "ann", bounded=True)
    with pytest.raises(
        ResourceExhausted, match=r"ann's ingest jobs queued or running hold .* MB.*job_pending_mb"
    ):
        queue.submit("x", b"c" * 501, "ann", bounded=True)
    assert queue.submit("x", b"c" * 500, "ann", bounded=True).state == QUEUED  # exactly at the limit
    queue.submit("x", b"d" * 2_900, "bob", bounded=True)  # another caller's room is its own
    assert queue.claim()[0].job_id == first.job_id  # type: ignore[index]  # a running job's request counts
    with pytest.raises(ResourceExhausted, match="job_pending_mb"):
        queue.submit("x", b"e", "ann", bounded=True)
    queue.finish(first.job_id, b"")  # an ended job drops its request: room again
    assert queue.submit("x", b"e" * 1_500, "ann", bounded=True).state == QUEUED
    queue.close()


def test_metrics_show_the_queues_depth_and_its_oldest_wait(state_config: StateConfig, tmp_path: Path) -> None:
    now = [datetime(2026, 12, 1, 10, 0, tzinfo=UTC)]
    queue = worker(state_config, tmp_path, clock=lambda: now[0])

    def sample(name: str, **labels: str) -> float | None:
        return REGISTRY.get_sample_value(name, labels)

    jobs.QUEUE_METRICS.store = queue
    try:
        assert sample("ragstack_ingest_jobs", state="queued") == 0.0
        assert sample("ragstack_ingest_oldest_queued_seconds") == 0.0
        first = queue.submit("x", b"")
        now[0] += timedelta(seconds=30)
        queue.submit("y", b"")
        queue.submit("x", b"")
        now[0] += timedelta(seconds=15)
        assert sample("ragstack_ingest_jobs", state="queued") == 3.0
        assert sample("ragstack_ingest_oldest_queued_seconds") == 45.0
        assert queue.claim()[0].job_id == first.job_id  # type: ignore[index]
        assert (
            sample("ragstack_ingest_jobs", state="queued"),
            sample("ragstack_ingest_jobs", state="running"),
        ) == (
            2.0,
            1.0,
        )
        assert sample("ragstack_ingest_oldest_queued_seconds") == 15.0
        assert sample("ragstack_ingest_jobs", state="dead") == 0.0

        class Unreachable:
            def depth(self) -> None:
                raise ConnectionError("the state is out of reach")

        jobs.QUEUE_METRICS.store = Unreachable()  # type: ignore[assignment]
        assert sample("ragstack_ingest_jobs", state="queued") is None  # no queue figures,
        assert b"python_gc_objects_collected_total" in generate_latest(REGISTRY)  # the rest answers
    finally:
        jobs.QUEUE_METRICS.store = None
        queue.close()


def test_a_stopping_worker_hands_its_job_back_at_once(state_config: StateConfig, tmp_path: Path) -> None:
    stopping, other = worker(state_config, tmp_path), worker(state_config, tmp_path)
    job = stopping.submit("x", b"", source="notes")
    assert stopping.claim() is not None and other.claim() is None
    assert other.active("notes") == job.job_id
    stopping.release(job.job_id)  # the service stops mid-job: not a failure, not a start
    assert (stopping.get(job.job_id).state, stopping.get(job.job_id).attempts) == (QUEUED, 0)  # type: ignore[union-attr]
    assert other.claim()[0].attempts == 1  # type: ignore[index]
    stopping.close()
    other.close()


def test_a_job_whose_end_cannot_be_written_does_not_hold_its_library_for_good(
    tmp_path: Path, small_disk
) -> None:  # type: ignore[no-untyped-def]
    """The queue on a disk that fills while a job runs: its release fails, and the job is taken
    again once its lease runs out, here too (the worker had kept its library held until a restart)."""
    import contextlib

    disk = small_disk(tmp_path / "disk", "1m")
    clock = Clock()
    queue = worker(StateConfig(), disk, clock, lease_s=30)
    job = queue.submit("x", b"request")
    assert queue.claim() is not None
    with contextlib.suppress(OSError), (disk / "filler").open("wb") as filler:
        filler.write(b"\0" * 2**21)
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        queue.release(job.job_id)
    (disk / "filler").unlink()
    assert queue.claim() is None  # its lease still runs: x may still be being written
    clock.advance(31)
    again = queue.claim()
    assert again is not None and (again[0].job_id, again[0].attempts) == (job.job_id, 2)
    queue.close()


def test_a_jobs_file_from_before_versions_is_adopted(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "jobs.sqlite")
    old.execute(
        "CREATE TABLE jobs (job_id TEXT PRIMARY KEY, library TEXT NOT NULL, request BLOB NOT NULL,"
        " state TEXT NOT NULL, submitted_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
        " files_done INTEGER NOT NULL DEFAULT 0, summary BLOB, error TEXT NOT NULL DEFAULT '',"
        " attempts INTEGER NOT NULL DEFAULT 0)"
    )
    old.execute("ALTER TABLE jobs ADD COLUMN principal TEXT NOT NULL DEFAULT ''")
    at = "2024-05-01T00:00:00+00:00"
    for job_id, state, attempts in (("done1", "done", 1), ("left", "running", 1), ("waits", "queued", 0)):
        old.execute(
            "INSERT INTO jobs (job_id, library, request, state, submitted_at, updated_at, attempts,"
            " principal) VALUES (?, 'lib', ?, ?, ?, ?, ?, 'ann')",
            (job_id, job_id.encode(), state, at, at, attempts),
        )
    old.commit()
    old.close()

    # Adopted at version 1; the turns (version 2) wait for `ragstack migrate`.
    with pytest.raises(MigrationRequired, match=r"version 1, this release needs 2 \(2: ingest jobs take"):
        state_tools.store(StateConfig(), tmp_path, jobs)
    db = state_tools.store(StateConfig(auto_migrate=True), tmp_path, jobs)
    assert version(db) == 2
    assert db.one("SELECT length(request) FROM jobs WHERE job_id = 'done1'") == (0,)  # ended: dropped
    store = JobStore(db)
    assert [j.job_id for j in store.list()] == ["waits", "left", "done1"]
    taken = store.claim()  # the job a stopped service left running has no lease: taken again first
    assert taken is not None and (taken[0].job_id, taken[0].attempts, taken[1], taken[2]) == (
        "left",
        2,
        b"left",
        "",
    )
    new = store.submit("other", b"")
    assert store.list()[0].job_id == new.job_id and store.get("done1").principal == "ann"  # type: ignore[union-attr]
    store.close()


def test_a_stalled_worker_whose_lease_ran_out(state_config: StateConfig, tmp_path: Path) -> None:
    clock = Clock()
    stalled, other = worker(state_config, tmp_path, clock, lease_s=10), worker(state_config, tmp_path, clock)
    job = stalled.submit("x", b"")
    assert stalled.claim() is not None
    clock.advance(11)
    if state_config.url:
        # PostgreSQL: its session still holds the library, so nobody else writes it while it may
        # wake up and write; once its connection goes, the job is taken.
        assert other.claim() is None
        stalled.close()
        deadline = time.monotonic() + 10  # the server ends the closed session's locks soon after
        while (taken := other.claim()) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert taken is not None and taken[0].job_id == job.job_id
    else:  # SQLite (one process): the lease alone says who writes
        assert other.claim()[0].job_id == job.job_id  # type: ignore[index]
        assert not stalled.renew(job.job_id)  # it stops the job when it next renews
        stalled.release(job.job_id)
        stalled.close()
    assert other.get(job.job_id).attempts == 2  # type: ignore[union-attr]
    other.close()


def test_a_job_of_a_worker_that_died_on_this_host_is_taken_at_once(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """A restart after a crash on the same machine need not wait for the dead process's lease."""
    import socket
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    clock = Clock()
    dead = worker(
        state_config, tmp_path, clock, lease_s=600, worker=f"{socket.gethostname()}:{gone.stdout.strip()}:x"
    )
    job = dead.submit("x", b"request")
    assert dead.claim() is not None
    dead.close()
    elsewhere = worker(state_config, tmp_path, clock, lease_s=600, worker="other-host:1:y")
    elsewhere_job = elsewhere.submit("y", b"r")
    assert elsewhere.claim()[0].job_id == elsewhere_job.job_id  # type: ignore[index]
    restarted = worker(state_config, tmp_path, clock, lease_s=600)
    again = restarted.claim()
    assert again is not None and again[0].job_id == job.job_id and again[0].attempts == 2
    # Another host's running job is left to its lease: its process cannot be looked at from here.
    assert restarted.claim() is None and restarted.get(elsewhere_job.job_id).state == RUNNING  # type: ignore[union-attr]
    restarted.close()
    elsewhere.close()
