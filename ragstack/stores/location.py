"""Opening LanceDB where the config says: a folder, or an object store URL shared by many machines."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any


def connect_lancedb(location: Path | str, writer: bool, options: Mapping[str, str] | None = None) -> Any:
    """A LanceDB connection. Readers check for the writer's commits on every read (another
    connection, maybe another process or machine); the single writer needs no check."""
    import lancedb

    if isinstance(location, Path) or "://" not in location:
        Path(location).mkdir(parents=True, exist_ok=True)
    return lancedb.connect(
        str(location),
        read_consistency_interval=None if writer else timedelta(seconds=0),
        storage_options=dict(options) if options else None,
    )


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
