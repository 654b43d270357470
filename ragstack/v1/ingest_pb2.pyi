from ragstack.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SourceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_KIND_UNSPECIFIED: _ClassVar[SourceKind]
    SOURCE_KIND_FOLDER: _ClassVar[SourceKind]
    SOURCE_KIND_HTTP: _ClassVar[SourceKind]
    SOURCE_KIND_SITEMAP: _ClassVar[SourceKind]
    SOURCE_KIND_S3: _ClassVar[SourceKind]
    SOURCE_KIND_WEBDAV: _ClassVar[SourceKind]

class DeletePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELETE_POLICY_UNSPECIFIED: _ClassVar[DeletePolicy]
    DELETE_POLICY_PRUNE: _ClassVar[DeletePolicy]
    DELETE_POLICY_KEEP: _ClassVar[DeletePolicy]

class BreakerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BREAKER_STATE_UNSPECIFIED: _ClassVar[BreakerState]
    BREAKER_STATE_CLOSED: _ClassVar[BreakerState]
    BREAKER_STATE_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_HALF_OPEN: _ClassVar[BreakerState]

class FileStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_STAGE_UNSPECIFIED: _ClassVar[FileStage]
    FILE_STAGE_PARSED: _ClassVar[FileStage]
    FILE_STAGE_CHUNKED: _ClassVar[FileStage]
    FILE_STAGE_EMBEDDED: _ClassVar[FileStage]
    FILE_STAGE_INDEXED: _ClassVar[FileStage]
    FILE_STAGE_UNCHANGED: _ClassVar[FileStage]
    FILE_STAGE_FAILED: _ClassVar[FileStage]
    FILE_STAGE_REMOVED: _ClassVar[FileStage]

class IngestJobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INGEST_JOB_STATE_UNSPECIFIED: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_QUEUED: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_RUNNING: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_DONE: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_FAILED: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_CANCELLED: _ClassVar[IngestJobState]
    INGEST_JOB_STATE_DEAD: _ClassVar[IngestJobState]
SOURCE_KIND_UNSPECIFIED: SourceKind
SOURCE_KIND_FOLDER: SourceKind
SOURCE_KIND_HTTP: SourceKind
SOURCE_KIND_SITEMAP: SourceKind
SOURCE_KIND_S3: SourceKind
SOURCE_KIND_WEBDAV: SourceKind
DELETE_POLICY_UNSPECIFIED: DeletePolicy
DELETE_POLICY_PRUNE: DeletePolicy
DELETE_POLICY_KEEP: DeletePolicy
BREAKER_STATE_UNSPECIFIED: BreakerState
BREAKER_STATE_CLOSED: BreakerState
BREAKER_STATE_OPEN: BreakerState
BREAKER_STATE_HALF_OPEN: BreakerState
FILE_STAGE_UNSPECIFIED: FileStage
FILE_STAGE_PARSED: FileStage
FILE_STAGE_CHUNKED: FileStage
FILE_STAGE_EMBEDDED: FileStage
FILE_STAGE_INDEXED: FileStage
FILE_STAGE_UNCHANGED: FileStage
FILE_STAGE_FAILED: FileStage
FILE_STAGE_REMOVED: FileStage
INGEST_JOB_STATE_UNSPECIFIED: IngestJobState
INGEST_JOB_STATE_QUEUED: IngestJobState
INGEST_JOB_STATE_RUNNING: IngestJobState
INGEST_JOB_STATE_DONE: IngestJobState
INGEST_JOB_STATE_FAILED: IngestJobState
INGEST_JOB_STATE_CANCELLED: IngestJobState
INGEST_JOB_STATE_DEAD: IngestJobState

class TuneEmbedderRequest(_message.Message):
    __slots__ = ("library", "epochs", "max_pairs", "revert", "pairs", "reembed")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MAX_PAIRS_FIELD_NUMBER: _ClassVar[int]
    REVERT_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    REEMBED_FIELD_NUMBER: _ClassVar[int]
    library: str
    epochs: float
    max_pairs: int
    revert: bool
    pairs: str
    reembed: bool
    def __init__(self, library: _Optional[str] = ..., epochs: _Optional[float] = ..., max_pairs: _Optional[int] = ..., revert: _Optional[bool] = ..., pairs: _Optional[str] = ..., reembed: _Optional[bool] = ...) -> None: ...

