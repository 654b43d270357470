"""Attached databases: SQLite, PostgreSQL and DuckDB, each reached only through a read-only
connection with a statement timeout, their schema introspected for the agent, every query fenced.

A URL names the database: `sqlite:///abs/path.db` (or a bare path to a .db/.sqlite file),
`postgresql://role@host:port/db`, `duckdb:///abs/path.duckdb`. `${NAME}` in a URL is read from the
environment the caller passes when the database is opened, so a password can stay out of files and
listings. Which URLs a caller of the API may name is decided by `ragstack.guard.databases`, which
opens them through these classes.

A URL is shown only through `ragstack.redact.redact_url`, a driver's error only through
`redact_text` with every expanded secret masked; a column whose name looks like a secret (`password`,
`token`, `ssn`, `*_hash`...) is never sampled."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ragstack import extras
from ragstack.domain import Column, Table
from ragstack.errors import InvalidArgument, PermissionDenied, RagstackError, Unavailable
from ragstack.redact import MASK, is_secret_name, redact_text, redact_url
from ragstack.sql.fence import fence

_SAMPLES = 5  # sample values per column shown to the agent
_MAX_DISTINCT = 50  # a text column with at most this many values is categorical: all of them kept
_CELL_CHARS = 500  # a longer value is cut in the rows returned
_MAX_VALUE_BYTES = 1_000_000  # SQLite: no value (intermediate ones too) may grow larger
_SAMPLE_TIMEOUT_S = 2.0  # one sample or count query of a schema
_SCHEMA_TIMEOUT_S = 10.0  # all of a schema's: past it, the rest go without samples and counts


class SqlFailed(RagstackError):
    """The database refused or aborted the query (an error, or the statement timeout)."""

    code = "FAILED_PRECONDITION"


@dataclass(frozen=True)
class Rows:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool  # more rows matched than the cap; `rows` holds the first `max_rows`
    sql: str  # the statement that ran


VARIABLE = re.compile(r"\$\{(\w+)\}")  # `${NAME}` in a URL


def expand(text: str, environ: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """`text` with every `${NAME}` replaced by its value from `environ` (percent-encoded, for a URL),
    and the values, which errors must never show."""
    secrets: list[str] = []

    def var(m: re.Match[str]) -> str:
        if m.group(1) not in environ:
            raise InvalidArgument(f"the database URL needs ${{{m.group(1)}}}, which is not set")
        secrets.append(environ[m.group(1)])
        return quote(environ[m.group(1)], safe="")

    return VARIABLE.sub(var, text), tuple(s for s in secrets if s)


def parse_url(url: str) -> tuple[str, str]:
    """(dialect, rest): `sqlite` or `duckdb` with the file path the URL names, `postgres` with the
    URL itself. InvalidArgument for anything else."""
    url = url.strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in ("postgresql", "postgres"):
        return "postgres", url
    if scheme == "duckdb":
        return "duckdb", url.split("://", 1)[1]
    if scheme == "sqlite":
        return "sqlite", url.split("://", 1)[1]
    if not scheme and Path(url).suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        return "sqlite", url
    raise InvalidArgument(
        f"unsupported database URL {redact_url(url)!r}: use sqlite:///path, postgresql://... or duckdb:///path"
    )


def open_source(url: str, environ: Mapping[str, str] | None = None) -> Source:
    """The database a URL written by the operator names (ragstack.yaml, tests), `${NAME}` read from
    `environ` anywhere in a PostgreSQL URL. Raises InvalidArgument for an unknown scheme or a missing
    file. URLs a caller of the API names go through `ragstack.guard.databases` instead."""
    dialect, rest = parse_url(url)
    if dialect == "postgres":
        conninfo, secrets = expand(rest, environ or {})
        return PostgresSource(rest, conninfo, secrets=secrets)
    path = Path(rest).expanduser()
    if not path.is_file():
        raise InvalidArgument(f"no database file at {path}")
    return (DuckDBSource if dialect == "duckdb" else SqliteSource)(path.resolve())


def driver_error(err: BaseException, secrets: Sequence[str] = (), limit: int = 300) -> str:
    """A driver's message, safe to show: secrets masked, expanded values first, then cut."""
    text = str(err).strip()
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return redact_text(text)[:limit]


