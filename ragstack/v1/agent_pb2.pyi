from ragstack.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Rating(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RATING_UNSPECIFIED: _ClassVar[Rating]
    RATING_UP: _ClassVar[Rating]
    RATING_DOWN: _ClassVar[Rating]

class QueryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUERY_MODE_UNSPECIFIED: _ClassVar[QueryMode]
    QUERY_MODE_GENERAL: _ClassVar[QueryMode]
    QUERY_MODE_COMPARE: _ClassVar[QueryMode]
    QUERY_MODE_METHODOLOGY: _ClassVar[QueryMode]
    QUERY_MODE_DATASETS: _ClassVar[QueryMode]
    QUERY_MODE_REPRODUCE: _ClassVar[QueryMode]
RATING_UNSPECIFIED: Rating
RATING_UP: Rating
RATING_DOWN: Rating
QUERY_MODE_UNSPECIFIED: QueryMode
QUERY_MODE_GENERAL: QueryMode
QUERY_MODE_COMPARE: QueryMode
QUERY_MODE_METHODOLOGY: QueryMode
QUERY_MODE_DATASETS: QueryMode
QUERY_MODE_REPRODUCE: QueryMode

class SendFeedbackRequest(_message.Message):
    __slots__ = ("trace_id", "rating", "comment")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    rating: Rating
    comment: str
    def __init__(self, trace_id: _Optional[str] = ..., rating: _Optional[_Union[Rating, str]] = ..., comment: _Optional[str] = ...) -> None: ...

class SendFeedbackResponse(_message.Message):
    __slots__ = ("feedback",)
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    feedback: Feedback
    def __init__(self, feedback: _Optional[_Union[Feedback, _Mapping]] = ...) -> None: ...

class ListFeedbackRequest(_message.Message):
    __slots__ = ("limit", "library")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    limit: int
    library: str
    def __init__(self, limit: _Optional[int] = ..., library: _Optional[str] = ...) -> None: ...

class ListFeedbackResponse(_message.Message):
    __slots__ = ("feedback",)
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    feedback: _containers.RepeatedCompositeFieldContainer[Feedback]
    def __init__(self, feedback: _Optional[_Iterable[_Union[Feedback, _Mapping]]] = ...) -> None: ...

class Feedback(_message.Message):
    __slots__ = ("trace_id", "rating", "comment", "principal", "question", "library", "created_at")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    RATING_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    rating: Rating
    comment: str
    principal: str
    question: str
    library: str
    created_at: str
    def __init__(self, trace_id: _Optional[str] = ..., rating: _Optional[_Union[Rating, str]] = ..., comment: _Optional[str] = ..., principal: _Optional[str] = ..., question: _Optional[str] = ..., library: _Optional[str] = ..., created_at: _Optional[str] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("question", "library", "mode", "top_k", "session_id", "skip_memory", "query_mode")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SKIP_MEMORY_FIELD_NUMBER: _ClassVar[int]
    QUERY_MODE_FIELD_NUMBER: _ClassVar[int]
    question: str
    library: str
    mode: _common_pb2.SearchMode
    top_k: int
    session_id: str
    skip_memory: bool
    query_mode: QueryMode
    def __init__(self, question: _Optional[str] = ..., library: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ..., top_k: _Optional[int] = ..., session_id: _Optional[str] = ..., skip_memory: _Optional[bool] = ..., query_mode: _Optional[_Union[QueryMode, str]] = ...) -> None: ...

class StartEvent(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class RouteEvent(_message.Message):
    __slots__ = ("mode", "classifier", "reason", "sub_questions", "standalone_question", "top_k", "chains_facts", "query_mode")
    MODE_FIELD_NUMBER: _ClassVar[int]
    CLASSIFIER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUB_QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    STANDALONE_QUESTION_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    CHAINS_FACTS_FIELD_NUMBER: _ClassVar[int]
    QUERY_MODE_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.SearchMode
    classifier: str
    reason: str
    sub_questions: _containers.RepeatedScalarFieldContainer[str]
    standalone_question: str
    top_k: int
    chains_facts: bool
    query_mode: QueryMode
    def __init__(self, mode: _Optional[_Union[_common_pb2.SearchMode, str]] = ..., classifier: _Optional[str] = ..., reason: _Optional[str] = ..., sub_questions: _Optional[_Iterable[str]] = ..., standalone_question: _Optional[str] = ..., top_k: _Optional[int] = ..., chains_facts: _Optional[bool] = ..., query_mode: _Optional[_Union[QueryMode, str]] = ...) -> None: ...

class ToolCallEvent(_message.Message):
    __slots__ = ("tool", "arguments_json", "result_count", "took_ms")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOOK_MS_FIELD_NUMBER: _ClassVar[int]
    tool: str
    arguments_json: str
    result_count: int
    took_ms: float
    def __init__(self, tool: _Optional[str] = ..., arguments_json: _Optional[str] = ..., result_count: _Optional[int] = ..., took_ms: _Optional[float] = ...) -> None: ...

class EvidenceEvent(_message.Message):
    __slots__ = ("hits", "grade", "score")
    HITS_FIELD_NUMBER: _ClassVar[int]
    GRADE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[_common_pb2.SearchHit]
    grade: str
    score: float
    def __init__(self, hits: _Optional[_Iterable[_Union[_common_pb2.SearchHit, _Mapping]]] = ..., grade: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class DeltaEvent(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class VerificationEvent(_message.Message):
    __slots__ = ("manifest",)
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    manifest: _common_pb2.Manifest
    def __init__(self, manifest: _Optional[_Union[_common_pb2.Manifest, _Mapping]] = ...) -> None: ...

class DoneEvent(_message.Message):
    __slots__ = ("trace_id", "answer", "citations", "confidence", "abstained", "generator", "manifest", "evidence_chunk_ids", "active_retrieval", "cut_by")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ABSTAINED_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    CUT_BY_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[_common_pb2.Citation]
    confidence: float
    abstained: bool
    generator: str
    manifest: _common_pb2.Manifest
    evidence_chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    active_retrieval: ActiveRetrieval
    cut_by: str
    def __init__(self, trace_id: _Optional[str] = ..., answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[_common_pb2.Citation, _Mapping]]] = ..., confidence: _Optional[float] = ..., abstained: _Optional[bool] = ..., generator: _Optional[str] = ..., manifest: _Optional[_Union[_common_pb2.Manifest, _Mapping]] = ..., evidence_chunk_ids: _Optional[_Iterable[str]] = ..., active_retrieval: _Optional[_Union[ActiveRetrieval, _Mapping]] = ..., cut_by: _Optional[str] = ...) -> None: ...

class ActiveRetrieval(_message.Message):
    __slots__ = ("rounds", "queries", "added_chunk_ids", "redrafted")
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    QUERIES_FIELD_NUMBER: _ClassVar[int]
    ADDED_CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    REDRAFTED_FIELD_NUMBER: _ClassVar[int]
    rounds: int
    queries: _containers.RepeatedScalarFieldContainer[str]
    added_chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    redrafted: bool
    def __init__(self, rounds: _Optional[int] = ..., queries: _Optional[_Iterable[str]] = ..., added_chunk_ids: _Optional[_Iterable[str]] = ..., redrafted: _Optional[bool] = ...) -> None: ...

class AskResponse(_message.Message):
    __slots__ = ("start", "route", "tool_call", "evidence", "delta", "verification", "done")
    START_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    start: StartEvent
    route: RouteEvent
    tool_call: ToolCallEvent
    evidence: EvidenceEvent
    delta: DeltaEvent
    verification: VerificationEvent
    done: DoneEvent
    def __init__(self, start: _Optional[_Union[StartEvent, _Mapping]] = ..., route: _Optional[_Union[RouteEvent, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallEvent, _Mapping]] = ..., evidence: _Optional[_Union[EvidenceEvent, _Mapping]] = ..., delta: _Optional[_Union[DeltaEvent, _Mapping]] = ..., verification: _Optional[_Union[VerificationEvent, _Mapping]] = ..., done: _Optional[_Union[DoneEvent, _Mapping]] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class GetTraceResponse(_message.Message):
    __slots__ = ("trace_json",)
    TRACE_JSON_FIELD_NUMBER: _ClassVar[int]
    trace_json: str
    def __init__(self, trace_json: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: int
    def __init__(self, limit: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "turns", "last_question", "updated_at")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    LAST_QUESTION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    turns: int
    last_question: str
    updated_at: str
    def __init__(self, session_id: _Optional[str] = ..., turns: _Optional[int] = ..., last_question: _Optional[str] = ..., updated_at: _Optional[str] = ...) -> None: ...
