"""One store's connection to the shared state, the same for SQLite and PostgreSQL.

Stores write SQL that both engines accept (`?` placeholders, `INSERT ... ON CONFLICT`); where they
differ a store looks at `db.dialect`. A StateDB is shared by a process's threads: each call (and
each `transaction()` block, as a whole) holds its lock. With PostgreSQL every store has its own
schema (`<state.schema_prefix>_<store>`), so stores keep their table names, and a connection lost
between calls (a server restart, a failover) is opened again on the next one."""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ragstack.errors import ConfigError, Unavailable

if TYPE_CHECKING:
    from ragstack.config import StateConfig
    from ragstack.state.migrations import Migration

Dialect = Literal["sqlite", "postgres"]
Row = tuple[Any, ...]
_STORE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")


class StateDB:
    def __init__(self, store: str, dialect: Dialect, connect: Callable[[], Any]) -> None:
        self.store = store
        self.dialect: Dialect = dialect
        self._connect = connect
        self._lock = threading.RLock()
        self._in_transaction = False
        self.connections = 0  # connections opened so far: session state (locks) lives in one
        self._closed = False
        self._conn = self._open()

    # --- statements ---------------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Runs one statement; the rows it changed."""
        return int(self._run(lambda c: c.execute(self._sql(sql), tuple(params)).rowcount))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if batch:
            self._run(lambda c: c.cursor().executemany(self._sql(sql), batch))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._run(lambda c: c.execute(self._sql(sql), tuple(params)).fetchone())
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        rows = self._run(lambda c: c.execute(self._sql(sql), tuple(params)).fetchall())
        return [tuple(r) for r in rows]

    @contextmanager
    def transaction(self) -> Iterator[StateDB]:
        """Statements inside commit together or not at all; SQLite takes its write lock up front
        (BEGIN IMMEDIATE) so two processes never deadlock upgrading a read. A nested block is part
        of the outer one."""
        with self._lock:
            if self._in_transaction:
                yield self
                return
            self._run(lambda c: c.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN"))
            self._in_transaction = True
            try:
                yield self
            except BaseException:
                self._in_transaction = False
                self._rollback()
                raise
            self._in_transaction = False
            self._conn.execute("COMMIT")

    @property
    def offset_only(self) -> str:
        """The clause that skips `?` rows with no limit after (SQLite needs a LIMIT before OFFSET)."""
        return "LIMIT -1 OFFSET ?" if self.dialect == "sqlite" else "OFFSET ?"

    def one_at_a_time(self, key: str) -> None:
        """In a transaction: waits until no other transaction holds `key`, then holds it to the end
        (a PostgreSQL advisory lock, per schema). Under READ COMMITTED, two writers that count or
        number rows and then write would otherwise each miss the other's rows; SQLite's transactions
        hold its write lock from their start already."""
        assert self._in_transaction, "one_at_a_time holds its lock to the end of a transaction"
        if self.dialect == "postgres":
            self.one(
                "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '.' || ?, 0))", (key,)
            )

    def close(self) -> None:
        """Closes the connection for good: a statement a thread still runs afterwards is refused,
        not run on a connection opened again that nobody would close. PostgreSQL session locks are
        released first, so another process need not wait for the server to end the session."""
        with self._lock:
            self._closed = True
            if self.dialect == "postgres":
                try:
                    self._conn.execute("SELECT pg_advisory_unlock_all()")
                except Exception:
                    pass  # the connection is gone, and the session's locks with it
            self._drop()

    # --- internals ----------------------------------------------------------------------------------

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else _postgres_sql(sql)

    def _run(self, call: Callable[[Any], Any]) -> Any:
        with self._lock:
            if self._closed:
                raise Unavailable(f"state store {self.store}: closed, this process is stopping")
            try:
                return call(self._conn)
            except Exception as err:
                if self.dialect != "postgres":
                    raise
                if _rolled_back(err):  # a deadlock or serialization failure: the connection is fine
                    raise Unavailable(
                        f"state store {self.store}: PostgreSQL rolled the transaction back, try again: "
                        f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
                    ) from err
                if not _lost(err):
                    raise
                if self._in_transaction:  # the transaction is gone with the connection
                    raise Unavailable(f"state store {self.store}: connection lost: {err}") from err
            self._drop()
            self._conn = self._open()  # lost between statements: once more on a new connection
            return call(self._conn)

    def _drop(self) -> None:
        try:
            self._conn.close()
        except Exception:
            pass

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except Exception as err:
            if self.dialect == "sqlite" or not _lost(err):
                raise

    def _open(self) -> Any:
        self.connections += 1
        try:
            return self._connect()
        except Exception as err:
            if self.dialect == "postgres" and _lost(err):
                raise Unavailable(f"state store {self.store}: PostgreSQL unreachable: {err}") from err
            raise


def _rolled_back(err: Exception) -> bool:
    """SQLSTATE class 40, transaction rollback: a deadlock, a serialization failure."""
    return str(getattr(err, "sqlstate", "") or "").startswith("40")


def _lost(err: Exception) -> bool:
    import psycopg

    return isinstance(err, psycopg.OperationalError | psycopg.InterfaceError) and not _rolled_back(err)


@lru_cache(maxsize=1024)
def _postgres_sql(sql: str) -> str:
    # psycopg's placeholders are %s; a literal % must be doubled. Our SQL holds no ? in literals.
    return sql.replace("%", "%%").replace("?", "%s")


def open_state(
    cfg: StateConfig,
    data_dir: Path,
    store: str,
    migrations: Sequence[Migration],
    *,
    migrate: bool | None = None,
) -> StateDB:
    """`store`'s state: `<data_dir>/<store>.sqlite`, or its schema in the PostgreSQL database at
    `cfg.url`. A new store gets the whole schema; one behind this release is migrated only when
    `migrate` (default: `cfg.auto_migrate`), else MigrationRequired says to run `ragstack migrate`."""
    from ragstack.state.migrations import prepare

    db = connect_state(cfg, data_dir, store)
    try:
        prepare(db, migrations, apply_pending=cfg.auto_migrate if migrate is None else migrate)
    except BaseException:
        db.close()
        raise
    return db


def connect_state(cfg: StateConfig, data_dir: Path, store: str) -> StateDB:
    """A connection to `store`'s state, its schema as it is (see open_state)."""
    if not _STORE_NAME.match(store):
        raise ValueError(f"bad store name {store!r}")
    if not cfg.url:
        path = data_dir / f"{store}.sqlite"
        return StateDB(store, "sqlite", lambda: _sqlite(path))
    schema = f"{cfg.schema_prefix}_{store}"
    url, password = cfg.url, os.environ.get(cfg.password_env, "") if cfg.password_env else ""
    return StateDB(store, "postgres", lambda: _postgres(url, password, schema, cfg.connect_timeout_s))


def _sqlite(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    _write_ahead(conn, 30.0)
    return conn


def _write_ahead(conn: sqlite3.Connection, wait_s: float) -> None:
    """WAL mode: readers in other processes do not block the writer. Switching a new file to it
    takes the file to oneself, and SQLite answers "database is locked" at once, past its busy
    timeout, while another process opening the same new file holds it: tried again for `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _postgres(url: str, password: str, schema: str, timeout_s: float) -> Any:
    try:
        import psycopg
    except ImportError:
        raise ConfigError("state.url names PostgreSQL: install the `postgres` extra (psycopg)") from None
    extra: dict[str, Any] = {"password": password} if password else {}
    conn = psycopg.connect(
        url,
        autocommit=True,
        connect_timeout=max(1, int(timeout_s)),
        application_name=f"ragstack-{schema}",
        **extra,
    )
    try:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    except psycopg.errors.UniqueViolation:
        pass  # another process made it at the same moment (IF NOT EXISTS is not atomic)
    conn.execute(f'SET search_path TO "{schema}"')
    return conn