class Source(ABC):
    """One attached database. Every method opens its own short-lived read-only connection."""

    dialect: str

    def query(self, sql: str, max_rows: int, timeout_s: float, tables: Sequence[Table] | None = None) -> Rows:
        """Fence the statement (SqlRefused: never run), then run it read-only with the caps.
        `tables`: the schema when the caller has it (else it is read)."""
        names: set[str] = set()
        for t in self.schema() if tables is None else tables:
            names.add(t.name)
            names.update(self._aliases(t.name))
        fenced = fence(sql, self.dialect, names, max_rows)
        rows = self._execute(fenced.sql, fenced.limit, timeout_s, bounded=True)
        got = len(rows.rows)
        return Rows(rows.columns, rows.rows[:max_rows], fenced.capped and got > max_rows, fenced.sql)

    def run(self, sql: str, max_rows: int, timeout_s: float) -> Rows:
        """The read-only connection without the parser fence: for tests of the connection itself."""
        return self._execute(sql, max_rows, timeout_s)

    def _aliases(self, table: str) -> tuple[str, ...]:
        return ()

    @abstractmethod
    def schema(self) -> list[Table]: ...

    @abstractmethod
    def _execute(self, sql: str, limit: int, timeout_s: float, bounded: bool = False) -> Rows:
        """Run `sql` read-only. `bounded` (a fenced SELECT): no value of the result reaches this
        process longer than `_CELL_CHARS`, however large the database made it."""


def _cell(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.date | dt.time | dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, str) and len(value) > _CELL_CHARS:
        return value[:_CELL_CHARS] + "…"
    if value is None or isinstance(value, int | float | str | bool):
        return value
    return str(value)[:_CELL_CHARS]


def _rows(columns: Sequence[str], fetched: Sequence[Sequence[Any]], sql: str) -> Rows:
    return Rows(tuple(columns), tuple(tuple(_cell(v) for v in r) for r in fetched), False, sql)


# Rows of a schema query, or None when it was stopped (or not run) for the time it took.
Read = Callable[[Any], list[Any] | None]


def _budgeted(run: Callable[[Any, float], list[Any] | None]) -> Read:
    """A schema's sample and count queries, each stopped after _SAMPLE_TIMEOUT_S and none started
    past _SCHEMA_TIMEOUT_S in all: a view that never ends (a recursive CTE) costs the attach a few
    seconds and its samples, never the service a core. `run(query, seconds)` stops one query."""
    end = time.monotonic() + _SCHEMA_TIMEOUT_S

    def read(query: Any) -> list[Any] | None:
        left = end - time.monotonic()
        return run(query, min(left, _SAMPLE_TIMEOUT_S)) if left > 0 else None

    return read


def _samples(column: str, read: Read, query: Any) -> tuple[str, ...]:
    """Every value of a categorical column (`query` reads its distinct values), else the first few;
    none of a column whose name looks like a secret (its values are not even read), nor of one whose
    query ran out of time."""
    if is_secret_name(column):
        return ()
    out = [str(_cell(r[0])) for r in read(query) or () if r[0] is not None]
    return tuple(out if len(out) <= _MAX_DISTINCT else out[:_SAMPLES])


def _count(read: Read, query: Any) -> int:
    """A table's row count; -1 when counting ran out of time."""
    rows = read(query)
    return int(rows[0][0]) if rows else -1


# --- SQLite ---------------------------------------------------------------------------------------

# The authorizer is the last line: even a statement the fence let through can only read.
_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}  # 33: RECURSIVE
_SQLITE_DENIED_FUNCS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "zeroblob"}


