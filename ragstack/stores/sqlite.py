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
