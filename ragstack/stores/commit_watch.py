"""Whether a LanceDB table in a local folder can have changed since a reader last asked its version.

A reader's `table.version` lists the table's versions on LanceDB's own thread: 0.2 ms alone, over a
millisecond each when eight searches ask at once, and a search asks every time (strong consistency).
Every commit writes a new manifest into `_versions` (the folder's time changes) and renames a new
`latest_version_hint.json` over the old one (its inode and time change), so two stats that match the
last check's prove that nothing was committed since. A stamp younger than `RACY_NS` proves nothing
(file times can be coarser than commits are apart), so for a moment after a commit readers ask
LanceDB again, as git does with racily clean files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

RACY_NS = 1_000_000_000
HINT = "latest_version_hint.json"

_Stamp = tuple[tuple[int, int], ...]


class CommitWatch:
    def __init__(self, table_folder: Path | None) -> None:
        """`table_folder`: the table's `<name>.lance` folder; None (object storage, or a writer,
        whose handle never checks) asks LanceDB every time."""
        self._versions = None if table_folder is None else table_folder / "_versions"
        self._known: tuple[_Stamp, int] | None = None  # a trusted stamp and the version read after it

    def version(self, read: Callable[[], int]) -> int:
        """The table's version: the last one `read` (LanceDB's check) gave, when the folder proves
        that nothing was committed since; `read()` again otherwise."""
        if self._versions is None:
            return read()
        now = time.time_ns()
        stamp = _stamp(self._versions)
        known = self._known
        if stamp and known is not None and known[0] == stamp:
            return known[1]
        version = read()  # after the stamp: a commit in between changes the next stamp
        # (One assignment: a slower thread's older pair is still true, only less often matched.)
        self._known = (stamp, version) if stamp and all(t < now - RACY_NS for _, t in stamp) else None
        return version

    def forget(self) -> None:
        """After the table was reopened (a restore): ask LanceDB next time."""
        self._known = None


def _stamp(versions: Path) -> _Stamp:
    """(inode, modification time) of the versions folder and of the hint; () when either is missing
    (a table from before hints: every read asks LanceDB)."""
    try:
        folder, hint = os.stat(versions), os.stat(versions / HINT)
    except OSError:
        return ()
    return ((folder.st_ino, folder.st_mtime_ns), (hint.st_ino, hint.st_mtime_ns))