def _sqlite_authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, _: str | None) -> int:
    if action not in _SQLITE_ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_READ and db not in (None, "main", "temp"):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SqliteSource(Source):
    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, check_same_thread=False)
        try:
            conn.execute("PRAGMA query_only = ON")
            yield conn
        except sqlite3.Error as err:
            raise SqlFailed(f"SQLite: {driver_error(err)}") from None
        finally:
            conn.close()

    def _aliases(self, table: str) -> tuple[str, ...]:
        return (f"main.{table}",)

    def schema(self) -> list[Table]:
        with self._connect() as conn:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                    "AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
            read = _budgeted(lambda sql, seconds: _sqlite_rows(conn, sql, seconds))
            tables = []
            for name in names:
                q = _quote_ident(name)
                cols = []
                for _, col, typ, *_ in conn.execute(f"PRAGMA table_info({q})").fetchall():
                    sql = f"SELECT DISTINCT {_quote_ident(col)} FROM {q} LIMIT 51"
                    cols.append(Column(col, typ or "", _samples(col, read, sql)))
                keys = tuple((r[3], r[2], r[4] or "") for r in conn.execute(f"PRAGMA foreign_key_list({q})"))
                tables.append(Table(name, tuple(cols), keys, _count(read, f"SELECT count(*) FROM {q}")))
        return tables

    def _execute(self, sql: str, limit: int, timeout_s: float, bounded: bool = False) -> Rows:
        with self._connect() as conn:
            # No string or blob over 1 MB, intermediate ones included: the progress handler cannot
            # interrupt one huge string operation, and the result must not flood the service.
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, _MAX_VALUE_BYTES)
            conn.set_authorizer(_sqlite_authorize)
            deadline = time.monotonic() + timeout_s
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            try:
                cur = conn.execute(sql)
                fetched = cur.fetchmany(limit)
            except sqlite3.OperationalError as err:
                if time.monotonic() > deadline:
                    raise SqlFailed(f"the query ran over its {timeout_s:g} s limit") from None
                raise SqlFailed(f"SQLite: {driver_error(err)}") from None
            return _rows([c[0] for c in cur.description or ()], fetched, sql)


def _sqlite_rows(conn: sqlite3.Connection, sql: str, seconds: float) -> list[Any] | None:
    stop = time.monotonic() + seconds
    conn.set_progress_handler(lambda: int(time.monotonic() > stop), 10_000)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        if time.monotonic() > stop:
            return None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --- PostgreSQL -----------------------------------------------------------------------------------

_PG_COLUMNS = """
SELECT c.table_schema, c.table_name, c.column_name, c.data_type
FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND c.table_schema NOT LIKE 'pg_%'
ORDER BY c.table_schema, c.table_name, c.ordinal_position
"""
_PG_KEYS = """
SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text, af.attname
FROM pg_constraint c
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]
WHERE c.contype = 'f'
"""


# bool, int8, int2, int4, float4, float8, numeric, date, time, timestamp, timestamptz: bounded in size.
_PG_PLAIN_TYPES = {16, 20, 21, 23, 700, 701, 1700, 1082, 1083, 1114, 1184}
_PG_ROLE = """
SELECT r.rolsuper, r.rolcreaterole,
       pg_has_role(current_user, 'pg_read_server_files', 'USAGE'),
       pg_has_role(current_user, 'pg_write_server_files', 'USAGE'),
       pg_has_role(current_user, 'pg_execute_server_program', 'USAGE')
FROM pg_roles r WHERE r.rolname = current_user
"""


