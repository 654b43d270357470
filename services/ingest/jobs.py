"""The durable ingest queue in the shared state (SQLite or PostgreSQL, ragstack/state), shared by
any number of ingest workers, one writer per library at a time. Submitters take turns: each job gets
a turn when queued, one after its submitter's pending jobs and none before the lowest turn still
pending, and jobs run by turn, then in the order submitted. So a caller's hundred queued jobs
delay another caller's first by one job, not by all hundred, and each caller's own jobs keep their
order. A worker holds its running job on a lease it renews; a job whose worker died is taken again
by any worker once the lease runs out (the pipeline's fingerprints make the second run redo only
what the first did not commit). A failure that may pass is retried with exponential backoff; a job
started `attempts` times is dead-lettered with its last error.

In PostgreSQL a claim locks the row it takes (`FOR UPDATE SKIP LOCKED`, so workers never wait on
each other) and a session advisory lock on the library, which goes with the worker's connection
when the worker dies. SQLite serialises claims in its write lock (one process per data dir)."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from ragstack.errors import (
    Cancelled,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
)
from ragstack.state import Migration, StateDB
from ragstack.state.migrations import ensure_column, split_statements

log = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED, DEAD = "queued", "running", "done", "failed", "cancelled", "dead"
_COLUMNS = "job_id, library, state, submitted_at, updated_at, files_done, summary, error, attempts, principal"

STORE = "jobs"
# An ended job's request goes: it may hold uploaded files' bytes, which would otherwise stay in the
# state for good, job after job (the summary says what was done).
_DROP_REQUEST = ", request = ?"
_ENDED = f"('{DONE}', '{FAILED}', '{CANCELLED}', '{DEAD}')"
# `seq` orders the queue (PostgreSQL has no rowid); `lease_until` and `not_before` are Unix times.
_SQLITE = """
CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, library TEXT NOT NULL, request BLOB NOT NULL,
  state TEXT NOT NULL, submitted_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  files_done INTEGER NOT NULL DEFAULT 0, summary BLOB, error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0, principal TEXT NOT NULL DEFAULT '',
  caller TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '', seq INTEGER,
  worker TEXT NOT NULL DEFAULT '', lease_until REAL NOT NULL DEFAULT 0,
  not_before REAL NOT NULL DEFAULT 0);
"""
_POSTGRES = """
CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, library TEXT NOT NULL, request BYTEA NOT NULL,
  state TEXT NOT NULL, submitted_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  files_done INTEGER NOT NULL DEFAULT 0, summary BYTEA, error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0, principal TEXT NOT NULL DEFAULT '',
  caller TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT '', seq BIGSERIAL,
  worker TEXT NOT NULL DEFAULT '', lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
  not_before DOUBLE PRECISION NOT NULL DEFAULT 0);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (state, seq);
