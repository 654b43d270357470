from google.protobuf import struct_pb2 as _struct_pb2
from ragstack.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetrieveServiceStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StoreFreshness(_message.Message):
    __slots__ = ("store", "version", "checked_at", "staleness_s")
    STORE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CHECKED_AT_FIELD_NUMBER: _ClassVar[int]
    STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    store: str
    version: int
    checked_at: str
    staleness_s: float
    def __init__(self, store: _Optional[str] = ..., version: _Optional[int] = ..., checked_at: _Optional[str] = ..., staleness_s: _Optional[float] = ...) -> None: ...

class RetrieveServiceStatsResponse(_message.Message):
    __slots__ = ("stores", "max_staleness_s")
    STORES_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_S_FIELD_NUMBER: _ClassVar[int]
    stores: _containers.RepeatedCompositeFieldContainer[StoreFreshness]
    max_staleness_s: float
    def __init__(self, stores: _Optional[_Iterable[_Union[StoreFreshness, _Mapping]]] = ..., max_staleness_s: _Optional[float] = ...) -> None: ...

class GetChunkVisualRequest(_message.Message):
    __slots__ = ("chunk_id", "library", "page", "width")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    library: str
    page: int
    width: int
    def __init__(self, chunk_id: _Optional[str] = ..., library: _Optional[str] = ..., page: _Optional[int] = ..., width: _Optional[int] = ...) -> None: ...

