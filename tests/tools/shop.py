"""The "shop" dataset, the same in SQLite, DuckDB and PostgreSQL, and fingerprints of a database's whole
content and schema for "the database is unchanged afterwards" checks.

Tables: customers(id, name, country), products(id, name, price), orders(id, customer_id -> customers,
status in {shipped, late, pending, cancelled}, amount, shipped_at DATE: NULL unless shipped or late),
order_items(order_id -> orders, product_id -> products, quantity). 48 orders, eight a month from
January to June 2024; the rows are computed, not random, and exposed here (CUSTOMERS, ORDERS, ...) so
that tests compute expected answers in Python. Three orders shipped late in March (LATE_IN_MARCH),
and late orders in other months too.

Amounts are multiples of 0.25, so SQLite's REAL sums are exact and equal PostgreSQL's and DuckDB's
NUMERIC/DECIMAL sums.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from pathlib import Path
from typing import Any, NamedTuple

STATUSES = ("shipped", "late", "pending", "cancelled")
TABLES = ("customers", "products", "orders", "order_items")


class Customer(NamedTuple):
    id: int
    name: str
    country: str


class Product(NamedTuple):
    id: int
    name: str
    price: float


class Order(NamedTuple):
    id: int
    customer_id: int
    status: str
    amount: float
    shipped_at: dt.date | None


class OrderItem(NamedTuple):
    order_id: int
    product_id: int
    quantity: int


CUSTOMERS: tuple[Customer, ...] = (
    Customer(1, "Ada Lovelace", "GB"),
    Customer(2, "Grace Hopper", "US"),
    Customer(3, "Emmy Noether", "DE"),
    Customer(4, "Marie Curie", "FR"),
    Customer(5, "Alan Turing", "GB"),
    Customer(6, "Kurt Gödel", "AT"),
    Customer(7, "Sophie Germain", "FR"),
    Customer(8, "John O'Neil", "US"),  # a quote in the data, on purpose
)

PRODUCTS: tuple[Product, ...] = (
    Product(1, "kettle", 39.5),
    Product(2, "teapot", 24.25),
    Product(3, "mug", 8.75),
    Product(4, "tea tin", 12.0),
    Product(5, "strainer", 5.5),
)

_STATUS_CYCLE = ("shipped", "late", "shipped", "pending", "shipped", "cancelled", "late", "shipped")


def _orders() -> tuple[Order, ...]:
    rows = []
    for i in range(1, 49):
        month = (i - 1) // 8 + 1  # eight orders a month, January to June
        status = _STATUS_CYCLE[(i * 5 + (i // 3) * 3) % len(_STATUS_CYCLE)]
        day = (i * 11) % 28 + 1
        amount = float((i * 37) % 200 + 10) + (i % 4) * 0.25
        shipped = dt.date(2024, month, day) if status in ("shipped", "late") else None
        rows.append(Order(i, (i * 5) % 8 + 1, status, amount, shipped))
    return tuple(rows)


ORDERS = _orders()
ORDER_ITEMS: tuple[OrderItem, ...] = tuple(
    item
    for o in ORDERS
    for item in (
        OrderItem(o.id, o.id % 5 + 1, o.id % 3 + 1),
        *([OrderItem(o.id, (o.id + 2) % 5 + 1, 1)] if o.id % 2 == 0 else []),
    )
)

LATE_IN_MARCH = sum(1 for o in ORDERS if o.status == "late" and o.shipped_at and o.shipped_at.month == 3)
assert LATE_IN_MARCH == 3, LATE_IN_MARCH  # the dataset's pinned answer

_MONEY = {"sqlite": "REAL", "postgres": "NUMERIC(10,2)", "duckdb": "DECIMAL(10,2)"}


def ddl(dialect: str) -> list[str]:
    money = _MONEY[dialect]
    statuses = ", ".join(f"'{s}'" for s in STATUSES)
    return [
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL)",
        f"CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price {money} NOT NULL)",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY,"
        " customer_id INTEGER NOT NULL REFERENCES customers(id),"
        f" status TEXT NOT NULL CHECK (status IN ({statuses})),"
        f" amount {money} NOT NULL, shipped_at DATE)",
        "CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id),"
        " product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,"
        " PRIMARY KEY (order_id, product_id))",
    ]


def _rows(dialect: str) -> dict[str, list[tuple[Any, ...]]]:
    def date(d: dt.date | None) -> Any:
        return d.isoformat() if (d is not None and dialect == "sqlite") else d

    return {
        "customers": [tuple(c) for c in CUSTOMERS],
        "products": [tuple(p) for p in PRODUCTS],
        "orders": [(o.id, o.customer_id, o.status, o.amount, date(o.shipped_at)) for o in ORDERS],
        "order_items": [tuple(i) for i in ORDER_ITEMS],
    }


def build_sqlite(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        for statement in ddl("sqlite"):
            conn.execute(statement)
        for table, rows in _rows("sqlite").items():
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        conn.commit()
    finally:
        conn.close()


def build_duckdb(path: Path) -> None:
    import duckdb

    conn = duckdb.connect(str(path))
    try:
        for statement in ddl("duckdb"):
            conn.execute(statement)
        for table, rows in _rows("duckdb").items():
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        conn.execute("CHECKPOINT")
    finally:
        conn.close()


def build_postgres(admin_url: str, *, reader: str | None = "ragstack_ro") -> None:
    """The tables in schema public of the database `admin_url` names, created by the superuser there;
    `reader` gets SELECT on them (and nothing else). Also a sequence nobody else may use."""
    import psycopg

    with psycopg.connect(admin_url) as conn:  # one transaction
        for statement in ddl("postgres"):
            conn.execute(statement)
        for table, rows in _rows("postgres").items():
            marks = ", ".join(["%s"] * len(rows[0]))
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        conn.execute("CREATE SEQUENCE order_numbers START 1000")
        if reader:
            conn.execute(f"GRANT SELECT ON customers, products, orders, order_items TO {reader}")


def build_shop(
    *, sqlite_path: Path | None = None, duckdb_path: Path | None = None, pg_admin_url: str | None = None
) -> None:
    """The shop dataset in each database named (files must not exist yet; the PG database empty)."""
    if sqlite_path is not None:
        build_sqlite(sqlite_path)
    if duckdb_path is not None:
        build_duckdb(duckdb_path)
    if pg_admin_url is not None:
        build_postgres(pg_admin_url)


# -- fingerprints ------------------------------------------------------------------------------------


def _digest(value: Any) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _file_parts(path: Path) -> dict[str, str]:
    """The file's bytes, and the names in its directory (a new file beside it: ATTACH, VACUUM INTO)."""
    return {
        "file bytes": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
        "directory": _digest(sorted(p.name for p in path.parent.iterdir())),
    }


