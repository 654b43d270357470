"""One source brought in line with its library: scan, compare with the catalog, ingest what changed,
remove what is gone (under the delete policy).

`look` is a poll's cheap half: it scans and says whether anything is to be done, writing nothing
(the poller queues a job when it is). `run` is the job: it scans again, so a job that waited in the
queue, or is run again after a crash, works from what the source holds now.

A poll's scan ends early once its source is paused or removed; a job's once it is removed (a paused
source may still be synced by hand)."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from ragstack.config import SourceConfig
from ragstack.domain import FileProgress, FileStage, IngestSummary, acl_groups, library_name
from ragstack.errors import NotFound
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import SourceItem, document_id_for
from services.ingest.syncing.backends import (
    Backend,
    Checkpoint,
    Entry,
    Failed,
    ScanError,
    ScanStopped,
    selector,
)
from services.ingest.syncing.state import SourceStore

log = logging.getLogger(__name__)

Opener = Callable[[SourceConfig, Checkpoint], Backend]
CHECK_EVERY_S = 0.5  # how often a scan looks whether its source is still wanted: a read of the state


class _StillWanted:
    """A scan's checkpoint: raises ScanStopped once its source is removed (or paused, for a poll),
    looking at the state at most every CHECK_EVERY_S, or at once when `cancelled` is set (its sync
    job was cancelled); ScanError once the scan has run for `timeout_s`. It ends with the scan:
    reading the items listed is the job's, and not stopped by it. A state it cannot read stops
    nothing: that is no failure of the source."""

    def __init__(
        self,
        store: SourceStore,
        name: str,
        on_pause: bool,
        cancelled: threading.Event | None = None,
        timeout_s: float = math.inf,
    ) -> None:
        self._store = store
        self._name = name
        self._on_pause = on_pause
        self._cancelled = cancelled
        self._timeout_s = timeout_s
        self._until = time.monotonic() + timeout_s
        self._looked = float("-inf")
        self.ended = False

    def __call__(self) -> None:
        if self.ended:
            return
        if self._cancelled is not None and self._cancelled.is_set():
            raise ScanStopped(f"the sync of source {self._name!r} was cancelled during its scan")
        now = time.monotonic()
        if now >= self._until:
            raise ScanError(
                f"the scan of source {self._name!r} ran past {self._timeout_s:g} s "
                "(ingest.source_scan_timeout_s)"
            )
        if now - self._looked < CHECK_EVERY_S:
            return
        self._looked = now
        try:
            paused = self._store.get(self._name).paused
        except NotFound:
            raise ScanStopped(f"source {self._name!r} was removed during its scan") from None
        except Exception as err:  # the state out of reach a moment: the scan goes on
            log.warning("could not look whether source %s is still wanted: %s", self._name, err)
            return
        if paused and self._on_pause:
            raise ScanStopped(f"source {self._name!r} was paused during its scan")


@dataclass
class Scan:
    """A source's items against its library: what to fetch, what failed, what is gone."""

    library: str
    changed: list[Entry] = field(default_factory=list)
    failed: list[Failed] = field(default_factory=list)
    unchanged: int = 0
    waiting: int = 0  # failed before, backing off or dead, and not changed since
    seen: set[str] = field(default_factory=set)  # sources listed (failed ones too: never pruned)
    gone: list[str] = field(default_factory=list)  # members not listed, when the policy prunes
    held: dict[str, str] = field(default_factory=dict)  # source -> revision the catalog holds

    @property
    def work(self) -> bool:
        return bool(self.changed or self.failed or self.gone)


