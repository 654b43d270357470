"""What a source lists: entries with a revision, read only when they changed.

A backend scans its location and yields one `Entry` per item (or `Failed` for an item it could not
look at), costing one metadata check per unchanged item: a stat, a line of an object listing, a
PROPFIND entry, a conditional GET answered 304. `read` fetches the bytes, and is only called for an
entry whose revision differs from the one the library holds. A scan that cannot run at all (the
source unreachable, its listing refused) raises `ScanError`: that is a failure of the source, which
the circuit breaker counts; a `Failed` item is retried on its own, and dead-lettered at last. A
backend calls its `checkpoint` before each request or item: it raises `ScanStopped` to end a scan
whose source was paused or removed meanwhile.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Protocol

from ragstack.errors import Cancelled, RagstackError, Unavailable
from ragstack.guard.paths import SETTING, PathGuard


@dataclass(frozen=True)
class Entry:
    """One item of a source. `source` is the document's source as the catalog records it (an absolute
    path; a URL without userinfo, secret parameters masked; `s3://bucket/key`); `name` is its path
    relative to the source's location, which include and exclude globs match."""

    source: str
    name: str
    revision: str
    size: int  # bytes; -1 when the listing does not say
    read: Callable[[], bytes]
    kind: str = ""  # "html" for a web page; "" lets the reader go by the name's extension


@dataclass(frozen=True)
class Failed:
    """An item the scan found but could not look at: retried on its own, never pruned for it."""

    source: str
    name: str
    reason: str


class ReadFailed(Unavailable):
    """An item a scan listed whose bytes could not be read: it changed or went away since, or its
    server refused. The message is safe to show; the item is retried."""


class ScanError(RagstackError):
    """The source could not be scanned at all. The message is safe to show (no credentials)."""


class ScanStopped(Cancelled):
    """The scan was ended early: its source was paused or removed, or its sync cancelled, while it
    was listed. No failure of the source: the breaker does not count it."""


# Called by a backend before each request or item of a scan; raises ScanStopped to end it.
Checkpoint = Callable[[], None]


def no_checkpoint() -> None:
    """A scan nothing stops (a spec checked when added)."""


class Backend(Protocol):
    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        """Every item whose `name` is `wanted`. `known`: source -> revision the library holds (a
        backend that can ask conditionally, as HTTP can, sends it). Raises ScanError, possibly
        after yielding some items: a scan that raised is never used to prune."""
        ...

    def close(self) -> None: ...


def selector(include: tuple[str, ...], exclude: tuple[str, ...]) -> Callable[[str], bool]:
    """A name is wanted when it matches an include glob (any, when there are none) and no exclude
    glob. Globs match the whole relative name (`*.md`, `docs/**`); `**` crosses folders, `*` too."""

    def matches(name: str, globs: tuple[str, ...]) -> bool:
        base = PurePosixPath(name).name
        return any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(base, g) for g in globs)

    def wanted(name: str) -> bool:
        return (not include or matches(name, include)) and not matches(name, exclude)

    return wanted


class FolderBackend:
    """A folder on the service's file system, under `ingest.allowed_roots`: its files (hidden ones
    skipped), revision = modification time and size."""

    def __init__(
        self, location: str, paths: PathGuard, max_items: int, checkpoint: Checkpoint = no_checkpoint
    ) -> None:
        self._root = paths.check(location)  # refused before its existence is looked at
        self._paths = paths
        self._max_items = max_items
        self._checkpoint = checkpoint

    @property
    def root(self) -> Path:
        return self._root

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        if not self._root.is_dir():
            raise ScanError(f"folder {self._root} does not exist or is not a folder")
        count = 0
        for path in sorted(self._root.rglob("*")):
            self._checkpoint()
            rel = path.relative_to(self._root)
            if any(part.startswith(".") for part in rel.parts) or not path.is_file():
                continue
            name = rel.as_posix()
            if not wanted(name):
                continue
            count += 1
            if count > self._max_items:
                raise ScanError(
                    f"{self._root} holds more than {self._max_items} files (ingest.source_max_items)"
                )
            if not self._paths.allows(path):
                yield Failed(str(path), name, f"a link to outside {SETTING}; skipped")
                continue
            try:
                st = path.stat()
            except OSError as err:  # removed between the listing and the stat
                yield Failed(str(path), name, f"cannot stat: {err.strerror}")
                continue
            mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC).isoformat()
            read = functools.partial(self._read, path.resolve(), st.st_ino)
            yield Entry(str(path.resolve()), name, f"{mtime}/{st.st_size}", st.st_size, read)

    def _read(self, path: Path, inode: int) -> bytes:
        """The file's bytes, if it is still the file the scan listed: opened without following a
        link, and what was opened checked against the roots (a file swapped for a link to outside
        them, or a folder above it swapped, between the scan and the read is refused)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as err:
            raise ReadFailed(f"{path}: cannot open ({err.strerror}; a link is not followed)") from None
        with os.fdopen(fd, "rb") as f:
            opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
            if not self._paths.allows(opened) or os.fstat(fd).st_ino != inode:
                raise ReadFailed(f"{path} changed into something else since it was listed; skipped")
            return f.read()

    def close(self) -> None:
        pass
