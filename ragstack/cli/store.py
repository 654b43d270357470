"""`ragstack store ...`: per-library stats, snapshots (create, list, restore, delete) and vacuum."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.domain import RetrieveStats, SnapshotInfo
from ragstack.errors import RagstackError
from ragstack.rpc.clients import IngestClient, RetrieveClient


def _client(cfg: Config, session: Any) -> IngestClient:
    return IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


async def stats(cfg: Config, library: str, as_json: bool) -> None:
    fresh: RetrieveStats | None = None
    async with connect(cfg, needed=("ingest", "retrieve"), start=("ingest",)) as session:
        found = await _client(cfg, session).stats(library)
        if not session.embedded:  # a retrieve replica that serves: how fresh its view is
            try:
                fresh = await RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s).stats()
            except RagstackError:
                pass
    if as_json:
        print(json.dumps(asdict(found) | ({"retrieve": asdict(fresh)} if fresh else {}), indent=2))
        return
    console = Console()
    table = Table(title="Libraries", title_justify="left")
    for col in (
        "library",
        "documents",
        "chunks",
        "vectors",
        "windows",
        "lexical",
        "pages",
        "entities",
        "relations",
    ):
        table.add_column(col, justify="left" if col == "library" else "right")
    table.add_column("communities", justify="right")
    table.add_column("media types")
    table.add_column("last indexed")
    table.add_column("embedder")
    table.add_column("builds")
    for lib in found.libraries:
        table.add_row(
            lib.name,
            str(lib.documents),
            str(lib.chunks),
            _flag(lib.vector_chunks, lib.chunks),
            str(lib.vector_windows),
            _flag(lib.lexical_chunks, lib.chunks),
            str(lib.lexical_pages),
            str(lib.entities),
            str(lib.relations),
            str(lib.communities),
            ", ".join(f"{k or '?'} {v}" for k, v in sorted(lib.media_types.items())),
            lib.last_indexed_at[:19],
            lib.embedder or "configured",
            ", ".join(_build(k, v, found.build) for k, v in sorted(lib.builds.items())),
        )
    console.print(table)
    stale = sum(v for lib in found.libraries for k, v in lib.builds.items() if k != found.build)
    if stale:
        console.print(
            f"{stale} documents were built other than this ingest service's {found.build}: their next"
            " ingest indexes them again (Document.build)",
            highlight=False,
        )
    versions = ", ".join(f"{k} v{v}" for k, v in sorted(found.table_versions.items()))
    console.print(f"LanceDB tables: {versions or 'none'}", highlight=False)
    console.print(
        f"Disk: LanceDB {_size(found.lancedb_bytes)}, tantivy {_size(found.tantivy_bytes)}, "
        f"catalog {_size(found.catalog_bytes)}, {found.snapshots} snapshots {_size(found.snapshots_bytes)}",
        highlight=False,
    )
    if fresh is not None:
        served = ", ".join(f"{s.store} v{s.version} {s.staleness_s:.1f} s" for s in fresh.stores)
        console.print(f"Retrieve (staleness at most {fresh.max_staleness_s:g} s): {served}", highlight=False)


def _build(build: str, count: int, current: str) -> str:
    """A build's documents, in yellow when they are to be indexed again."""
    text = f"{build or 'before builds'} {count}"
    return text if build == current else f"[yellow]{text}[/yellow]"


def _flag(count: int, expected: int) -> str:
    """A store's count, in red when it disagrees with the catalog."""
    return str(count) if count == expected else f"[red]{count}[/red]"


async def snapshot_create(cfg: Config, name: str) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        snap = await _client(cfg, session).create_snapshot(name)
    Console().print(f"snapshot {_describe(snap)}", highlight=False)


async def snapshot_list(cfg: Config, as_json: bool) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        found = await _client(cfg, session).list_snapshots()
    if as_json:
        print(json.dumps([asdict(s) for s in found], indent=2))
        return
    console = Console()
    if not found:
        console.print("no snapshots (ragstack store snapshot create NAME)")
    for snap in found:
        console.print(_describe(snap), highlight=False)


async def snapshot_restore(cfg: Config, name: str) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        snap, versions = await _client(cfg, session).restore_snapshot(name)
    now = ", ".join(f"{k} v{v}" for k, v in sorted(versions.items()))
    Console().print(f"restored {_describe(snap)}; LanceDB tables now {now}", highlight=False)


async def snapshot_delete(cfg: Config, name: str) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        await _client(cfg, session).delete_snapshot(name)
    Console().print(f"deleted snapshot {name}", highlight=False)


async def vacuum(cfg: Config, older_than_days: int | None) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        report = await _client(cfg, session).vacuum(older_than_days)
    per_table = ", ".join(f"{k} {v}" for k, v in sorted(report.table_versions_removed.items()))
    Console().print(
        f"removed {report.versions_removed} LanceDB versions older than {report.older_than_days} days "
        f"({per_table or 'no tables'}), compacted {report.fragments_compacted} fragments; freed "
        f"{_size(report.lancedb_bytes_freed)} in LanceDB and {_size(report.tantivy_bytes_freed)} in tantivy; "
        f"removed {report.jobs_removed} ended ingest jobs",
        highlight=False,
    )


def _describe(snap: SnapshotInfo) -> str:
    versions = ", ".join(f"{k} v{v}" for k, v in sorted(snap.table_versions.items()))
    return (
        f"{snap.name}  {snap.created_at[:19]}  {snap.documents} documents, {snap.chunks} chunks, "
        f"copies {_size(snap.bytes)}  ({versions})"
    )