class SourceSync:
    def __init__(
        self,
        store: SourceStore,
        pipeline: IngestPipeline,
        opener: Opener,
        default_library: str,
        scan_timeout_s: float = math.inf,
    ) -> None:
        self._store = store
        self._pipeline = pipeline
        self._open = opener
        self._default_library = default_library
        self._scan_timeout_s = scan_timeout_s

    def library(self, spec: SourceConfig) -> str:
        return library_name(spec.library, self._default_library)

    def look(self, name: str) -> Scan:
        """Scans the source (one metadata check per unchanged item) and compares; writes nothing.
        Raises the backend's ScanError when the source cannot be scanned, ScanStopped when it was
        paused or removed meanwhile."""
        return self._scan(self._store.get(name).spec, on_pause=True)

    def confirm(self, name: str) -> None:
        """A poll's last look, after its scan: raises ScanStopped when the source was paused or
        removed meanwhile."""
        _StillWanted(self._store, name, on_pause=True)()

    def _scan(self, spec: SourceConfig, on_pause: bool, cancelled: threading.Event | None = None) -> Scan:
        library = self.library(spec)
        scan = Scan(library)
        groups = acl_groups(spec.groups)
        documents = self._pipeline.list_documents(library)
        # A document whose ACL is not the source's (its groups were changed), or whose index build is
        # not the pipeline's (services/ingest/build.py), is fetched again: the pipeline rewrites it
        # in every store even when the bytes are the same.
        held = [d for d in documents if tuple(d.groups) == groups and self._pipeline.holds(d.build)]
        scan.held = {d.source: d.revision for d in held}
        failures = self._store.failures(spec.name)
        checkpoint = _StillWanted(self._store, spec.name, on_pause, cancelled, self._scan_timeout_s)
        backend = self._open(spec, checkpoint)
        try:
            for found in backend.scan(scan.held, selector(tuple(spec.include), tuple(spec.exclude))):
                checkpoint()
                scan.seen.add(found.source)
                earlier = failures.get(found.source)
                revision = found.revision if isinstance(found, Entry) else ""
                if earlier is not None and self._store.waiting(earlier, revision):
                    scan.waiting += 1
                elif isinstance(found, Failed):
                    scan.failed.append(found)
                elif scan.held.get(found.source) == found.revision:
                    scan.unchanged += 1
                else:
                    scan.changed.append(found)
        finally:
            checkpoint.ended = True
            backend.close()
        if spec.delete == "prune":  # only after a whole scan: one that raised prunes nothing
            scan.gone = sorted(self._store.members(spec.name) - scan.seen)
        return scan

    def run(
        self,
        name: str,
        caller: tuple[str, ...] | None = None,
        cancelled: threading.Event | None = None,
    ) -> Generator[FileProgress | IngestSummary, None, None]:
        """The sync job: progress events as an ingest's, then the summary. Once `cancelled` is
        set, its listing stops at its next request and its ingest as the pipeline's does."""
        spec = self._store.get(name).spec
        try:
            scan = self._scan(spec, on_pause=False, cancelled=cancelled)
        except ScanStopped:
            raise
        except Exception as err:  # the job fails, and the source's breaker counts it as a failed poll
            self._store.poll_failed(name, str(err) or type(err).__name__)
            raise
        # Members first: a crash after the ingest below must not leave a document no source owns.
        self._store.add_members(name, scan.seen)
        for failed in scan.failed:
            self._store.item_failed(name, failed.source, "", failed.reason)
        items = [SourceItem(e.source, e.revision, e.read, max(e.size, 0), e.kind) for e in scan.changed]
        revisions = {e.source: e.revision for e in scan.changed}
        removals = [document_id_for(scan.library, source) for source in scan.gone]
        summary = IngestSummary()
        if items or removals:
            events = self._pipeline.run(
                items,
                scan.library,
                enrich=False,
                groups=acl_groups(spec.groups),
                caller=caller,
                removals=removals,
                cancelled=cancelled,
            )
            with contextlib.closing(events):
                yield from self._follow(name, scan, revisions, events, summary, cancelled)
        for failed in scan.failed:  # items the scan could not look at
            summary.files += 1
            summary.failed += 1
            summary.failures.append(f"{failed.source}: {failed.reason}")
            yield FileProgress(failed.source, FileStage.FAILED, 0, 0, reason=failed.reason)
        self._store.remove_members(name, scan.gone)
        summary.files += scan.unchanged
        summary.unchanged += scan.unchanged
        if scan.waiting:
            summary.notes.append(
                f"{scan.waiting} item(s) left to a later retry or dead-lettered (`ragstack source retry`)"
            )
        yield summary

    def _follow(
        self,
        name: str,
        scan: Scan,
        revisions: dict[str, str],
        events: Iterator[FileProgress | IngestSummary],
        summary: IngestSummary,
        cancelled: threading.Event | None,
    ) -> Iterator[FileProgress]:
        """Passes the pipeline's events on, recording each item's outcome as it comes. Once the
        sync is cancelled, a failure is the cancel's doing (a parse stopped): not the item's."""
        settled: dict[str, str] = {}  # document id -> revision, found unchanged by their bytes
        try:
            for event in events:
                if isinstance(event, IngestSummary):
                    _merge(summary, event)
                    continue
                if event.stage is FileStage.FAILED:
                    if cancelled is None or not cancelled.is_set():
                        self._store.item_failed(
                            name, event.source, revisions.get(event.source, ""), event.reason
                        )
                elif event.stage in (FileStage.INDEXED, FileStage.UNCHANGED):
                    self._store.items_ok(name, [event.source])
                    if event.stage is FileStage.UNCHANGED and event.source in revisions:
                        settled[event.document_id] = revisions[event.source]
                yield event
        finally:  # also when the sync is cancelled: what was found unchanged before it stays found
            if settled:
                self._pipeline.note_revisions(scan.library, settled)


def _merge(into: IngestSummary, other: IngestSummary) -> None:
    for name in ("files", "indexed", "unchanged", "failed", "chunks", "removed", "rebuilt", "seconds"):
        setattr(into, name, getattr(into, name) + getattr(other, name))
    for name in ("entities", "relations", "communities", "communities_summarized"):
        setattr(into, name, getattr(other, name))
    into.failures.extend(other.failures)
    into.notes.extend(other.notes)