class TuneEmbedderResponse(_message.Message):
    __slots__ = ("stage", "done", "total", "loss", "message", "embedder", "previous_embedder", "chunks", "pairs", "seconds")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    done: int
    total: int
    loss: float
    message: str
    embedder: str
    previous_embedder: str
    chunks: int
    pairs: int
    seconds: float
    def __init__(self, stage: _Optional[str] = ..., done: _Optional[int] = ..., total: _Optional[int] = ..., loss: _Optional[float] = ..., message: _Optional[str] = ..., embedder: _Optional[str] = ..., previous_embedder: _Optional[str] = ..., chunks: _Optional[int] = ..., pairs: _Optional[int] = ..., seconds: _Optional[float] = ...) -> None: ...

class SourceSpec(_message.Message):
    __slots__ = ("name", "kind", "url", "library", "interval_s", "groups", "include", "exclude", "delete_policy", "endpoint", "region")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    DELETE_POLICY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    REGION_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: SourceKind
    url: str
    library: str
    interval_s: float
    groups: _containers.RepeatedScalarFieldContainer[str]
    include: _containers.RepeatedScalarFieldContainer[str]
    exclude: _containers.RepeatedScalarFieldContainer[str]
    delete_policy: DeletePolicy
    endpoint: str
    region: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[SourceKind, str]] = ..., url: _Optional[str] = ..., library: _Optional[str] = ..., interval_s: _Optional[float] = ..., groups: _Optional[_Iterable[str]] = ..., include: _Optional[_Iterable[str]] = ..., exclude: _Optional[_Iterable[str]] = ..., delete_policy: _Optional[_Union[DeletePolicy, str]] = ..., endpoint: _Optional[str] = ..., region: _Optional[str] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("item", "revision", "error", "attempts", "failed_at")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_FIELD_NUMBER: _ClassVar[int]
    item: str
    revision: str
    error: str
    attempts: int
    failed_at: str
    def __init__(self, item: _Optional[str] = ..., revision: _Optional[str] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., failed_at: _Optional[str] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("spec", "origin", "paused", "breaker", "consecutive_failures", "last_error", "last_poll_at", "last_success_at", "next_poll_at", "last_job_id", "retrying", "dead_letters")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    BREAKER_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_POLL_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_POLL_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RETRYING_FIELD_NUMBER: _ClassVar[int]
    DEAD_LETTERS_FIELD_NUMBER: _ClassVar[int]
    spec: SourceSpec
    origin: str
    paused: bool
    breaker: BreakerState
    consecutive_failures: int
    last_error: str
    last_poll_at: str
    last_success_at: str
    next_poll_at: str
    last_job_id: str
    retrying: int
    dead_letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    def __init__(self, spec: _Optional[_Union[SourceSpec, _Mapping]] = ..., origin: _Optional[str] = ..., paused: _Optional[bool] = ..., breaker: _Optional[_Union[BreakerState, str]] = ..., consecutive_failures: _Optional[int] = ..., last_error: _Optional[str] = ..., last_poll_at: _Optional[str] = ..., last_success_at: _Optional[str] = ..., next_poll_at: _Optional[str] = ..., last_job_id: _Optional[str] = ..., retrying: _Optional[int] = ..., dead_letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ...) -> None: ...

class AddSourceRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: SourceSpec
    def __init__(self, spec: _Optional[_Union[SourceSpec, _Mapping]] = ...) -> None: ...

class AddSourceResponse(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: Source
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ("library",)
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    library: str
    def __init__(self, library: _Optional[str] = ...) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ...) -> None: ...

class GetSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSourceResponse(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: Source
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ...) -> None: ...

class PauseSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PauseSourceResponse(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: Source
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ...) -> None: ...

class ResumeSourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ResumeSourceResponse(_message.Message):
    __slots__ = ("source",)
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    source: Source
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ...) -> None: ...

class RemoveSourceRequest(_message.Message):
    __slots__ = ("name", "remove_documents")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REMOVE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    remove_documents: bool
    def __init__(self, name: _Optional[str] = ..., remove_documents: _Optional[bool] = ...) -> None: ...

