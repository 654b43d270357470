"""`ragstack db ...`: attach, list, detach and query the databases a library answers from."""

from __future__ import annotations

import json
from dataclasses import asdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragstack import domain as d
from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.rpc.clients import IngestClient, RetrieveClient


async def attach(cfg: Config, name: str, url: str, library: str) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        db = await IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s).attach_database(
            name, url, library
        )
    Console().print(
        f"attached {db.name} ({db.dialect}, {db.url}) to library {db.library}", highlight=False, markup=False
    )
    _print_tables(db)


async def detach(cfg: Config, name: str, library: str) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        await IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s).detach_database(name, library)
    Console().print(f"detached {name}")


async def list_databases(cfg: Config, library: str, as_json: bool) -> None:
    async with connect(cfg, needed=("retrieve",), start=("retrieve",)) as session:
        found = await RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s).databases(
            library
        )
    if as_json:
        print(json.dumps([asdict(db) for db in found], indent=2, default=str))
        return
    console = Console()
    if not found:
        console.print(f"no database is attached to library {library or cfg.library!r}")
    for db in found:
        state = f"[red]{escape(db.error)}[/red]" if db.error else f"{len(db.tables)} tables"
        console.print(
            f"[bold]{escape(db.name)}[/bold] ({db.dialect or '?'}, {db.origin}) {escape(db.url)}: {state}"
        )
        _print_tables(db)


async def query(cfg: Config, sql: str, database: str, library: str, as_json: bool) -> None:
    async with connect(cfg, needed=("retrieve",), start=("retrieve",)) as session:
        result = await RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s).sql(
            library, database, sql
        )
    if as_json:
        print(json.dumps(asdict(result), default=str))
        return
    table = Table(title=f"{result.database}: {result.sql}", title_justify="left")
    for col in result.columns:
        table.add_column(col, overflow="fold")
    for row in result.rows:
        table.add_row(*("null" if v is None else str(v) for v in row))
    console = Console()
    console.print(table)
    more = " (more matched: the row cap, sql.max_rows, cut it)" if result.truncated else ""
    console.print(f"{len(result.rows)} rows in {result.took_ms:.0f} ms{more}")


def _print_tables(db: d.Database) -> None:
    console = Console()
    for t in db.tables:
        console.print(f"  {t.describe(samples=3)}", highlight=False, markup=False)
