"""Bounded staleness of a retrieve replica: every store it reads is checked for the writer's newest
commit on a timer, so reads lag the writer by at most `retrieve.max_staleness_s` even on object
storage (where the stores themselves check only that often), and what each check found is
reported (Stats, /metrics).

A check confirms at its start that the store serves the newest version committed before then, so
a store's staleness is the time since its last successful check started. Checks run every half
of the bound: the staleness stays under it while two checks together take less than the other half.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from prometheus_client import Gauge

from ragstack.domain import RetrieveStats, StoreFreshness

log = logging.getLogger(__name__)

VERSION = Gauge(
    "ragstack_retrieve_store_version",
    "The version of a store this retrieve replica serves (LanceDB table version, lexical generation).",
    ["store"],
)
STALENESS = Gauge(
    "ragstack_retrieve_staleness_seconds",
    "Seconds since this retrieve replica last confirmed it serves a store's newest version.",
    ["store"],
)
MAX_STALENESS = Gauge(
    "ragstack_retrieve_max_staleness_seconds", "retrieve.max_staleness_s: the bound the replica keeps."
)

# A store's check: {store name: the version it serves after looking for a newer one}.
Check = Callable[[], Mapping[str, int]]


class Freshness:
    def __init__(
        self, checks: Sequence[Check], max_staleness_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._checks = checks
        self.max_staleness_s = max_staleness_s
        self._clock = clock
        self._seen: dict[str, tuple[int, float]] = {}  # store: (version, when its check started)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        MAX_STALENESS.set(max_staleness_s)

    def check(self) -> None:
        """Every store, once. A check that fails keeps the store's last result, so its staleness
        grows past the bound and shows."""
        for check in self._checks:
            started = self._clock()
            try:
                versions = check()
            except Exception as err:  # an unreachable store must not stop the others' checks
                log.warning("freshness check failed: %s", err)
                continue
            with self._lock:
                for store, version in versions.items():
                    self._seen[store] = (version, started)
                    VERSION.labels(store).set(version)
                    STALENESS.labels(store).set_function(self._staleness_of(store))

    def _staleness_of(self, store: str) -> Callable[[], float]:
        return lambda: self._clock() - self._seen[store][1]

    def stats(self) -> RetrieveStats:
        now = self._clock()
        with self._lock:
            seen = sorted(self._seen.items())
        return RetrieveStats(
            stores=[
                StoreFreshness(store, version, datetime.fromtimestamp(at, UTC).isoformat(), now - at)
                for store, (version, at) in seen
            ],
            max_staleness_s=self.max_staleness_s,
        )

    def start(self) -> None:
        """Checks now, then every half of the bound on a thread of its own (checks block on I/O)."""
        self.check()
        self._thread = threading.Thread(target=self._run, name="retrieve-freshness", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.max_staleness_s / 2):
            self.check()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.max_staleness_s + 5)