class GetChunkVisualResponse(_message.Message):
    __slots__ = ("png", "page", "regions", "width", "height")
    PNG_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    png: bytes
    page: int
    regions: _containers.RepeatedCompositeFieldContainer[ChunkRegion]
    width: int
    height: int
    def __init__(self, png: _Optional[bytes] = ..., page: _Optional[int] = ..., regions: _Optional[_Iterable[_Union[ChunkRegion, _Mapping]]] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class ChunkRegion(_message.Message):
    __slots__ = ("page", "left", "top", "right", "bottom")
    PAGE_FIELD_NUMBER: _ClassVar[int]
    LEFT_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    BOTTOM_FIELD_NUMBER: _ClassVar[int]
    page: int
    left: float
    top: float
    right: float
    bottom: float
    def __init__(self, page: _Optional[int] = ..., left: _Optional[float] = ..., top: _Optional[float] = ..., right: _Optional[float] = ..., bottom: _Optional[float] = ...) -> None: ...

class GetGraphRequest(_message.Message):
    __slots__ = ("library",)
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    library: str
    def __init__(self, library: _Optional[str] = ...) -> None: ...

class GetGraphResponse(_message.Message):
    __slots__ = ("entities", "relations", "communities", "chunks_with_entities")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    COMMUNITIES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_WITH_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[GraphEntity]
    relations: _containers.RepeatedCompositeFieldContainer[GraphRelation]
    communities: _containers.RepeatedCompositeFieldContainer[GraphCommunity]
    chunks_with_entities: int
    def __init__(self, entities: _Optional[_Iterable[_Union[GraphEntity, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[GraphRelation, _Mapping]]] = ..., communities: _Optional[_Iterable[_Union[GraphCommunity, _Mapping]]] = ..., chunks_with_entities: _Optional[int] = ...) -> None: ...

class GraphEntity(_message.Message):
    __slots__ = ("key", "name", "type", "chunk_ids")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    name: str
    type: str
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[str] = ..., chunk_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GraphRelation(_message.Message):
    __slots__ = ("source", "target", "weight", "label", "evidence")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    weight: float
    label: str
    evidence: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., weight: _Optional[float] = ..., label: _Optional[str] = ..., evidence: _Optional[str] = ...) -> None: ...

class GraphCommunity(_message.Message):
    __slots__ = ("community_id", "members", "summary", "chunk_ids", "document_ids")
    COMMUNITY_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    community_id: str
    members: _containers.RepeatedScalarFieldContainer[str]
    summary: str
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, community_id: _Optional[str] = ..., members: _Optional[_Iterable[str]] = ..., summary: _Optional[str] = ..., chunk_ids: _Optional[_Iterable[str]] = ..., document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetChunkRequest(_message.Message):
    __slots__ = ("chunk_id", "library")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    library: str
    def __init__(self, chunk_id: _Optional[str] = ..., library: _Optional[str] = ...) -> None: ...

class GetChunkResponse(_message.Message):
    __slots__ = ("chunk", "regions")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    REGIONS_FIELD_NUMBER: _ClassVar[int]
    chunk: _common_pb2.Chunk
    regions: _containers.RepeatedCompositeFieldContainer[ChunkRegion]
    def __init__(self, chunk: _Optional[_Union[_common_pb2.Chunk, _Mapping]] = ..., regions: _Optional[_Iterable[_Union[ChunkRegion, _Mapping]]] = ...) -> None: ...

class ListDatabasesRequest(_message.Message):
    __slots__ = ("library", "question")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    library: str
    question: str
    def __init__(self, library: _Optional[str] = ..., question: _Optional[str] = ...) -> None: ...

class ListDatabasesResponse(_message.Message):
    __slots__ = ("databases",)
    DATABASES_FIELD_NUMBER: _ClassVar[int]
    databases: _containers.RepeatedCompositeFieldContainer[_common_pb2.Database]
    def __init__(self, databases: _Optional[_Iterable[_Union[_common_pb2.Database, _Mapping]]] = ...) -> None: ...

class SqlRequest(_message.Message):
    __slots__ = ("library", "database", "sql", "max_rows")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    library: str
    database: str
    sql: str
    max_rows: int
    def __init__(self, library: _Optional[str] = ..., database: _Optional[str] = ..., sql: _Optional[str] = ..., max_rows: _Optional[int] = ...) -> None: ...

class SqlResponse(_message.Message):
    __slots__ = ("database", "dialect", "sql", "columns", "rows", "truncated", "took_ms")
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    DIALECT_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    database: str
    dialect: str
    sql: str
    columns: _containers.RepeatedScalarFieldContainer[str]
    rows: _containers.RepeatedCompositeFieldContainer[_struct_pb2.ListValue]
    truncated: bool
    took_ms: float
    def __init__(self, database: _Optional[str] = ..., dialect: _Optional[str] = ..., sql: _Optional[str] = ..., columns: _Optional[_Iterable[str]] = ..., rows: _Optional[_Iterable[_Union[_struct_pb2.ListValue, _Mapping]]] = ..., truncated: _Optional[bool] = ..., took_ms: _Optional[float] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("query", "texts")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    query: str
    texts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., texts: _Optional[_Iterable[str]] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("scores", "scorer")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    SCORER_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    scorer: str
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., scorer: _Optional[str] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "library", "top_k", "mode", "document_ids", "media_types", "heading_prefix", "max_per_document", "expand_context")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPES_FIELD_NUMBER: _ClassVar[int]
    HEADING_PREFIX_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    EXPAND_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    query: str
    library: str
    top_k: int
    mode: _common_pb2.SearchMode
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    media_types: _containers.RepeatedScalarFieldContainer[str]
    heading_prefix: _containers.RepeatedScalarFieldContainer[str]
    max_per_document: int
    expand_context: bool
    def __init__(self, query: _Optional[str] = ..., library: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ..., document_ids: _Optional[_Iterable[str]] = ..., media_types: _Optional[_Iterable[str]] = ..., heading_prefix: _Optional[_Iterable[str]] = ..., max_per_document: _Optional[int] = ..., expand_context: _Optional[bool] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "took_ms", "communities")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    COMMUNITIES_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[_common_pb2.SearchHit]
    mode: _common_pb2.SearchMode
    took_ms: float
    communities: _containers.RepeatedCompositeFieldContainer[CommunityHit]
    def __init__(self, hits: _Optional[_Iterable[_Union[_common_pb2.SearchHit, _Mapping]]] = ..., mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ..., took_ms: _Optional[float] = ..., communities: _Optional[_Iterable[_Union[CommunityHit, _Mapping]]] = ...) -> None: ...

class CommunityHit(_message.Message):
    __slots__ = ("community_id", "summary", "score", "entities", "chunk_ids")
    COMMUNITY_ID_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    community_id: str
    summary: str
    score: float
    entities: _containers.RepeatedScalarFieldContainer[str]
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, community_id: _Optional[str] = ..., summary: _Optional[str] = ..., score: _Optional[float] = ..., entities: _Optional[_Iterable[str]] = ..., chunk_ids: _Optional[_Iterable[str]] = ...) -> None: ...
