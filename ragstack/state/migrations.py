"""Versioned schemas. Each store lists its migrations in order; a store's `schema_migrations` table
records which it has. Opening a store makes a new one whole, adopts one from before versions at
version 1 (its first migration is written to be idempotent for that), and refuses one that is
behind this release with MigrationRequired, which names the changes: `ragstack migrate` (or
`state.auto_migrate: true`) applies them. A store ahead of this release (written by a newer one)
is refused too. Migrations run in one transaction under a lock, so two processes starting at once
apply each change once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ragstack.errors import FailedPrecondition
from ragstack.state.db import StateDB

Step = str | Callable[[StateDB], None]


@dataclass(frozen=True)
class Migration:
    version: int
    says: str  # what it changes, as `ragstack migrate` and MigrationRequired show it
    sqlite: Step
    postgres: Step | None = None  # None: the same as `sqlite`

    def step(self, dialect: str) -> Step:
        return self.postgres if dialect == "postgres" and self.postgres is not None else self.sqlite


class MigrationRequired(FailedPrecondition):
    def __init__(self, store: str, current: int, pending: Sequence[Migration]) -> None:
        changes = "; ".join(f"{m.version}: {m.says}" for m in pending)
        super().__init__(
            f"state store {store!r} is at schema version {current}, this release needs "
            f"{pending[-1].version} ({changes}): run `ragstack migrate` first"
        )
        self.store = store
        self.current = current
        self.pending = list(pending)


def prepare(db: StateDB, migrations: Sequence[Migration], *, apply_pending: bool) -> list[Migration]:
    """Makes `db`'s schema current (see the module's docstring); the migrations it applied."""
    _check_order(migrations)
    latest = migrations[-1].version
    with db.transaction():
        _lock(db)
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " says TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = version(db)
        if current > latest:
            raise FailedPrecondition(
                f"state store {db.store!r} is at schema version {current}, newer than this release"
                f" knows ({latest}): run the release that wrote it"
            )
        applied: list[Migration] = []
        if current == 0:
            # A new store is made whole; one from before versions gets its first (idempotent) one.
            applied = _apply(db, list(migrations) if not _has_tables(db) else list(migrations[:1]))
            current = applied[-1].version
        pending = [m for m in migrations if m.version > current]
        if pending and not apply_pending:
            raise MigrationRequired(db.store, current, pending)
        return applied + _apply(db, pending)


def pending(db: StateDB, migrations: Sequence[Migration]) -> list[Migration]:
    """What `prepare` would apply to `db` when allowed to (all of them for a new store)."""
    current = version(db) if _has_table(db, "schema_migrations") else 0
    return [m for m in migrations if m.version > current]


def version(db: StateDB) -> int:
    row = db.one("SELECT max(version) FROM schema_migrations")
    return int(row[0]) if row and row[0] is not None else 0


def _apply(db: StateDB, todo: Sequence[Migration]) -> list[Migration]:
    for m in todo:
        step = m.step(db.dialect)
        if callable(step):
            step(db)
        else:
            for statement in split_statements(step):
                db.execute(statement)
        db.execute(
            "INSERT INTO schema_migrations (version, says, applied_at) VALUES (?, ?, ?)",
            (m.version, m.says, datetime.now(UTC).isoformat()),
        )
    return list(todo)


def split_statements(script: str) -> list[str]:
    """A script's statements (sqlite3's executescript would commit the open transaction)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def _lock(db: StateDB) -> None:
    if db.dialect == "postgres":  # SQLite's BEGIN IMMEDIATE already excludes other writers
        db.one("SELECT pg_advisory_xact_lock(hashtext('ragstack.migrate.' || current_schema()))")


def _has_table(db: StateDB, name: str) -> bool:
    if db.dialect == "sqlite":
        row = db.one("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
    else:
        row = db.one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
            " AND table_name = ?",
            (name,),
        )
    return bool(row and row[0])


def _has_tables(db: StateDB) -> bool:
    """Whether the store holds tables of its own (beyond the version table)."""
    if db.dialect == "sqlite":
        row = db.one(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name != 'schema_migrations'"
        )
    else:
        row = db.one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
            " AND table_name != 'schema_migrations'"
        )
    return bool(row and row[0])


def _check_order(migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if not versions or versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations must be numbered 1, 2, ... in order, got {versions}")


def ensure_column(db: StateDB, table: str, column: str, definition: str) -> None:
    """SQLite: adds `column` to a table made before versions (the first migrations adopt those)."""
    have = {row[1] for row in db.all(f"PRAGMA table_info({table})")}
    if column not in have:
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
