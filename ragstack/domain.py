"""Plain domain objects shared by the services. No grpc, no protobuf: see convert.py for the mapping."""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ragstack.errors import InvalidArgument

if TYPE_CHECKING:
    from ragstack.config import SourceConfig


class SearchMode(enum.StrEnum):
    AUTO = "auto"
    LEXICAL = "lexical"
    DENSE = "dense"
    HYBRID = "hybrid"
    GRAPH_LOCAL = "graph"
    GRAPH_GLOBAL = "graph-global"
    SQL = "sql"  # the agent only: read-only SQL over the attached databases


class QueryMode(enum.StrEnum):
    """The answer's shape (AskRequest.query_mode); AUTO lets the router choose."""

    AUTO = "auto"
    GENERAL = "general"
    COMPARE = "compare"
    METHODOLOGY = "methodology"
    DATASETS = "datasets"
    REPRODUCE = "reproduce"


class Verdict(enum.StrEnum):
    SUPPORTED = "supported"
    PARTIAL = "partial"
    UNSUPPORTED = "unsupported"


class FileStage(enum.StrEnum):
    PARSED = "parsed"
    CHUNKED = "chunked"
    EMBEDDED = "embedded"
    INDEXED = "indexed"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    REMOVED = "removed"


@dataclass(frozen=True)
class Document:
    document_id: str
    library: str
    source: str
    revision: str
    fingerprint: str
    title: str
    media_type: str
    chunk_count: int = 0
    indexed_at: str = ""
    groups: tuple[str, ...] = ()  # ACL groups that may see it; empty: public (see `acl_allows`)
    build: str = ""  # the index build it was made with (services/ingest/build.py); "": before builds


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    document_id: str
    library: str
    text: str
    heading_path: tuple[str, ...] = ()
    pages: tuple[int, ...] = ()
    position: int = 0
    title: str = ""
    source: str = ""
    media_type: str = ""
    groups: tuple[str, ...] = ()  # its document's ACL groups


@dataclass(frozen=True)
class ChunkRegion:
    """Where (part of) a chunk lies on a page of its PDF: fractions of the page, origin top left."""

    page: int
    left: float
    top: float
    right: float
    bottom: float


@dataclass(frozen=True)
class ChunkVisual:
    """A chunk's page as a PNG picture, its regions drawn (GetChunkVisual)."""

    png: bytes
    page: int
    regions: tuple[ChunkRegion, ...]
    width: int
    height: int


@dataclass(frozen=True)
class PageText:
    """A whole page (or, for a format without pages, the whole document as page 0) for the lexical
    index, so terms that chunking put in different chunks still meet."""

    document_id: str
    library: str
    page: int
    text: str
    title: str = ""
    media_type: str = ""
    groups: tuple[str, ...] = ()  # its document's ACL groups


HEADING_SEP = "\x1f"
# Request sizes every entry point refuses past (gRPC, HTTP, MCP), each naming its limit: a question;
# a search's query (room for what the agent adds to a question: rewrites, bridge entities); and a
# heading-prefix filter, which the lexical store matches as a pattern of bounded size; a text to
# score (the embedder reads its first 256 word pieces, about 1,000 characters); an answer to verify
# (16,000 tokens or so, past any default generation) and the evidence it cites (100 passages of
# 10,000 characters: a search's most, expanded), whose every sentence the checker embeds.
MAX_QUESTION_CHARS = 4000
MAX_QUERY_CHARS = 8000
MAX_HEADING_PREFIX_BYTES = 256
MAX_SCORE_TEXT_CHARS = 8000
MAX_ANSWER_CHARS = 64_000
MAX_EVIDENCE_CHARS = 1_000_000


def list_limit(value: int, most: int, default: int = 50) -> int:
    """A List request's `limit`: 0 means `default`, past `most` is `most`, below 0 is refused."""
    if value < 0:
        raise InvalidArgument(f"limit {value} is negative (0: {default}, at most {most})")
    return min(value or default, most)


def heading_key(path: tuple[str, ...] | list[str]) -> str:
    """A heading path as one string that prefix-matches its sub-sections: `A\x1fB\x1f`."""
    return "".join(f"{h}{HEADING_SEP}" for h in path)


MAX_GROUPS = 32
_GROUP = re.compile(r"^[A-Za-z0-9_.@:-]{1,64}\Z")


def acl_groups(raw: Iterable[str]) -> tuple[str, ...]:
    """The ACL groups an ingest names, checked (1-64 of letters, digits, `_.-@:`; at most 32
    distinct) and normalised: sorted, without duplicates."""
    groups = tuple(sorted(set(raw)))
    bad = next((g for g in groups if not isinstance(g, str) or not _GROUP.match(g)), None)
    if bad is not None:
        raise InvalidArgument(f"invalid ACL group {bad!r}: use 1-64 of A-Z a-z 0-9 _ . - @ :")
    if len(groups) > MAX_GROUPS:
        raise InvalidArgument(f"{len(groups)} ACL groups is over the limit of {MAX_GROUPS}")
    return groups


