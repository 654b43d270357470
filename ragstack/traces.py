"""One replayable JSON trace per query (its content is a `query_trace.QueryTrace`), each caller's
newest N kept, so one caller's questions never push out another's traces. The local admin's are
`<data_dir>/traces/<trace_id>.json` (where every trace was before callers had folders), another
caller's `<data_dir>/traces/by/<digest of its name>/<trace_id>.json`."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ragstack.auth import LOCAL
from ragstack.errors import InvalidArgument, TraceNotFound

_TRACE_ID = re.compile(r"^[0-9a-f]{32}\Z")


def check_trace_id(trace_id: str) -> str:
    if not _TRACE_ID.match(trace_id):
        raise InvalidArgument(f"invalid trace id {trace_id[:40]!r}: expected 32 lower-case hex characters")
    return trace_id


class TraceStore:
    def __init__(self, directory: Path, retention: int, enabled: bool = True) -> None:
        """`retention`: the newest traces kept of each caller."""
        self._dir = directory
        self._retention = retention
        self.enabled = enabled

    def write(self, trace_id: str, trace: dict[str, Any], owner: str = LOCAL.name) -> Path | None:
        """Writes `owner`'s trace, then forgets that caller's traces past the newest `retention`."""
        if not self.enabled:
            return None
        check_trace_id(trace_id)
        folder = self._folder(owner)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{trace_id}.json"
        # Not named *.json while written: another write's pruning must not take it for a trace.
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(trace, fh, indent=2, ensure_ascii=False, default=str)
            os.replace(tmp, target)  # readers never see a half-written trace
        except BaseException:  # a full disk: the part it holds is given back at once
            Path(tmp).unlink(missing_ok=True)
            raise
        for old in _newest_first(_traces_in(folder))[self._retention :]:
            old.unlink(missing_ok=True)
        _drop_stale_parts(folder)
        return target

    def read(self, trace_id: str, owner: str | None = None) -> dict[str, Any]:
        """The trace `trace_id` of `owner`, or of anyone (None)."""
        name = f"{check_trace_id(trace_id)}.json"
        if owner is not None:
            places = [self._folder(owner) / name]
        else:
            places = [self._dir / name, *self._dir.glob(f"by/*/{name}")]
        path = next((p for p in places if p.exists()), None)
        if path is None:
            raise TraceNotFound(trace_id)
        result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return result

    def list(self) -> list[Path]:
        """Every caller's trace files, newest first."""
        folders = [self._dir, *(f for f in self._dir.glob("by/*") if f.is_dir())]
        return _newest_first(p for folder in folders for p in _traces_in(folder))

    def _folder(self, owner: str) -> Path:
        if owner == LOCAL.name:
            return self._dir
        return self._dir / "by" / hashlib.sha256(owner.encode()).hexdigest()[:32]


def _traces_in(folder: Path) -> list[Path]:
    """The traces in `folder`: files named by a trace id (no half-written file, nothing else)."""
    return [p for p in folder.glob("*.json") if _TRACE_ID.match(p.stem)]


def _drop_stale_parts(folder: Path, older_than_s: float = 3600.0) -> None:
    """Removes what a write killed halfway left behind (an hour old: no write takes that long)."""
    cutoff = time.time() - older_than_s
    for part in folder.glob(".tmp-*.part"):
        try:
            if part.stat().st_mtime < cutoff:
                part.unlink()
        except FileNotFoundError:
            continue


def _newest_first(paths: Iterable[Path]) -> list[Path]:
    stamped = []
    for p in paths:
        try:
            stamped.append((p.stat().st_mtime_ns, p))
        except FileNotFoundError:  # pruned by another writer meanwhile
            continue
    return [p for _, p in sorted(stamped, reverse=True)]