def fingerprint_sqlite(path: Path) -> dict[str, str]:
    parts = _file_parts(path)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        parts["dump"] = _digest(list(conn.iterdump()))
        parts["pragmas"] = _digest(
            [
                conn.execute(f"PRAGMA {p}").fetchall()
                for p in ("user_version", "application_id", "schema_version", "journal_mode", "page_size")
            ]
        )
    finally:
        conn.close()
    return parts


def fingerprint_duckdb(path: Path) -> dict[str, str]:
    """Open no other connection to the file in this process meanwhile (DuckDB refuses two
    configurations of one file in one process): take it before opening a source and after closing."""
    import duckdb

    parts = _file_parts(path)
    conn = duckdb.connect(str(path), read_only=True)
    try:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return sorted(conn.execute(sql).fetchall(), key=repr)

        tables = rows("SELECT database_name, schema_name, table_name, sql FROM duckdb_tables()")
        parts["tables"] = _digest(tables)
        parts["columns"] = _digest(rows("SELECT table_name, column_name, data_type FROM duckdb_columns()"))
        parts["views"] = _digest(rows("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal"))
        parts["sequences"] = _digest(rows("SELECT sequence_name, last_value FROM duckdb_sequences()"))
        parts["macros"] = _digest(rows("SELECT function_name FROM duckdb_functions() WHERE NOT internal"))
        parts["databases"] = _digest(rows("SELECT database_name, path FROM duckdb_databases()"))
        for db, schema, table, _ in tables:
            parts[f"rows {schema}.{table}"] = _digest(rows(f'SELECT * FROM "{db}"."{schema}"."{table}"'))
    finally:
        conn.close()
    return parts