def acl_allows(acl: Sequence[str] | None, groups: Sequence[str]) -> bool:
    """Whether a caller who sees `acl` (None: everything) sees a document with these groups: a
    document without groups is public; one with groups needs one of them in `acl`."""
    return acl is None or not groups or not set(groups).isdisjoint(acl)


@dataclass(frozen=True)
class SearchFilter:
    """Restricts a search; empty fields restrict nothing. `acl`: the ACL groups whose documents the
    caller sees besides public ones (None: every document; (): public ones only). Every store
    applies it inside its query (never to the results), so a hidden document is never a candidate."""

    document_ids: tuple[str, ...] = ()
    media_types: tuple[str, ...] = ()
    heading_prefix: tuple[str, ...] = ()
    acl: tuple[str, ...] | None = None

    def __bool__(self) -> bool:
        return bool(self.document_ids or self.media_types or self.heading_prefix) or self.acl is not None

    def accepts(self, chunk: Chunk) -> bool:
        return (
            (not self.document_ids or chunk.document_id in self.document_ids)
            and (not self.media_types or chunk.media_type in self.media_types)
            and heading_key(chunk.heading_path).startswith(heading_key(self.heading_prefix))
            and acl_allows(self.acl, chunk.groups)
        )

    def narrowed_to(self, acl: tuple[str, ...] | None) -> SearchFilter:
        """This filter for a caller who sees `acl`: the caller's groups bound what the request asks."""
        if acl is None:
            return self
        mine = set(acl) if self.acl is None else set(acl) & set(self.acl)
        return replace(self, acl=tuple(sorted(mine)))


@dataclass(frozen=True)
class SignalScore:
    signal: str
    score: float
    rank: int = 0


def chunk_key(chunk_id: str) -> int:
    """A chunk's identity as a signed 64-bit integer (blake2b of its id), the same in every store:
    search fuses candidates by it before their chunks are read (ragstack/stores/lexical.py)."""
    return int.from_bytes(hashlib.blake2b(chunk_id.encode(), digest_size=8).digest(), "little", signed=True)


def document_key(document_id: str) -> int:
    """A document's identity the same way: the per-document cap counts candidates by it."""
    return chunk_key("\x1f" + document_id)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A search candidate before its chunk is read: its keys, and the chunk when the store had it
    at hand, else where its store reads it: `at` is (read, handle), `read` a function from handles
    to their chunks that reads many at once (read_chunks)."""

    key: int
    document_key: int
    chunk: Chunk | None = None
    at: tuple[Callable[[list[Any]], list[Chunk]], Any] | None = None

    @classmethod
    def of(cls, chunk: Chunk) -> Candidate:
        return cls(chunk_key(chunk.chunk_id), document_key(chunk.document_id), chunk)


def read_chunks(candidates: Sequence[Candidate]) -> list[Chunk]:
    """Each candidate's chunk, in order: those not at hand read together, one call per `read`
    function (a store search gives all its candidates the same one)."""
    out: dict[int, Chunk] = {}
    pending: dict[int, tuple[Callable[[list[Any]], list[Chunk]], list[int], list[Any]]] = {}
    for i, c in enumerate(candidates):
        if c.chunk is not None:
            out[i] = c.chunk
        else:
            assert c.at is not None, "a candidate without its chunk says where to read it"
            read, handle = c.at
            _, indices, handles = pending.setdefault(id(read), (read, [], []))
            indices.append(i)
            handles.append(handle)
    for read, indices, handles in pending.values():
        out.update(zip(indices, read(handles), strict=True))
    return [out[i] for i in range(len(candidates))]


@dataclass(frozen=True)
class SearchHit:
    chunk: Chunk
    score: float
    signals: tuple[SignalScore, ...] = ()
    context: str = ""


@dataclass(frozen=True)
class CommunityHit:
    """A knowledge-graph community whose summary matched a query (graph global search)."""

    community_id: str
    summary: str
    score: float
    entities: tuple[str, ...] = ()
    chunk_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphEntity:
    key: str
    name: str
    type: str
    chunk_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphRelation:
    source: str  # entity keys
    target: str
    weight: float
    label: str = ""
    evidence: str = ""


@dataclass(frozen=True)
class GraphCommunity:
    community_id: str
    members: tuple[str, ...]  # entity keys, most connected first
    summary: str
    chunk_ids: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()


@dataclass
class GraphView:
    """A library's knowledge graph as one caller may see it (RetrieveService.GetGraph)."""

    entities: list[GraphEntity] = field(default_factory=list)
    relations: list[GraphRelation] = field(default_factory=list)
    communities: list[GraphCommunity] = field(default_factory=list)
    chunks_with_entities: int = 0


