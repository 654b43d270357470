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
    __slots__ = ("query", "library", "top_k", "mode")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    query: str
    library: str
    top_k: int
    mode: _common_pb2.SearchMode
    def __init__(self, query: _Optional[str] = ..., library: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "mode", "took_ms")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[_common_pb2.SearchHit]
    mode: _common_pb2.SearchMode
    took_ms: float
    def __init__(self, hits: _Optional[_Iterable[_Union[_common_pb2.SearchHit, _Mapping]]] = ..., mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ..., took_ms: _Optional[float] = ...) -> None: ...