_PG_SYSTEM = "('pg_catalog', 'information_schema')"
_PG_CATALOG_QUERIES = {
    "relations": f"""SELECT n.nspname, c.relname, c.relkind, c.relacl::text, c.relowner::regrole::text
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN {_PG_SYSTEM} AND n.nspname NOT LIKE 'pg_toast%'""",
    "columns": f"""SELECT table_schema, table_name, column_name, data_type, ordinal_position, column_default
        FROM information_schema.columns WHERE table_schema NOT IN {_PG_SYSTEM}""",
    "sequences": "SELECT schemaname, sequencename, last_value FROM pg_sequences",
    "roles": """SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,
        rolreplication, rolbypassrls, rolconnlimit, rolpassword, rolvaliduntil FROM pg_authid""",
    "memberships": "SELECT roleid::regrole::text, member::regrole::text FROM pg_auth_members",
    "role settings": "SELECT setdatabase, setrole, setconfig FROM pg_db_role_setting",
    "schemas": "SELECT nspname, nspowner::regrole::text, nspacl::text FROM pg_namespace",
    "databases": "SELECT datname, datacl::text, datallowconn, datconnlimit FROM pg_database",
    "extensions": "SELECT extname, extversion FROM pg_extension",
    "functions": f"""SELECT n.nspname, p.proname, md5(p.prosrc), p.proacl::text FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN {_PG_SYSTEM}""",
    "function grants": """SELECT p.proname, p.proacl::text FROM pg_proc p WHERE p.proacl IS NOT NULL""",
    "triggers": "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal",
    "event triggers": "SELECT evtname FROM pg_event_trigger",
    "policies": "SELECT polname, polrelid::regclass::text FROM pg_policy",
    "rules": "SELECT rulename, ev_class::regclass::text FROM pg_rewrite WHERE rulename <> '_RETURN'",
    "large objects": "SELECT oid, lomowner FROM pg_largeobject_metadata",
    "default privileges": """SELECT defaclrole, defaclnamespace, defaclobjtype, defaclacl::text
        FROM pg_default_acl""",
    "config files": "SELECT sourcefile, name, setting FROM pg_file_settings",
    "subscriptions": "SELECT subname FROM pg_subscription",
    "publications": "SELECT pubname FROM pg_publication",
    "foreign servers": "SELECT srvname FROM pg_foreign_server",
}


def fingerprint_postgres(admin_url: str) -> dict[str, str]:
    """Every user table's rows, and the catalog: relations, columns, sequences, roles, schemas,
    databases, extensions, functions, grants, triggers, large objects, settings files."""
    import psycopg

    parts: dict[str, str] = {}
    with psycopg.connect(admin_url, autocommit=True) as conn:

        def rows(sql: str) -> list[tuple[Any, ...]]:
            return sorted(conn.execute(sql).fetchall(), key=repr)

        for name, sql in _PG_CATALOG_QUERIES.items():
            parts[name] = _digest(rows(sql))
        tables = rows(
            f"""SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN {_PG_SYSTEM}
            AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'"""
        )
        for schema, table in tables:
            quoted = f'"{schema}"."{table}"'
            parts[f"rows {schema}.{table}"] = _digest(
                rows(
                    f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
                    f" FROM {quoted} t"
                )
            )
    return parts


def fingerprint(dialect: str, target: str | Path) -> dict[str, str]:
    """The fingerprint of a database: a file path for sqlite and duckdb, the admin URL for postgres."""
    if dialect == "sqlite":
        return fingerprint_sqlite(Path(target))
    if dialect == "duckdb":
        return fingerprint_duckdb(Path(target))
    if dialect == "postgres":
        return fingerprint_postgres(str(target))
    raise ValueError(dialect)