class RemoveSourceResponse(_message.Message):
    __slots__ = ("documents_removed",)
    DOCUMENTS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    documents_removed: int
    def __init__(self, documents_removed: _Optional[int] = ...) -> None: ...

class RetrySourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetrySourceResponse(_message.Message):
    __slots__ = ("source", "requeued")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEUED_FIELD_NUMBER: _ClassVar[int]
    source: Source
    requeued: int
    def __init__(self, source: _Optional[_Union[Source, _Mapping]] = ..., requeued: _Optional[int] = ...) -> None: ...

class AttachDatabaseRequest(_message.Message):
    __slots__ = ("library", "name", "url", "groups")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    library: str
    name: str
    url: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, library: _Optional[str] = ..., name: _Optional[str] = ..., url: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class AttachDatabaseResponse(_message.Message):
    __slots__ = ("database",)
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    database: _common_pb2.Database
    def __init__(self, database: _Optional[_Union[_common_pb2.Database, _Mapping]] = ...) -> None: ...

class DetachDatabaseRequest(_message.Message):
    __slots__ = ("library", "name")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    library: str
    name: str
    def __init__(self, library: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DetachDatabaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FileUpload(_message.Message):
    __slots__ = ("filename", "content")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    filename: str
    content: bytes
    def __init__(self, filename: _Optional[str] = ..., content: _Optional[bytes] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("library", "paths", "files", "prune", "urls", "enrich", "groups", "source")
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    URLS_FIELD_NUMBER: _ClassVar[int]
    ENRICH_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    library: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    files: _containers.RepeatedCompositeFieldContainer[FileUpload]
    prune: bool
    urls: _containers.RepeatedScalarFieldContainer[str]
    enrich: bool
    groups: _containers.RepeatedScalarFieldContainer[str]
    source: str
    def __init__(self, library: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ..., files: _Optional[_Iterable[_Union[FileUpload, _Mapping]]] = ..., prune: _Optional[bool] = ..., urls: _Optional[_Iterable[str]] = ..., enrich: _Optional[bool] = ..., groups: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ...) -> None: ...

class FileProgress(_message.Message):
    __slots__ = ("source", "stage", "document_id", "reason", "chunk_count", "index", "total")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    source: str
    stage: FileStage
    document_id: str
    reason: str
    chunk_count: int
    index: int
    total: int
    def __init__(self, source: _Optional[str] = ..., stage: _Optional[_Union[FileStage, str]] = ..., document_id: _Optional[str] = ..., reason: _Optional[str] = ..., chunk_count: _Optional[int] = ..., index: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class IngestSummary(_message.Message):
    __slots__ = ("files", "indexed", "unchanged", "failed", "chunks", "seconds", "failures", "removed", "entities", "relations", "communities", "communities_summarized", "notes", "rebuilt")
    FILES_FIELD_NUMBER: _ClassVar[int]
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    COMMUNITIES_FIELD_NUMBER: _ClassVar[int]
    COMMUNITIES_SUMMARIZED_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    REBUILT_FIELD_NUMBER: _ClassVar[int]
    files: int
    indexed: int
    unchanged: int
    failed: int
    chunks: int
    seconds: float
    failures: _containers.RepeatedScalarFieldContainer[str]
    removed: int
    entities: int
    relations: int
    communities: int
    communities_summarized: int
    notes: _containers.RepeatedScalarFieldContainer[str]
    rebuilt: int
    def __init__(self, files: _Optional[int] = ..., indexed: _Optional[int] = ..., unchanged: _Optional[int] = ..., failed: _Optional[int] = ..., chunks: _Optional[int] = ..., seconds: _Optional[float] = ..., failures: _Optional[_Iterable[str]] = ..., removed: _Optional[int] = ..., entities: _Optional[int] = ..., relations: _Optional[int] = ..., communities: _Optional[int] = ..., communities_summarized: _Optional[int] = ..., notes: _Optional[_Iterable[str]] = ..., rebuilt: _Optional[int] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("file", "summary")
    FILE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    file: FileProgress
    summary: IngestSummary
    def __init__(self, file: _Optional[_Union[FileProgress, _Mapping]] = ..., summary: _Optional[_Union[IngestSummary, _Mapping]] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("library",)
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    library: str
    def __init__(self, library: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[_common_pb2.Document]
    def __init__(self, documents: _Optional[_Iterable[_Union[_common_pb2.Document, _Mapping]]] = ...) -> None: ...

class ListLibrariesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLibrariesResponse(_message.Message):
    __slots__ = ("libraries",)
    LIBRARIES_FIELD_NUMBER: _ClassVar[int]
    libraries: _containers.RepeatedCompositeFieldContainer[Library]
    def __init__(self, libraries: _Optional[_Iterable[_Union[Library, _Mapping]]] = ...) -> None: ...

class Library(_message.Message):
    __slots__ = ("name", "documents", "chunks", "updated_at", "databases")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    DATABASES_FIELD_NUMBER: _ClassVar[int]
    name: str
    documents: int
    chunks: int
    updated_at: str
    databases: int
    def __init__(self, name: _Optional[str] = ..., documents: _Optional[int] = ..., chunks: _Optional[int] = ..., updated_at: _Optional[str] = ..., databases: _Optional[int] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("document_id", "library")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    library: str
    def __init__(self, document_id: _Optional[str] = ..., library: _Optional[str] = ...) -> None: ...

class GetDocumentResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.Document
    def __init__(self, document: _Optional[_Union[_common_pb2.Document, _Mapping]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("document_id", "library")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    library: str
    def __init__(self, document_id: _Optional[str] = ..., library: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("chunks_removed",)
    CHUNKS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    chunks_removed: int
    def __init__(self, chunks_removed: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("library",)
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    library: str
    def __init__(self, library: _Optional[str] = ...) -> None: ...

class LibraryStats(_message.Message):
    __slots__ = ("name", "documents", "chunks", "vector_chunks", "lexical_chunks", "lexical_pages", "media_types", "entities", "relations", "communities", "last_indexed_at", "embedder", "vector_windows", "builds")
    class MediaTypesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class BuildsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_PAGES_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPES_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    COMMUNITIES_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEXED_AT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    VECTOR_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    BUILDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    documents: int
    chunks: int
    vector_chunks: int
    lexical_chunks: int
    lexical_pages: int
    media_types: _containers.ScalarMap[str, int]
    entities: int
    relations: int
    communities: int
    last_indexed_at: str
    embedder: str
    vector_windows: int
    builds: _containers.ScalarMap[str, int]
    def __init__(self, name: _Optional[str] = ..., documents: _Optional[int] = ..., chunks: _Optional[int] = ..., vector_chunks: _Optional[int] = ..., lexical_chunks: _Optional[int] = ..., lexical_pages: _Optional[int] = ..., media_types: _Optional[_Mapping[str, int]] = ..., entities: _Optional[int] = ..., relations: _Optional[int] = ..., communities: _Optional[int] = ..., last_indexed_at: _Optional[str] = ..., embedder: _Optional[str] = ..., vector_windows: _Optional[int] = ..., builds: _Optional[_Mapping[str, int]] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("libraries", "table_versions", "lancedb_bytes", "tantivy_bytes", "catalog_bytes", "snapshots_bytes", "snapshots", "build")
    class TableVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    LIBRARIES_FIELD_NUMBER: _ClassVar[int]
    TABLE_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    LANCEDB_BYTES_FIELD_NUMBER: _ClassVar[int]
    TANTIVY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CATALOG_BYTES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_BYTES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    BUILD_FIELD_NUMBER: _ClassVar[int]
    libraries: _containers.RepeatedCompositeFieldContainer[LibraryStats]
    table_versions: _containers.ScalarMap[str, int]
    lancedb_bytes: int
    tantivy_bytes: int
    catalog_bytes: int
    snapshots_bytes: int
    snapshots: int
    build: str
    def __init__(self, libraries: _Optional[_Iterable[_Union[LibraryStats, _Mapping]]] = ..., table_versions: _Optional[_Mapping[str, int]] = ..., lancedb_bytes: _Optional[int] = ..., tantivy_bytes: _Optional[int] = ..., catalog_bytes: _Optional[int] = ..., snapshots_bytes: _Optional[int] = ..., snapshots: _Optional[int] = ..., build: _Optional[str] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("name", "created_at", "table_versions", "documents", "chunks", "bytes")
    class TableVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    TABLE_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    created_at: str
    table_versions: _containers.ScalarMap[str, int]
    documents: int
    chunks: int
    bytes: int
    def __init__(self, name: _Optional[str] = ..., created_at: _Optional[str] = ..., table_versions: _Optional[_Mapping[str, int]] = ..., documents: _Optional[int] = ..., chunks: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class CreateSnapshotResponse(_message.Message):
    __slots__ = ("snapshot",)
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ...) -> None: ...

class ListSnapshotsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSnapshotsResponse(_message.Message):
    __slots__ = ("snapshots",)
    SNAPSHOTS_FIELD_NUMBER: _ClassVar[int]
    snapshots: _containers.RepeatedCompositeFieldContainer[Snapshot]
    def __init__(self, snapshots: _Optional[_Iterable[_Union[Snapshot, _Mapping]]] = ...) -> None: ...

class RestoreSnapshotRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RestoreSnapshotResponse(_message.Message):
    __slots__ = ("snapshot", "table_versions")
    class TableVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    TABLE_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    snapshot: Snapshot
    table_versions: _containers.ScalarMap[str, int]
    def __init__(self, snapshot: _Optional[_Union[Snapshot, _Mapping]] = ..., table_versions: _Optional[_Mapping[str, int]] = ...) -> None: ...

class DeleteSnapshotRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSnapshotResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VacuumRequest(_message.Message):
    __slots__ = ("older_than_days",)
    OLDER_THAN_DAYS_FIELD_NUMBER: _ClassVar[int]
    older_than_days: int
    def __init__(self, older_than_days: _Optional[int] = ...) -> None: ...

class VacuumResponse(_message.Message):
    __slots__ = ("older_than_days", "versions_removed", "table_versions_removed", "fragments_compacted", "lancedb_bytes_freed", "tantivy_bytes_freed", "jobs_removed")
    class TableVersionsRemovedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    OLDER_THAN_DAYS_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    TABLE_VERSIONS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    FRAGMENTS_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    LANCEDB_BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    TANTIVY_BYTES_FREED_FIELD_NUMBER: _ClassVar[int]
    JOBS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    older_than_days: int
    versions_removed: int
    table_versions_removed: _containers.ScalarMap[str, int]
    fragments_compacted: int
    lancedb_bytes_freed: int
    tantivy_bytes_freed: int
    jobs_removed: int
    def __init__(self, older_than_days: _Optional[int] = ..., versions_removed: _Optional[int] = ..., table_versions_removed: _Optional[_Mapping[str, int]] = ..., fragments_compacted: _Optional[int] = ..., lancedb_bytes_freed: _Optional[int] = ..., tantivy_bytes_freed: _Optional[int] = ..., jobs_removed: _Optional[int] = ...) -> None: ...

class SubmitIngestRequest(_message.Message):
    __slots__ = ("request",)
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: IngestRequest
    def __init__(self, request: _Optional[_Union[IngestRequest, _Mapping]] = ...) -> None: ...

class SubmitIngestResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: IngestJob
    def __init__(self, job: _Optional[_Union[IngestJob, _Mapping]] = ...) -> None: ...

class GetIngestJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetIngestJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: IngestJob
    def __init__(self, job: _Optional[_Union[IngestJob, _Mapping]] = ...) -> None: ...

class ListIngestJobsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListIngestJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[IngestJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[IngestJob, _Mapping]]] = ...) -> None: ...

class CancelIngestJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelIngestJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: IngestJob
    def __init__(self, job: _Optional[_Union[IngestJob, _Mapping]] = ...) -> None: ...

class IngestJob(_message.Message):
    __slots__ = ("job_id", "library", "state", "submitted_at", "updated_at", "files_done", "summary", "error", "attempts", "principal")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    FILES_DONE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    library: str
    state: IngestJobState
    submitted_at: str
    updated_at: str
    files_done: int
    summary: IngestSummary
    error: str
    attempts: int
    principal: str
    def __init__(self, job_id: _Optional[str] = ..., library: _Optional[str] = ..., state: _Optional[_Union[IngestJobState, str]] = ..., submitted_at: _Optional[str] = ..., updated_at: _Optional[str] = ..., files_done: _Optional[int] = ..., summary: _Optional[_Union[IngestSummary, _Mapping]] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...
