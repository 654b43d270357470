"""Room on a disk: what writes that would fill it check first, so that a full disk refuses the next
write with the limit named instead of failing it halfway."""

from __future__ import annotations

import errno
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


# How a full disk reads where no errno survives: the OS's own words, passed on as text by the native
# stores (LanceDB: "No space left on device (os error 28)"; tantivy: "StorageFull"), and SQLite's
# SQLITE_FULL message.
_FULL_WORDS = ("no space left on device", "storagefull", "disk quota exceeded", "database or disk is full")
_SQLITE_FULL = 13
_PG_DISK_FULL = "53100"


def full_disk(err: BaseException) -> str | None:
    """What says that `err`, or an error that caused it, came from a full disk (ENOSPC or a quota,
    SQLite's SQLITE_FULL, PostgreSQL's disk_full, or the OS's words in a native store's message);
    None when nothing does."""
    seen: set[int] = set()
    at: BaseException | None = err
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, OSError) and at.errno in (errno.ENOSPC, errno.EDQUOT):
            return "no space left on device" if at.errno == errno.ENOSPC else "disk quota exceeded"
        if getattr(at, "sqlite_errorcode", None) == _SQLITE_FULL:
            return "database or disk is full"
        if getattr(at, "sqlstate", None) == _PG_DISK_FULL:
            return "the state database's disk is full"
        text = str(at).lower()
        for words in _FULL_WORDS:
            if words in text:
                return "no space left on device" if words == "storagefull" else words
        at = at.__cause__ or at.__context__
    return None
