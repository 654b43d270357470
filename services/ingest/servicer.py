"""IngestService over gRPC: protobuf in, pipeline calls, protobuf out. Nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import replace
from typing import Any, TypeVar

import grpc

from ragstack import auth, convert
from ragstack.convert_fields import to_pb
from ragstack.domain import FileProgress, IngestSummary, SourceState, acl_groups, library_name, list_limit
from ragstack.errors import Cancelled, InvalidArgument, NotFound, Unavailable
from ragstack.guard.databases import ATTACHED
from ragstack.guard.paths import PathGuard
from ragstack.stores.databases import DatabaseRegistry
from ragstack.stores.snapshots import StoreLifecycle, check_name
from ragstack.tuning.tune import TuneSettings, TuneStep
from ragstack.v1 import ingest_pb2, ingest_pb2_grpc
from services.ingest.ahead import Ahead
from services.ingest.crawler import CrawlLimits, crawl, fetcher_for
from services.ingest.jobs import CANCELLED, Job, JobStore, retryable
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import (
    Rejected,
    SourceItem,
    collect_paths,
    document_id_for,
    resolved,
    upload_items,
)
from services.ingest.syncing.poller import forget, poll_principal
from services.ingest.syncing.registry import Sources
from services.ingest.tuning import DEFAULT_PAIRS, Tuned, Tuner, check_settings

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_READ_AHEAD = 1024  # events the pipeline may run ahead of the client before it waits


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(
        self,
        pipeline: IngestPipeline,
        default_library: str,
        crawl_limits: CrawlLimits | None = None,
        databases: DatabaseRegistry | None = None,
        lifecycle: StoreLifecycle | None = None,
        retention_days: int = 7,
        jobs: JobStore | None = None,
        paths: PathGuard | None = None,
        crawl_slots: int = 2,
        sources: Sources | None = None,
        poll_s: float = 1.0,
        tuner: Tuner | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._tuner = tuner
        self._poll_s = poll_s  # how often an idle worker looks for jobs other processes queued
        self._sources = sources
        self._paths = paths or PathGuard(())  # server files readable by path: none unless configured
        self._jobs = jobs
        self._running: tuple[str, asyncio.Task[None]] | None = None  # the job the worker runs
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lifecycle = lifecycle
        self._retention_days = retention_days
        self._databases = databases
        self._crawl_limits = crawl_limits or CrawlLimits()
        self._default_library = default_library
        # Ingests and deletes run side by side (the pipeline writes their batches one at a time);
        # a snapshot, restore or vacuum holds `_exclusive`, which new ones pass through, and waits
        # for those running to end.
        self._exclusive = asyncio.Lock()
        self._writing = 0
        self._idle = asyncio.Condition()
        self._crawls = asyncio.Semaphore(crawl_slots)
        self._crawl_slots = crawl_slots
        self._crawls_waiting = 0

    async def Ingest(
        self, request: ingest_pb2.IngestRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ingest_pb2.IngestResponse]:
        async for event in self._ingest(request):
            yield event

    async def _ingest(self, request: ingest_pb2.IngestRequest) -> AsyncIterator[ingest_pb2.IngestResponse]:
        if request.source:
            async for response in self._sync(request):
                yield response
            return
        library = library_name(request.library, self._default_library)
        groups = acl_groups(request.groups)
        items: list[SourceItem | Rejected] = [
            *collect_paths(request.paths, self._paths),
            *upload_items(library, ((f.filename, f.content) for f in request.files)),
        ]
        for url in request.urls:
            pages, skipped = await self._crawl(url)
            items.extend(pages)
            items.extend(Rejected(u, why) for u, why in skipped)
        async with self._writer():
            roots = resolved(request.paths) if request.prune else []
            cancelled = threading.Event()
            events = self._pipeline.run(
                items,
                library,
                roots,
                enrich=request.enrich,
                groups=groups,
                caller=auth.current().acl,
                cancelled=cancelled,
            )
            async for event in _read_ahead(events, cancelled):
                yield _event_pb(event)

    async def _sync(self, request: ingest_pb2.IngestRequest) -> AsyncIterator[ingest_pb2.IngestResponse]:
        """A source's sync, as its job (or an Ingest call naming it) runs it."""
        sources = self._registry_of_sources()
        self._source_request(request)
        async with self._writer():
            cancelled = threading.Event()
            events = sources.sync.run(request.source, auth.current().acl, cancelled)
            async for event in _read_ahead(events, cancelled):
                yield _event_pb(event)

    def _source_request(self, request: ingest_pb2.IngestRequest) -> str:
        """The library of the source a request syncs, once the request is checked."""
        if request.paths or request.files or request.urls or request.groups or request.prune:
            raise InvalidArgument(
                "a source's sync takes no paths, files, urls, groups or prune: its spec says"
            )
        spec = self._registry_of_sources().store.get(request.source).spec
        library = library_name(spec.library, self._default_library)
        if not auth.current().may_use(library):  # another library's source reads as unknown
            raise NotFound(f"source {request.source!r} not found")
        if request.library and library_name(request.library, self._default_library) != library:
            raise InvalidArgument(f"source {spec.name!r} feeds library {library!r}, not {request.library!r}")
        return library

    async def _crawl(self, url: str) -> tuple[list[SourceItem], list[tuple[str, str]]]:
        """A crawl, when one of the service's crawl slots (`ingest.max_crawls`) is free; it waits
        its turn, and is refused when as many again are waiting."""
        if self._crawls.locked() and self._crawls_waiting >= self._crawl_slots:
            raise Unavailable(
                f"{self._crawl_slots} crawls are running and as many are waiting (ingest.max_crawls); "
                "retry later"
            )
        self._crawls_waiting += 1
        try:
            await self._crawls.acquire()
        finally:
            self._crawls_waiting -= 1
        fetcher = fetcher_for(self._crawl_limits)
        try:
            # Cancelled (the client went away, the service is stopping): the page in flight fails
            # within a read slice, the rest at once, and the thread is waited for.
            return await _to_thread_to_the_end(fetcher.cancel, crawl, url, self._crawl_limits, fetcher)
        finally:
            fetcher.close()
            self._crawls.release()

    @contextlib.asynccontextmanager
    async def _writer(self) -> AsyncIterator[None]:
        """An ingest or a delete: not while a snapshot, restore or vacuum runs."""
        async with self._exclusive:
            self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
            async with self._idle:
                self._idle.notify_all()

    async def SubmitIngest(
        self, request: ingest_pb2.SubmitIngestRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.SubmitIngestResponse:
        wanted = request.request
        if wanted.source:
            library = self._source_request(wanted)
            job = self._queue().submit(
                library,
                wanted.SerializeToString(),
                auth.current().name,
                auth.current().to_header(),
                wanted.source,
                bounded=True,
            )
            self._wake.set()
            return ingest_pb2.SubmitIngestResponse(job=_job_pb(job))
        library = library_name(wanted.library, self._default_library)
        if not (wanted.paths or wanted.files or wanted.urls):
            raise InvalidArgument("nothing to ingest: give paths, files or urls")
        acl_groups(wanted.groups)  # refused now, not when the job runs
        checked = self._paths.check_all(wanted.paths)  # refused before existence is looked at
        missing = await asyncio.to_thread(lambda: [str(p) for p in checked if not p.exists()])
        if missing:  # refused now, not when the job runs
            raise InvalidArgument(f"path does not exist: {missing[0]}")
        caller = auth.current()
        job = self._queue().submit(
            library, wanted.SerializeToString(), caller.name, caller.to_header(), bounded=True
        )
        self._wake.set()
        return ingest_pb2.SubmitIngestResponse(job=_job_pb(job))

    async def GetIngestJob(
        self, request: ingest_pb2.GetIngestJobRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.GetIngestJobResponse:
        job = self._queue().get(request.job_id)
        if job is None or not auth.current().owns(job.principal):  # another's job reads as unknown
            raise NotFound(f"ingest job {request.job_id!r} not found")
        return ingest_pb2.GetIngestJobResponse(job=_job_pb(job))

    async def ListIngestJobs(
        self, request: ingest_pb2.ListIngestJobsRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListIngestJobsResponse:
        caller = auth.current()
        owner = None if caller.is_admin else caller.name
        return ingest_pb2.ListIngestJobsResponse(
            jobs=[_job_pb(j) for j in self._queue().list(list_limit(request.limit, 500), owner)]
        )

    async def CancelIngestJob(
        self, request: ingest_pb2.CancelIngestJobRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.CancelIngestJobResponse:
        jobs = self._queue()
        job = jobs.get(request.job_id)
        if job is None or not auth.current().owns(job.principal):
            raise NotFound(f"ingest job {request.job_id!r} not found")
        cancelled = await self._cancel(job.job_id)
        return ingest_pb2.CancelIngestJobResponse(job=_job_pb(jobs.get(job.job_id) or cancelled))

    async def _cancel(self, job_id: str, wait: bool = True) -> Job:
        """Cancels a job; a running one is stopped, and waited for unless not `wait`."""
        cancelled = self._queue().cancel(job_id)
        assert cancelled is not None
        running = self._running
        if running is not None and running[0] == job_id:
            running[1].cancel()  # the parse in flight stops; the batch being written ends first
            if wait:
                await asyncio.wait([running[1]])
        return cancelled

    def _queue(self) -> JobStore:
        if self._jobs is None:
            raise Unavailable("this ingest service keeps no job queue")
        return self._jobs

    def wake(self) -> None:
        """A job was queued (from any thread): the worker looks at the queue now."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def work(self) -> None:
        """The queue's worker: runs due jobs one at a time, for as long as the service runs. Other
        processes share the queue, so with nothing due it looks again every `poll_s` (sooner when a
        retry's backoff ends, at once when wake() says a job was queued here)."""
        self._loop = asyncio.get_running_loop()
        jobs = self._queue()
        while True:
            self._wake.clear()
            try:
                claimed = await asyncio.to_thread(jobs.claim)
            except Exception as err:  # the state is out of reach (a PostgreSQL restart): look again
                log.warning("claiming an ingest job failed: %s", err)
                claimed = None
            if claimed is None:
                await self._wait_for_work(jobs)
                continue
            job, raw, caller = claimed
            task = asyncio.create_task(self._run_job(jobs, job.job_id, raw, caller))
            beat = asyncio.create_task(self._heartbeat(jobs, job.job_id, task))
            self._running = (job.job_id, task)
            try:
                await asyncio.shield(task)  # CancelIngestJob cancels the job's task, not this loop
            except asyncio.CancelledError:
                if not task.cancelled():  # the service is stopping: the job goes back to the queue
                    task.cancel()
                    await asyncio.wait([task])
                    raise
            except Exception as err:  # its end could not be recorded: its lease runs out, it runs again
                log.warning("ingest job %s: %s", job.job_id, err)
            finally:
                self._running = None
                beat.cancel()
                # Its library is free again; the state may be out of reach as the service stops
                # (then its lease runs out and another worker takes the job).
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(jobs.release, job.job_id)

    async def _wait_for_work(self, jobs: JobStore) -> None:
        due = None
        with contextlib.suppress(Exception):  # out of reach: the next claim says so
            due = await asyncio.to_thread(jobs.due_in)
        wait = min(self._poll_s, due) if due else self._poll_s  # 0: due, but its library is busy
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), wait)

    async def _heartbeat(self, jobs: JobStore, job_id: str, task: asyncio.Task[None]) -> None:
        """Renews the running job's lease; stops the job once it is no longer this worker's
        (cancelled by another process, or taken by another worker after the lease ran out)."""
        while True:
            await asyncio.sleep(jobs.lease_s / 3)
            try:
                ours = await asyncio.to_thread(jobs.renew, job_id)
            except Exception as err:  # the state is out of reach: the lease has time left to try again
                log.warning("renewing ingest job %s failed: %s", job_id, err)
                continue
            if not ours:
                if not task.cancelling():  # not already being stopped here (CancelIngestJob)
                    log.warning("ingest job %s is no longer this worker's: stopping it", job_id)
                    task.cancel()
                return

    async def _run_job(self, jobs: JobStore, job_id: str, raw: bytes, caller: str) -> None:
        # A cancel that came between the claim and `_running` found no task to stop: it is in the
        # state. (`_running` is set before this runs, so a later cancel finds the task.)
        claimed = jobs.get(job_id)
        if claimed is None or claimed.state == CANCELLED:
            return
        request = ingest_pb2.IngestRequest.FromString(raw)
        done = 0
        # The job runs as its submitter: the same ACL checks as the Ingest call would have made.
        token = auth.PRINCIPAL.set(auth.Principal.from_header(caller) if caller else auth.LOCAL)
        try:
            async for event in self._ingest(request):
                if event.HasField("summary"):
                    jobs.finish(job_id, event.summary.SerializeToString())
                elif event.file.stage in _FINISHED:
                    done += 1
                    me = asyncio.current_task()
                    if not jobs.progress(job_id, done) and me and not me.cancelling():
                        me.cancel()  # cancelled, or another worker has it: stop at the next await
        except asyncio.CancelledError:
            raise  # cancelled (its state says so), lost, or the service is stopping (released)
        except Exception as err:  # a batch that cannot run at all; files that fail are in the summary
            retry = retryable(err)
            log.warning("ingest job %s failed%s: %s", job_id, " (to be retried)" if retry else "", err)
            jobs.fail(job_id, f"{type(err).__name__}: {err}", retry=retry)
        finally:
            auth.PRINCIPAL.reset(token)

    async def ListDocuments(
        self, request: ingest_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListDocumentsResponse:
        docs = self._pipeline.list_documents(
            library_name(request.library, self._default_library), auth.current().acl
        )
        return ingest_pb2.ListDocumentsResponse(documents=[convert.document_to_pb(x) for x in docs])

    async def ListLibraries(
        self, request: ingest_pb2.ListLibrariesRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListLibrariesResponse:
        caller = auth.current()
        found = await asyncio.to_thread(self._libraries, caller)
        return ingest_pb2.ListLibrariesResponse(
            libraries=[
                ingest_pb2.Library(name=name, documents=docs, chunks=chunks, updated_at=at, databases=dbs)
                for name, (docs, chunks, at, dbs) in sorted(found.items())
            ]
        )

    def _libraries(self, caller: auth.Principal) -> dict[str, tuple[int, int, str, int]]:
        """name -> (documents, chunks, last indexed, attached databases) of the libraries the caller
        may use, counting only what its ACL groups see (a library of hidden things only is left out)."""
        with_docs = {name: (docs, chunks, at) for name, docs, chunks, at in self._pipeline.libraries()}
        attached = self._databases.attached_counts() if self._databases is not None else {}
        names = [n for n in set(with_docs) | set(attached) if caller.may_use(n)]
        if caller.acl is None:
            return {n: (*with_docs.get(n, (0, 0, "")), attached.get(n, 0)) for n in names}
        out = {}
        for name in names:
            docs = self._pipeline.list_documents(name, caller.acl)
            dbs = self._databases.entries(name, caller.sees) if self._databases is not None else []
            count = sum(1 for e in dbs if e.origin == ATTACHED)
            if docs or count:
                at = max((d.indexed_at for d in docs), default="")
                out[name] = (len(docs), sum(d.chunk_count for d in docs), at, count)
        return out

    async def GetDocument(
        self, request: ingest_pb2.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.GetDocumentResponse:
        return ingest_pb2.GetDocumentResponse(
            document=convert.document_to_pb(
                self._pipeline.get_document(
                    library_name(request.library, self._default_library),
                    request.document_id,
                    auth.current().acl,
                )
            )
        )

    async def DeleteDocument(
        self, request: ingest_pb2.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.DeleteDocumentResponse:
        async with self._writer():
            removed = await asyncio.to_thread(
                self._pipeline.delete_document,
                library_name(request.library, self._default_library),
                request.document_id,
                auth.current().acl,  # a document the caller may not see is not found
            )
        return ingest_pb2.DeleteDocumentResponse(chunks_removed=removed)

    async def AttachDatabase(
        self, request: ingest_pb2.AttachDatabaseRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.AttachDatabaseResponse:
        db = await asyncio.to_thread(
            self._registry().attach,
            library_name(request.library, self._default_library),
            request.name,
            request.url,
            request.groups,
        )
        return ingest_pb2.AttachDatabaseResponse(database=convert.database_to_pb(db))

    async def DetachDatabase(
        self, request: ingest_pb2.DetachDatabaseRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.DetachDatabaseResponse:
        self._registry().detach(library_name(request.library, self._default_library), request.name)
        return ingest_pb2.DetachDatabaseResponse()

    async def Stats(
        self, request: ingest_pb2.StatsRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.StatsResponse:
        library = library_name(request.library, self._default_library) if request.library else ""
        stats = await asyncio.to_thread(self._stores().stats, library)
        return convert.store_stats_to_pb(stats)

    async def CreateSnapshot(
        self, request: ingest_pb2.CreateSnapshotRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.CreateSnapshotResponse:
        lifecycle = self._stores()
        info = await self._locked(lifecycle.create, check_name(request.name))
        return ingest_pb2.CreateSnapshotResponse(snapshot=convert.snapshot_to_pb(info))

    async def ListSnapshots(
        self, request: ingest_pb2.ListSnapshotsRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListSnapshotsResponse:
        found = await asyncio.to_thread(self._stores().snapshots)
        return ingest_pb2.ListSnapshotsResponse(snapshots=[convert.snapshot_to_pb(s) for s in found])

    async def RestoreSnapshot(
        self, request: ingest_pb2.RestoreSnapshotRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.RestoreSnapshotResponse:
        lifecycle = self._stores()
        lifecycle.get(request.name)  # INVALID_ARGUMENT or NOT_FOUND without waiting for the lock
        info, versions = await self._locked(lifecycle.restore, request.name)
        return ingest_pb2.RestoreSnapshotResponse(
            snapshot=convert.snapshot_to_pb(info), table_versions=versions
        )

    async def DeleteSnapshot(
        self, request: ingest_pb2.DeleteSnapshotRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.DeleteSnapshotResponse:
        lifecycle = self._stores()
        lifecycle.get(request.name)
        await self._locked(lifecycle.delete, request.name)
        return ingest_pb2.DeleteSnapshotResponse()

    async def Vacuum(
        self, request: ingest_pb2.VacuumRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.VacuumResponse:
        lifecycle = self._stores()
        days = request.older_than_days if request.HasField("older_than_days") else self._retention_days
        report = await self._locked(lifecycle.vacuum, days)
        removed = await asyncio.to_thread(self._queue().prune, report.older_than_days)
        return convert.vacuum_to_pb(replace(report, jobs_removed=removed))

    async def _locked(self, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn` in a worker thread once no ingest or delete runs, none starting until `fn` returns,
        even when the call is cancelled: the stores change under nobody's feet."""
        async with self._exclusive:
            async with self._idle:
                await self._idle.wait_for(lambda: self._writing == 0)
            return await _to_thread_to_the_end(lambda: None, fn, *args)

    def _stores(self) -> StoreLifecycle:
        if self._lifecycle is None:
            raise Unavailable("this ingest service manages no store lifecycle")
        return self._lifecycle

    async def TuneEmbedder(
        self, request: ingest_pb2.TuneEmbedderRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ingest_pb2.TuneEmbedderResponse]:
        if self._tuner is None:
            raise Unavailable("this ingest service tunes no embedders")
        tuner = self._tuner
        library = library_name(request.library, self._default_library)
        settings = TuneSettings(epochs=request.epochs or 1.0)
        max_pairs = request.max_pairs or DEFAULT_PAIRS
        kinds = request.pairs or "heading"
        check_settings(settings.epochs, max_pairs, kinds)
        loop = asyncio.get_running_loop()
        steps: asyncio.Queue[TuneStep] = asyncio.Queue()
        stop = threading.Event()

        def progress(step: TuneStep) -> None:
            if stop.is_set():  # the call ended: the work stops at its next step, old vectors kept
                raise Cancelled(f"tuning {library!r} was cancelled")
            loop.call_soon_threadsafe(steps.put_nowait, step)

        if request.revert and request.reembed:
            raise InvalidArgument(
                "revert or reembed, not both: revert re-embeds with the configured embedder"
            )
        if request.revert or request.reembed:
            again = tuner.revert if request.revert else tuner.reembed
            work = asyncio.ensure_future(asyncio.to_thread(again, library, progress))
        else:
            work = asyncio.ensure_future(
                asyncio.to_thread(tuner.tune, library, settings, max_pairs, kinds, progress)
            )
        try:
            while not work.done() or not steps.empty():
                step = asyncio.ensure_future(steps.get())
                await asyncio.wait([step, work], return_when=asyncio.FIRST_COMPLETED)
                if step.done():
                    yield _step_pb(step.result())
                else:
                    step.cancel()
            yield _tuned_pb(work.result())
        finally:
            stop.set()
            await asyncio.wait([work])  # nothing of the tuning outlives the call
            if not work.cancelled() and isinstance(work.exception(), Cancelled):
                log.info("tuning %r stopped: its call ended", library)

    # --- sources ---------------------------------------------------------------------------------

    async def AddSource(
        self, request: ingest_pb2.AddSourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.AddSourceResponse:
        sources = self._registry_of_sources()
        spec = convert.source_spec_from_pb(request.spec)
        await asyncio.to_thread(sources.check, spec)
        state = sources.store.add(spec)
        sources.poller.wake()
        return ingest_pb2.AddSourceResponse(source=self._source_pb(sources, state))

    async def ListSources(
        self, request: ingest_pb2.ListSourcesRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListSourcesResponse:
        sources = self._registry_of_sources()
        caller = auth.current()
        wanted = library_name(request.library, self._default_library) if request.library else None
        found = []
        for state in sources.store.list():
            library = library_name(state.spec.library, self._default_library)
            if caller.may_use(library) and wanted in (None, library):
                found.append(self._source_pb(sources, state))
        return ingest_pb2.ListSourcesResponse(sources=found)

    async def GetSource(
        self, request: ingest_pb2.GetSourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.GetSourceResponse:
        sources = self._registry_of_sources()
        state = sources.store.get(request.name)
        if not auth.current().may_use(library_name(state.spec.library, self._default_library)):
            raise NotFound(f"source {request.name!r} not found")  # another library's reads as unknown
        return ingest_pb2.GetSourceResponse(source=self._source_pb(sources, state))

    async def PauseSource(
        self, request: ingest_pb2.PauseSourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.PauseSourceResponse:
        sources = self._registry_of_sources()
        state = sources.store.set_paused(request.name, True)
        # The sync a poll queued is stopped too, not waited for (a poll under way stops by itself,
        # and one ending now cancels the job it queues: SourcePoller.poll); one asked for by hand
        # goes on.
        polled = self._queue().active(request.name, poll_principal(request.name))
        if polled is not None:
            await self._cancel(polled, wait=False)
        return ingest_pb2.PauseSourceResponse(source=self._source_pb(sources, state))

    async def ResumeSource(
        self, request: ingest_pb2.ResumeSourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ResumeSourceResponse:
        sources = self._registry_of_sources()
        state = sources.store.set_paused(request.name, False)
        sources.poller.wake()
        return ingest_pb2.ResumeSourceResponse(source=self._source_pb(sources, state))

    async def RemoveSource(
        self, request: ingest_pb2.RemoveSourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.RemoveSourceResponse:
        sources = self._registry_of_sources()
        state = sources.store.get(request.name)
        if state.origin == "config":
            raise InvalidArgument(f"source {request.name!r} is declared in ragstack.yaml; remove it there")
        active = self._queue().active(request.name)
        if active is not None:  # its job would go on ingesting what is being removed
            await self._cancel(active)
        members = sources.store.members(request.name)
        sources.store.remove(request.name)
        forget(request.name)
        removed = 0
        if request.remove_documents and members:
            library = library_name(state.spec.library, self._default_library)
            async with self._writer():
                ids = [document_id_for(library, member) for member in sorted(members)]
                removed = await asyncio.to_thread(self._pipeline.remove_documents, library, ids)
        return ingest_pb2.RemoveSourceResponse(documents_removed=removed)

    async def RetrySource(
        self, request: ingest_pb2.RetrySourceRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.RetrySourceResponse:
        sources = self._registry_of_sources()
        requeued = sources.store.retry(request.name)
        sources.poller.wake()
        return ingest_pb2.RetrySourceResponse(
            source=self._source_pb(sources, sources.store.get(request.name)), requeued=requeued
        )

    @staticmethod
    def _source_pb(sources: Sources, state: SourceState) -> ingest_pb2.Source:
        return convert.source_to_pb(state, sources.store.failures(state.spec.name).values())

    def _registry_of_sources(self) -> Sources:
        if self._sources is None:
            raise Unavailable("this ingest service keeps no sources")
        return self._sources

    def _registry(self) -> DatabaseRegistry:
        if self._databases is None:
            raise Unavailable("this ingest service keeps no database registry")
        return self._databases


_FINISHED = (ingest_pb2.FILE_STAGE_INDEXED, ingest_pb2.FILE_STAGE_UNCHANGED, ingest_pb2.FILE_STAGE_FAILED)
_STATES = {
    "queued": ingest_pb2.INGEST_JOB_STATE_QUEUED,
    "running": ingest_pb2.INGEST_JOB_STATE_RUNNING,
    "done": ingest_pb2.INGEST_JOB_STATE_DONE,
    "failed": ingest_pb2.INGEST_JOB_STATE_FAILED,
    "cancelled": ingest_pb2.INGEST_JOB_STATE_CANCELLED,
    "dead": ingest_pb2.INGEST_JOB_STATE_DEAD,
}


def _event_pb(event: FileProgress | IngestSummary) -> ingest_pb2.IngestResponse:
    if isinstance(event, FileProgress):
        return convert.progress_to_pb(event)
    return convert.summary_to_pb(event)


def _step_pb(step: TuneStep) -> ingest_pb2.TuneEmbedderResponse:
    return ingest_pb2.TuneEmbedderResponse(
        stage=step.stage, done=step.done, total=step.total, loss=step.loss, message=step.message
    )


def _tuned_pb(tuned: Tuned) -> ingest_pb2.TuneEmbedderResponse:
    return ingest_pb2.TuneEmbedderResponse(
        stage="done",
        embedder=tuned.embedder,
        previous_embedder=tuned.previous,
        chunks=tuned.chunks,
        pairs=tuned.pairs,
        seconds=tuned.seconds,
    )


def _job_pb(job: Job) -> ingest_pb2.IngestJob:
    summary = ingest_pb2.IngestSummary.FromString(job.summary) if job.summary else None
    return to_pb(job, ingest_pb2.IngestJob, state=_STATES[job.state], summary=summary)


def register(servicer: IngestServicer) -> Callable[[grpc.aio.Server], None]:
    return lambda server: ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server)


async def _to_thread_to_the_end(on_cancel: Callable[[], None], fn: Callable[..., _T], *args: Any) -> _T:
    """`fn(*args)` on a thread. A cancelled caller calls `on_cancel` (to hurry `fn` along), still
    waits for the thread to end, then is cancelled: nothing of `fn` outlives the call."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        on_cancel()
        await asyncio.wait([work])
        raise


async def _read_ahead(events: Generator[_T, None, None], cancelled: threading.Event) -> AsyncIterator[_T]:
    """The generator's items, run on one worker thread and handed over in bursts: one thread hop
    per burst, not per item (re-ingesting a corpus is thousands of `unchanged` events). When the
    reader stops early (a cancelled call: the client went away, or the service is stopping),
    `cancelled` is set, which the run's parsing, listing, embedding and extraction watch, and the
    generator is closed on its own thread, which lets the pipeline finish the batch it is writing;
    this returns once it has."""
    ahead = Ahead(events, _same, _one, _READ_AHEAD, "ingest-events")
    finished = False
    try:
        while burst := await asyncio.to_thread(ahead.burst):
            for item, _ in burst:
                yield item
        finished = True
    finally:
        if not finished:
            cancelled.set()
        await asyncio.to_thread(ahead.close)


def _same(item: _T) -> _T:
    return item


def _one(_: object) -> int:
    return 1
