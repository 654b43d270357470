"""The services on PostgreSQL state, stopped: they leave no session open in the state database, and
the source polling the ingest service led is another worker's at once, not when the server notices
the connections are gone."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ragstack.config import StateConfig
from ragstack.resources import Resources
from ragstack.state.db import connect_state
from ragstack.state.locks import SharedLock
from tests.conftest import make_config, start_with
from tests.tools.state import fresh_postgres_url


async def test_stopped_services_leave_no_session_and_hand_their_locks_over(
    tmp_path: Path, resources: Resources
) -> None:
    state = StateConfig(url=fresh_postgres_url(), auto_migrate=True)
    cfg = make_config(
        tmp_path / "data",
        state=state.model_dump(),
        ingest={"source_polling": True, "source_tick_s": 0.2},
    )
    watcher = connect_state(state, tmp_path, "watch")
    database = state.url.rsplit("/", 1)[1]

    def sessions() -> int:
        row = watcher.one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()", (database,)
        )
        return int(row[0])  # type: ignore[index]

    other = SharedLock(state, tmp_path / "other", "source-poller")
    try:
        running = await start_with(cfg, resources)  # every service and the gateway
        try:
            deadline = time.monotonic() + 30
            while await asyncio.to_thread(other.lead):  # the service leads once its poller ticks
                other.close()
                other = SharedLock(state, tmp_path / "other", "source-poller")
                assert time.monotonic() < deadline, "the ingest service never led the source polling"
                await asyncio.sleep(0.1)
            assert sessions() > 1  # the service's own, and the other lock's
        finally:
            await running.stop()
        assert other.lead()  # at once: the stopped service let go of it
        # Only the other lock's: every connection of the services is closed (the server ends each
        # session a moment after its client closed it).
        deadline = time.monotonic() + 10
        while (left := sessions()) != 1:
            assert time.monotonic() < deadline, f"{left - 1} sessions of the stopped services stay open"
            await asyncio.sleep(0.05)
        commit = SharedLock(state, tmp_path / "other", "ingest-commit")
        with commit.hold():  # nobody holds the stores' turn
            pass
        commit.close()
    finally:
        other.close()
        watcher.close()
