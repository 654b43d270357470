"""The document catalog: one row per document with its fingerprint for incremental ingest, in the
shared state (SQLite or PostgreSQL, ragstack/state)."""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragstack.domain import Document
from ragstack.state import Migration, StateDB
from ragstack.state.migrations import ensure_column, prepare, split_statements

_COLUMNS = (
    "document_id, library, source, revision, fingerprint, title, media_type, chunk_count, indexed_at, groups,"
    " build"
)
_INSERT = (
    f"INSERT INTO documents ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (library, document_id) DO UPDATE SET source = excluded.source,"
    " revision = excluded.revision, fingerprint = excluded.fingerprint, title = excluded.title,"
    " media_type = excluded.media_type, chunk_count = excluded.chunk_count,"
    " indexed_at = excluded.indexed_at, groups = excluded.groups, build = excluded.build"
)

STORE = "catalog"
# The batch journal: what a batch is about to write, so that a crash between the stores' commits
# is rolled back or forward at the next start (services/ingest/pipeline.py).
_TABLES = """
CREATE TABLE IF NOT EXISTS documents (
  document_id TEXT NOT NULL, library TEXT NOT NULL, source TEXT NOT NULL, revision TEXT,
  fingerprint TEXT NOT NULL, title TEXT, media_type TEXT, chunk_count INTEGER, indexed_at TEXT,
  groups TEXT NOT NULL DEFAULT '[]', PRIMARY KEY (library, document_id));
CREATE TABLE IF NOT EXISTS journal (id INTEGER PRIMARY KEY CHECK (id = 1), record TEXT);
"""


def _first(db: StateDB) -> None:
    """The tables; a catalog from before document ACLs gets `groups` (its documents are public)."""
    for statement in split_statements(_TABLES):
        db.execute(statement)
    if db.dialect == "sqlite":
        ensure_column(db, "documents", "groups", "TEXT NOT NULL DEFAULT '[]'")


MIGRATIONS = (
    Migration(1, "documents and the batch journal", _first),
    # The graph's entity keys each library's writes touched since its communities were last made
    # (written with the batch's catalog rows, cleared by the refresh): the refresh summarises the
    # communities of these again, and one that a cancel, a crash or a failure skipped is made by the
    # library's next run, in whichever process. EVERY_COMMUNITY: all of them (what changed is unknown).
    Migration(
        2,
        "graph entities whose communities wait for a refresh",
        "CREATE TABLE IF NOT EXISTS graph_touched (library TEXT NOT NULL, key TEXT NOT NULL,"
        " PRIMARY KEY (library, key))",
    ),
    # Each document's index build (services/ingest/build.py); a catalog's older rows get the empty
    # one, so their documents are indexed again by their next ingest.
    Migration(
        3, "documents' index builds", "ALTER TABLE documents ADD COLUMN build TEXT NOT NULL DEFAULT ''"
    ),
)
EVERY_COMMUNITY = ""  # no entity has an empty key
# What a backup from before a column was added holds in its place.
_BEFORE = {"groups": "'[]'", "build": "''"}
_TOUCH = "INSERT INTO graph_touched (library, key) VALUES (?, ?) ON CONFLICT (library, key) DO NOTHING"


