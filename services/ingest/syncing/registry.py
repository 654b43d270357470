"""The ingest service's sources, in one place: their store, the sync a job runs, the poller, and
what the RPCs show of them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ragstack import convert
from ragstack.config import Config, SourceConfig
from ragstack.errors import InvalidArgument
from ragstack.guard.paths import PathGuard
from ragstack.v1 import ingest_pb2
from services.ingest.crawler import CrawlLimits
from services.ingest.jobs import JobStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.syncing.backends import Backend
from services.ingest.syncing.poller import SourcePoller
from services.ingest.syncing.remote import open_backend
from services.ingest.syncing.state import Retries, SourceState, SourceStore, iso
from services.ingest.syncing.sync import SourceSync


@dataclass
class Sources:
    store: SourceStore
    sync: SourceSync
    poller: SourcePoller
    paths: PathGuard

    def check(self, spec: SourceConfig) -> None:
        """Refuses a spec that could never be polled, before it is recorded: a folder outside
        `ingest.allowed_roots` (PERMISSION_DENIED, whether it exists or not), a URL of the wrong
        scheme. Whether a host may be fetched is the fetch guard's to say, at each poll."""
        if spec.kind == "folder":
            self.paths.check(spec.url)
            return
        try:
            parts = urlsplit(spec.url)
        except ValueError:
            raise InvalidArgument(f"source {spec.name!r}: not a URL") from None
        schemes = ("s3",) if spec.kind == "s3" else ("http", "https")
        if parts.scheme not in schemes or not parts.netloc:
            shown = " or ".join(s + "://..." for s in schemes)
            raise InvalidArgument(f"source {spec.name!r}: a {spec.kind} source's url is {shown}")
        if spec.endpoint is not None and urlsplit(spec.endpoint).scheme not in ("http", "https"):
            raise InvalidArgument(f"source {spec.name!r}: endpoint is an http:// or https:// URL")

    def to_pb(self, state: SourceState) -> ingest_pb2.Source:
        failures = self.store.failures(state.spec.name).values()
        return ingest_pb2.Source(
            spec=convert.source_spec_to_pb(state.spec),
            origin=state.origin,
            paused=state.paused,
            breaker=convert.breaker_to_pb(state.breaker),
            consecutive_failures=state.failures,
            last_error=state.last_error,
            last_poll_at=state.last_poll_at,
            last_success_at=state.last_success_at,
            next_poll_at=iso(max(state.next_poll, time.time())) if not state.paused else "",
            last_job_id=state.last_job_id,
            retrying=sum(1 for f in failures if not f.dead),
            dead_letters=[
                ingest_pb2.DeadLetter(
                    item=f.item,
                    revision=f.revision,
                    error=f.error,
                    attempts=f.attempts,
                    failed_at=f.failed_at,
                )
                for f in failures
                if f.dead
            ],
        )


def build_sources(
    cfg: Config, pipeline: IngestPipeline, jobs: JobStore, paths: PathGuard, wake_worker: Callable[[], None]
) -> Sources:
    """The ingest service's sources: `<data_dir>/sources.sqlite`, the config's `sources:` declared."""
    ingest = cfg.ingest
    retries = Retries(
        attempts=ingest.source_retries,
        backoff_s=ingest.source_backoff_s,
        backoff_max_s=ingest.source_backoff_max_s,
        breaker_failures=ingest.source_breaker_failures,
        breaker_cooldown_s=ingest.source_breaker_cooldown_s,
    )
    store = SourceStore(cfg.data_dir / "sources.sqlite", retries)
    store.declare(cfg.sources)
    limits = CrawlLimits.from_config(ingest)

    def opener(spec: SourceConfig) -> Backend:
        return open_backend(spec, paths, limits, ingest.source_max_items)

    sync = SourceSync(store, pipeline, opener, cfg.library)
    poller = SourcePoller(store, sync, jobs, wake_worker, ingest.source_tick_s, ingest.source_watch)
    return Sources(store, sync, poller, paths)