@dataclass(frozen=True)
class Feedback:
    """A person's verdict on one answer, kept with its trace id."""

    trace_id: str
    rating: str  # up | down
    comment: str = ""
    principal: str = ""
    question: str = ""
    library: str = ""
    created_at: str = ""


@dataclass(frozen=True)
class SqlSource:
    """A query result an answer cites: where it ran, what ran, how many rows came back."""

    database: str
    query: str
    row_count: int
    truncated: bool = False


@dataclass(frozen=True)
class Citation:
    ref: str
    chunk: Chunk
    quote: str = ""
    sql: SqlSource | None = None


_NUMERIC = re.compile(r"int|real|float|double|numeric|decimal|money|number|serial", re.IGNORECASE)
_TEMPORAL = re.compile(r"date|time", re.IGNORECASE)


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    samples: tuple[str, ...] = ()  # distinct values; every value of a categorical text column

    @property
    def numeric(self) -> bool:
        return bool(_NUMERIC.search(self.type))

    @property
    def temporal(self) -> bool:
        return bool(_TEMPORAL.search(self.type))


@dataclass(frozen=True)
class Table:
    name: str  # as a query names it: `orders`, or `sales.orders` outside the default schema
    columns: tuple[Column, ...]
    foreign_keys: tuple[tuple[str, str, str], ...] = ()  # (column, referenced table, referenced column)
    row_count: int = -1  # -1 when it could not be counted

    def describe(self, samples: int = 5) -> str:
        """One line for an LLM prompt or an embedding: columns, types, sample values, keys."""
        cols = ", ".join(
            f"{c.name} {c.type}" + (f" (e.g. {', '.join(c.samples[:samples])})" if c.samples else "")
            for c in self.columns
        )
        keys = "".join(f"; {c} references {t}({rc})" for c, t, rc in self.foreign_keys)
        return f"table {self.name} ({self.row_count} rows): {cols}{keys}"


@dataclass(frozen=True)
class Database:
    """A database attached to a library, with its schema as the read-only connection sees it."""

    name: str
    library: str
    dialect: str
    url: str  # password redacted
    origin: str  # `config` or `attached`
    tables: tuple[Table, ...] = ()
    scores: tuple[float, ...] = ()  # per table, relevance to a question, when one was given
    error: str = ""
    groups: tuple[str, ...] = ()  # ACL groups that may query it; empty: everyone who may use the library


@dataclass(frozen=True)
class SqlResult:
    database: str
    dialect: str
    sql: str  # the statement that ran
    columns: tuple[str, ...]
    rows: tuple[tuple[object, ...], ...]
    truncated: bool
    took_ms: float = 0.0


@dataclass(frozen=True)
class Evidence:
    ref: str
    chunk_id: str
    text: str


@dataclass(frozen=True)
class Claim:
    claim_id: str
    claim: str
    refs: tuple[str, ...]
    verdict: Verdict
    confidence: float
    reason: str


@dataclass(frozen=True)
class Manifest:
    claims: tuple[Claim, ...] = ()
    supported_ratio: float = 0.0
    method: str = ""
    verified: bool = True


@dataclass(frozen=True)
class Verification:
    manifest: Manifest
    confidence: float
    abstain: bool


@dataclass(frozen=True)
class FileProgress:
    source: str
    stage: FileStage
    index: int
    total: int
    document_id: str = ""
    chunk_count: int = 0
    reason: str = ""


@dataclass
class IngestSummary:
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    failed: int = 0
    removed: int = 0
    chunks: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    entities: int = 0  # the library's knowledge graph after the run
    relations: int = 0
    communities: int = 0
    communities_summarized: int = 0  # summaries written by this run; the rest were kept
    notes: list[str] = field(default_factory=list)  # what the run did not do, and why
    rebuilt: int = 0  # of `indexed`: unchanged bytes, indexed again for a new build


@dataclass(frozen=True)
class IngestJob:
    """An ingest on the durable queue (SubmitIngest)."""

    job_id: str
    library: str
    state: str  # queued | running | done | failed | cancelled | dead
    submitted_at: str
    updated_at: str
    files_done: int = 0
    summary: IngestSummary | None = None
    error: str = ""
    attempts: int = 0
    principal: str = ""  # who submitted it


# Events of an answer stream, in the order the agent emits them.


@dataclass(frozen=True)
class StartEvent:
    trace_id: str


@dataclass(frozen=True)
class RouteEvent:
    mode: SearchMode
    classifier: str
    reason: str
    sub_questions: tuple[str, ...] = ()  # agentic plans: searched one by one
    standalone_question: str = ""  # a session's follow-up as retrieval used it
    top_k: int = 0  # hits per search the route chose; 0: the request's or the configured
    chains_facts: bool = False  # search again from what the first search found (bridge searches)
    query_mode: QueryMode = QueryMode.GENERAL  # the answer's shape, as asked or as the router chose


