"""The on-disk layout version of a data dir: stores written by another layout are refused with a
clear message instead of failing deep inside LanceDB or tantivy."""

from __future__ import annotations

import json
from pathlib import Path

from ragstack.errors import RagstackError

LAYOUT_VERSION = 5
_FILE = "layout.json"


class LayoutMismatch(RagstackError):
    code = "FAILED_PRECONDITION"


def check_layout(data_dir: Path) -> None:
    """Marks a new data dir with the current layout; refuses one written by another layout."""
    data_dir.mkdir(parents=True, exist_ok=True)
    marker = data_dir / _FILE
    if marker.exists():
        found = json.loads(marker.read_text()).get("version")
        if found == LAYOUT_VERSION:
            return
    elif not any(_holds_a_store(p) for p in data_dir.iterdir()):
        marker.write_text(json.dumps({"version": LAYOUT_VERSION}))
        return
    else:
        found = 1
    raise LayoutMismatch(
        f"the stores in {data_dir} use layout {found}, this RAGStack uses {LAYOUT_VERSION}: "
        "move that folder away (or set data_dir to a new folder) and ingest again"
    )


def _holds_a_store(path: Path) -> bool:
    """Whether `path` is a store an older layout wrote; an empty store folder (a mount point made
    for a store's own disk) is not."""
    if path.name == "catalog.sqlite":
        return True
    return path.name in {"lancedb", "tantivy"} and path.is_dir() and any(path.iterdir())
