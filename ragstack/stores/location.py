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
    """A LanceDB connection. The single writer needs no check for commits. A reader (another
    connection, maybe another process or machine) checks for the writer's commits on every read
    in a folder, where a check is a directory listing; on object storage, where each check is a
    request, at most every `max_staleness_s` (0: on every read too)."""
    import lancedb

    local = isinstance(location, Path) or "://" not in location
    if local:
        Path(location).mkdir(parents=True, exist_ok=True)
    interval = None if writer else timedelta(seconds=0 if local else max_staleness_s)
    return lancedb.connect(
        str(location),
        read_consistency_interval=interval,
        storage_options=dict(options) if options else None,
    )


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
