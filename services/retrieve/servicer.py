"""RetrieveService over gRPC: protobuf in, Searcher calls, protobuf out."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import grpc

from ragstack import convert
from ragstack.domain import SearchFilter, library_name
from ragstack.v1 import retrieve_pb2, retrieve_pb2_grpc
from services.retrieve.databases import Databases
from services.retrieve.freshness import Freshness
from services.retrieve.page_picture import ChunkPictures
from services.retrieve.searcher import Query, Searcher


class RetrieveServicer(retrieve_pb2_grpc.RetrieveServiceServicer):
    def __init__(
        self,
        searcher: Searcher,
        databases: Databases,
        default_library: str,
        pictures: ChunkPictures,
        freshness: Freshness,
    ) -> None:
        self._searcher = searcher
        self._freshness = freshness
        self._databases = databases
        self._pictures = pictures
        self._default_library = default_library

    async def Search(
        self, request: retrieve_pb2.SearchRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.SearchResponse:
        start = time.perf_counter()
        result = await self._searcher.search(
            Query(
                text=request.query,
                library=library_name(request.library, self._default_library),
                top_k=request.top_k,
                mode=convert.mode_of_request(request.mode),
                where=SearchFilter(
                    document_ids=tuple(request.document_ids),
                    media_types=tuple(request.media_types),
                    heading_prefix=tuple(request.heading_prefix),
                ),
                max_per_document=request.max_per_document,
                expand_context=request.expand_context,
            )
        )
        return retrieve_pb2.SearchResponse(
            hits=[convert.hit_to_pb(h) for h in result.hits],
            mode=convert.mode_to_pb(result.mode),
            took_ms=(time.perf_counter() - start) * 1000,
            communities=[convert.community_to_pb(c) for c in result.communities],
        )

    async def Score(
        self, request: retrieve_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.ScoreResponse:
        scores, scorer = await self._searcher.score(request.query, list(request.texts))
        return retrieve_pb2.ScoreResponse(scores=scores, scorer=scorer)

    async def ListDatabases(
        self, request: retrieve_pb2.ListDatabasesRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.ListDatabasesResponse:
        found = await self._databases.list(
            library_name(request.library, self._default_library), request.question
        )
        return retrieve_pb2.ListDatabasesResponse(databases=[convert.database_to_pb(x) for x in found])

    async def Sql(
        self, request: retrieve_pb2.SqlRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.SqlResponse:
        result = await self._databases.sql(
            library_name(request.library, self._default_library),
            request.database,
            request.sql,
            request.max_rows,
        )
        return convert.sql_result_to_pb(result)

    async def GetChunk(
        self, request: retrieve_pb2.GetChunkRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.GetChunkResponse:
        library = library_name(request.library, self._default_library)
        chunk = await self._searcher.chunk(library, request.chunk_id)
        regions = await self._pictures.regions(chunk)
        return retrieve_pb2.GetChunkResponse(
            chunk=convert.chunk_to_pb(chunk), regions=[convert.region_to_pb(r) for r in regions]
        )

    async def GetChunkVisual(
        self, request: retrieve_pb2.GetChunkVisualRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.GetChunkVisualResponse:
        library = library_name(request.library, self._default_library)
        visual = await self._pictures.visual(library, request.chunk_id, request.page, request.width)
        return convert.visual_to_pb(visual)

    async def GetGraph(
        self, request: retrieve_pb2.GetGraphRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[retrieve_pb2.GetGraphResponse]:
        library = library_name(request.library, self._default_library)
        for page in convert.graph_to_pages(await self._searcher.graph(library)):
            yield page

    async def Stats(
        self, request: retrieve_pb2.RetrieveServiceStatsRequest, context: grpc.aio.ServicerContext
    ) -> retrieve_pb2.RetrieveServiceStatsResponse:
        return convert.retrieve_stats_to_pb(self._freshness.stats())


def register(servicer: RetrieveServicer) -> Callable[[grpc.aio.Server], None]:
    return lambda server: retrieve_pb2_grpc.add_RetrieveServiceServicer_to_server(servicer, server)
