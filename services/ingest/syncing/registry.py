"""The ingest service's sources, in one place: their store, the sync a job runs, the poller, and
what the RPCs show of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from ragstack.config import Config, SourceConfig
from ragstack.domain import acl_groups
from ragstack.errors import InvalidArgument
from ragstack.guard.paths import PathGuard
from services.ingest.crawler import CrawlLimits
from services.ingest.jobs import JobStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.syncing.backends import Backend
from services.ingest.syncing.poller import SourcePoller
from services.ingest.syncing.remote import S3Backend, open_backend
from services.ingest.syncing.state import Retries, SourceStore
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
        acl_groups(spec.groups)  # the groups ingest would refuse, refused now
        if spec.kind == "folder":
            self.paths.check(spec.url)
            return
        if spec.kind == "s3":  # bucket, prefix, region and endpoint as its backend reads them
            S3Backend(spec.url, endpoint=spec.endpoint, region=spec.region, max_items=1).close()
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
