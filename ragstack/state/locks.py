"""A lock that one process at a time holds among all that share the state: PostgreSQL's session
advisory lock, on a connection of its own, or on SQLite (processes on one machine sharing a
data_dir) flock on a file there. Either is released when its process dies, so a crashed holder
never blocks the others."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragstack.config import StateConfig
from ragstack.state.db import StateDB, connect_state


class SharedLock:
    def __init__(self, cfg: StateConfig, data_dir: Path, name: str) -> None:
        self.name = name
        self._local = threading.Lock()  # the process's threads take turns first
        self._file = data_dir / f"{name}.lock"
        self._db: StateDB | None = None
        if cfg.url:
            self._db = connect_state(cfg, data_dir, "locks")

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._local:
            if self._db is None:
                with self._flock():
                    yield
                return
            key = f"ragstack.lock.{self.name}"
            self._db.one("SELECT pg_advisory_lock(hashtextextended(?, 0))", (key,))
            try:
                yield
            finally:
                self._db.one("SELECT pg_advisory_unlock(hashtextextended(?, 0))", (key,))

    @contextmanager
    def _flock(self) -> Iterator[None]:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
