"""One replayable JSON trace per query in `<data_dir>/traces/<trace_id>.json`, newest N kept (its
content is a `query_trace.QueryTrace`)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ragstack.errors import InvalidArgument, TraceNotFound

_TRACE_ID = re.compile(r"^[0-9a-f]{32}\Z")


def check_trace_id(trace_id: str) -> str:
    if not _TRACE_ID.match(trace_id):
        raise InvalidArgument(f"invalid trace id {trace_id[:40]!r}: expected 32 lower-case hex characters")
    return trace_id


class TraceStore:
    def __init__(self, directory: Path, retention: int, enabled: bool = True) -> None:
        self._dir = directory
        self._retention = retention
        self.enabled = enabled

    def write(self, trace_id: str, trace: dict[str, Any]) -> Path | None:
        if not self.enabled:
            return None
        check_trace_id(trace_id)
        self._dir.mkdir(parents=True, exist_ok=True)
        target = self._dir / f"{trace_id}.json"
        fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(trace, fh, indent=2, ensure_ascii=False, default=str)
        os.replace(tmp, target)  # readers never see a half-written trace
        self._prune()
        return target

    def read(self, trace_id: str) -> dict[str, Any]:
        path = self._dir / f"{check_trace_id(trace_id)}.json"
        if not path.exists():
            raise TraceNotFound(trace_id)
        result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return result

    def list(self) -> list[Path]:
        """Trace files, newest first."""
        if not self._dir.exists():
            return []
        return sorted(self._dir.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)

    def _prune(self) -> None:
        for old in self.list()[self._retention :]:
            old.unlink(missing_ok=True)
