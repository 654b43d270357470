"""The document catalog: one SQLite row per document, with its fingerprint for incremental ingest."""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragstack.domain import Document
from ragstack.stores.sqlite import ensure_column, open_sqlite

_COLUMNS = (
    "document_id, library, source, revision, fingerprint, title, media_type, chunk_count, indexed_at, groups"
)
_INSERT = f"INSERT OR REPLACE INTO documents ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


# The batch journal: what a batch is about to write, so that a crash between the stores' commits
# is rolled back or forward at the next start (services/ingest/pipeline.py).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
  document_id TEXT NOT NULL, library TEXT NOT NULL, source TEXT NOT NULL, revision TEXT,
  fingerprint TEXT NOT NULL, title TEXT, media_type TEXT, chunk_count INTEGER, indexed_at TEXT,
  groups TEXT NOT NULL DEFAULT '[]', PRIMARY KEY (library, document_id));
CREATE TABLE IF NOT EXISTS journal (id INTEGER PRIMARY KEY CHECK (id = 1), record TEXT);
"""


class Catalog:
    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = open_sqlite(path, _SCHEMA)
        _upgrade(self._db)

    def begin_batch(self, record: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO journal (id, record) VALUES (1, ?)", (record,))

    def pending_batch(self) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT record FROM journal WHERE id = 1").fetchone()
        return str(row[0]) if row else None

    def end_batch(self, docs: Iterable[Document] = (), removed: Iterable[tuple[str, str]] = ()) -> None:
        """The batch's catalog rows (`docs` written, `removed`: (library, document id) gone) and the
        end of its journal entry, in one transaction."""
        rows = [_row(d) for d in docs]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM documents WHERE library = ? AND document_id = ?", list(removed))
            self._db.executemany(_INSERT, rows)
            self._db.execute("DELETE FROM journal WHERE id = 1")
            self._db.execute("COMMIT")

    def get(self, library: str, document_id: str) -> Document | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE library = ? AND document_id = ?",
                (library, document_id),
            ).fetchone()
        return _document(row) if row else None

    def states(self, library: str) -> dict[str, tuple[str, tuple[str, ...]]]:
        """document_id -> (fingerprint, ACL groups) for a whole library (one query for a big batch):
        a document is unchanged only when both are (a new ACL must reach every store)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT document_id, fingerprint, groups FROM documents WHERE library = ?", (library,)
            ).fetchall()
        return {r[0]: (r[1], _groups(r[2])) for r in rows}

    def upsert(self, docs: Iterable[Document]) -> None:
        rows = [_row(d) for d in docs]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(_INSERT, rows)
            self._db.execute("COMMIT")

    def set_revisions(self, library: str, revisions: Mapping[str, str]) -> None:
        """document_id -> its backend revision (mtime, ETag), for documents whose bytes did not change."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany(
                "UPDATE documents SET revision = ? WHERE library = ? AND document_id = ?",
                [(rev, library, doc_id) for doc_id, rev in revisions.items()],
            )
            self._db.execute("COMMIT")

    def list(self, library: str) -> list[Document]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE library = ? ORDER BY source", (library,)
            ).fetchall()
        return [_document(r) for r in rows]

    def libraries(self) -> builtins.list[tuple[str, int, int, str]]:
        """(library, documents, chunks, last indexed_at) for every library with documents."""
        with self._lock:
            rows = self._db.execute(
                "SELECT library, count(*), coalesce(sum(chunk_count), 0), max(indexed_at) FROM documents"
                " GROUP BY library ORDER BY library"
            ).fetchall()
        return [(r[0], int(r[1]), int(r[2]), r[3] or "") for r in rows]

    def media_types(self, library: str) -> dict[str, int]:
        """media type -> documents of that type in the library."""
        with self._lock:
            rows = self._db.execute(
                "SELECT coalesce(media_type, ''), count(*) FROM documents WHERE library = ?"
                " GROUP BY 1 ORDER BY 1",
                (library,),
            ).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def backup_to(self, target: Path) -> None:
        """A consistent copy of the catalog in the new file `target` (SQLite's backup API), in one
        file (rollback journal, not WAL), so the copy can be moved and read on its own."""
        with self._lock:
            copy = sqlite3.connect(str(target))
            try:
                self._db.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")
            finally:
                copy.close()

    def restore_from(self, source: Path) -> None:
        """The catalog becomes the content of `source` (a `backup_to` file), in one transaction:
        other connections see the old rows or the restored ones."""
        with self._lock:
            copy = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
            try:
                copy.backup(self._db)
            finally:
                copy.close()
            self._db.executescript(_SCHEMA)  # a snapshot older than a table gets it back
            _upgrade(self._db)

    def close(self) -> None:
        self._db.close()


def _row(d: Document) -> tuple[object, ...]:
    return (
        d.document_id,
        d.library,
        d.source,
        d.revision,
        d.fingerprint,
        d.title,
        d.media_type,
        d.chunk_count,
        d.indexed_at,
        json.dumps(sorted(d.groups)),
    )


def _document(row: tuple[Any, ...]) -> Document:
    doc_id, library, source, revision, fingerprint, title, media_type, chunks, indexed_at, groups = row
    return Document(
        doc_id, library, source, revision, fingerprint, title, media_type, chunks, indexed_at, _groups(groups)
    )


def _groups(raw: object) -> tuple[str, ...]:
    return tuple(json.loads(str(raw))) if raw else ()


def _upgrade(db: sqlite3.Connection) -> None:
    """A catalog written before document ACLs: its documents become public."""
    ensure_column(db, "documents", "groups", "TEXT NOT NULL DEFAULT '[]'")
