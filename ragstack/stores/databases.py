"""Which databases answer for which library: those in ragstack.yaml (`sql.databases`) and those
attached at run time (`ragstack db attach`, AttachDatabase), kept in the shared state (ragstack/state)
with the ACL groups that may query them. Ingest writes the attached ones; retrieve reads both. Every
database is opened through `ragstack.guard.databases`, which decides what an attached URL may name."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ragstack import domain as d
from ragstack.config import DatabaseConfig
from ragstack.errors import InvalidArgument, NotFound, RagstackError
from ragstack.guard.databases import ATTACHED, CONFIG, DatabaseGuard
from ragstack.redact import redact_text, redact_url
from ragstack.sql import Source
from ragstack.state import Migration, StateDB
from ragstack.state.migrations import ensure_column

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")

STORE = "databases"


def _first(db: StateDB) -> None:
    """The table; a SQLite file from before database ACLs gets `acl_groups` (its databases are
    open to everyone who may use their library)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS databases (library TEXT NOT NULL, name TEXT NOT NULL,"
        " url TEXT NOT NULL, attached_at TEXT NOT NULL, acl_groups TEXT NOT NULL DEFAULT '[]',"
        " PRIMARY KEY (library, name))"
    )
    if db.dialect == "sqlite":
        ensure_column(db, "databases", "acl_groups", "TEXT NOT NULL DEFAULT '[]'")


MIGRATIONS = (Migration(1, "databases attached at run time", _first),)

# Whether a caller may see something with these ACL groups (`Principal.sees`).
Visible = Callable[[Sequence[str]], bool]


@dataclass(frozen=True)
class Entry:
    name: str
    library: str
    url: str  # as given: may hold a password or ${NAME}; shown only through `redact_url`
    origin: str  # `config` or `attached`
    groups: tuple[str, ...] = ()  # ACL groups that may query it; empty: everyone who may use the library


class DatabaseRegistry:
    def __init__(
        self, db: StateDB, configured: Sequence[DatabaseConfig] = (), guard: DatabaseGuard | None = None
    ) -> None:
        self._configured = list(configured)
        self._guard = guard or DatabaseGuard()
        self._db = db

    def open(self, entry: Entry) -> Source:
        """The database an entry names, through the guard (an attached URL is checked again)."""
        return self._guard.open(entry.url, entry.origin)

    def introspect(self, entry: Entry) -> d.Database:
        """The database with its schema, or with the reason it could not be read."""
        found = d.Database(
            entry.name, entry.library, "", redact_url(entry.url), entry.origin, groups=entry.groups
        )
        try:
            source = self.open(entry)
            return replace(found, dialect=source.dialect, tables=tuple(source.schema()))
        except RagstackError as err:  # a missing file, an unreachable server: listed with the reason
            return replace(found, error=redact_text(str(err)))
        except Exception as err:  # a driver error nobody wrapped: still listed, never fatal
            return replace(found, error=f"{type(err).__name__}: {redact_text(str(err))[:300]}")

    def entries(self, library: str, visible: Visible | None = None) -> list[Entry]:
        """Configured databases first, then attached ones, each by name; with `visible`, only
        those whose ACL groups it accepts."""
        out = [Entry(c.name, library, c.url, CONFIG) for c in self._configured if c.library == library]
        taken = {e.name for e in out}
        rows = self._db.all(
            "SELECT name, url, acl_groups FROM databases WHERE library = ? ORDER BY name", (library,)
        )
        out.extend(
            Entry(name, library, url, ATTACHED, tuple(json.loads(groups or "[]")))
            for name, url, groups in rows
            if name not in taken
        )
        return [e for e in out if visible is None or visible(e.groups)]

    def entry(self, library: str, name: str, visible: Visible | None = None) -> Entry:
        """One database by name; with no name, the library's only one. One that `visible` does not
        accept is not found, as if it were not there."""
        entries = self.entries(library, visible)
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

    def attach(self, library: str, name: str, url: str, groups: Iterable[str] = ()) -> d.Database:
        """Checks the URL against the guard's allowlists, opens the database read-only and reads its
        schema, then records it with its ACL groups. A name already attached is replaced; a
        configured one cannot be."""
        if not _NAME.match(name):
            raise InvalidArgument(f"invalid database name {name[:80]!r}: use 1-64 of A-Z a-z 0-9 _ . -")
        if any(c.name == name and c.library == library for c in self._configured):
            raise InvalidArgument(
                f"database {name!r} is configured in ragstack.yaml; attach it under another name"
            )
        entry = Entry(name, library, url.strip(), ATTACHED, d.acl_groups(groups))
        # PermissionDenied, InvalidArgument, Unavailable or SqlFailed: nothing recorded
        source = self.open(entry)
        found = d.Database(
            name,
            library,
            source.dialect,
            redact_url(entry.url),
            entry.origin,
            tuple(source.schema()),
            groups=entry.groups,
        )
        self._db.execute(
            "INSERT INTO databases (library, name, url, attached_at, acl_groups) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (library, name) DO UPDATE SET url = excluded.url,"
            " attached_at = excluded.attached_at, acl_groups = excluded.acl_groups",
            (library, name, entry.url, datetime.now(UTC).isoformat(), json.dumps(entry.groups)),
        )
        return found

    def detach(self, library: str, name: str) -> None:
        gone = self._db.execute("DELETE FROM databases WHERE library = ? AND name = ?", (library, name))
        if not gone:
            configured = any(c.name == name and c.library == library for c in self._configured)
            where = "configured in ragstack.yaml: remove it there" if configured else "not attached"
            raise NotFound(f"database {name!r} of library {library!r} is {where}")

    def attached_counts(self) -> dict[str, int]:
        """library -> databases attached at run time."""
        rows = self._db.all("SELECT library, count(*) FROM databases GROUP BY library")
        return {r[0]: int(r[1]) for r in rows}

    def close(self) -> None:
        self._db.close()
