"""Domain errors. Each maps to one gRPC status (rpc/interceptors.py) and one HTTP status (gateway)."""

from __future__ import annotations


class RagstackError(Exception):
    """Base of every error RAGStack raises on purpose. `code` names the gRPC status."""

    code = "INTERNAL"


class ConfigError(RagstackError):
    code = "INVALID_ARGUMENT"


class InvalidArgument(RagstackError):
    code = "INVALID_ARGUMENT"


class NotFound(RagstackError):
    code = "NOT_FOUND"


class DocumentNotFound(NotFound):
    def __init__(self, document_id: str) -> None:
        super().__init__(f"document {document_id!r} not found")


class TraceNotFound(NotFound):
    def __init__(self, trace_id: str) -> None:
        super().__init__(f"trace {trace_id!r} not found")


class AlreadyExists(RagstackError):
    code = "ALREADY_EXISTS"


class UnsupportedFormat(InvalidArgument):
    pass


class FailedPrecondition(RagstackError):
    code = "FAILED_PRECONDITION"


class Cancelled(RagstackError):
    code = "CANCELLED"


class ResourceExhausted(RagstackError):
    code = "RESOURCE_EXHAUSTED"


class PermissionDenied(RagstackError):
    code = "PERMISSION_DENIED"


class DeadlineExceeded(RagstackError):
    code = "DEADLINE_EXCEEDED"


class Unavailable(RagstackError):
    """A peer service or a model is not reachable."""

    code = "UNAVAILABLE"


class ModelMissing(Unavailable):
    pass


class RpcError(RagstackError):
    """A failed call to a RAGStack service, as clients see it: the status name and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
