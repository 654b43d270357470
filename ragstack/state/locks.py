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
from ragstack.errors import Unavailable
from ragstack.state.db import StateDB, connect_state


class SharedLock:
    def __init__(self, cfg: StateConfig, data_dir: Path, name: str) -> None:
        self.name = name
        self._local = threading.Lock()  # the process's threads take turns first
        self._file = data_dir / f"{name}.lock"
        self._db: StateDB | None = None
        self._leading: int | None = None  # the connection (or lock file) this process leads with
        self._closed = False
        if cfg.url:
            self._db = connect_state(cfg, data_dir, "locks")

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._local:
            if self._closed:
                raise Unavailable(f"the {self.name} lock is closed: this process is stopping")
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

    def lead(self) -> bool:
        """Whether this process leads: the lock taken without waiting and kept for the life of the
        process (its connection), so one process among those sharing the state does a job; when it
        dies, another takes over at its next try. Asked again, it checks its hold is still there."""
        with self._local:
            if self._closed:  # a call that was under way when the process began to stop
                return False
            if self._db is None:
                if self._leading is None:
                    self._leading = self._try_flock()
                return self._leading is not None
            self._db.one("SELECT 1")  # a lost connection (and the lock with it) shows here
            if self._leading != self._db.connections:
                key = f"ragstack.lock.{self.name}"
                row = self._db.one("SELECT pg_try_advisory_lock(hashtextextended(?, 0))", (key,))
                self._leading = self._db.connections if row and row[0] else None
            return self._leading is not None

    def _try_flock(self) -> int | None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd  # kept open: the lock lasts as long as the process

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
        """Lets go of the lock; a call in another thread finishes first (a poller's `lead` that
        a stopping service no longer awaits would otherwise take the lead again, or reconnect)."""
        with self._local:
            self._closed = True
            if self._db is not None:
                self._db.close()  # which hands the lead over now, not when the server ends the session
            elif self._leading is not None:
                os.close(self._leading)
            self._leading = None
