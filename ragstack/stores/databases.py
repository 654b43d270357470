"""Which databases answer for which library: those in ragstack.yaml (`sql.databases`) and those
attached at run time (`ragstack db attach`, AttachDatabase), kept in `<data_dir>/databases.sqlite`.
Ingest writes the attached ones; retrieve reads both."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ragstack import domain as d
from ragstack.config import DatabaseConfig
from ragstack.errors import InvalidArgument, NotFound, RagstackError
from ragstack.sql import open_source, redact
from ragstack.stores.sqlite import open_sqlite

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Entry:
    name: str
    library: str
    url: str  # as given: may hold a password or ${NAME}; never shown (see `redact`)
    origin: str  # `config` or `attached`


def introspect(entry: Entry) -> d.Database:
    """The database with its schema, or with the reason it could not be read."""
    found = d.Database(entry.name, entry.library, "", redact(entry.url), entry.origin)
    try:
        source = open_source(entry.url)
        return replace(found, dialect=source.dialect, tables=tuple(source.schema()))
    except RagstackError as err:  # a missing file, an unreachable server: listed with the reason
        return replace(found, error=str(err))
    except Exception as err:  # a driver error nobody wrapped: still listed, never fatal
        return replace(found, error=f"{type(err).__name__}: {err}")


class DatabaseRegistry:
    def __init__(self, path: Path, configured: Sequence[DatabaseConfig] = ()) -> None:
        self._configured = list(configured)
        self._lock = threading.Lock()
        self._db = open_sqlite(
            path,
            "CREATE TABLE IF NOT EXISTS databases (library TEXT NOT NULL, name TEXT NOT NULL,"
            " url TEXT NOT NULL, attached_at TEXT NOT NULL, PRIMARY KEY (library, name))",
        )

    def entries(self, library: str) -> list[Entry]:
        """Configured databases first, then attached ones, each by name."""
        out = [Entry(c.name, library, c.url, "config") for c in self._configured if c.library == library]
        taken = {e.name for e in out}
        with self._lock:
            rows = self._db.execute(
                "SELECT name, url FROM databases WHERE library = ? ORDER BY name", (library,)
            ).fetchall()
        out.extend(Entry(name, library, url, "attached") for name, url in rows if name not in taken)
        return out

    def entry(self, library: str, name: str) -> Entry:
        """One database by name; with no name, the library's only one."""
        entries = self.entries(library)
        if not name:
            if len(entries) == 1:
                return entries[0]
            if not entries:
                raise NotFound(f"library {library!r} has no attached database")
            raise InvalidArgument(
                f"library {library!r} has {len(entries)} databases: name one of "
                + ", ".join(e.name for e in entries)
            )
        for e in entries:
            if e.name == name:
                return e
        raise NotFound(f"database {name!r} is not attached to library {library!r}")

    def attach(self, library: str, name: str, url: str) -> d.Database:
        """Opens the database read-only and reads its schema, then records it. A name already
        attached is replaced; a configured one cannot be."""
        if not _NAME.match(name):
            raise InvalidArgument(f"invalid database name {name!r}: use 1-64 of A-Z a-z 0-9 _ . -")
        if any(c.name == name and c.library == library for c in self._configured):
            raise InvalidArgument(
                f"database {name!r} is configured in ragstack.yaml; attach it under another name"
            )
        entry = Entry(name, library, url.strip(), "attached")
        source = open_source(entry.url)  # InvalidArgument, Unavailable or SqlFailed: nothing recorded
        found = d.Database(
            name, library, source.dialect, redact(entry.url), entry.origin, tuple(source.schema())
        )
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO databases (library, name, url, attached_at) VALUES (?, ?, ?, ?)",
                (library, name, entry.url, datetime.now(UTC).isoformat()),
            )
        return found

    def detach(self, library: str, name: str) -> None:
        with self._lock:
            gone = self._db.execute(
                "DELETE FROM databases WHERE library = ? AND name = ?", (library, name)
            ).rowcount
        if not gone:
            configured = any(c.name == name and c.library == library for c in self._configured)
            where = "configured in ragstack.yaml: remove it there" if configured else "not attached"
            raise NotFound(f"database {name!r} of library {library!r} is {where}")

    def attached_counts(self) -> dict[str, int]:
        """library -> databases attached at run time."""
        with self._lock:
            rows = self._db.execute("SELECT library, count(*) FROM databases GROUP BY library").fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def close(self) -> None:
        self._db.close()
