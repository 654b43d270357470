from ragstack.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
