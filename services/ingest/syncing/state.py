"""Where sources stand, in the shared state (ragstack/state): their settings, their circuit breakers, the
items waiting for a retry or dead-lettered, and the items each source has listed (its members, the
documents its delete policy may prune).

What is indexed is not kept here: the library's catalog says it. Members are recorded before the
items are ingested, so a crash between the two leaves a member that is not indexed yet (pruning it
is a no-op), never a document no source owns."""

from __future__ import annotations

import builtins
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ragstack.config import SourceConfig
from ragstack.domain import ItemFailure, SourceState
from ragstack.errors import InvalidArgument, NotFound
from ragstack.state import Migration, StateDB
from ragstack.state.migrations import split_statements

CONFIG, API = "config", "api"
CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

STORE = "sources"
# Poll and retry times are epoch seconds: REAL is SQLite's double, PostgreSQL's is DOUBLE PRECISION.
_TABLES = """
CREATE TABLE IF NOT EXISTS sources (
  name TEXT PRIMARY KEY, spec TEXT NOT NULL, origin TEXT NOT NULL, paused INTEGER NOT NULL DEFAULT 0,
  breaker TEXT NOT NULL DEFAULT 'closed', failures INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '', last_poll_at TEXT NOT NULL DEFAULT '',
  last_success_at TEXT NOT NULL DEFAULT '', next_poll REAL NOT NULL DEFAULT 0,
  last_job_id TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS item_failures (
  name TEXT NOT NULL, item TEXT NOT NULL, revision TEXT NOT NULL, attempts INTEGER NOT NULL,
  error TEXT NOT NULL, failed_at TEXT NOT NULL, retry_at REAL NOT NULL, dead INTEGER NOT NULL,
  PRIMARY KEY (name, item));
CREATE TABLE IF NOT EXISTS members (name TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (name, item));
"""


def _first(db: StateDB) -> None:
    tables = _TABLES if db.dialect == "sqlite" else _TABLES.replace(" REAL ", " DOUBLE PRECISION ")
    for statement in split_statements(tables):
        db.execute(statement)


MIGRATIONS = (Migration(1, "sources, item failures and members", _first),)


@dataclass(frozen=True)
class Retries:
    """How failures are retried: items (`ingest.source_retries` attempts) and polls (the breaker)."""

    attempts: int = 5
    backoff_s: float = 2.0
    backoff_max_s: float = 600.0
    breaker_failures: int = 5
    breaker_cooldown_s: float = 60.0

    def delay(self, failures: int, jitter: Callable[[], float] = random.random) -> float:
        """Exponential backoff with ±20 % jitter, so that items failing together spread out."""
        base = min(self.backoff_max_s, self.backoff_s * 2 ** max(0, failures - 1))
        return base * (0.8 + 0.4 * jitter())


_STATE_COLUMNS = (
    "spec, origin, paused, breaker, failures, last_error, last_poll_at, last_success_at, next_poll,"
    " last_job_id"
)


