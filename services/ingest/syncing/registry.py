"""The ingest service's sources, in one place: their store, the sync a job runs, the poller, and
what the RPCs show of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragstack.config import Config, SourceConfig
from ragstack.domain import acl_groups
from ragstack.guard.paths import PathGuard
from ragstack.state import open_state
from ragstack.state.locks import SharedLock
from services.ingest.crawler import CrawlLimits
from services.ingest.jobs import JobStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.syncing import state as source_state
from services.ingest.syncing.backends import Backend, Checkpoint, no_checkpoint
from services.ingest.syncing.poller import SourcePoller
from services.ingest.syncing.remote import open_backend
from services.ingest.syncing.s3 import own_buckets
from services.ingest.syncing.state import Retries, SourceStore
from services.ingest.syncing.sync import Opener, SourceSync


@dataclass
class Sources:
    store: SourceStore
    sync: SourceSync
    poller: SourcePoller
    open: Opener
    leader: SharedLock | None = None  # shared state: which ingest worker polls

    def close(self) -> None:
        """Closes the store, and hands the polling over to another worker at once."""
        self.store.close()
        if self.leader is not None:
            self.leader.close()

    def check(self, spec: SourceConfig) -> None:
        """Refuses a spec that could never be polled, before it is recorded: ACL groups ingest would
        refuse, and what its backend refuses when built (a folder outside `ingest.allowed_roots`,
        PERMISSION_DENIED whether it exists or not; a URL, bucket, region or endpoint it cannot
        read). Whether a host may be fetched is the fetch guard's to say, at each poll."""
        acl_groups(spec.groups)
        self.open(spec, no_checkpoint).close()


def build_sources(
    cfg: Config, pipeline: IngestPipeline, jobs: JobStore, paths: PathGuard, wake_worker: Callable[[], None]
) -> Sources:
    """The ingest service's sources: their store in the shared state, the config's `sources:` declared."""
    ingest = cfg.ingest
    retries = Retries(
        attempts=ingest.source_retries,
        backoff_s=ingest.source_backoff_s,
        backoff_max_s=ingest.source_backoff_max_s,
        breaker_failures=ingest.source_breaker_failures,
        breaker_cooldown_s=ingest.source_breaker_cooldown_s,
    )
    store = SourceStore(
        open_state(cfg.state, cfg.data_dir, source_state.STORE, source_state.MIGRATIONS), retries
    )
    store.declare(cfg.sources)
    limits = CrawlLimits.from_config(ingest)
    stores = own_buckets(cfg.storage.lancedb(cfg.data_dir), cfg.storage.lexical_snapshots)

    def opener(spec: SourceConfig, checkpoint: Checkpoint) -> Backend:
        return open_backend(spec, paths, limits, ingest.source_max_items, checkpoint, stores)

    sync = SourceSync(store, pipeline, opener, cfg.library, ingest.source_scan_timeout_s)
    # Ingest workers sharing PostgreSQL state: one of them polls (another takes over if it dies).
    shared = cfg.state.url and ingest.source_polling
    leader = SharedLock(cfg.state, cfg.data_dir, "source-poller") if shared else None
    poller = SourcePoller(
        store,
        sync,
        jobs,
        wake_worker,
        ingest.source_tick_s,
        ingest.source_watch,
        leads=leader.lead if leader is not None else lambda: True,
    )
    return Sources(store, sync, poller, opener, leader)
