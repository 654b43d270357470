"""The durable ingest queue: jobs kept in SQLite (`<data_dir>/jobs.sqlite`) with the request they
carry, run one at a time in submission order. A job that was running when the service stopped is
queued again at start: the pipeline's fingerprints make the second run redo only what the first did
not commit."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragstack.stores.sqlite import ensure_column, open_sqlite

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
_COLUMNS = "job_id, library, state, submitted_at, updated_at, files_done, summary, error, attempts, principal"


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
    attempts: int = 0
    principal: str = ""  # who submitted it: only it (and admins) see the job


class JobStore:
    def __init__(self, path: Path, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._db = open_sqlite(
            path,
            "CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, library TEXT NOT NULL,"
            " request BLOB NOT NULL, state TEXT NOT NULL, submitted_at TEXT NOT NULL,"
            " updated_at TEXT NOT NULL, files_done INTEGER NOT NULL DEFAULT 0, summary BLOB,"
            " error TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0)",
        )
        ensure_column(self._db, "jobs", "principal", "TEXT NOT NULL DEFAULT ''")
        # The submitter in full (its role, libraries and ACL groups), so the job runs as it would
        # have run in the call; empty for jobs from before principals.
        ensure_column(self._db, "jobs", "caller", "TEXT NOT NULL DEFAULT ''")
        ensure_column(self._db, "jobs", "source", "TEXT NOT NULL DEFAULT ''")  # a source's sync job

    def submit(
        self, library: str, request: bytes, principal: str = "", caller: str = "", source: str = ""
    ) -> Job:
        """Queues `request`; `principal` names the submitter, `caller` is what to run the job as,
        `source` the source it syncs (if it does)."""
        at = self._now().isoformat()
        job_id = uuid.uuid4().hex
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (job_id, library, request, state, submitted_at, updated_at, principal,"
                " caller, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, library, request, QUEUED, at, at, principal, caller, source),
            )
        job = self.get(job_id)
        assert job is not None
        return job

    def active(self, source: str) -> str | None:
        """The id of a queued or running job that syncs `source`, if there is one."""
        with self._lock:
            row = self._db.execute(
                "SELECT job_id FROM jobs WHERE source = ? AND state IN (?, ?) LIMIT 1",
                (source, QUEUED, RUNNING),
            ).fetchone()
        return str(row[0]) if row else None

    def requeue_running(self) -> int:
        """At start: jobs a stopped service left running go back to the queue."""
        with self._lock:
            return self._db.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE state = ?",
                (QUEUED, self._now().isoformat(), RUNNING),
            ).rowcount

    def claim(self) -> tuple[Job, bytes, str] | None:
        """The oldest queued job, now running, with its request and the caller to run it as."""
        with self._lock:
            row = self._db.execute(
                "SELECT job_id, request, caller FROM jobs WHERE state = ? ORDER BY submitted_at, rowid"
                " LIMIT 1",
                (QUEUED,),
            ).fetchone()
            if row is None:
                return None
            self._db.execute(
                "UPDATE jobs SET state = ?, attempts = attempts + 1, files_done = 0, updated_at = ?"
                " WHERE job_id = ?",
                (RUNNING, self._now().isoformat(), row[0]),
            )
        job = self.get(row[0])
        assert job is not None
        return job, bytes(row[1]), str(row[2] or "")

    def progress(self, job_id: str, files_done: int) -> None:
        self._update(job_id, "files_done = ?", files_done)

    def finish(self, job_id: str, summary: bytes) -> None:
        self._update(job_id, "state = 'done', summary = ?", summary)

    def fail(self, job_id: str, error: str) -> None:
        self._update(job_id, "state = 'failed', error = ?", error[:2000])

    def cancel(self, job_id: str) -> Job | None:
        """Marks a queued or running job cancelled (the worker stops a running one); a job that has
        ended stays as it ended. None for an unknown id."""
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE job_id = ? AND state IN (?, ?)",
                (CANCELLED, self._now().isoformat(), job_id, QUEUED, RUNNING),
            )
        return self.get(job_id)

    def _update(self, job_id: str, assignment: str, value: object) -> None:
        """Changes a running job (one cancelled meanwhile stays cancelled)."""
        with self._lock:
            self._db.execute(
                f"UPDATE jobs SET {assignment}, updated_at = ? WHERE job_id = ? AND state = ?",
                (value, self._now().isoformat(), job_id, RUNNING),
            )

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def list(self, limit: int = 50, principal: str | None = None) -> list[Job]:
        """The newest jobs: `principal`'s only, or everyone's when None."""
        where, args = ("WHERE principal = ?", (principal,)) if principal is not None else ("", ())
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY submitted_at DESC, rowid DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        return [_job(r) for r in rows]

    def close(self) -> None:
        self._db.close()


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
