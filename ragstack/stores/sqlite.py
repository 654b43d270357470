"""The SQLite files beside the stores (catalog, ingest jobs, attached databases, enrichment cache)
open one way."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_sqlite(path: Path, schema: str) -> sqlite3.Connection:
    """An autocommit connection that threads share (its owner serialises calls with a lock), in
    WAL mode so readers in other processes do not block the writer, with `schema` (idempotent
    statements) applied."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema)
    return db


def ensure_column(db: sqlite3.Connection, table: str, column: str, definition: str) -> None:
    """Adds `column` to a table made by an older release (schema upgrades in place)."""
    have = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
    if column not in have:
        db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