@dataclass(frozen=True)
class ToolCallEvent:
    tool: str
    arguments_json: str
    result_count: int
    took_ms: float


@dataclass(frozen=True)
class EvidenceEvent:
    hits: tuple[SearchHit, ...]
    grade: str
    score: float


@dataclass(frozen=True)
class DeltaEvent:
    text: str


@dataclass(frozen=True)
class VerificationEvent:
    manifest: Manifest


@dataclass(frozen=True)
class ActiveRetrieval:
    """What FLARE-style active retrieval did to one answer."""

    rounds: int = 0
    queries: tuple[str, ...] = ()
    added_chunk_ids: tuple[str, ...] = ()
    redrafted: bool = False


@dataclass(frozen=True)
class DoneEvent:
    trace_id: str
    answer: str
    citations: tuple[Citation, ...]
    confidence: float
    abstained: bool
    generator: str
    manifest: Manifest
    evidence_chunk_ids: tuple[str, ...] = ()  # what the draft was written from, in numbered order
    active_retrieval: ActiveRetrieval | None = None  # set when generation.active_retrieval_rounds > 0
    cut_by: str = ""  # the limit that stopped the LLM mid-draft (llm.max_output_tokens, ...)


AskEvent = (
    StartEvent | RouteEvent | ToolCallEvent | EvidenceEvent | DeltaEvent | VerificationEvent | DoneEvent
)


# The stores' lifecycle (ragstack/stores/snapshots.py): what Stats, snapshots and vacuum report.


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    created_at: str
    table_versions: dict[str, int]
    documents: int
    chunks: int
    bytes: int = 0  # of its copies (tantivy, catalog); LanceDB data is shared with the tables


@dataclass(frozen=True)
class LibraryStats:
    name: str
    documents: int = 0
    chunks: int = 0  # as the catalog counts them
    vector_chunks: int = 0
    lexical_chunks: int = 0
    lexical_pages: int = 0
    media_types: dict[str, int] = field(default_factory=dict)
    entities: int = 0
    relations: int = 0
    communities: int = 0
    last_indexed_at: str = ""
    embedder: str = ""  # "" the configured one, else a tuned one's name
    vector_windows: int = 0  # window vectors of the chunks embedded as several (models.window_tokens)
    builds: dict[str, int] = field(default_factory=dict)  # documents per index build


@dataclass(frozen=True)
class StoreStats:
    libraries: list[LibraryStats]
    table_versions: dict[str, int]
    lancedb_bytes: int
    tantivy_bytes: int
    catalog_bytes: int
    snapshots_bytes: int
    snapshots: int
    build: str = ""  # the index build the ingest service writes


@dataclass(frozen=True)
class StoreFreshness:
    """One store as a retrieve replica serves it (services/retrieve/freshness.py)."""

    store: str  # a LanceDB table, or `lexical`
    version: int
    checked_at: str  # when `version` was last confirmed the newest committed one, RFC 3339
    staleness_s: float  # seconds since then: how far behind the writer reads may be, at most


@dataclass(frozen=True)
class RetrieveStats:
    stores: list[StoreFreshness]
    max_staleness_s: float


@dataclass(frozen=True)
class VacuumReport:
    older_than_days: int
    versions_removed: int
    table_versions_removed: dict[str, int]
    fragments_compacted: int
    lancedb_bytes_freed: int
    tantivy_bytes_freed: int
    jobs_removed: int = 0  # ended ingest jobs older than the window (the queue's, not the stores')


_LIBRARY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


def library_name(raw: str, default: str) -> str:
    """The library a request names (or the default), checked: 1-64 of [A-Za-z0-9_.-], not dots alone."""
    name = raw or default
    if len(name) > 64 or not set(name) <= _LIBRARY_CHARS or set(name) == {"."}:
        raise InvalidArgument(
            f"invalid library name {name[:80]!r}: use 1-64 of A-Z a-z 0-9 _ . - (not only dots)"
        )
    return name


@dataclass(frozen=True)
class ItemFailure:
    """An item of a source that failed: retried after `retry_at`, or dead (out of attempts)."""

    item: str
    revision: str
    attempts: int
    error: str
    failed_at: str
    retry_at: float
    dead: bool


@dataclass(frozen=True)
class SourceState:
    """A source (services/ingest/syncing) and where it stands: its breaker, its last and next poll."""

    spec: SourceConfig
    origin: str
    paused: bool
    breaker: str
    failures: int
    last_error: str
    last_poll_at: str
    last_success_at: str
    next_poll: float  # seconds since the epoch
    last_job_id: str
