"""Shared state: the catalog, job queue, sessions, recall memory, database registry, feedback,
enrichment cache and sources, in SQLite files under `data_dir` (the embedded default) or in one
PostgreSQL database (`state.url`) that any number of service processes share. Each store's schema
is versioned (state/migrations.py); `ragstack migrate` applies what a new release adds."""

from ragstack.state.db import StateDB, open_state
from ragstack.state.migrations import Migration, MigrationRequired

__all__ = ["Migration", "MigrationRequired", "StateDB", "open_state"]