class PostgresSource(Source):
    """Each call: a new connection whose transactions are all READ ONLY, with statement_timeout.
    Attach with a role that can only SELECT (the docs say how); this is the second fence."""

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        conninfo: str = "",
        params: Mapping[str, str] | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        """`url`: as given, for messages (shown redacted; it may hold `${NAME}`, never a value read
        for one). What psycopg connects to: `conninfo` (the URL itself when empty and `params`
        too) and the keywords `params`. `secrets`: values errors must never show."""
        self.url = url
        self._conninfo = conninfo or ("" if params else url)
        self._params = dict(params or {})
        self._secrets = tuple(secrets)

    @contextmanager
    def _connect(self, timeout_s: float) -> Iterator[Any]:
        extras.require("postgres", "a PostgreSQL database")
        import psycopg  # deferred: only deployments with PostgreSQL sources pay for the import

        try:
            settings = f"-c default_transaction_read_only=on -c statement_timeout={int(timeout_s * 1000)}"
            keywords: dict[str, Any] = {
                **self._params,
                "connect_timeout": max(1, int(timeout_s)),
                "options": settings,
            }
            conn = psycopg.connect(self._conninfo, **keywords)
        except psycopg.Error as err:
            raise Unavailable(
                f"cannot connect to {redact_url(self.url)}: {driver_error(err, self._secrets, 200)}"
            ) from None
        try:
            conn.read_only = True
            _check_role(conn)
            yield conn
        except psycopg.errors.QueryCanceled:
            raise SqlFailed(f"the query ran over its {timeout_s:g} s limit") from None
        except psycopg.Error as err:
            raise SqlFailed(f"PostgreSQL: {driver_error(err, self._secrets)}") from None
        finally:
            conn.rollback()
            conn.close()

    def _aliases(self, table: str) -> tuple[str, ...]:
        return (f"public.{table}",) if "." not in table else ()

    def schema(self) -> list[Table]:
        from psycopg import sql as pgsql

        # The catalog queries have the connection's statement_timeout; samples and counts the budget.
        with self._connect(_SCHEMA_TIMEOUT_S) as conn:
            read = _budgeted(lambda query, seconds: _pg_rows(conn, query, seconds))
            columns: dict[str, list[tuple[str, str, str]]] = {}
            for schema, table, col, typ in conn.execute(_PG_COLUMNS):
                name = table if schema == "public" else f"{schema}.{table}"
                columns.setdefault(name, []).append((schema, col, typ))
            keys: dict[str, list[tuple[str, str, str]]] = {}
            for rel, col, ref, ref_col in conn.execute(_PG_KEYS):
                keys.setdefault(rel, []).append((col, ref, ref_col))
            tables = []
            for name, cols in columns.items():
                schema = cols[0][0]
                ident = pgsql.Identifier(schema, name.split(".")[-1])
                out = []
                for _, col, typ in cols:
                    q = pgsql.SQL("SELECT DISTINCT {} FROM {} LIMIT 51").format(pgsql.Identifier(col), ident)
                    out.append(Column(col, typ, _samples(col, read, q)))
                count = _count(read, pgsql.SQL("SELECT count(*) FROM {}").format(ident))
                tables.append(Table(name, tuple(out), tuple(keys.get(name, ())), count))
        return tables

    def _execute(self, sql: str, limit: int, timeout_s: float, bounded: bool = False) -> Rows:
        with self._connect(timeout_s) as conn, conn.cursor() as cur:
            if not bounded:
                cur.execute(sql, prepare=True)  # a prepared statement cannot hold a second command
                fetched = cur.fetchmany(limit) if cur.description else []
                return _rows([c.name for c in cur.description or ()], fetched, sql)
            # The columns first (LIMIT 0 runs nothing), then every value that is not a number, date
            # or boolean cut on the server, so a huge value never crosses the wire.
            cur.execute(f"SELECT * FROM ({sql}) AS _q LIMIT 0", prepare=True)
            described = [(c.name, c.type_code) for c in cur.description or ()]
            aliases = [f"c{i}" for i in range(len(described))]
            values = [
                a if oid in _PG_PLAIN_TYPES else f"left({a}::text, {_CELL_CHARS + 1})"
                for a, (_, oid) in zip(aliases, described, strict=True)
            ]
            cur.execute(f"SELECT {', '.join(values)} FROM ({sql}) AS _q({', '.join(aliases)})", prepare=True)
            return _rows([n for n, _ in described], cur.fetchmany(limit), sql)


def _pg_rows(conn: Any, query: Any, seconds: float) -> list[Any] | None:
    """`query`'s rows, or None once it ran `seconds`: in a savepoint of its own, so the schema's
    transaction goes on after a query stopped."""
    import psycopg

    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")
            rows: list[Any] = conn.execute(query).fetchall()
            return rows
    except psycopg.errors.QueryCanceled:
        return None


def _check_role(conn: Any) -> None:
    """A read-only transaction does not stop a superuser's COPY TO PROGRAM or server-file
    functions: such a role is refused outright."""
    row = conn.execute(_PG_ROLE).fetchone()
    powers = [
        "superuser",
        "createrole",
        "pg_read_server_files",
        "pg_write_server_files",
        "pg_execute_server_program",
    ]
    held = [p for p, has in zip(powers, row or (), strict=False) if has]
    conn.rollback()
    if held:
        raise PermissionDenied(
            f"refusing PostgreSQL role with {', '.join(held)}: attach with a role that can only SELECT "
            "(README: Databases)"
        )


