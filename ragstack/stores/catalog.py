"""The document catalog: one SQLite row per document, with its fingerprint for incremental ingest."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ragstack.domain import Document

_COLUMNS = "document_id, library, source, revision, fingerprint, title, media_type, chunk_count, indexed_at"


class Catalog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS documents ("
            " document_id TEXT PRIMARY KEY, library TEXT NOT NULL, source TEXT NOT NULL,"
            " revision TEXT, fingerprint TEXT NOT NULL, title TEXT, media_type TEXT,"
            " chunk_count INTEGER, indexed_at TEXT)"
        )
        self._db.execute("CREATE INDEX IF NOT EXISTS documents_library ON documents(library, source)")

    def get(self, document_id: str) -> Document | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE document_id = ?", (document_id,)
            ).fetchone()
        return Document(*row) if row else None

    def upsert(self, doc: Document) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT OR REPLACE INTO documents ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    doc.document_id,
                    doc.library,
                    doc.source,
                    doc.revision,
                    doc.fingerprint,
                    doc.title,
                    doc.media_type,
                    doc.chunk_count,
                    doc.indexed_at,
                ),
            )

    def delete(self, document_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM documents WHERE document_id = ?", (document_id,))

    def list(self, library: str) -> list[Document]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE library = ? ORDER BY source", (library,)
            ).fetchall()
        return [Document(*r) for r in rows]

    def close(self) -> None:
        self._db.close()
