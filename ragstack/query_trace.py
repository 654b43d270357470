"""The schema of a query's JSON trace (`<data_dir>/traces/<trace_id>.json`, kept by `TraceStore`).

The agent fills one `QueryTrace` stage by stage; the gateway's GET /v1/traces/{id}, the agent's
GetTrace and `ragstack traces` read it back through `QueryTrace.from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Required, TypedDict

# Raise when a field changes meaning or goes; a new optional field needs no new version.
SCHEMA_VERSION = 1


class RouteRecord(TypedDict, total=False):
    mode: Required[str]
    classifier: Required[str]
    reason: Required[str]
    sub_questions: Required[list[str]]
    standalone_question: Required[str]
    top_k: Required[int]
    query_mode: str  # the answer's shape (traces from before query modes have none)


class HitRecord(TypedDict):
    chunk_id: str
    score: float
    signals: list[dict[str, Any]]  # `domain.SignalScore` fields


class RecalledRecord(TypedDict):
    question: str
    score: float


class ToolCall(TypedDict, total=False):
    """One tool call. Searches have hint, took_ms and hits; SQL calls ran, truncated or error;
    a recalled memory has recalled and no took_ms."""

    tool: Required[str]  # search, bridge_search, read_neighbours, recall_memory, sql
    arguments: Required[dict[str, Any]]
    hint: str  # why this search ran: a bridge, a retry, a recalled question
    result_count: int
    took_ms: float
    hits: list[HitRecord]
    recalled: RecalledRecord
    ran: str  # the statement the database ran
    truncated: bool
    error: str


class GradeRecord(TypedDict, total=False):
    query: Required[str]
    grade: Required[str]  # correct, ambiguous, incorrect
    score: Required[float]
    grader: str  # llm or score; absent for a database result


class EvidenceGrade(TypedDict):
    grade: str
    score: float
    hits: int


class CitationRecord(TypedDict, total=False):
    ref: Required[str]
    chunk_id: Required[str]
    source: Required[str]
    heading_path: Required[list[str]]
    pages: Required[list[int]]
    sql: dict[str, Any]  # `domain.SqlSource` fields, for a database result


@dataclass(kw_only=True)
class QueryTrace:
    """One query, as the agent answered it. A field left None was not reached (or does not apply)
    and is not written.

    Always written: schema_version, trace_id (the OpenTelemetry trace id when tracing is on),
    principal (only it and admins may read the trace), question, library, session_id, session_key,
    request_id (the gateway's), memory (whether earlier questions were recalled and this one is
    remembered), started_at, top_k_requested (0: the default), took_ms.

    Route: rewrite (none, heuristic or llm: how a follow-up became standalone; in a session only),
    standalone_question, route (mode, classifier, reason, sub_questions, standalone_question, top_k).

    Gather and grade: tool_calls, grades (one per search, neighbour read or database result),
    sql_notice (why a database gave no result), grade (of the evidence as a whole: grade, score,
    hits).

    Analysis (a computation over the documents): analysis (ran, and why not; by: llm, offline or
    none; the code or the description and value, stdout, stderr, error, killed_by, the files given
    and opened, the documents it read; with an LLM every attempt it wrote).

    Draft: session_evidence (in a session: the earlier turns' chunks drafted from again, and which:
    cited or all), no_draft_reason, llm_error, draft_cut_by (the limit that stopped the LLM
    mid-draft: llm.max_output_tokens or llm.timeout_s), score_error, instructions_left_out (sentences that
    instruct their reader, not quoted), ungrounded (an LLM's sentences that neither cited nor said
    they are not from the documents: removed, or the answer withheld), generator (an LLM's name,
    extractive, sql or none), draft (as delivered).

    Verify and cite: verification (`domain.Verification` fields), answer, abstained, confidence,
    citations.

    Active retrieval (when on): active_retrieval (rounds, queries, added_chunk_ids, redrafted,
    first_draft); its searches are tool calls named active_search, and draft and verification are
    those of the answer that stands.
    """

    schema_version: int = SCHEMA_VERSION
    trace_id: str
    principal: str = ""
    question: str
    library: str
    session_id: str = ""
    session_key: str = ""
    request_id: str = ""
    memory: bool = False
    started_at: str = ""
    top_k_requested: int = 0
    rewrite: str | None = None
    standalone_question: str | None = None
    route: RouteRecord | None = None
    tool_calls: list[ToolCall] | None = None
    grades: list[GradeRecord] | None = None
    sql_notice: str | None = None
    grade: EvidenceGrade | None = None
    no_draft_reason: str | None = None
    llm_error: str | None = None
    draft_cut_by: str | None = None
    score_error: str | None = None
    instructions_left_out: list[str] | None = None
    ungrounded: list[str] | None = None
    session_evidence: dict[str, Any] | None = None
    analysis: dict[str, Any] | None = None
    generator: str | None = None
    draft: str | None = None
    verification: dict[str, Any] | None = None
    answer: str | None = None
    abstained: bool | None = None
    confidence: float | None = None
    citations: list[CitationRecord] | None = None
    active_retrieval: dict[str, Any] | None = None
    took_ms: float | None = None

    def open_tools(self) -> None:
        """Gathering began: its tool calls and grades are written from now on, even when none."""
        self.tool_calls, self.grades = [], []

    def add_call(self, call: ToolCall) -> None:
        assert self.tool_calls is not None, "open_tools first"
        self.tool_calls.append(call)

    def add_grade(self, grade: GradeRecord) -> None:
        assert self.grades is not None, "open_tools first"
        self.grades.append(grade)

    def to_json(self) -> dict[str, Any]:
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryTrace:
        """A trace file's content. Files written before the schema was versioned have no
        schema_version: they are version 1. Fields an older writer did not record read as empty;
        keys this schema does not know are left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values.setdefault("schema_version", 1)
        return cls(**values)
