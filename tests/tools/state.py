"""Shared state for store tests, on both backends: `state_config` gives a StateConfig for SQLite
(the data dir's files) or for a fresh database on one throwaway PostgreSQL server per test session.

    def test_x(state_config, tmp_path):
        catalog = Catalog(open_state(state_config, tmp_path, catalog_mod.STORE, catalog_mod.MIGRATIONS))
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragstack.bench.postgres import PostgresServer, unavailable_reason
from ragstack.config import StateConfig
from ragstack.state import StateDB, open_state

BACKENDS = ("sqlite", "postgres")
_numbers = itertools.count()
_server: PostgresServer | None = None


def postgres_server() -> PostgresServer:
    """The session's PostgreSQL server, started on first use (stopped by `stop_server`)."""
    global _server
    if _server is None:
        reason = unavailable_reason()
        if reason:
            pytest.fail(f"PostgreSQL is needed for the state tests: {reason}")
        _server = PostgresServer(max_connections=200)
        _server.start()
    return _server


def stop_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


def fresh_postgres_url() -> str:
    """A new, empty database on the session's server (as its superuser)."""
    return postgres_server().database(f"state_{next(_numbers)}")


def config_for(backend: str) -> StateConfig:
    return StateConfig(url=fresh_postgres_url()) if backend == "postgres" else StateConfig()


def store(cfg: StateConfig, data_dir: Path, module: types.ModuleType) -> StateDB:
    """`module`'s store (its STORE and MIGRATIONS) on `cfg`'s backend."""
    return open_state(cfg, data_dir, module.STORE, module.MIGRATIONS)


@pytest.fixture(params=BACKENDS)
def state_config(request: pytest.FixtureRequest) -> Iterator[StateConfig]:
    yield config_for(request.param)
