"""Databases as sources, attacked: read-only SQL that cannot be turned against its owner, proven on
real databases (a SQLite file, a DuckDB file and a throwaway PostgreSQL server) with the shop dataset.

Every attack in ATTACKS goes through `Source.query` and must end as the table says: REFUSED (the fence
said no; it never ran), CAPPED (it ran and came back with `max_rows` rows, `truncated`), TIMEOUT
(SqlFailed at the time limit), FAILED (SqlFailed, the database refused it) or, for quoting tricks
only, RAN with exactly the harmless rows listed. After each attack every database's fingerprint
(content, schema, roles, files beside it) is what it was, no attack took longer than the time limit
plus slack, and none grew this process's peak memory by more than MEMORY_MB.

Then the connections on their own: `Source.run` (no fence) of writes fails on the read-only
connection. And ordinary analytical SELECTs pass and give the right answers in all three dialects.

PostgreSQL cases skip, loudly, when no server can be started here (scripts/install_postgres.sh).
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragstack.errors import PermissionDenied
from ragstack.sql import Rows, Source, SqlFailed, SqlRefused, open_source
from ragstack.sql import sources as sql_sources
from ragstack.sql.sources import DuckDBSource, PostgresSource, SqliteSource
from tests.tools import shop
from tests.tools.postgres import ADMIN_PASSWORD, RO_PASSWORD, RO_ROLE, PostgresServer, unavailable_reason

MAX_ROWS = 20
TIMEOUT_S = 1.0
SLACK_S = 3.0  # every attack answers within TIMEOUT_S + SLACK_S
MEMORY_MB = 256  # no attack may raise this process's peak memory by more than this

SQLITE, POSTGRES, DUCKDB = "sqlite", "postgres", "duckdb"
CELL_LIMIT = 501  # the longest value a fenced query may return (500 characters and the cut mark)
ALL = (SQLITE, POSTGRES, DUCKDB)
S, P, D = (SQLITE,), (POSTGRES,), (DUCKDB,)
SP, SD, PD = (SQLITE, POSTGRES), (SQLITE, DUCKDB), (POSTGRES, DUCKDB)

REFUSED, CAPPED, TIMEOUT, FAILED, RAN, CUT = "refused", "capped", "timeout", "failed", "ran", "cut"
Expect = frozenset[str]
R: Expect = frozenset({REFUSED})
CAP: Expect = frozenset({CAPPED})
SLOW: Expect = frozenset({REFUSED, TIMEOUT})  # refused, or stopped at the time limit
# Never a large result: refused, stopped, or its values cut by the database before they reach us.
BOMB: Expect = frozenset({REFUSED, TIMEOUT, FAILED, CUT})
HARMLESS: Expect = frozenset({REFUSED, RAN})  # a quoting trick: refused, or ran as the literal it is


@dataclass(frozen=True)
class Attack:
    id: str
    sql: str | Mapping[str, str]  # one statement for every dialect, or one per dialect
    dialects: tuple[str, ...] = ALL
    expect: Expect | Mapping[str, Expect] = R
    rows: tuple[tuple[Any, ...], ...] | None = None  # when it may run: the only result allowed

    def sql_for(self, dialect: str) -> str:
        return self.sql if isinstance(self.sql, str) else self.sql[dialect]

    def expected(self, dialect: str) -> Expect:
        return self.expect if isinstance(self.expect, frozenset) else self.expect[dialect]


def cte_shadow(catalog: str) -> str:
    """A system catalog read unqualified, beside a subquery that defines a CTE of the same name (the
    CTE is not in scope outside its subquery: the outer name is the real catalog)."""
    return f"SELECT * FROM {catalog}, (WITH {catalog} AS (SELECT 1 AS x) SELECT x FROM {catalog}) AS s"


# {dir}: the directory of the database file (SQLite, DuckDB) or a world-writable scratch directory
# (PostgreSQL); a file appearing there counts as a change. {admin_dsn}: the PostgreSQL superuser's
# conninfo, the worst case for dblink.
DBLINK_PAYLOAD = "CREATE TABLE pwned_by_dblink (x int)"
DEEP = 3000  # nesting depth of the parser-recursion attack
NESTED_REPLACE = "'x'"
for _ in range(8):  # 10^8 characters from a 200-character statement
    NESTED_REPLACE = f"replace({NESTED_REPLACE}, 'x', 'xxxxxxxxxx')"
ATTACKS: tuple[Attack, ...] = (
    # -- writes ------------------------------------------------------------------------------------
    Attack("insert", "INSERT INTO customers (id, name, country) VALUES (99, 'Mallory', 'XX')"),
    Attack("update", "UPDATE orders SET status = 'shipped' WHERE status = 'late'"),
    Attack("delete", "DELETE FROM orders"),
    Attack("replace", "REPLACE INTO customers (id, name, country) VALUES (1, 'Mallory', 'XX')", S),
    Attack("insert-or-replace", "INSERT OR REPLACE INTO customers VALUES (1, 'Mallory', 'XX')", SD),
    Attack(
        "upsert", "INSERT INTO customers VALUES (1, 'M', 'XX') ON CONFLICT (id) DO UPDATE SET name = 'pwned'"
    ),
    Attack("merge", "MERGE INTO customers c USING orders o ON c.id = o.id WHEN MATCHED THEN DELETE", PD),
    Attack("insert-select", "INSERT INTO customers SELECT id + 100, name, country FROM customers"),
    # -- schema changes ----------------------------------------------------------------------------
    Attack("drop-table", "DROP TABLE orders"),
    Attack("drop-table-if-exists-cascade", "DROP TABLE IF EXISTS order_items CASCADE", PD),
    Attack("create-table", "CREATE TABLE pwned (x INTEGER)"),
    Attack("create-table-as", "CREATE TABLE pwned AS SELECT * FROM customers"),
    Attack("create-view", "CREATE VIEW pwned AS SELECT 1 AS x"),
    Attack("create-index", "CREATE INDEX pwned ON orders (status)"),
    Attack(
        "create-trigger", "CREATE TRIGGER pwned AFTER INSERT ON orders BEGIN DELETE FROM customers; END", S
    ),
    Attack("create-function", "CREATE FUNCTION pwned() RETURNS int LANGUAGE sql AS 'SELECT 1'", P),
    Attack("create-macro", "CREATE MACRO pwned(x) AS x + 1", D),
    Attack("alter-add-column", "ALTER TABLE orders ADD COLUMN pwned INTEGER"),
    Attack("alter-rename", "ALTER TABLE orders RENAME TO orders_old"),
    Attack("truncate", "TRUNCATE orders", PD),
    Attack("grant", "GRANT ALL ON orders TO ragstack_ro", P),
    Attack("alter-role", "ALTER ROLE ragstack_ro SUPERUSER", P),
    Attack("create-role", "CREATE ROLE mallory LOGIN SUPERUSER PASSWORD 'x'", P),
    # -- several statements, hidden or not ---------------------------------------------------------
    Attack("stacked", "SELECT 1; DROP TABLE orders"),
    Attack("stacked-select-delete", "SELECT * FROM orders; DELETE FROM orders"),
    Attack("stacked-after-block-comment", "SELECT 1 /* harmless */; DELETE FROM orders"),
    Attack("stacked-after-line-comment", "SELECT 1 -- harmless\n; DELETE FROM orders"),
    Attack("stacked-empty-statements", "SELECT 1;;; DELETE FROM orders"),
    Attack("stacked-after-string", "SELECT 'x'; DELETE FROM orders; --'"),
    Attack("stacked-nul-byte", "SELECT 1\x00; DROP TABLE orders"),
    Attack("nested-comment", "SELECT 1 /* outer /* inner */ a comment in PostgreSQL */; DELETE FROM orders"),
    Attack("nested-comment-unbalanced", "SELECT 1 /* /* */ ; DELETE FROM orders; /* */"),
    Attack(
        "comment-injection",  # a line comment holding `*/`, regenerated as a block comment
        {
            SQLITE: "SELECT 1 AS a -- */ , (SELECT count(*) FROM sqlite_master) AS b /*\n",
            POSTGRES: "SELECT 1 AS a -- */ , (SELECT count(*) FROM pg_roles) AS b /*\n",
            DUCKDB: "SELECT 1 AS a -- */ , (SELECT count(*) FROM duckdb_tables) AS b /*\n",
        },
        expect=HARMLESS,
        rows=((1,),),
    ),
    Attack("semicolon-in-comment", "SELECT 1 /* ; DROP TABLE orders */", expect=HARMLESS, rows=((1,),)),
    Attack("keyword-split-by-comment", "DELETE/**/FROM/**/orders"),
    Attack(  # to every engine here `；DELETE` is an identifier: an alias, as the fence read it too
        "fullwidth-semicolon", "SELECT 1；DELETE FROM orders", expect=frozenset({REFUSED, FAILED, CAPPED})
    ),
    # -- writes inside a SELECT --------------------------------------------------------------------
    Attack("cte-delete", "WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x"),
    Attack(
        "cte-insert", "WITH x AS (INSERT INTO customers VALUES (99, 'M', 'XX') RETURNING id) SELECT id FROM x"
    ),
    Attack("cte-update", "WITH x AS (UPDATE orders SET amount = 0 RETURNING id) SELECT count(*) FROM x"),
    Attack("select-into", "SELECT * INTO pwned FROM orders", PD),
    Attack("select-for-update", "SELECT * FROM orders FOR UPDATE", P),
    Attack("select-for-share-nowait", "SELECT * FROM orders FOR SHARE NOWAIT", P),
    Attack("explain-analyze-delete", "EXPLAIN ANALYZE DELETE FROM orders"),
    Attack("explain-analyze-select", "EXPLAIN ANALYZE SELECT * FROM orders"),
    # -- SQLite: pragmas, attached files, extensions -----------------------------------------------
    Attack("pragma-writable-schema", "PRAGMA writable_schema = ON", SD),
    Attack("pragma-query-only-off", "PRAGMA query_only = 0", S),
    Attack("pragma-user-version", "PRAGMA user_version = 42", S),
    Attack("pragma-table-function", "SELECT * FROM pragma_table_info('orders')", SD),
    Attack("attach", "ATTACH DATABASE '{dir}/evil.db' AS evil", SD),
    Attack("detach", "DETACH DATABASE main", SD),
    Attack("vacuum-into", "VACUUM INTO '{dir}/copy.db'", S),
    Attack("vacuum", "VACUUM"),
    Attack("load-extension", "SELECT load_extension('/tmp/evil.so')", S),
    Attack("readfile", "SELECT readfile('/etc/passwd')", S),
    Attack("writefile", "SELECT writefile('{dir}/pwned.txt', 'x')", S),
    Attack("fts3-tokenizer", "SELECT fts3_tokenizer('simple')", S),
    # -- PostgreSQL: files, programs, other sessions, session state --------------------------------
    Attack("pg-read-file", "SELECT pg_read_file('/etc/passwd')", P),
    Attack("pg-read-file-quoted-name", "SELECT \"pg_read_file\"('/etc/passwd')", P),
    Attack("pg-read-file-qualified", "SELECT pg_catalog.pg_read_file('/etc/passwd')", P),
    Attack("pg-ls-dir", "SELECT pg_ls_dir('.')", P),
    Attack("pg-ls-dir-from", "SELECT * FROM pg_ls_dir('.')", P),
    Attack("lo-import", "SELECT lo_import('/etc/passwd')", P),
    Attack("lo-export", "SELECT lo_export(1, '{dir}/pwned')", P),
    Attack("copy-to-program", "COPY orders TO PROGRAM 'touch /tmp/ragstack-pwned'", P),
    Attack("copy-from-file", "COPY orders FROM '/etc/passwd'", P),
    Attack("copy-to-file", "COPY (SELECT * FROM orders) TO '{dir}/orders.csv'", PD),
    Attack("dblink", f"SELECT * FROM dblink('{{admin_dsn}}', '{DBLINK_PAYLOAD}') AS t(x text)", P),
    Attack("dblink-exec", f"SELECT dblink_exec('{{admin_dsn}}', '{DBLINK_PAYLOAD}')", P),
    Attack("query-to-xml", "SELECT query_to_xml('DELETE FROM orders RETURNING *', true, false, '')", P),
    Attack("set-config", "SELECT set_config('default_transaction_read_only', 'off', false)", P),
    Attack("current-setting", "SELECT current_setting('data_directory')", PD),
    Attack("set-role", "SET ROLE postgres", P),
    Attack("set-session-authorization", "SET SESSION AUTHORIZATION postgres", P),
    Attack("set-statement-timeout", "SET statement_timeout = 0", PD),
    Attack("start-transaction-read-write", "START TRANSACTION READ WRITE", P),
    Attack("pg-sleep", "SELECT pg_sleep(30)", P, expect=SLOW),
    Attack("pg-sleep-in-where", "SELECT id FROM orders WHERE pg_sleep(1) IS NOT NULL", P, expect=SLOW),
    Attack("do-block", "DO $$ BEGIN DELETE FROM orders; END $$", P),
    Attack("call", "CALL pwned()", PD),
    Attack("nextval", "SELECT nextval('order_numbers')", PD),
    Attack("setval", "SELECT setval('order_numbers', 1)", P),
    Attack("txid-current", "SELECT txid_current()", P),
    Attack("advisory-lock", "SELECT pg_advisory_lock(42)", P),
    Attack("pg-notify", "SELECT pg_notify('ch', 'x')", P),
    Attack("notify", "NOTIFY ch", P),
    Attack("terminate-backend", "SELECT pg_terminate_backend(pg_backend_pid())", P),
    Attack("reload-conf", "SELECT pg_reload_conf()", P),
    Attack("prepare", "PREPARE p AS DELETE FROM orders", P),
    Attack("lock-table", "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE", P),
    Attack("analyze", "ANALYZE orders", PD),
    Attack("checkpoint", "CHECKPOINT", PD),
    Attack("listen", "LISTEN ch", P),
    Attack(
        "xml-external-entity",
        "SELECT xmlparse(document '<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><x>&e;</x>')",
        P,
        expect=frozenset({REFUSED, FAILED}),
    ),
    # -- system catalogs ---------------------------------------------------------------------------
    Attack("sqlite-master", "SELECT * FROM sqlite_master", SD),
    Attack("sqlite-schema", "SELECT sql FROM sqlite_schema", S),
    Attack("sqlite-temp-master", "SELECT * FROM sqlite_temp_master", S),
    Attack("sqlite-master-qualified", "SELECT * FROM main.sqlite_master", SD),
    Attack("sqlite-master-backticks", "SELECT `sql` FROM `sqlite_master`", S),
    Attack("sqlite-master-brackets", "SELECT [sql] FROM [sqlite_master]", S),
    Attack("sqlite-master-mixed-case", "sElEcT * fRoM SQLITE_MASTER"),
    Attack("pg-shadow", "SELECT * FROM pg_shadow", P),
    Attack("pg-shadow-quoted", 'SELECT * FROM "pg_shadow"', P),
    Attack("pg-shadow-unicode-escape", 'SELECT * FROM U&"\\0070g_shadow"', P),
    Attack("pg-authid", "SELECT rolname, rolpassword FROM pg_authid", P),
    Attack("pg-settings", "SELECT name, setting FROM pg_settings", PD),
    Attack("pg-roles-qualified", "SELECT * FROM pg_catalog.pg_roles", P),
    Attack("pg-stat-activity", "SELECT query FROM pg_stat_activity", P),
    Attack("catalog-in-join", "SELECT o.id FROM orders o JOIN pg_catalog.pg_user u ON true", P),
    Attack("catalog-in-subquery", "SELECT (SELECT count(*) FROM pg_class) AS n FROM orders", P),
    Attack("information-schema", "SELECT * FROM information_schema.tables"),
    Attack("information-schema-columns", "SELECT table_name, column_name FROM information_schema.columns"),
    Attack("table-command", "TABLE pg_shadow", P),
    Attack("duckdb-settings", "SELECT * FROM duckdb_settings()", D),
    Attack("duckdb-tables-view", "SELECT * FROM duckdb_tables", D),
    Attack("duckdb-databases", "SELECT * FROM duckdb_databases()", D),
    Attack(
        "cte-shadowing-catalog",
        {
            SQLITE: cte_shadow("sqlite_master"),
            POSTGRES: cte_shadow("pg_settings"),
            DUCKDB: cte_shadow("duckdb_tables"),
        },
    ),
    Attack("cte-shadowing-pg-shadow", cte_shadow("pg_shadow"), P),
    Attack("cte-shadowing-pg-stat-activity", cte_shadow("pg_stat_activity"), P),
    Attack("cte-shadowing-pg-settings", cte_shadow("pg_settings"), D),
    Attack("cte-shadowing-sqlite-master", cte_shadow("sqlite_master"), D),
    # -- DuckDB: files, extensions, configuration --------------------------------------------------
    Attack("read-csv", "SELECT * FROM read_csv('/etc/passwd')", D),
    Attack("read-csv-auto-scalar-subquery", "SELECT (SELECT count(*) FROM read_csv_auto('/etc/passwd'))", D),
    Attack("read-parquet", "SELECT * FROM read_parquet('{dir}/x.parquet')", D),
    Attack("read-text", "SELECT * FROM read_text('/etc/passwd')", D),
    Attack("replacement-scan", "SELECT * FROM '/etc/passwd'", D),
    Attack("glob-files", "SELECT * FROM glob('/etc/*')", D),
    Attack("getenv", "SELECT getenv('HOME')", D),
    Attack("install-httpfs", "INSTALL httpfs", D),
    Attack("load-httpfs", "LOAD httpfs", D),
    Attack("enable-external-access", "SET enable_external_access = true", D),
    Attack("reset-lock-configuration", "RESET lock_configuration", D),
    Attack("copy-table-to-file", "COPY orders TO '{dir}/out.csv'", D),
    Attack("export-database", "EXPORT DATABASE '{dir}/export'", D),
    Attack("use-memory", "USE memory", D),
    Attack("summarize", "SUMMARIZE orders", D),
    # -- quoting tricks: refused, or run as the literal they are -----------------------------------
    Attack(
        "dollar-quoted",
        "SELECT $$;DROP TABLE orders;$$ AS x",
        expect=HARMLESS,
        rows=((";DROP TABLE orders;",),),
    ),
    Attack(
        "e-string-escape",
        "SELECT E'\\'; DROP TABLE orders; --' AS x",
        expect=HARMLESS,
        rows=(("'; DROP TABLE orders; --",),),
    ),
    Attack(
        "backslash-quote",
        "SELECT 'a\\'; DELETE FROM orders; --' AS x",
        expect=HARMLESS,
        rows=(("a'; DELETE FROM orders; --",),),
    ),
    Attack("unicode-escape-string", "SELECT U&'\\0044ROP' AS x", P, expect=HARMLESS, rows=(("DROP",),)),
    Attack("identifier-with-semicolon", 'SELECT 1 AS "x; DROP TABLE orders"', expect=HARMLESS, rows=((1,),)),
    # -- huge results: capped ----------------------------------------------------------------------
    Attack(
        "recursive-cte-1e7",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000) SELECT i FROM n",
        expect=CAP,
    ),
    Attack("cross-join-3", "SELECT * FROM orders a, orders b, orders c", expect=CAP),
    Attack(
        "cross-join-5",
        "SELECT a.id, b.id, c.id, d.id, e.id FROM orders a CROSS JOIN orders b CROSS JOIN orders c"
        " CROSS JOIN orders d CROSS JOIN orders e",
        expect=CAP,
    ),
    Attack("limit-above-cap", "SELECT a.id, b.id FROM orders a, orders b LIMIT 1000000", expect=CAP),
    Attack(
        "limit-offset-above-cap", "SELECT a.id FROM orders a, orders b LIMIT 1000000 OFFSET 5", expect=CAP
    ),
    Attack("limit-in-subquery-only", "SELECT * FROM (SELECT id FROM orders LIMIT 5) s, orders c", expect=CAP),
    Attack(
        "union-all-huge",
        "SELECT a.id FROM orders a, orders b UNION ALL SELECT c.id FROM orders c",
        expect=CAP,
    ),
    Attack(
        "generate-series-scalar",
        "SELECT generate_series(1, 1000000000)",
        P,
        expect=frozenset({REFUSED, CAPPED}),
    ),
    Attack("generate-series-from", "SELECT * FROM generate_series(1, 1000000000)", PD),
    Attack("limit-subquery", "SELECT * FROM orders LIMIT (SELECT 1000000)"),
    Attack("limit-all", "SELECT * FROM orders a, orders b LIMIT ALL", P, expect=frozenset({REFUSED, CAPPED})),
    Attack(
        "fetch-first",
        "SELECT * FROM orders a, orders b FETCH FIRST 1000000 ROWS ONLY",
        PD,
        expect=frozenset({REFUSED, CAPPED}),
    ),
    # -- slow queries: stopped at the time limit ---------------------------------------------------
    Attack(
        "recursive-cte-1e9",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000)"
        " SELECT count(*) FROM n",
        expect=SLOW,
    ),
    Attack(
        "cross-join-count",
        "SELECT count(*) FROM orders a, orders b, orders c, orders d, orders e, orders f, orders g",
        expect=SLOW,
    ),
    Attack(
        "cross-join-sort",
        "SELECT a.id FROM orders a, orders b, orders c, orders d, orders e, orders f"
        " ORDER BY a.amount * b.amount + c.amount - d.amount * e.amount / f.amount DESC",
        expect=SLOW,
    ),
    # -- memory bombs: never a result --------------------------------------------------------------
    Attack("zeroblob", "SELECT zeroblob(1000000000)", S, expect=BOMB),
    Attack("randomblob", "SELECT randomblob(1000000000)", S, expect=BOMB),
    Attack("repeat", "SELECT repeat('x', 1000000000)", expect=BOMB),
    Attack("space", "SELECT space(1000000000)", PD, expect=BOMB),
    Attack("printf-width", "SELECT printf('%.*c', 200000000, 'x') AS x", S, expect=BOMB),
    Attack("lpad", "SELECT lpad('x', 200000000, 'y') AS x", PD, expect=BOMB),
    Attack("printf-zero-pad", "SELECT printf('%0200000000d', 1) AS x", SD, expect=BOMB),
    Attack("format-zero-pad", "SELECT format('%0200000000d', 1) AS x", S, expect=BOMB),
    Attack("replace-nested", f"SELECT {NESTED_REPLACE} AS x", expect=BOMB),
    Attack(
        "doubling-string-cte",
        "WITH RECURSIVE s(x) AS (SELECT 'x' UNION ALL SELECT x || x FROM s WHERE length(x) < 100000000)"
        " SELECT x FROM s ORDER BY length(x) DESC",
        expect=BOMB,
    ),
    Attack(
        "string-agg-cross-join",
        "SELECT string_agg(a.name, ',') AS x FROM customers a, orders b, orders c, orders d, orders e",
        expect=BOMB,
    ),
    Attack(
        "list-aggregate", "SELECT list(a.id) AS x FROM orders a, orders b, orders c, orders d", D, expect=BOMB
    ),
    Attack("range-list", "SELECT range(10000000) AS x", D, expect=BOMB),
    Attack("array-of-series", "SELECT ARRAY(SELECT generate_series(1, 100000000))", P, expect=BOMB),
    # -- parameters --------------------------------------------------------------------------------
    Attack("qmark-placeholder", "SELECT * FROM orders WHERE id = ?"),
    Attack("numbered-placeholder", "SELECT * FROM orders WHERE id = $1", PD),
    Attack("named-placeholder", "SELECT * FROM orders WHERE id = :id", S),
    Attack("pyformat-placeholder", "SELECT * FROM orders WHERE id = %s", P),
    Attack("named-pyformat-placeholder", "SELECT * FROM orders WHERE id = %(id)s", P),
    # -- garbage -----------------------------------------------------------------------------------
    Attack("empty", ""),
    Attack("blank", "  \n\t "),
    Attack("misspelt", "SELEC * FROM orders"),
    Attack("truncated", "SELECT * FROM"),
    Attack("brackets", ")))((("),
    Attack("lone-nul", "SELECT 1\x00", expect=frozenset({REFUSED, FAILED})),
    Attack("deep-nesting", "SELECT " + "(" * DEEP + "1" + ")" * DEEP),
    Attack(  # a megabyte of SQL: the fence itself must not become the slow part
        "oversized-statement",
        "SELECT " + ", ".join(f"'{i}'" for i in range(100_000)) + " FROM orders",
        expect=frozenset({REFUSED, FAILED}),
    ),
    Attack("binary-noise", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
)


def attack_cases() -> list[Any]:
    return [
        pytest.param(dialect, attack, id=f"{dialect}-{attack.id}")
        for attack in ATTACKS
        for dialect in attack.dialects
    ]


# -- the databases ---------------------------------------------------------------------------------


@dataclass
class Databases:
    sqlite_path: Path
    duckdb_path: Path
    scratch: Path  # world-writable: where PostgreSQL file attacks would write
    pg: PostgresServer | None
    pg_problem: str | None
    baseline: dict[str, dict[str, str]]
    sources: dict[str, Source]

    def require(self, dialect: str) -> None:
        if dialect == POSTGRES and self.pg is None:
            pytest.skip(f"!!! POSTGRESQL UNAVAILABLE, its SQL fence cases did not run: {self.pg_problem}")

    def url(self, dialect: str, role: str | None = None) -> str:
        if dialect == SQLITE:
            return f"sqlite://{self.sqlite_path}"
        if dialect == DUCKDB:
            return f"duckdb://{self.duckdb_path}"
        assert self.pg is not None
        return self.pg.url(role) if role else self.pg.url()

    def source(self, dialect: str) -> Source:
        self.require(dialect)
        if dialect not in self.sources:
            self.sources[dialect] = open_source(self.url(dialect))
        return self.sources[dialect]

    def render(self, sql: str, dialect: str) -> str:
        folder = {SQLITE: self.sqlite_path.parent, DUCKDB: self.duckdb_path.parent}.get(dialect, self.scratch)
        sql = sql.replace("{dir}", str(folder))
        if self.pg is not None:
            dsn = f"host=127.0.0.1 port={self.pg.port} dbname=shop user=postgres password={ADMIN_PASSWORD}"
            sql = sql.replace("{admin_dsn}", dsn)
        return sql

    def fingerprint(self, dialect: str) -> dict[str, str]:
        if dialect == SQLITE:
            return shop.fingerprint_sqlite(self.sqlite_path)
        if dialect == DUCKDB:
            return shop.fingerprint_duckdb(self.duckdb_path)
        assert self.pg is not None
        parts = shop.fingerprint_postgres(self.pg.admin_url)
        parts["scratch directory"] = repr(sorted(p.name for p in self.scratch.iterdir()))
        return parts

    def assert_unchanged(self, dialect: str, what: str) -> None:
        now = self.fingerprint(dialect)
        before = self.baseline[dialect]
        changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
        assert not changed, f"{dialect} database CHANGED after {what}: {changed}"


def _shout(config: pytest.Config, message: str) -> None:
    """Straight to the terminal, past output capture: a skip line alone is easy to miss."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        reporter.write_line(f"!!! {message}", red=True, bold=True)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Databases]:
    root = tmp_path_factory.mktemp("sql-fence")
    (root / "sqlite").mkdir()
    (root / "duckdb").mkdir()
    sqlite_path, duckdb_path = root / "sqlite" / "shop.db", root / "duckdb" / "shop.duckdb"
    shop.build_shop(sqlite_path=sqlite_path, duckdb_path=duckdb_path)
    scratch = Path(tempfile.mkdtemp(prefix="ragstack-scratch-"))
    scratch.chmod(0o777)
    pg: PostgresServer | None = None
    problem = unavailable_reason()
    if problem is None:
        try:
            server = PostgresServer()
            server.start()
            pg = server
            shop.build_postgres(pg.admin_url)
            try:  # a database that has dblink, as many do: the worst case for a read-only session
                pg.execute_admin("CREATE EXTENSION IF NOT EXISTS dblink")
            except Exception:  # no contrib files here: the dblink attacks must be refused all the same
                pass
        except Exception as err:
            problem = f"{type(err).__name__}: {err}"
            if pg is not None:
                pg.stop()
                pg = None
    if problem:
        _shout(
            pytestconfig,
            f"POSTGRESQL UNAVAILABLE: the PostgreSQL SQL-fence cases will be SKIPPED ({problem})",
        )
    dbs = Databases(sqlite_path, duckdb_path, scratch, pg, problem, {}, {})
    for dialect in ALL:
        if dialect != POSTGRES or pg is not None:
            dbs.baseline[dialect] = dbs.fingerprint(dialect)
    try:
        yield dbs
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(scratch, ignore_errors=True)