class SourceStore:
    def __init__(
        self, db: StateDB, retries: Retries = Retries(), now: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._retries = retries
        self._now = now

    # --- sources -----------------------------------------------------------------------------------

    def declare(self, specs: Sequence[SourceConfig]) -> None:
        """At start: the config's sources, added or updated (their state kept); config sources no
        longer declared are forgotten (their documents stay, like a removed source's)."""
        names = {s.name for s in specs}
        with self._db.transaction() as db:
            for spec in specs:
                self._upsert(spec, CONFIG)
            for (name,) in db.all("SELECT name FROM sources WHERE origin = ?", (CONFIG,)):
                if name not in names:
                    self._forget(name)

    def add(self, spec: SourceConfig) -> SourceState:
        """Registers (or updates) a source added through the API; due at once."""
        with self._db.transaction() as db:
            row = db.one("SELECT origin FROM sources WHERE name = ?", (spec.name,))
            if row is not None and row[0] == CONFIG:
                raise InvalidArgument(f"source {spec.name!r} is declared in ragstack.yaml; change it there")
            self._upsert(spec, API)
            db.execute("UPDATE sources SET next_poll = 0 WHERE name = ?", (spec.name,))
        return self.get(spec.name)

    def _upsert(self, spec: SourceConfig, origin: str) -> None:
        self._db.execute(
            "INSERT INTO sources (name, spec, origin) VALUES (?, ?, ?) ON CONFLICT(name) DO UPDATE SET"
            " spec = excluded.spec, origin = excluded.origin",
            (spec.name, spec.model_dump_json(), origin),
        )

    def get(self, name: str) -> SourceState:
        row = self._db.one(f"SELECT {_STATE_COLUMNS} FROM sources WHERE name = ?", (name,))
        if row is None:
            raise NotFound(f"source {name!r} not found")
        return _state(row)

    def list(self) -> list[SourceState]:
        rows = self._db.all(f"SELECT {_STATE_COLUMNS} FROM sources ORDER BY name")
        return [_state(r) for r in rows]

    def remove(self, name: str) -> None:
        state = self.get(name)
        if state.origin == CONFIG:
            raise InvalidArgument(f"source {name!r} is declared in ragstack.yaml; remove it there")
        with self._db.transaction():
            self._forget(name)

    def _forget(self, name: str) -> None:
        for table in ("sources", "item_failures", "members"):
            self._db.execute(f"DELETE FROM {table} WHERE name = ?", (name,))

    def set_paused(self, name: str, paused: bool) -> SourceState:
        self.get(name)
        resumed = "" if paused else ", next_poll = 0"  # a resumed source is due at once
        self._db.execute(f"UPDATE sources SET paused = ?{resumed} WHERE name = ?", (int(paused), name))
        return self.get(name)

    def due(self) -> builtins.list[SourceState]:
        """Sources not paused whose next poll has come (an open breaker's once its cool-down ended)."""
        rows = self._db.all(
            f"SELECT {_STATE_COLUMNS} FROM sources WHERE paused = 0 AND next_poll <= ? ORDER BY next_poll",
            (float(self._now()),),
        )
        return [_state(r) for r in rows]

    def poll_now(self, name: str) -> None:
        self._db.execute("UPDATE sources SET next_poll = 0 WHERE name = ?", (name,))

    def polling(self, name: str) -> str:
        """A poll starts: an open breaker whose cool-down ended becomes half-open (this poll is its
        trial). Returns the breaker's state."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE sources SET last_poll_at = ?, breaker = CASE WHEN breaker = ? THEN ? ELSE breaker"
                " END WHERE name = ?",
                (iso(self._now()), OPEN, HALF_OPEN, name),
            )
            row = db.one("SELECT breaker FROM sources WHERE name = ?", (name,))
        return str(row[0]) if row else CLOSED

    def poll_succeeded(self, name: str, job_id: str = "") -> None:
        now = self._now()
        with self._db.transaction() as db:
            row = db.one("SELECT spec FROM sources WHERE name = ?", (name,))
            if row is None:  # removed meanwhile
                return
            interval = SourceConfig.model_validate_json(row[0]).interval_s
            first = db.one("SELECT min(retry_at) FROM item_failures WHERE name = ? AND dead = 0", (name,))
            retry = first[0] if first else None
            due = min(now + interval, max(float(retry), now)) if retry is not None else now + interval
            job = ", last_job_id = ?" if job_id else ""  # a poll that queued no job keeps the last one's
            db.execute(
                "UPDATE sources SET breaker = ?, failures = 0, last_error = '', last_success_at = ?,"
                f" next_poll = ?{job} WHERE name = ?",
                (CLOSED, iso(now), float(due), *((job_id,) if job_id else ()), name),
            )

    def poll_failed(self, name: str, error: str) -> str:
        """Counts a failed poll: retried after a backoff; the breaker opens after
        `breaker_failures` in a row, or at once when this was its half-open trial. Returns its state."""
        now = self._now()
        with self._db.transaction() as db:
            row = db.one("SELECT spec, breaker, failures FROM sources WHERE name = ?", (name,))
            if row is None:
                return CLOSED
            interval = SourceConfig.model_validate_json(row[0]).interval_s
            failures = int(row[2]) + 1
            opens = row[1] == HALF_OPEN or failures >= self._retries.breaker_failures
            breaker = OPEN if opens else CLOSED
            wait = self._retries.breaker_cooldown_s if opens else min(interval, self._retries.delay(failures))
            db.execute(
                "UPDATE sources SET breaker = ?, failures = ?, last_error = ?, next_poll = ? WHERE name = ?",
                (breaker, failures, error[:2000], float(now + wait), name),
            )
        return breaker

    def retry(self, name: str) -> int:
        """Dead letters get a fresh set of attempts, an open breaker is half-opened, and the source
        is due at once. Returns how many items were dead."""
        self.get(name)
        with self._db.transaction() as db:
            dead = db.execute(
                "UPDATE item_failures SET dead = 0, attempts = 0, retry_at = 0 WHERE name = ? AND dead = 1",
                (name,),
            )
            db.execute("UPDATE item_failures SET retry_at = 0 WHERE name = ?", (name,))
            db.execute(
                "UPDATE sources SET next_poll = 0, breaker = CASE WHEN breaker = ? THEN ? ELSE breaker END"
                " WHERE name = ?",
                (OPEN, HALF_OPEN, name),
            )
        return int(dead)

    # --- items -------------------------------------------------------------------------------------

    def item_failed(self, name: str, item: str, revision: str, error: str) -> ItemFailure:
        """One more failed attempt: retried after a backoff, dead once out of attempts. A new
        revision of a failed item starts its attempts again."""
        now = self._now()
        with self._db.transaction() as db:
            row = db.one(
                "SELECT revision, attempts FROM item_failures WHERE name = ? AND item = ?", (name, item)
            )
            attempts = (int(row[1]) if row is not None and row[0] == revision else 0) + 1
            dead = attempts >= self._retries.attempts
            retry_at = now + self._retries.delay(attempts)
            db.execute(
                "INSERT INTO item_failures (name, item, revision, attempts, error, failed_at, retry_at, dead)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name, item) DO UPDATE SET"
                " revision = excluded.revision, attempts = excluded.attempts, error = excluded.error,"
                " failed_at = excluded.failed_at, retry_at = excluded.retry_at, dead = excluded.dead",
                (name, item, revision, attempts, error[:2000], iso(now), float(retry_at), int(dead)),
            )
            if not dead:  # the retry comes at its time, not at the source's next scheduled poll
                db.execute(
                    "UPDATE sources SET next_poll = CASE WHEN next_poll < ? THEN next_poll ELSE ? END"
                    " WHERE name = ?",
                    (float(retry_at), float(retry_at), name),
                )
        return ItemFailure(item, revision, attempts, error[:2000], iso(now), retry_at, dead)

    def items_ok(self, name: str, items: Iterable[str]) -> None:
        with self._db.transaction() as db:
            db.executemany(
                "DELETE FROM item_failures WHERE name = ? AND item = ?", [(name, i) for i in items]
            )

    def failures(self, name: str) -> dict[str, ItemFailure]:
        rows = self._db.all(
            "SELECT item, revision, attempts, error, failed_at, retry_at, dead FROM item_failures"
            " WHERE name = ? ORDER BY item",
            (name,),
        )
        return {r[0]: ItemFailure(r[0], r[1], int(r[2]), r[3], r[4], float(r[5]), bool(r[6])) for r in rows}

    def waiting(self, failure: ItemFailure, revision: str) -> bool:
        """Whether an item that failed at `failure` is not to be tried now at `revision`: dead or
        backing off, and unchanged since."""
        return failure.revision == revision and (failure.dead or failure.retry_at > self._now())

    def members(self, name: str) -> set[str]:
        return {r[0] for r in self._db.all("SELECT item FROM members WHERE name = ?", (name,))}

    def add_members(self, name: str, items: Iterable[str]) -> None:
        with self._db.transaction() as db:
            db.executemany(
                "INSERT INTO members (name, item) VALUES (?, ?) ON CONFLICT (name, item) DO NOTHING",
                [(name, i) for i in items],
            )

    def remove_members(self, name: str, items: Iterable[str]) -> None:
        with self._db.transaction() as db:
            db.executemany("DELETE FROM members WHERE name = ? AND item = ?", [(name, i) for i in items])

    def close(self) -> None:
        self._db.close()


def _state(row: tuple[Any, ...]) -> SourceState:
    spec, origin, paused, breaker, failures, error, polled, succeeded, next_poll, job = row
    return SourceState(
        SourceConfig.model_validate(json.loads(spec)),
        origin,
        bool(paused),
        breaker,
        int(failures),
        error,
        polled,
        succeeded,
        float(next_poll),
        job,
    )


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat() if seconds else ""