class Catalog:
    def __init__(self, db: StateDB) -> None:
        self._db = db

    def begin_batch(self, record: str) -> None:
        self._db.execute(
            "INSERT INTO journal (id, record) VALUES (1, ?)"
            " ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            (record,),
        )

    def pending_batch(self) -> str | None:
        row = self._db.one("SELECT record FROM journal WHERE id = 1")
        return str(row[0]) if row else None

    def end_batch(
        self,
        docs: Iterable[Document] = (),
        removed: Iterable[tuple[str, str]] = (),
        touched: tuple[str, Iterable[str]] | None = None,
    ) -> None:
        """The batch's catalog rows (`docs` written, `removed`: (library, document id) gone) and the
        end of its journal entry, in one transaction. `touched`: (library, the graph's entity keys
        the batch wrote or removed), whose communities now wait for a refresh."""
        rows = [_row(d) for d in docs]
        with self._db.transaction() as db:
            db.executemany("DELETE FROM documents WHERE library = ? AND document_id = ?", list(removed))
            db.executemany(_INSERT, rows)
            if touched is not None:
                library, keys = touched
                db.executemany(_TOUCH, [(library, k) for k in keys])
            db.execute("DELETE FROM journal WHERE id = 1")

    def graph_touched(self, library: str) -> set[str]:
        """The entity keys whose communities wait for a refresh (EVERY_COMMUNITY among them: all)."""
        return {r[0] for r in self._db.all("SELECT key FROM graph_touched WHERE library = ?", (library,))}

    def graph_emptied(self) -> builtins.list[str]:
        """Libraries whose communities wait for a refresh but that have no documents left (a delete's
        refresh failed): no run into them will come to make it."""
        rows = self._db.all(
            "SELECT DISTINCT t.library FROM graph_touched t WHERE NOT EXISTS"
            " (SELECT 1 FROM documents d WHERE d.library = t.library) ORDER BY t.library"
        )
        return [r[0] for r in rows]

    def graph_refreshed(self, library: str) -> None:
        self._db.execute("DELETE FROM graph_touched WHERE library = ?", (library,))

    def get(self, library: str, document_id: str) -> Document | None:
        row = self._db.one(
            f"SELECT {_COLUMNS} FROM documents WHERE library = ? AND document_id = ?", (library, document_id)
        )
        return _document(row) if row else None

    def states(self, library: str) -> dict[str, tuple[str, tuple[str, ...], str]]:
        """document_id -> (fingerprint, ACL groups, build) for a whole library (one query for a big
        batch): a document is unchanged only when all three are (a new ACL must reach every store)."""
        rows = self._db.all(
            "SELECT document_id, fingerprint, groups, build FROM documents WHERE library = ?", (library,)
        )
        return {r[0]: (r[1], _groups(r[2]), r[3]) for r in rows}

    def upsert(self, docs: Iterable[Document]) -> None:
        rows = [_row(d) for d in docs]
        with self._db.transaction() as db:
            db.executemany(_INSERT, rows)

    def set_revisions(self, library: str, revisions: Mapping[str, str]) -> None:
        """document_id -> its backend revision (mtime, ETag), for documents whose bytes did not change."""
        with self._db.transaction() as db:
            db.executemany(
                "UPDATE documents SET revision = ? WHERE library = ? AND document_id = ?",
                [(rev, library, doc_id) for doc_id, rev in revisions.items()],
            )

    def list(self, library: str) -> list[Document]:
        rows = self._db.all(f"SELECT {_COLUMNS} FROM documents WHERE library = ? ORDER BY source", (library,))
        return [_document(r) for r in rows]

    def libraries(self) -> builtins.list[tuple[str, int, int, str]]:
        """(library, documents, chunks, last indexed_at) for every library with documents."""
        rows = self._db.all(
            "SELECT library, count(*), coalesce(sum(chunk_count), 0), max(indexed_at) FROM documents"
            " GROUP BY library ORDER BY library"
        )
        return [(r[0], int(r[1]), int(r[2]), r[3] or "") for r in rows]

    def media_types(self, library: str) -> dict[str, int]:
        """media type -> documents of that type in the library."""
        return self._counts("coalesce(media_type, '')", library)

    def builds(self, library: str) -> dict[str, int]:
        """index build -> documents of the library built so ("": before builds were recorded)."""
        return self._counts("build", library)

    def _counts(self, column: str, library: str) -> dict[str, int]:
        rows = self._db.all(
            f"SELECT {column}, count(*) FROM documents WHERE library = ? GROUP BY 1 ORDER BY 1", (library,)
        )
        return {r[0]: int(r[1]) for r in rows}

    def backup_to(self, target: Path) -> None:
        """The catalog's documents and the graph's pending refreshes, as of one moment, in the new
        SQLite file `target` (whatever the backend), so a snapshot can be moved and read on its own."""
        with self._db.transaction() as db:
            rows = db.all(f"SELECT {_COLUMNS} FROM documents")
            touched = db.all("SELECT library, key FROM graph_touched")
        copy = StateDB(STORE, "sqlite", lambda: _one_file(target))
        try:
            prepare(copy, MIGRATIONS, apply_pending=True)
            with copy.transaction():
                copy.executemany(_INSERT, rows)
                copy.executemany(_TOUCH, touched)
        finally:
            copy.close()

    def restore_from(self, source: Path) -> None:
        """The catalog's documents and pending refreshes become those of `source` (a `backup_to`
        file, of this release or an older one), in one transaction: other connections see the old
        rows or the restored ones. A file from before pending refreshes were kept leaves every
        library's communities due (the graph tables come back as they were then, whatever that was)."""
        conn = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)
        try:
            have = {r[1] for r in conn.execute("PRAGMA table_info(documents)")}
            columns = ", ".join(c if c in have else _BEFORE[c] for c in _COLUMNS.split(", "))
            rows = conn.execute(f"SELECT {columns} FROM documents").fetchall()
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "graph_touched" in tables:
                touched = conn.execute("SELECT library, key FROM graph_touched").fetchall()
            else:
                touched = [(library, EVERY_COMMUNITY) for library in sorted({r[1] for r in rows})]
        finally:
            conn.close()
        with self._db.transaction() as db:
            db.execute("DELETE FROM documents")
            db.executemany(_INSERT, rows)
            db.execute("DELETE FROM graph_touched")
            db.executemany(_TOUCH, touched)

    def close(self) -> None:
        self._db.close()


def _one_file(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")  # one file, no WAL beside it
    return conn


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
        d.build,
    )


def _document(row: tuple[Any, ...]) -> Document:
    doc_id, library, source, revision, fingerprint, title, media_type, chunks, indexed_at, groups, build = row
    return Document(
        doc_id,
        library,
        source,
        revision,
        fingerprint,
        title,
        media_type,
        chunks,
        indexed_at,
        _groups(groups),
        build,
    )


def _groups(raw: object) -> tuple[str, ...]:
    return tuple(json.loads(str(raw))) if raw else ()
