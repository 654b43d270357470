"""IngestService over gRPC: protobuf in, pipeline calls, protobuf out. Nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import grpc

from ragstack import convert
from ragstack.domain import FileProgress, IngestSummary, library_name
from ragstack.errors import Unavailable
from ragstack.stores.databases import DatabaseRegistry
from ragstack.v1 import ingest_pb2, ingest_pb2_grpc
from services.ingest.crawler import CrawlLimits, crawl
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import Rejected, SourceItem, collect_paths, resolved, upload_items

_END = object()


class IngestServicer(ingest_pb2_grpc.IngestServiceServicer):
    def __init__(
        self,
        pipeline: IngestPipeline,
        default_library: str,
        crawl_limits: CrawlLimits | None = None,
        databases: DatabaseRegistry | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._databases = databases
        self._crawl_limits = crawl_limits or CrawlLimits()
        self._default_library = default_library
        # The stores have one writer each: batches and deletes run one at a time.
        self._write_lock = asyncio.Lock()

    async def Ingest(
        self, request: ingest_pb2.IngestRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ingest_pb2.IngestResponse]:
        library = library_name(request.library, self._default_library)
        items: list[SourceItem | Rejected] = [
            *collect_paths(request.paths),
            *upload_items((f.filename, f.content) for f in request.files),
        ]
        for url in request.urls:
            pages, skipped = await asyncio.to_thread(crawl, url, self._crawl_limits)
            items.extend(pages)
            items.extend(Rejected(u, why) for u, why in skipped)
        async with self._write_lock:
            roots = resolved(request.paths) if request.prune else []
            events = self._pipeline.run(items, library, roots)
            while (event := await asyncio.to_thread(next, events, _END)) is not _END:
                if isinstance(event, FileProgress):
                    yield convert.progress_to_pb(event)
                elif isinstance(event, IngestSummary):
                    yield convert.summary_to_pb(event)

    async def ListDocuments(
        self, request: ingest_pb2.ListDocumentsRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListDocumentsResponse:
        docs = self._pipeline.list_documents(library_name(request.library, self._default_library))
        return ingest_pb2.ListDocumentsResponse(documents=[convert.document_to_pb(x) for x in docs])

    async def ListLibraries(
        self, request: ingest_pb2.ListLibrariesRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.ListLibrariesResponse:
        with_docs = {name: (docs, chunks, at) for name, docs, chunks, at in self._pipeline.libraries()}
        attached = self._databases.attached_counts() if self._databases is not None else {}
        return ingest_pb2.ListLibrariesResponse(
            libraries=[
                ingest_pb2.Library(
                    name=name,
                    documents=with_docs.get(name, (0, 0, ""))[0],
                    chunks=with_docs.get(name, (0, 0, ""))[1],
                    updated_at=with_docs.get(name, (0, 0, ""))[2],
                    databases=attached.get(name, 0),
                )
                for name in sorted(set(with_docs) | set(attached))
            ]
        )

    async def GetDocument(
        self, request: ingest_pb2.GetDocumentRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.GetDocumentResponse:
        return ingest_pb2.GetDocumentResponse(
            document=convert.document_to_pb(
                self._pipeline.get_document(
                    library_name(request.library, self._default_library), request.document_id
                )
            )
        )

    async def DeleteDocument(
        self, request: ingest_pb2.DeleteDocumentRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.DeleteDocumentResponse:
        async with self._write_lock:
            removed = await asyncio.to_thread(
                self._pipeline.delete_document,
                library_name(request.library, self._default_library),
                request.document_id,
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
        )
        return ingest_pb2.AttachDatabaseResponse(database=convert.database_to_pb(db))

    async def DetachDatabase(
        self, request: ingest_pb2.DetachDatabaseRequest, context: grpc.aio.ServicerContext
    ) -> ingest_pb2.DetachDatabaseResponse:
        self._registry().detach(library_name(request.library, self._default_library), request.name)
        return ingest_pb2.DetachDatabaseResponse()

    def _registry(self) -> DatabaseRegistry:
        if self._databases is None:
            raise Unavailable("this ingest service keeps no database registry")
        return self._databases


def register(servicer: IngestServicer) -> Callable[[grpc.aio.Server], None]:
    return lambda server: ingest_pb2_grpc.add_IngestServiceServicer_to_server(servicer, server)
