"""Who may call what: the permission each RPC needs and where its request names a library.

Checked once per call by the server interceptor, before the servicer runs. A method missing here is
refused (fail closed), so a new RPC cannot ship without a rule; `tests/kernel/test_access.py`
checks that every RPC in the protos has one. Ownership (traces, jobs, sessions) and document ACLs
are finer than a method and are checked by the servicers and inside retrieval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragstack.auth import Permission, Principal
from ragstack.domain import library_name
from ragstack.errors import PermissionDenied

# Probes and discovery stay open: load balancers and grpcurl need them without the token.
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


@dataclass(frozen=True)
class Rule:
    permission: Permission
    action: str  # what the caller is doing, for the refusal
    library: Callable[[Any], str | None] | None = None  # the library the request names, if any


def _library(request: Any) -> str:
    return str(request.library)


def _ingested_library(request: Any) -> str | None:
    """An ingest's library; None for a source's sync, whose servicer checks the source's library."""
    return None if request.source else str(request.library)


def _named_library(request: Any) -> str | None:
    """The library a listing is narrowed to; none named lists every library the caller may use."""
    return str(request.library) or None


def _submitted_library(request: Any) -> str | None:
    return _ingested_library(request.request)


def _spec_library(request: Any) -> str:
    return str(request.spec.library)


_R, _W, _A = Permission.READ, Permission.WRITE, Permission.ADMIN
RULES: dict[str, Rule] = {
    "/ragstack.v1.AgentService/Ask": Rule(_R, "asking", _library),
    "/ragstack.v1.AgentService/GetTrace": Rule(_R, "reading a trace"),
    "/ragstack.v1.AgentService/ListSessions": Rule(_R, "listing sessions"),
    "/ragstack.v1.AgentService/SendFeedback": Rule(_R, "giving feedback"),  # on its own answers only
    "/ragstack.v1.AgentService/ListFeedback": Rule(_A, "listing feedback"),
    "/ragstack.v1.IngestService/Ingest": Rule(_W, "ingesting", _ingested_library),
    "/ragstack.v1.IngestService/SubmitIngest": Rule(_W, "queueing an ingest", _submitted_library),
    "/ragstack.v1.IngestService/GetIngestJob": Rule(_R, "reading an ingest job"),
    "/ragstack.v1.IngestService/ListIngestJobs": Rule(_R, "listing ingest jobs"),
    "/ragstack.v1.IngestService/CancelIngestJob": Rule(_W, "cancelling an ingest job"),
    "/ragstack.v1.IngestService/ListDocuments": Rule(_R, "listing documents", _library),
    "/ragstack.v1.IngestService/GetDocument": Rule(_R, "reading a document", _library),
    "/ragstack.v1.IngestService/DeleteDocument": Rule(_W, "deleting a document", _library),
    "/ragstack.v1.IngestService/ListLibraries": Rule(_R, "listing libraries"),
    "/ragstack.v1.IngestService/AttachDatabase": Rule(_A, "attaching a database", _library),
    "/ragstack.v1.IngestService/DetachDatabase": Rule(_A, "detaching a database", _library),
    "/ragstack.v1.IngestService/Stats": Rule(_A, "reading store statistics"),
    "/ragstack.v1.IngestService/CreateSnapshot": Rule(_A, "taking a snapshot"),
    "/ragstack.v1.IngestService/ListSnapshots": Rule(_A, "listing snapshots"),
    "/ragstack.v1.IngestService/RestoreSnapshot": Rule(_A, "restoring a snapshot"),
    "/ragstack.v1.IngestService/DeleteSnapshot": Rule(_A, "deleting a snapshot"),
    "/ragstack.v1.IngestService/Vacuum": Rule(_A, "vacuuming the stores"),
    "/ragstack.v1.IngestService/AddSource": Rule(_A, "adding a source", _spec_library),
    "/ragstack.v1.IngestService/ListSources": Rule(_R, "listing sources", _named_library),
    "/ragstack.v1.IngestService/GetSource": Rule(_R, "reading a source"),  # its library: servicer
    "/ragstack.v1.IngestService/PauseSource": Rule(_A, "pausing a source"),
    "/ragstack.v1.IngestService/ResumeSource": Rule(_A, "resuming a source"),
    "/ragstack.v1.IngestService/RemoveSource": Rule(_A, "removing a source"),
    "/ragstack.v1.IngestService/RetrySource": Rule(_A, "retrying a source"),
    "/ragstack.v1.IngestService/TuneEmbedder": Rule(_A, "tuning a library's embedder", _library),
    "/ragstack.v1.RetrieveService/Search": Rule(_R, "searching", _library),
    "/ragstack.v1.RetrieveService/Score": Rule(_R, "scoring texts"),
    "/ragstack.v1.RetrieveService/ListDatabases": Rule(_R, "listing databases", _library),
    "/ragstack.v1.RetrieveService/Sql": Rule(_R, "running SQL", _library),
    "/ragstack.v1.RetrieveService/GetChunk": Rule(_R, "reading a chunk", _library),
    "/ragstack.v1.RetrieveService/GetGraph": Rule(_R, "reading the knowledge graph", _library),
    "/ragstack.v1.RetrieveService/GetChunkVisual": Rule(_R, "reading a chunk's page picture", _library),
    "/ragstack.v1.RetrieveService/Stats": Rule(_A, "reading store freshness"),
    "/ragstack.v1.VerifyService/Verify": Rule(_R, "verifying an answer"),
}


def authorize(method: str, request: Any, principal: Principal, default_library: str) -> None:
    """Raises PermissionDenied (naming the permission or library) unless `principal` may make
    this call; InvalidArgument for a malformed library name."""
    rule = RULES.get(method)
    library = rule.library(request) if rule is not None and rule.library is not None else None
    permit(method, library, principal, default_library)


def permit(method: str, library: str | None, principal: Principal, default_library: str) -> None:
    """`authorize` for a call about to be made with `library` (None: the method names none): the
    gateway checks a streamed call with it, so a refusal is a status, not an event mid-stream."""
    rule = RULES.get(method)
    if rule is None:
        raise PermissionDenied(f"{method} has no access rule; refused")
    principal.require(rule.permission, rule.action)
    if rule.library is not None and library is not None:
        principal.require_library(library_name(library, default_library))
