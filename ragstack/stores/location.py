"""Opening LanceDB where the config says: a folder, or an object store URL shared by many machines."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any


def connect_lancedb(
    location: Path | str,
    writer: bool,
    options: Mapping[str, str] | None = None,
    max_staleness_s: float = 0.0,
) -> Any:
    """A LanceDB connection. A writer needs no check for commits (ingest workers that share the
    stores reopen the tables at each turn: services/ingest/unit_of_work.py). A reader (another
    connection, maybe another process or machine) checks for the writer's commits on every read
    in a folder, where a check is a directory listing; on object storage, where each check is a
    request, at most every `max_staleness_s` (0: on every read too)."""
    import lancedb

    local = local_folder(location)
    if local is not None:
        local.mkdir(parents=True, exist_ok=True)
    interval = None if writer else timedelta(seconds=0 if local is not None else max_staleness_s)
    return lancedb.connect(
        str(location),
        read_consistency_interval=interval,
        storage_options=dict(options) if options else None,
    )


def local_folder(location: Path | str) -> Path | None:
    """The folder of a LanceDB location on this machine's file system; None for an object store URL."""
    return Path(location) if isinstance(location, Path) or "://" not in location else None


def create_or_open(db: Any, name: str, schema: Any) -> Any:
    """Table `name`, created with `schema` if it does not exist yet: two writers starting at once
    on new shared stores both get it (one creates it, the other opens it)."""
    try:
        return db.create_table(name, schema=schema, exist_ok=True)
    except Exception:
        if name in table_names(db):  # the other writer's create won the race
            return db.open_table(name)
        raise


def latest_version(table: Any) -> int:
    """A reader's check for the writer's newest commit of `table`, now: the version it then serves."""
    table.checkout_latest()
    return int(table.version)


def table_names(db: Any) -> list[str]:
    """Every table of a LanceDB connection (the listing comes in pages)."""
    names: list[str] = []
    token = None
    while True:
        page = db.list_tables(page_token=token)
        names.extend(page.tables)
        token = page.page_token
        if not token:
            return names
