from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_GRAPH_LOCAL: _ClassVar[SearchMode]
    SEARCH_MODE_GRAPH_GLOBAL: _ClassVar[SearchMode]
    SEARCH_MODE_SQL: _ClassVar[SearchMode]

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_SUPPORTED: _ClassVar[Verdict]
    VERDICT_PARTIAL: _ClassVar[Verdict]
    VERDICT_UNSUPPORTED: _ClassVar[Verdict]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_GRAPH_LOCAL: SearchMode
SEARCH_MODE_GRAPH_GLOBAL: SearchMode
SEARCH_MODE_SQL: SearchMode
VERDICT_UNSPECIFIED: Verdict
VERDICT_SUPPORTED: Verdict
VERDICT_PARTIAL: Verdict
VERDICT_UNSUPPORTED: Verdict

class Document(_message.Message):
    __slots__ = ("document_id", "library", "source", "revision", "fingerprint", "title", "media_type", "chunk_count", "indexed_at", "groups", "build")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    INDEXED_AT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    BUILD_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    library: str
    source: str
    revision: str
    fingerprint: str
    title: str
    media_type: str
    chunk_count: int
    indexed_at: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    build: str
    def __init__(self, document_id: _Optional[str] = ..., library: _Optional[str] = ..., source: _Optional[str] = ..., revision: _Optional[str] = ..., fingerprint: _Optional[str] = ..., title: _Optional[str] = ..., media_type: _Optional[str] = ..., chunk_count: _Optional[int] = ..., indexed_at: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., build: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("chunk_id", "document_id", "library", "text", "heading_path", "pages", "position", "title", "source", "media_type")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    HEADING_PATH_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    document_id: str
    library: str
    text: str
    heading_path: _containers.RepeatedScalarFieldContainer[str]
    pages: _containers.RepeatedScalarFieldContainer[int]
    position: int
    title: str
    source: str
    media_type: str
    def __init__(self, chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., library: _Optional[str] = ..., text: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., pages: _Optional[_Iterable[int]] = ..., position: _Optional[int] = ..., title: _Optional[str] = ..., source: _Optional[str] = ..., media_type: _Optional[str] = ...) -> None: ...

class SignalScore(_message.Message):
    __slots__ = ("signal", "score", "rank")
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    signal: str
    score: float
    rank: int
    def __init__(self, signal: _Optional[str] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("chunk", "score", "signals", "context")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    chunk: Chunk
    score: float
    signals: _containers.RepeatedCompositeFieldContainer[SignalScore]
    context: str
    def __init__(self, chunk: _Optional[_Union[Chunk, _Mapping]] = ..., score: _Optional[float] = ..., signals: _Optional[_Iterable[_Union[SignalScore, _Mapping]]] = ..., context: _Optional[str] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("ref", "chunk_id", "document_id", "title", "source", "heading_path", "pages", "quote", "sql")
    REF_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    HEADING_PATH_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    ref: str
    chunk_id: str
    document_id: str
    title: str
    source: str
    heading_path: _containers.RepeatedScalarFieldContainer[str]
    pages: _containers.RepeatedScalarFieldContainer[int]
    quote: str
    sql: SqlSource
    def __init__(self, ref: _Optional[str] = ..., chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., title: _Optional[str] = ..., source: _Optional[str] = ..., heading_path: _Optional[_Iterable[str]] = ..., pages: _Optional[_Iterable[int]] = ..., quote: _Optional[str] = ..., sql: _Optional[_Union[SqlSource, _Mapping]] = ...) -> None: ...

class SqlSource(_message.Message):
    __slots__ = ("database", "query", "row_count", "truncated")
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    database: str
    query: str
    row_count: int
    truncated: bool
    def __init__(self, database: _Optional[str] = ..., query: _Optional[str] = ..., row_count: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class Database(_message.Message):
    __slots__ = ("name", "library", "dialect", "url", "origin", "tables", "error", "groups")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    DIALECT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    name: str
    library: str
    dialect: str
    url: str
    origin: str
    tables: _containers.RepeatedCompositeFieldContainer[TableSchema]
    error: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., library: _Optional[str] = ..., dialect: _Optional[str] = ..., url: _Optional[str] = ..., origin: _Optional[str] = ..., tables: _Optional[_Iterable[_Union[TableSchema, _Mapping]]] = ..., error: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class TableSchema(_message.Message):
    __slots__ = ("name", "columns", "foreign_keys", "row_count", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    FOREIGN_KEYS_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    columns: _containers.RepeatedCompositeFieldContainer[ColumnSchema]
    foreign_keys: _containers.RepeatedCompositeFieldContainer[ForeignKey]
    row_count: int
    score: float
    def __init__(self, name: _Optional[str] = ..., columns: _Optional[_Iterable[_Union[ColumnSchema, _Mapping]]] = ..., foreign_keys: _Optional[_Iterable[_Union[ForeignKey, _Mapping]]] = ..., row_count: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class ColumnSchema(_message.Message):
    __slots__ = ("name", "type", "samples")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    samples: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., samples: _Optional[_Iterable[str]] = ...) -> None: ...

class ForeignKey(_message.Message):
    __slots__ = ("column", "references_table", "references_column")
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_TABLE_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_COLUMN_FIELD_NUMBER: _ClassVar[int]
    column: str
    references_table: str
    references_column: str
    def __init__(self, column: _Optional[str] = ..., references_table: _Optional[str] = ..., references_column: _Optional[str] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ("claim_id", "claim", "refs", "verdict", "confidence", "reason")
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    REFS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    claim_id: str
    claim: str
    refs: _containers.RepeatedScalarFieldContainer[str]
    verdict: Verdict
    confidence: float
    reason: str
    def __init__(self, claim_id: _Optional[str] = ..., claim: _Optional[str] = ..., refs: _Optional[_Iterable[str]] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., confidence: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class Manifest(_message.Message):
    __slots__ = ("claims", "supported_ratio", "method", "verified")
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_RATIO_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    claims: _containers.RepeatedCompositeFieldContainer[Claim]
    supported_ratio: float
    method: str
    verified: bool
    def __init__(self, claims: _Optional[_Iterable[_Union[Claim, _Mapping]]] = ..., supported_ratio: _Optional[float] = ..., method: _Optional[str] = ..., verified: _Optional[bool] = ...) -> None: ...
