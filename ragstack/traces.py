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
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(trace, fh, indent=2, ensure_ascii=False, default=str)
        os.replace(tmp, target)  # readers never see a half-written trace
        for old in _newest_first(folder.glob("*.json"))[self._retention :]:
            old.unlink(missing_ok=True)
        return target

    def read(self, trace_id: str) -> dict[str, Any]:
        name = f"{check_trace_id(trace_id)}.json"
        path = next((p for p in (self._dir / name, *self._dir.glob(f"by/*/{name}")) if p.exists()), None)
        if path is None:
            raise TraceNotFound(trace_id)
        result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return result

    def list(self) -> list[Path]:
        """Every caller's trace files, newest first."""
        return _newest_first([*self._dir.glob("*.json"), *self._dir.glob("by/*/*.json")])

    def _folder(self, owner: str) -> Path:
        if owner == LOCAL.name:
            return self._dir
        return self._dir / "by" / hashlib.sha256(owner.encode()).hexdigest()[:32]


def _newest_first(paths: Iterable[Path]) -> list[Path]:
    stamped = []
    for p in paths:
        try:
            stamped.append((p.stat().st_mtime_ns, p))
        except FileNotFoundError:  # pruned by another writer meanwhile
            continue
    return [p for _, p in sorted(stamped, reverse=True)]