# --- DuckDB ---------------------------------------------------------------------------------------


_DUCK_PLAIN = re.compile(
    r"^(?:BOOLEAN|TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|U\w*INT|FLOAT|DOUBLE|DECIMAL\S*|DATE|TIME\w*)$"
)


class DuckDBSource(Source):
    dialect = "duckdb"

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        import duckdb

        try:
            conn = duckdb.connect(
                str(self.path),
                read_only=True,
                config={
                    "enable_external_access": False,  # no files, URLs or other databases
                    "autoinstall_known_extensions": False,
                    "autoload_known_extensions": False,
                    "memory_limit": "256MB",  # it runs inside the service: bound what a query may hold
                    "lock_configuration": True,  # and no SET to undo the above
                },
            )
        except duckdb.Error as err:
            raise Unavailable(f"cannot open DuckDB {self.path}: {driver_error(err)}") from None
        try:
            yield conn
        except duckdb.InterruptException:
            raise SqlFailed("the query ran over its time limit") from None
        except duckdb.Error as err:
            raise SqlFailed(f"DuckDB: {driver_error(err)}") from None
        finally:
            conn.close()

    def _aliases(self, table: str) -> tuple[str, ...]:
        return (f"main.{table}",) if "." not in table else ()

    def schema(self) -> list[Table]:
        with self._connect() as conn:
            cols: dict[str, list[tuple[str, str]]] = {}
            for table, col, typ in conn.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
            ).fetchall():
                cols.setdefault(table, []).append((col, typ))
            keys: dict[str, list[tuple[str, str, str]]] = {}
            for table, con_cols, ref_table, ref_cols in conn.execute(
                "SELECT table_name, constraint_column_names, referenced_table, referenced_column_names "
                "FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY'"
            ).fetchall():
                keys.setdefault(table, []).append((con_cols[0], ref_table, ref_cols[0]))
            read = _budgeted(lambda sql, seconds: _duckdb_rows(conn, sql, seconds))
            tables = []
            for table, columns in cols.items():
                q = _quote_ident(table)
                out = []
                for c, t in columns:
                    sql = f"SELECT DISTINCT {_quote_ident(c)} FROM {q} LIMIT 51"
                    out.append(Column(c, t, _samples(c, read, sql)))
                count = _count(read, f"SELECT count(*) FROM {q}")
                tables.append(Table(table, tuple(out), tuple(keys.get(table, ())), count))
        return tables

    def _execute(self, sql: str, limit: int, timeout_s: float, bounded: bool = False) -> Rows:
        with self._connect() as conn:
            timer = threading.Timer(timeout_s, conn.interrupt)
            timer.start()
            try:
                names: list[str] = []
                if bounded:  # as for PostgreSQL: long values are cut inside DuckDB
                    described = conn.execute(f"SELECT * FROM ({sql}) AS _q LIMIT 0").description or []
                    names = [c[0] for c in described]
                    aliases = [f"c{i}" for i in range(len(names))]
                    values = [
                        a
                        if _DUCK_PLAIN.match(str(c[1]))
                        else f"left(CAST({a} AS VARCHAR), {_CELL_CHARS + 1})"
                        for a, c in zip(aliases, described, strict=True)
                    ]
                    sql_run = f"SELECT {', '.join(values)} FROM ({sql}) AS _q({', '.join(aliases)})"
                else:
                    sql_run = sql
                cur = conn.execute(sql_run)
                fetched = cur.fetchmany(limit) if cur.description else []
                names = names or [c[0] for c in cur.description or ()]
            except Exception:
                if not timer.is_alive():
                    raise SqlFailed(f"the query ran over its {timeout_s:g} s limit") from None
                raise
            finally:
                timer.cancel()
            return _rows(names, fetched, sql)


def _duckdb_rows(conn: Any, sql: str, seconds: float) -> list[Any] | None:
    import duckdb

    timer = threading.Timer(seconds, conn.interrupt)
    timer.start()
    try:
        return list(conn.execute(sql).fetchall())
    except duckdb.InterruptException:
        return None
    finally:
        timer.cancel()