CREATE INDEX IF NOT EXISTS jobs_source ON jobs (source);
CREATE INDEX IF NOT EXISTS jobs_principal ON jobs (principal, seq);
"""
# Columns a jobs.sqlite from before versions may lack (its running jobs have no lease: taken again).
_ADOPTED = (
    ("principal", "TEXT NOT NULL DEFAULT ''"),
    ("caller", "TEXT NOT NULL DEFAULT ''"),  # the submitter in full, so the job runs as it would have
    ("source", "TEXT NOT NULL DEFAULT ''"),  # the source a sync job syncs
    ("seq", "INTEGER"),
    ("worker", "TEXT NOT NULL DEFAULT ''"),
    ("lease_until", "REAL NOT NULL DEFAULT 0"),
    ("not_before", "REAL NOT NULL DEFAULT 0"),
)


def _first(db: StateDB) -> None:
    for statement in split_statements(_POSTGRES if db.dialect == "postgres" else _SQLITE):
        db.execute(statement)
    if db.dialect == "sqlite":
        for column, definition in _ADOPTED:
            ensure_column(db, "jobs", column, definition)
        db.execute("UPDATE jobs SET seq = rowid WHERE seq IS NULL")
    for statement in split_statements(_INDEXES):
        db.execute(statement)


_TURNS = """
ALTER TABLE jobs ADD COLUMN turn BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (state, turn);
CREATE INDEX IF NOT EXISTS jobs_pending ON jobs (principal, state, turn);
"""


def _second(db: StateDB) -> None:
    for statement in split_statements(_TURNS):
        db.execute(statement)
    db.execute(f"UPDATE jobs SET request = ? WHERE state IN {_ENDED}", (b"",))


MIGRATIONS = (
    Migration(1, "ingest jobs with leases, retries and a dead-letter state", _first),
    Migration(2, "ingest jobs take turns between submitters; ended jobs keep no request", _second),
)


def retryable(err: BaseException) -> bool:
    """Whether a job that failed with `err` may succeed when run again: a bad request (refused
    argument, permission, missing thing, unmet precondition) fails the same way every time, and
    work stopped on purpose (a source removed during its sync) is not to be done again."""
    return not isinstance(err, InvalidArgument | PermissionDenied | NotFound | FailedPrecondition | Cancelled)


@dataclass(frozen=True)
class Job:
    job_id: str
    library: str
    state: str
    submitted_at: str
    updated_at: str
    files_done: int = 0
    summary: bytes = b""  # a serialized IngestSummary, once done
    error: str = ""
    attempts: int = 0  # times started
    principal: str = ""  # who submitted it: only it (and admins) see the job


def worker_id() -> str:
    """This process's name among the workers: host, pid and a nonce (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class JobStore:
    def __init__(
        self,
        db: StateDB,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        lease_s: float = 60.0,
        attempts: int = 3,
        backoff_s: float = 10.0,
        worker: str | None = None,
        pending_limit: int = 100,
        pending_bytes: int = 2**30,
    ) -> None:
        self._db = db
        self.pending_limit = pending_limit
        self.pending_bytes = pending_bytes
        self._now = now
        self.lease_s = lease_s
        self._attempts = attempts
        self._backoff_s = backoff_s
        self.worker = worker or worker_id()
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # job id -> library, of the jobs this worker runs
        # Library lock keys differ per schema: two deployments may share one database.
        row = db.one("SELECT current_schema()") if db.dialect == "postgres" else None
        self._scope = f"{row[0] if row else db.store}"

    def submit(
        self,
        library: str,
        request: bytes,
        principal: str = "",
        caller: str = "",
        source: str = "",
        bounded: bool = False,
    ) -> Job:
        """Queues `request`; `principal` names the submitter, `caller` is what to run the job as,
        `source` the source it syncs (if it does). `bounded` (a caller's request): refused with
        ResourceExhausted when the submitter has `pending_limit` jobs queued or running already, or
        their requests (uploaded files' bytes included) and this one would pass `pending_bytes`."""
        at = self._now().isoformat()
        job_id = uuid.uuid4().hex
        # SQLite has no sequence: the next number is taken under its write lock.
        seq = ", seq" if self._db.dialect == "sqlite" else ""
        value = ", (SELECT coalesce(max(seq), 0) + 1 FROM jobs)" if seq else ""
        # One after the submitter's pending jobs, and never before the queue's lowest pending turn: read
        # from pending jobs only, so neither a job started out of turn (its library free) nor the
        # history Vacuum removes moves it.
        larger = "greatest" if self._db.dialect == "postgres" else "max"
        turn = (
            f"{larger}((SELECT coalesce(max(turn), 0) + 1 FROM jobs WHERE principal = ?"
            " AND state IN (?, ?)),"
            " coalesce((SELECT turn FROM jobs WHERE state IN (?, ?) ORDER BY turn LIMIT 1), 0))"
        )
        turn_args = (principal, QUEUED, RUNNING, QUEUED, RUNNING)
        with self._db.transaction() as db:
            db.one_at_a_time(f"jobs.submit.{principal}")  # so its counts hold
            if bounded:
                # length() of a blob is read from its header (SQLite, PostgreSQL), not its bytes.
                row = db.one(
                    "SELECT count(*), coalesce(sum(length(request)), 0) FROM jobs"
                    " WHERE principal = ? AND state IN (?, ?)",
                    (principal, QUEUED, RUNNING),
                )
                count, held = (int(row[0]), int(row[1])) if row else (0, 0)
                if count >= self.pending_limit:
                    raise ResourceExhausted(
                        f"refused: {principal[:64]} has {count} ingest jobs queued or running, the "
                        f"limit (ingest.job_pending_limit); wait for some to finish, or cancel some"
                    )
                if held + len(request) > self.pending_bytes:
                    raise ResourceExhausted(
                        f"refused: {principal[:64]}'s ingest jobs queued or running hold "
                        f"{held / 2**20:.1f} MB of requests, and this one {len(request) / 2**20:.1f} MB "
                        f"would pass the limit of {self.pending_bytes / 2**20:g} MB "
                        "(ingest.job_pending_mb); wait for some to finish, or cancel some"
                    )
            db.execute(
                "INSERT INTO jobs (job_id, library, request, state, submitted_at, updated_at, principal,"
                f" caller, source, turn{seq}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, {turn}{value})",
                (job_id, library, request, QUEUED, at, at, principal, caller, source, *turn_args),
            )
        job = self.get(job_id)
        assert job is not None
        return job

    def active(self, source: str, principal: str | None = None) -> str | None:
        """The id of a queued or running job that syncs `source` (submitted by `principal`, when
        given), if there is one."""
        by = " AND principal = ?" if principal is not None else ""
        row = self._db.one(
            f"SELECT job_id FROM jobs WHERE source = ?{by} AND state IN (?, ?) LIMIT 1",
            (source, *((principal,) if principal is not None else ()), QUEUED, RUNNING),
        )
        return str(row[0]) if row else None

    def claim(self) -> tuple[Job, bytes, str] | None:
        """The oldest job that is due (queued and past its backoff, or running on a lease that ran
        out) in a library nobody else is writing, now running here, with its request and the caller
        to run it as. A job already started `attempts` times is dead-lettered instead."""
        with self._lock:  # one claim at a time per store: `_held` is read and written here
            self._expire_dead_here()
            while True:
                taken = None
                try:
                    with self._db.transaction() as db:
                        taken = self._claim_one(db, set(self._held.values()))
                except BaseException:
                    if isinstance(taken, tuple):  # locked, then the commit failed
                        self._unlock_library(taken[1])
                    raise
                if taken is None:
                    return None
                if isinstance(taken, str):
                    continue  # it was dead-lettered: look again
                job_id, library, request, caller = taken
                self._held[job_id] = library
                job = self.get(job_id)
                assert job is not None
                return job, request, caller

    def _expire_dead_here(self) -> None:
        """Running jobs of workers on this host whose process has gone (a restart after a crash)
        are due at once rather than when their lease runs out."""
        host = self.worker.split(":", 1)[0]
        rows = self._db.all(
            "SELECT job_id, worker FROM jobs WHERE state = ? AND worker LIKE ? AND lease_until > 0",
            (RUNNING, f"{host}:%"),
        )
        for job_id, worker in rows:
            if worker != self.worker and worker.split(":", 1)[0] == host and not _alive(worker):
                self._db.execute(
                    "UPDATE jobs SET lease_until = 0 WHERE job_id = ? AND worker = ?", (job_id, worker)
                )

    def _claim_one(self, db: StateDB, busy: set[str]) -> tuple[str, str, bytes, str] | str | None:
        now = self._now().timestamp()
        skip = set(busy)
        while True:
            row = self._due(db, now, skip)
            if row is None:
                return None
            job_id, library, request, caller, state, attempts, error = row
            if attempts >= self._attempts:
                self._dead(db, job_id, state, attempts, error)
                return ""
            if not self._lock_library(db, library):
                skip.add(library)  # another worker writes it; its other jobs wait
                continue
            try:
                db.execute(
                    "UPDATE jobs SET state = ?, attempts = attempts + 1, files_done = 0, worker = ?,"
                    " lease_until = ?, updated_at = ? WHERE job_id = ?",
                    (RUNNING, self.worker, now + self.lease_s, self._now().isoformat(), job_id),
                )
            except BaseException:
                self._unlock_library(library)
                raise
            return job_id, library, bytes(request), str(caller or "")

    def _due(self, db: StateDB, now: float, skip: set[str]) -> tuple[Any, ...] | None:
        # A running job with a live lease marks its library as being written.
        others = "".join(" AND library != ?" for _ in skip)
        locking = " FOR UPDATE SKIP LOCKED" if db.dialect == "postgres" else ""
        return db.one(
            "SELECT job_id, library, request, caller, state, attempts, error FROM jobs"
            " WHERE ((state = ? AND not_before <= ?) OR (state = ? AND lease_until < ?))"
            " AND library NOT IN (SELECT library FROM jobs WHERE state = ? AND lease_until >= ?)"
            f"{others} ORDER BY turn, seq LIMIT 1{locking}",
            (QUEUED, now, RUNNING, now, RUNNING, now, *sorted(skip)),
        )

    def _dead(self, db: StateDB, job_id: str, state: str, attempts: int, error: str) -> None:
        if state == RUNNING:
            why = f"gave up after {attempts} starts: its worker died (its lease ran out)"
            why += f"; the failure before: {error}" if error else ""
        else:
            why = error or f"gave up after {attempts} starts"
        db.execute(
            "UPDATE jobs SET state = ?, error = ?, worker = '', lease_until = 0, updated_at = ?"
            f"{_DROP_REQUEST} WHERE job_id = ?",
            (DEAD, why[:2000], self._now().isoformat(), b"", job_id),
        )

    def renew(self, job_id: str) -> bool:
        """Extends this worker's lease on a running job; False when the job is no longer its own
        (cancelled, or taken by another worker after the lease ran out): the worker stops it."""
        return self._extend(job_id, "", ())

    def progress(self, job_id: str, files_done: int) -> bool:
        """Records the files done, renewing the lease (see renew)."""
        return self._extend(job_id, ", files_done = ?", (files_done,))

    def _extend(self, job_id: str, assignment: str, values: tuple[Any, ...]) -> bool:
        library = self._held.get(job_id)
        if library is not None and not self._still_locked(library):
            return False  # the connection was lost with its lock, and another worker took it since
        changed = self._db.execute(
            f"UPDATE jobs SET lease_until = ?{assignment}, updated_at = ? WHERE job_id = ? AND state = ?"
            " AND worker = ?",
            (
                self._now().timestamp() + self.lease_s,
                *values,
                self._now().isoformat(),
                job_id,
                RUNNING,
                self.worker,
            ),
        )
        return changed > 0

    def finish(self, job_id: str, summary: bytes) -> None:
        self._end(job_id, "state = ?, summary = ?" + _DROP_REQUEST, (DONE, summary, b""))

    def fail(self, job_id: str, error: str, retry: bool = False) -> None:
        """A failed run: a `retry` one goes back to the queue after a backoff (doubling each time)
        until it has been started `attempts` times, then it is dead; any other fails at once."""
        error = error[:2000]
        if not retry:
            self._end(job_id, "state = ?, error = ?" + _DROP_REQUEST, (FAILED, error, b""))
            return
        row = self._db.one("SELECT attempts FROM jobs WHERE job_id = ?", (job_id,))
        attempts = int(row[0]) if row else 0
        if attempts >= self._attempts:
            self._end(job_id, "state = ?, error = ?" + _DROP_REQUEST, (DEAD, error, b""))
            return
        not_before = self._now().timestamp() + self._backoff_s * 2 ** max(0, attempts - 1)
        self._end(job_id, "state = ?, error = ?, not_before = ?", (QUEUED, error, not_before))

    def release(self, job_id: str) -> None:
        """This worker is done with the job, however it ended: its library is free again. One
        still running here (the service is stopping) goes back to the queue at once, this start
        uncounted."""
        try:
            self._end(job_id, "state = ?, attempts = attempts - 1", (QUEUED,))
        finally:  # also when that cannot be written (a full disk): the job's lease runs out instead
            with self._lock:
                library = self._held.pop(job_id, None)
            if library is not None:
                self._unlock_library(library)

    def _end(self, job_id: str, assignment: str, values: tuple[Any, ...]) -> None:
        """Changes a job that runs here (one cancelled, or taken by another worker, stays so)."""
        self._db.execute(
            f"UPDATE jobs SET {assignment}, worker = '', lease_until = 0, updated_at = ?"
            " WHERE job_id = ? AND state = ? AND worker = ?",
            (*values, self._now().isoformat(), job_id, RUNNING, self.worker),
        )

    def cancel(self, job_id: str) -> Job | None:
        """Marks a queued or running job cancelled (its worker stops a running one when it next
        renews, or at once when it is here); a job that has ended stays as it ended. None for an
        unknown id."""
        self._db.execute(
            f"UPDATE jobs SET state = ?, lease_until = 0, updated_at = ?{_DROP_REQUEST} WHERE job_id = ?"
            " AND state IN (?, ?)",
            (CANCELLED, self._now().isoformat(), b"", job_id, QUEUED, RUNNING),
        )
        return self.get(job_id)

    def prune(self, older_than_days: int) -> int:
        """Removes the jobs that ended (done, failed, cancelled, dead) more than `older_than_days`
        ago, the queue's history; how many went."""
        cutoff = (self._now() - timedelta(days=older_than_days)).isoformat()
        return self._db.execute(f"DELETE FROM jobs WHERE state IN {_ENDED} AND updated_at <= ?", (cutoff,))

    def due_in(self) -> float | None:
        """Seconds until the next queued job's backoff ends (0 if one is due), None when none waits."""
        row = self._db.one("SELECT min(not_before) FROM jobs WHERE state = ?", (QUEUED,))
        if not row or row[0] is None:
            return None
        return max(0.0, float(row[0]) - self._now().timestamp())

    def get(self, job_id: str) -> Job | None:
        row = self._db.one(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
        return _job(row) if row else None

    def depth(self) -> tuple[dict[str, int], float]:
        """The jobs queued, running and dead, and the seconds the oldest queued one has waited (0:
        none), for /metrics."""
        rows = self._db.all(
            "SELECT state, count(*), min(submitted_at) FROM jobs WHERE state IN (?, ?, ?) GROUP BY state",
            (QUEUED, RUNNING, DEAD),
        )
        counts = dict.fromkeys((QUEUED, RUNNING, DEAD), 0) | {state: int(n) for state, n, _ in rows}
        oldest = next((at for state, _, at in rows if state == QUEUED), None)
        waited = (self._now() - datetime.fromisoformat(oldest)).total_seconds() if oldest else 0.0
        return counts, max(waited, 0.0)

    def list(self, limit: int = 50, principal: str | None = None) -> list[Job]:
        """The newest jobs: `principal`'s only, or everyone's when None."""
        where, args = ("WHERE principal = ?", (principal,)) if principal is not None else ("", ())
        rows = self._db.all(f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY seq DESC LIMIT ?", (*args, limit))
        return [_job(r) for r in rows]

    def close(self) -> None:
        """Closes the connection; in PostgreSQL the library locks go with it."""
        self._db.close()

    # --- one writer per library ------------------------------------------------------------------------

    def _lock_library(self, db: StateDB, library: str) -> bool:
        """In PostgreSQL a session lock, so that it outlives the claim's transaction and dies with
        the connection; SQLite's claims are serialised, and a live lease marks the library."""
        if db.dialect != "postgres":
            return True
        row = db.one("SELECT pg_try_advisory_lock(?)", (self._key(library),))
        return bool(row and row[0])

    def _unlock_library(self, library: str) -> None:
        if self._db.dialect == "postgres":
            self._db.one("SELECT pg_advisory_unlock(?)", (self._key(library),))

    def _still_locked(self, library: str) -> bool:
        """Whether this session still holds the library (a connection opened again has lost it)."""
        if self._db.dialect != "postgres":
            return True
        key = self._key(library)
        row = self._db.one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            " AND granted AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 1",
            (key >> 32, key & 0xFFFFFFFF),
        )
        if row and row[0]:
            return True
        return self._lock_library(self._db, library)  # free: nobody wrote it meanwhile

    def _key(self, library: str) -> int:
        """A library's advisory lock key (63 bits, so its halves are pg_locks' classid and objid)."""
        digest = hashlib.blake2b(f"{self._scope}\0{library}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 1


def _alive(worker: str) -> bool:
    """Whether the process of a worker id on this host still runs (a reused pid reads as alive: its
    job then waits for the lease)."""
    try:
        os.kill(int(worker.split(":")[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, IndexError):
        return True
    return True


def _job(row: tuple[Any, ...]) -> Job:
    job_id, library, state, submitted, updated, done, summary, error, attempts, principal = row
    return Job(
        job_id,
        library,
        state,
        submitted,
        updated,
        done,
        bytes(summary or b""),
        error or "",
        attempts,
        principal,
    )


class _QueueMetrics:
    """/metrics: the shared queue's depth as this process's store reads it at each scrape (every
    worker sees the same queue), for alerting and for scaling the ingest workers."""

    store: JobStore | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.store is None:
            return
        try:
            counts, waited = self.store.depth()
        except Exception as err:  # the state out of reach: the rest of /metrics still answers
            log.warning("could not read the ingest queue's depth: %s", err)
            return
        jobs = GaugeMetricFamily(
            "ragstack_ingest_jobs", "Ingest jobs in the shared queue, by state.", labels=["state"]
        )
        for state, n in counts.items():
            jobs.add_metric([state], n)
        yield jobs
        yield GaugeMetricFamily(
            "ragstack_ingest_oldest_queued_seconds",
            "How long the oldest queued ingest job has waited (0: none queued).",
            value=waited,
        )


QUEUE_METRICS = _QueueMetrics()
REGISTRY.register(QUEUE_METRICS)