# -- memory: the process's peak resident size, reset before each attack (Linux) --------------------


def _peak_rss_mb() -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(found.group(1)) // 1024 if found else None


def _reset_peak_rss() -> int | None:
    """Reset the peak to the current size; that size in MB, or None where Linux does not let us."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _peak_rss_mb()


# -- the attacks -----------------------------------------------------------------------------------


def attempt(source: Source, sql: str) -> tuple[str, str, Rows | None]:
    """The outcome of one query through the fence: (outcome, detail, rows)."""
    try:
        rows = source.query(sql, max_rows=MAX_ROWS, timeout_s=TIMEOUT_S)
    except SqlRefused as err:
        return REFUSED, err.reason, None
    except SqlFailed as err:
        return (TIMEOUT if "over its" in str(err) or "time limit" in str(err) else FAILED), str(err), None
    except Exception as err:  # anything else is a bug: reported as its type, never accepted
        return f"crashed ({type(err).__name__})", str(err)[:300], None
    detail = f"{len(rows.rows)} rows: {rows.sql[:200]}"
    longest = max((len(v) for r in rows.rows for v in r if isinstance(v, str)), default=0)
    if longest > CELL_LIMIT:
        return f"a value of {longest} characters", detail, rows
    if any(isinstance(v, str) and v.endswith("…") for r in rows.rows for v in r):
        return CUT, detail, rows
    return (CAPPED if rows.truncated else RAN), detail, rows


@pytest.mark.parametrize(("dialect", "attack"), attack_cases())
def test_attack_is_refused_or_contained(dbs: Databases, dialect: str, attack: Attack) -> None:
    source = dbs.source(dialect)
    sql = dbs.render(attack.sql_for(dialect), dialect)
    before = _reset_peak_rss()
    started = time.monotonic()
    outcome, detail, rows = attempt(source, sql)
    elapsed = time.monotonic() - started
    peak = _peak_rss_mb()
    expected = attack.expected(dialect)
    assert outcome in expected, (
        f"{attack.id} on {dialect}: {outcome} ({detail}); expected one of {sorted(expected)}"
    )
    if outcome == CAPPED:
        assert rows is not None and len(rows.rows) == MAX_ROWS, detail
        assert re.search(rf"\bLIMIT {MAX_ROWS + 1}\b", rows.sql, re.I), rows.sql
    if outcome == RAN:
        assert rows is not None and attack.rows is not None and rows.rows == attack.rows, detail
    if outcome == TIMEOUT:
        assert elapsed >= TIMEOUT_S * 0.9, f"a timeout after {elapsed:.2f} s: {detail}"
    assert elapsed < TIMEOUT_S + SLACK_S, f"{attack.id} on {dialect} took {elapsed:.1f} s ({outcome})"
    if before is not None and peak is not None:
        assert peak - before < MEMORY_MB, f"{attack.id} on {dialect} raised peak memory by {peak - before} MB"
    dbs.assert_unchanged(dialect, f"attack {attack.id!r}")


def test_the_attack_table_is_large_and_well_formed() -> None:
    strings = {attack.sql_for(d) for attack in ATTACKS for d in attack.dialects}
    assert len(strings) >= 50, len(strings)
    ids = Counter(attack.id for attack in ATTACKS)
    assert not [i for i, n in ids.items() if n > 1], ids
    for attack in ATTACKS:
        if any(RAN in attack.expected(d) for d in attack.dialects):
            assert attack.rows is not None, attack.id
        if not isinstance(attack.sql, str):
            assert set(attack.dialects) <= set(attack.sql), attack.id


# -- the connections alone: writes fail without the fence -----------------------------------------

RUN_WRITES: dict[str, tuple[str, ...]] = {
    SQLITE: (
        "INSERT INTO customers VALUES (99, 'Mallory', 'XX')",
        "UPDATE orders SET amount = 0",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "CREATE TABLE pwned (x INTEGER)",
        "CREATE TEMP TABLE pwned (x INTEGER)",
        "PRAGMA query_only = 0",
        "PRAGMA writable_schema = ON",
        "ATTACH DATABASE '{dir}/evil.db' AS evil",
        "VACUUM INTO '{dir}/copy.db'",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT 1; DELETE FROM orders",
    ),
    POSTGRES: (
        "INSERT INTO customers VALUES (99, 'Mallory', 'XX')",
        "UPDATE orders SET amount = 0",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "CREATE TABLE pwned (x int)",
        "CREATE TEMP TABLE pwned (x int)",
        "SELECT nextval('order_numbers')",
        "SELECT set_config('transaction_read_only', 'off', false)",
        "DO $$ BEGIN SET TRANSACTION READ WRITE; DELETE FROM orders; END $$",
        "SELECT 1; DELETE FROM orders",
        "COPY orders TO '{dir}/orders.csv'",
        "SELECT pg_read_file('/etc/passwd')",
    ),
    DUCKDB: (
        "INSERT INTO customers VALUES (99, 'Mallory', 'XX')",
        "UPDATE orders SET amount = 0",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "CREATE TABLE pwned (x INTEGER)",
        "COPY orders TO '{dir}/out.csv'",
        "COPY orders FROM '/etc/passwd'",
        "ATTACH '{dir}/evil.duckdb' AS evil",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        "SELECT * FROM read_csv('/etc/passwd')",
        "EXPORT DATABASE '{dir}/export'",
    ),
}


@pytest.mark.parametrize(
    ("dialect", "sql"),
    [pytest.param(d, s, id=f"{d}-{i}") for d, stmts in RUN_WRITES.items() for i, s in enumerate(stmts)],
)
def test_the_read_only_connection_itself_refuses_writes(dbs: Databases, dialect: str, sql: str) -> None:
    source = dbs.source(dialect)
    with pytest.raises(SqlFailed):
        source.run(dbs.render(sql, dialect), MAX_ROWS, TIMEOUT_S)
    dbs.assert_unchanged(dialect, f"run({sql!r})")


def test_sqlite_query_only_off_then_insert_still_fails(dbs: Databases) -> None:
    source = dbs.source(SQLITE)
    with pytest.raises(SqlFailed):
        source.run("PRAGMA query_only = 0", MAX_ROWS, TIMEOUT_S)
    with pytest.raises(SqlFailed):
        source.run("INSERT INTO customers VALUES (99, 'Mallory', 'XX')", MAX_ROWS, TIMEOUT_S)
    dbs.assert_unchanged(SQLITE, "PRAGMA query_only = 0, then INSERT")


@pytest.mark.parametrize(
    "opener",
    ["SET TRANSACTION READ WRITE", "SET default_transaction_read_only = off", "START TRANSACTION READ WRITE"],
)
def test_postgres_read_write_switches_do_not_outlive_their_call(dbs: Databases, opener: str) -> None:
    """PostgreSQL accepts SET TRANSACTION READ WRITE as the first statement of a transaction; each
    call is one prepared statement on a fresh read-only connection, so the next call is read-only."""
    source = dbs.source(POSTGRES)
    try:
        source.run(opener, MAX_ROWS, TIMEOUT_S)
    except SqlFailed:
        pass
    with pytest.raises(SqlFailed, match="read-only transaction"):
        source.run("INSERT INTO customers VALUES (99, 'Mallory', 'XX')", MAX_ROWS, TIMEOUT_S)
    dbs.assert_unchanged(POSTGRES, f"{opener}, then INSERT")


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO customers VALUES (99, 'Mallory', 'XX')",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "CREATE TABLE pwned (x int)",
        "ALTER ROLE ragstack_ro SUPERUSER",
        "SELECT nextval('order_numbers')",
        "SELECT set_config('transaction_read_only', 'off', false)",
        "DO $$ BEGIN SET TRANSACTION READ WRITE; DELETE FROM orders; END $$",
    ],
)
def test_postgres_refuses_a_superuser_outright(dbs: Databases, sql: str) -> None:
    """A read-only transaction does not stop a superuser's COPY TO PROGRAM or server-file functions,
    so a role with such powers is refused before anything runs: attached (wrongly) as the superuser,
    nothing runs, and the database is unchanged."""
    dbs.require(POSTGRES)
    assert dbs.pg is not None
    source = open_source(dbs.pg.admin_url)
    with pytest.raises(PermissionDenied, match=r"superuser.*only SELECT"):
        source.run(sql, MAX_ROWS, TIMEOUT_S)
    with pytest.raises(PermissionDenied):
        source.schema()
    dbs.assert_unchanged(POSTGRES, f"run({sql!r}) as the superuser")


# -- ordinary analytics pass, with the right answers -----------------------------------------------


def _late_by_month() -> tuple[tuple[Any, ...], ...]:
    months = Counter(o.shipped_at.month for o in shop.ORDERS if o.status == "late" and o.shipped_at)
    return tuple(sorted(months.items()))


def _country_totals() -> tuple[tuple[Any, ...], ...]:
    country = {c.id: c.country for c in shop.CUSTOMERS}
    n: Counter[str] = Counter()
    total: dict[str, float] = defaultdict(float)
    for o in shop.ORDERS:
        if o.status in ("shipped", "late"):
            n[country[o.customer_id]] += 1
            total[country[o.customer_id]] += o.amount
    return tuple((c, n[c], total[c]) for c in sorted(n) if n[c] > 3)


def _top_order_per_customer() -> tuple[tuple[Any, ...], ...]:
    best: dict[int, shop.Order] = {}
    for o in shop.ORDERS:
        b = best.get(o.customer_id)
        if b is None or (o.amount, -o.id) > (b.amount, -b.id):
            best[o.customer_id] = o
    return tuple((c, best[c].id, best[c].amount) for c in sorted(best))


def _running_total() -> tuple[tuple[Any, ...], ...]:
    out, total = [], 0.0
    for o in shop.ORDERS:
        total += o.amount
        out.append((o.id, total))
    return tuple(out)


def _lag() -> tuple[tuple[Any, ...], ...]:
    first = shop.ORDERS[:6]
    return tuple((o.id, None if i == 0 else o.amount - first[i - 1].amount) for i, o in enumerate(first))


def _frequent_customers() -> tuple[tuple[Any, ...], ...]:
    n = Counter(o.customer_id for o in shop.ORDERS)
    names = {c.id: c.name for c in shop.CUSTOMERS}
    return tuple(sorted((names[c], k) for c, k in n.items() if k >= 6))


def _above_average() -> tuple[tuple[Any, ...], ...]:
    avg = sum(o.amount for o in shop.ORDERS) / len(shop.ORDERS)
    ids = {o.customer_id for o in shop.ORDERS if o.amount > avg}
    return tuple(sorted((c.name,) for c in shop.CUSTOMERS if c.id in ids))


def _customers_with(status: str) -> set[int]:
    return {o.customer_id for o in shop.ORDERS if o.status == status}


def _sizes() -> tuple[tuple[Any, ...], ...]:
    sizes = Counter("big" if o.amount >= 100 else "small" for o in shop.ORDERS)
    return tuple(sorted(sizes.items()))


def _units_per_product() -> tuple[tuple[Any, ...], ...]:
    units: Counter[str] = Counter()
    names = {p.id: p.name for p in shop.PRODUCTS}
    for item in shop.ORDER_ITEMS:
        units[names[item.product_id]] += item.quantity
    return tuple(sorted(units.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Good:
    id: str
    sql: str | Mapping[str, str]
    rows: Callable[[], tuple[tuple[Any, ...], ...]]
    max_rows: int = 100
    truncated: bool = False
    limit: int | None = None  # the LIMIT the statement that ran must carry

    def sql_for(self, dialect: str) -> str:
        return self.sql if isinstance(self.sql, str) else self.sql[dialect]


GOOD: tuple[Good, ...] = (
    Good(
        "late-in-march-by-dialect",
        {
            SQLITE: "SELECT count(*) FROM orders WHERE status = 'late'"
            " AND strftime('%Y-%m', shipped_at) = '2024-03'",
            POSTGRES: "SELECT count(*) FROM orders WHERE status = 'late'"
            " AND date_trunc('month', shipped_at) = DATE '2024-03-01'",
            DUCKDB: "SELECT count(*) FROM orders WHERE status = 'late'"
            " AND year(shipped_at) = 2024 AND month(shipped_at) = 3",
        },
        lambda: ((shop.LATE_IN_MARCH,),),
    ),
    Good(
        "late-in-march-range",
        "SELECT count(*) AS n FROM orders WHERE status = 'late'"
        " AND shipped_at >= '2024-03-01' AND shipped_at < '2024-04-01'",
        lambda: ((shop.LATE_IN_MARCH,),),
    ),
    Good(
        "late-by-month",
        {
            SQLITE: "SELECT CAST(strftime('%m', shipped_at) AS INTEGER) AS m, count(*) FROM orders"
            " WHERE status = 'late' GROUP BY m ORDER BY m",
            POSTGRES: "SELECT EXTRACT(MONTH FROM shipped_at) AS m, count(*) FROM orders"
            " WHERE status = 'late' GROUP BY m ORDER BY m",
            DUCKDB: "SELECT date_part('month', shipped_at) AS m, count(*) FROM orders"
            " WHERE status = 'late' GROUP BY m ORDER BY m",
        },
        _late_by_month,
    ),
    Good(
        "join-group-having",
        "SELECT c.country, count(*) AS n, sum(o.amount) AS total FROM orders o"
        " JOIN customers c ON c.id = o.customer_id WHERE o.status IN ('shipped', 'late')"
        " GROUP BY c.country HAVING count(*) > 3 ORDER BY c.country",
        _country_totals,
    ),
    Good(
        "window-rank-partition",
        "SELECT customer_id, id, amount FROM (SELECT customer_id, id, amount,"
        " rank() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS r FROM orders) t"
        " WHERE r = 1 ORDER BY customer_id",
        _top_order_per_customer,
    ),
    Good(
        "window-running-sum",
        "SELECT id, sum(amount) OVER (ORDER BY id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
        " AS running FROM orders ORDER BY id",
        _running_total,
    ),
    Good(
        "window-lag",
        "SELECT id, amount - lag(amount) OVER (ORDER BY id) AS delta FROM orders ORDER BY id LIMIT 6",
        _lag,
        limit=6,
    ),
    Good(
        "cte-join",
        "WITH per_customer AS (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id)"
        " SELECT c.name, p.n FROM per_customer p JOIN customers c ON c.id = p.customer_id"
        " WHERE p.n >= 6 ORDER BY c.name",
        _frequent_customers,
    ),
    Good(
        "recursive-cte-small",
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) SELECT sum(i) FROM n",
        lambda: ((55,),),
    ),
    Good(
        "nested-subqueries",
        "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM orders"
        " WHERE amount > (SELECT avg(amount) FROM orders)) ORDER BY name",
        _above_average,
    ),
    Good(
        "union",
        "SELECT country FROM customers WHERE country = 'FR' UNION SELECT country FROM customers"
        " WHERE country = 'US' ORDER BY 1",
        lambda: (("FR",), ("US",)),
    ),
    Good(
        "intersect",
        "SELECT customer_id FROM orders WHERE status = 'late' INTERSECT"
        " SELECT customer_id FROM orders WHERE status = 'cancelled' ORDER BY 1",
        lambda: tuple((c,) for c in sorted(_customers_with("late") & _customers_with("cancelled"))),
    ),
    Good(
        "except",
        "SELECT id FROM customers EXCEPT SELECT customer_id FROM orders WHERE status = 'late' ORDER BY 1",
        lambda: tuple((c.id,) for c in shop.CUSTOMERS if c.id not in _customers_with("late")),
    ),
    Good(
        "case-group-by",
        "SELECT CASE WHEN amount >= 100 THEN 'big' ELSE 'small' END AS size, count(*) AS n FROM orders"
        " GROUP BY 1 ORDER BY 1",
        _sizes,
    ),
    Good(
        "three-way-join",
        "SELECT p.name, sum(i.quantity) AS units FROM order_items i JOIN products p ON p.id = i.product_id"
        " JOIN orders o ON o.id = i.order_id GROUP BY p.name ORDER BY units DESC, p.name",
        _units_per_product,
    ),
    Good(
        "quote-in-data",
        "SELECT id, country FROM customers WHERE name = 'John O''Neil'",
        lambda: ((8, "US"),),
    ),
    Good(
        "null-filter-count-distinct",
        "SELECT count(*) AS unshipped, count(DISTINCT customer_id) AS customers FROM orders"
        " WHERE shipped_at IS NULL",
        lambda: (
            (
                sum(1 for o in shop.ORDERS if o.shipped_at is None),
                len({o.customer_id for o in shop.ORDERS if o.shipped_at is None}),
            ),
        ),
    ),
    Good(
        "limit-below-cap-kept",
        "SELECT id FROM orders ORDER BY id LIMIT 5",
        lambda: tuple((i,) for i in range(1, 6)),
        max_rows=10,
        limit=5,
    ),
    Good(
        "limit-with-offset-kept",
        "SELECT id FROM orders ORDER BY id LIMIT 3 OFFSET 10",
        lambda: ((11,), (12,), (13,)),
        max_rows=10,
        limit=3,
    ),
    Good(
        "limit-above-cap-tightened",
        "SELECT id FROM orders ORDER BY id LIMIT 30",
        lambda: tuple((i,) for i in range(1, 11)),
        max_rows=10,
        truncated=True,
        limit=11,
    ),
    Good(
        "no-limit-capped",
        "SELECT id FROM orders ORDER BY id",
        lambda: tuple((i,) for i in range(1, 11)),
        max_rows=10,
        truncated=True,
        limit=11,
    ),
    Good(
        "exactly-the-cap-not-truncated",
        "SELECT id FROM customers ORDER BY id",
        lambda: tuple((c.id,) for c in shop.CUSTOMERS),
        max_rows=len(shop.CUSTOMERS),
    ),
)


@pytest.mark.parametrize(
    ("dialect", "good"), [pytest.param(d, g, id=f"{d}-{g.id}") for g in GOOD for d in ALL]
)
def test_analytical_select_passes_with_the_right_answer(dbs: Databases, dialect: str, good: Good) -> None:
    source = dbs.source(dialect)
    result = source.query(good.sql_for(dialect), max_rows=good.max_rows, timeout_s=5.0)
    assert result.rows == good.rows(), result.sql
    assert result.truncated is good.truncated
    if good.limit is not None:
        assert re.search(rf"\bLIMIT {good.limit}\b", result.sql, re.I), result.sql


@pytest.mark.parametrize("dialect", ALL)
def test_schema_lists_the_user_tables(dbs: Databases, dialect: str) -> None:
    tables = {t.name: t for t in dbs.source(dialect).schema()}
    assert set(tables) == set(shop.TABLES)
    assert tables["orders"].row_count == len(shop.ORDERS)
    assert [c.name for c in tables["orders"].columns] == [
        "id",
        "customer_id",
        "status",
        "amount",
        "shipped_at",
    ]
    assert set(next(c for c in tables["orders"].columns if c.name == "status").samples) == {
        o.status for o in shop.ORDERS
    }
    assert ("customer_id", "customers", "id") in tables["orders"].foreign_keys


ENDLESS_VIEW = (
    "CREATE VIEW endless AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
    "SELECT n FROM r WHERE n < 0"
)


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", POSTGRES])
def test_a_view_that_never_ends_costs_the_schema_its_samples_not_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dbs: Databases, dialect: str
) -> None:
    """Sample values and counts are read at attach time, through every view: each query is stopped
    at its own budget, and none starts past the schema's, so the attach ends, with the views listed."""
    monkeypatch.setattr(sql_sources, "_SAMPLE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(sql_sources, "_SCHEMA_TIMEOUT_S", 1.0)
    script = ["CREATE TABLE t (a INTEGER)", "INSERT INTO t VALUES (7)", ENDLESS_VIEW]
    script += [ENDLESS_VIEW.replace("endless", f"endless{i}", 1) for i in range(5)]
    path = tmp_path / f"endless.{dialect}"
    if dialect == POSTGRES:  # a database of its own on the suite's server: `shop` stays as it was
        dbs.require(dialect)
        assert dbs.pg is not None
        dbs.pg.execute_admin(
            "CREATE DATABASE endless", f"GRANT CONNECT ON DATABASE endless TO {RO_ROLE}", database="postgres"
        )
        script += [f"GRANT USAGE ON SCHEMA public TO {RO_ROLE}"]
        script += [f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {RO_ROLE}"]
        dbs.pg.execute_admin(*script, database="endless")
        source: Source = PostgresSource(dbs.pg.role_url(RO_ROLE, RO_PASSWORD, "endless"))
    elif dialect == "sqlite":
        with sqlite3.connect(path) as conn:
            for statement in script:
                conn.execute(statement)
        conn.close()
        source = SqliteSource(path)
    else:
        import duckdb

        with duckdb.connect(str(path)) as duck:
            for statement in script:
                duck.execute(statement)
        source = DuckDBSource(path)
    started = time.monotonic()
    try:
        tables = {t.name: t for t in source.schema()}
    finally:
        if dialect == POSTGRES and dbs.pg is not None:
            dbs.pg.execute_admin("DROP DATABASE endless WITH (FORCE)", database="postgres")
    assert time.monotonic() - started < 10  # 1 s of budget, and the query in flight stopped
    assert tables["endless"].row_count == -1 and tables["endless"].columns[0].samples == ()
    assert set(tables) == {"t", "endless", *(f"endless{i}" for i in range(5))}  # all listed, if late


@pytest.mark.parametrize("dialect", ALL)
def test_every_database_is_unchanged_after_the_suite(dbs: Databases, dialect: str) -> None:
    """Last in the file: the whole fingerprint, once more, after every attack and every write."""
    dbs.require(dialect)
    dbs.assert_unchanged(dialect, "the whole suite")
