"""Room on a disk: what writes that would fill it check first, so that a full disk refuses the next
write with the limit named instead of failing it halfway."""

from __future__ import annotations

import shutil
from pathlib import Path

from ragstack.errors import ResourceExhausted


def require_free(path: Path, floor_bytes: int, doing: str, adding: int = 0) -> None:
    """Raises ResourceExhausted when writing `adding` more bytes under `path` would leave less than
    `floor_bytes` free on its disk (`ingest.min_free_mb`; 0: no check)."""
    if floor_bytes <= 0:
        return
    while not path.exists() and path != path.parent:  # a data dir not made yet: its disk
        path = path.parent
    free = shutil.disk_usage(path).free
    if free - adding < floor_bytes:
        needs = f", and it would write {adding / 2**20:.0f} MiB" if adding else ""
        raise ResourceExhausted(
            f"{doing} refused: {free / 2**20:.0f} MiB are free on the disk of {path}{needs}; at least "
            f"{floor_bytes / 2**20:g} MiB must stay free (ingest.min_free_mb)"
        )
