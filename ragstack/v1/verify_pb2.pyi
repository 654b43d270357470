from ragstack.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Evidence(_message.Message):
    __slots__ = ("ref", "chunk_id", "text")
    REF_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ref: str
    chunk_id: str
    text: str
    def __init__(self, ref: _Optional[str] = ..., chunk_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("answer", "evidence", "evidence_score", "abstain_threshold")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_SCORE_FIELD_NUMBER: _ClassVar[int]
    ABSTAIN_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    answer: str
    evidence: _containers.RepeatedCompositeFieldContainer[Evidence]
    evidence_score: float
    abstain_threshold: float
    def __init__(self, answer: _Optional[str] = ..., evidence: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., evidence_score: _Optional[float] = ..., abstain_threshold: _Optional[float] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("manifest", "confidence", "abstain")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ABSTAIN_FIELD_NUMBER: _ClassVar[int]
    manifest: _common_pb2.Manifest
    confidence: float
    abstain: bool
    def __init__(self, manifest: _Optional[_Union[_common_pb2.Manifest, _Mapping]] = ..., confidence: _Optional[float] = ..., abstain: _Optional[bool] = ...) -> None: ...
