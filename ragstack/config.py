"""The one configuration: `ragstack.yaml`, typed, strict, with environment overrides.

Every key has a documented default, so an empty file (or none) is a working embedded setup.
Unknown keys are rejected with the key's dotted path in the message. Environment variables
`RAGSTACK__SECTION__KEY=value` override the file (values parsed as YAML scalars).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragstack import locations, policy
from ragstack.errors import ConfigError
from ragstack.models import CROSS_ENCODER, EMBEDDER

ENV_PREFIX = "RAGSTACK__"
# Every setting with its default and what it does: the reference, and what `ragstack init` writes.
EXAMPLE_CONFIG = Path(__file__).resolve().parent / "config.example.yaml"
SERVICE_NAMES = ("ingest", "retrieve", "agent", "verify")  # the gRPC services
WINDOW_TOKENS = 128  # the bundled embedder's training length (models.window_tokens)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Endpoint(_Strict):
    """Where a service listens (and where its peers reach it)."""

    host: str = Field("127.0.0.1", description="Bind address; also the address peers dial.")
    port: int = Field(..., ge=0, le=65535, description="TCP port; 0 picks a free one (tests).")
    dial: str = Field(
        "",
        description="The gRPC target peers dial instead of host:port, to reach every replica: e.g. "
        "dns:///retrieve.ns.svc:50052 (a headless Service) or ipv4:127.0.0.1:50052,127.0.0.1:50062; "
        "calls go round-robin over them. Empty: host:port.",
    )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def target(self) -> str:
        """What a peer dials: `dial`, or the one address this endpoint listens on."""
        return self.dial or self.address


class ServicesConfig(_Strict):
    """Listening addresses of the four gRPC services and the HTTP gateway."""

    ingest: Endpoint = Endpoint(port=50051)
    retrieve: Endpoint = Endpoint(port=50052)
    agent: Endpoint = Endpoint(port=50053)
    verify: Endpoint = Endpoint(port=50054)
    gateway: Endpoint = Endpoint(port=8080)
    grace_s: float = Field(5.0, gt=0, description="Graceful shutdown window for in-flight RPCs.")
    max_message_mb: int = Field(64, ge=1, le=1024, description="Largest gRPC message, in MiB.")
    token: str = Field(
        "",
        description="A shared secret every gRPC call must carry (authorization: Bearer); health and "
        "reflection excepted. Set it when the services listen beyond loopback; empty: none.",
    )


class ModelsConfig(_Strict):
    """The ONNX embedder (installed once by `ragstack models install`)."""

    embedder_dir: Path = Field(
        default_factory=lambda: locations.models_dir() / EMBEDDER,
        description="Folder holding model.onnx and tokenizer.json of a sentence-transformers export "
        "(default: the user's models folder, RAGSTACK_HOME/models when that is set).",
    )
    provider: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="ONNX Runtime execution provider; auto uses CUDA when available."
    )
    batch_size: int = Field(32, ge=1, le=1024)
    max_length: int = Field(256, ge=8, le=512, description="Word pieces per text; longer is truncated.")
    window_tokens: int = Field(
        WINDOW_TOKENS,
        ge=0,
        le=512,
        description="Word pieces of a dense window, the heading path included (at most max_length; "
        "0: none): a longer chunk is embedded as windows of its sentences and searched by its best "
        "one, so every word reaches the dense index. 128 is what all-MiniLM-L6-v2 was trained on; "
        "a change applies to documents ingested after it (README, Results).",
    )
    threads: int = Field(0, ge=0, description="Intra-op threads; 0 lets ONNX Runtime decide.")
    query_threads: int = Field(
        2,
        ge=0,
        description="Intra-op threads of the int8 query embedder for a lone query (0: ONNX Runtime "
        "decides), and how many queries of concurrent searches it runs at once, each on one thread: "
        "int8 vectors would depend on their batch-mates, so its queries never share a run "
        "(`ragstack bench embed`; README, Speed).",
    )
    tuned_dir: Path | None = Field(
        None,
        description="Where libraries' tuned embedders live (`ragstack tune embedder`), one folder each; "
        "default: `tuned` beside embedder_dir. Every ingest and retrieve process of a tuned library "
        "needs its folder.",
    )
    tool_env: Path = Field(
        default_factory=lambda: locations.data_home() / "tools" / "export",
        description="The export's tool environment (torch, optimum), where `ragstack tune embedder` "
        "trains; created from the package registry the first time it is needed.",
    )

    @model_validator(mode="after")
    def _window_fits(self) -> ModelsConfig:
        if self.window_tokens > self.max_length:
            raise ValueError(f"window_tokens ({self.window_tokens}) is over max_length ({self.max_length})")
        return self

    @property
    def tuned_folder(self) -> Path:
        return self.tuned_dir or self.embedder_dir.parent / "tuned"


class IngestConfig(_Strict):
    chunk_tokens: int = Field(512, ge=32, le=8192, description="Target chunk size in word pieces.")
    overlap_sentences: int = Field(1, ge=0, le=10, description="Sentences repeated at chunk starts.")
    rebuild: bool = Field(
        True,
        description="Index again a document whose bytes are unchanged but whose build (the pipeline's "
        "version, chunk_tokens, overlap_sentences) is not this service's, at its next ingest or sync. "
        "false: it keeps its chunks until its bytes change (defer a new release's re-index; `ragstack "
        "store stats` counts what waits).",
    )
    max_file_mb: float = Field(50.0, gt=0, description="Files larger than this fail with the limit named.")
    batch_chunks: int = Field(256, ge=1, description="Chunks embedded and written together.")
    crawl_max_pages: int = Field(50, ge=1, description="Crawler: pages fetched per start URL.")
    crawl_max_depth: int = Field(2, ge=0, description="Crawler: link hops from the start URL.")
    crawl_delay_s: float = Field(0.5, ge=0, description="Crawler: pause between two requests to the host.")
    graph: bool = Field(True, description="Extract entities and relations into the knowledge graph.")
    page_pictures: bool = Field(
        True,
        description="Keep each PDF and where its lines lie (in LanceDB, beside the chunks: the PDF's size "
        "again) so a citation can be shown drawn on its page (GetChunkVisual, the web UI, `ragstack "
        "visualize`); false keeps none and those calls refuse.",
    )
    graph_llm: bool = Field(
        True,
        description="Extract entities and summarise communities with the LLM when one is reachable (one "
        "call per chunk: slow on large corpora); false always uses spaCy and extractive summaries.",
    )
    graph_seed: int = Field(42, description="Louvain seed: the same rows give the same communities.")
    graph_resolution: float = Field(
        1.0, gt=0, le=10, description="Louvain resolution: higher gives more, smaller communities."
    )
    retention_days: int = Field(
        7,
        ge=0,
        le=36_500,
        description="Vacuum (`ragstack store vacuum`, the Vacuum RPC) removes LanceDB versions older than "
        "this many days; the versions snapshots pin are kept.",
    )
    min_free_mb: int = Field(
        256,
        ge=0,
        description="Megabytes (2**20 bytes) that must stay free on the data dir's disk: an ingest "
        "batch or a snapshot that would go below is refused (RESOURCE_EXHAUSTED) before it writes. "
        "0: no check.",
    )
    max_snapshots: int = Field(
        20,
        ge=1,
        le=1_000,
        description="Snapshots that may exist at once (each pins LanceDB versions Vacuum keeps); "
        "CreateSnapshot past it is refused: delete one first.",
    )
    allowed_roots: list[Path] | None = Field(
        None,
        description="Folders whose files the Ingest RPC may read by path (symlinks resolved first); "
        "anything else is refused. None: <data_dir>/inbox for a service; the one-process CLI also "
        "allows the paths its user names. Relative entries are relative to the config file.",
    )
    fetch_allow: list[str] = Field(
        default_factory=list,
        description="Crawler and URL ingest: hosts or CIDR ranges that may be fetched although they are "
        "loopback, private, link-local or otherwise internal (intranet crawling). Empty: public "
        "addresses only.",
    )
    crawl_page_timeout_s: float = Field(
        15.0, gt=0, description="Crawler: total time one page may take (connect, headers and body)."
    )
    crawl_timeout_s: float = Field(120.0, gt=0, description="Crawler: total time of one start URL's crawl.")
    crawl_max_redirects: int = Field(5, ge=0, le=20, description="Crawler: redirects followed per page.")
    max_crawls: int = Field(
        2,
        ge=1,
        le=64,
        description="Crawls one ingest service runs at once; as many more wait, the rest get 503.",
    )
    # Budgets of one document: a file over one fails alone, with the budget named.
    max_unpacked_mb: float = Field(
        512.0,
        gt=0,
        description="DOCX/PPTX/XLSX/ODF/EPUB: bytes the zip's members unpack to (summed while read).",
    )
    max_depth: int = Field(512, ge=16, le=100_000, description="HTML and XML: nesting depth of elements.")
    max_chars: int = Field(
        20_000_000, ge=1000, description="Characters of text a document may hold (in XML text or as parsed)."
    )
    max_chunks: int = Field(20_000, ge=1, description="Chunks one document may make.")
    max_pages: int = Field(2_000, ge=1, description="Pages of a PDF.")
    max_frames: int = Field(200, ge=1, description="Frames of an image (a multi-page TIFF).")
    max_frame_megapixels: float = Field(100.0, gt=0, description="Pixels of one image frame, in millions.")
    parse_timeout_s: float = Field(
        300.0, gt=0, description="Wall time to parse one PDF, Office document, HTML page or image."
    )
    parse_workers: int = Field(
        2, ge=1, le=32, description="Parser processes (each started when first needed, ~400 MB with Docling)."
    )
    parse_memory_mb: int = Field(
        4096,
        ge=512,
        description="Address space of the parser process (PDF, Office, HTML, images): a parser past it "
        "fails that file and is replaced.",
    )
    crawl_max_page_mb: float = Field(
        10.0, gt=0, description="Crawler: a page's body is refused once it grows past this (while reading)."
    )
    # Conversion by a docling-serve server (services/ingest/remote_convert.py).
    converter: Literal["local", "docling-serve"] = Field(
        "local",
        description="Who converts PDF, DOCX, PPTX, XLSX and HTML files: `local` (Docling in the parser "
        "processes) or `docling-serve` (the server at docling_serve_url, over its HTTP API, asked for "
        "the same model-free pipeline; its DoclingDocument goes through the same code as a local one, "
        "so the chunks are the same). PDF pages without a text layer are read by OCR locally either way.",
    )
    docling_serve_url: str | None = Field(
        None,
        description="docling-serve: the server's base URL, http:// or https:// (e.g. http://docling:5001); "
        "required with converter: docling-serve.",
    )
    docling_serve_timeout_s: float = Field(
        300.0,
        gt=0,
        description="docling-serve: time one file's request may take, from sending it to the answer's "
        "last byte; past it the file fails.",
    )
    docling_serve_connect_timeout_s: float = Field(
        10.0, gt=0, description="docling-serve: time to open a connection to the server."
    )
    docling_serve_max_concurrent: int = Field(
        4,
        ge=1,
        le=256,
        description="docling-serve: requests one ingest process has in flight at once; more wait their turn.",
    )
    docling_serve_max_response_mb: float = Field(
        256.0,
        gt=0,
        description="docling-serve: the largest answer read (the document as JSON); a larger one fails "
        "the file.",
    )
    docling_serve_api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="docling-serve: the NAME of an environment variable of the ingest service holding "
        "the server's API key (its DOCLING_SERVE_API_KEY), sent in the X-Api-Key header of every "
        "request; never the key itself. Read when the service starts: a variable that is not set or "
        "is empty stops the start, naming it. Unset: no key is sent.",
    )

    # Sources kept in sync (top-level `sources:`; services/ingest/syncing/).
    source_polling: bool = Field(
        True,
        description="Sources: this ingest service polls the sources (and watches their folders). False: "
        "their syncs run only when asked (`ragstack source sync`, SubmitIngest naming the source); "
        "the services a CLI command starts for itself never poll.",
    )
    job_lease_s: float = Field(
        60.0,
        ge=5,
        le=3600,
        description="Queued ingest: a worker renews its running job's lease every third of this; a job "
        "whose lease ran out (its worker died) is taken again by any worker.",
    )
    job_attempts: int = Field(
        3,
        ge=1,
        le=100,
        description="Queued ingest: times a job is started (after a failure or a dead worker, with "
        "exponential backoff) before it is dead-lettered with its last error.",
    )
    job_backoff_s: float = Field(
        10.0, gt=0, le=3600, description="Queued ingest: the first retry's delay; each later one doubles it."
    )
    job_pending_limit: int = Field(
        100,
        ge=1,
        description="Queued ingest: jobs one caller may have queued or running at once; past it "
        "SubmitIngest is refused (RESOURCE_EXHAUSTED, naming this setting).",
    )
    job_pending_mb: float = Field(
        1024.0,
        gt=0,
        description="Queued ingest: megabytes (2**20 bytes) of requests, uploaded files included, one "
        "caller's jobs queued or running may hold in the state at once; past it SubmitIngest is "
        "refused (RESOURCE_EXHAUSTED, naming this setting).",
    )
    source_tick_s: float = Field(
        1.0, gt=0, le=60, description="Sources: how often the ingester looks for a source that is due."
    )
    source_retries: int = Field(
        5,
        ge=1,
        le=100,
        description="Sources: attempts an item gets (with exponential backoff and jitter) before it is "
        "dead-lettered; `ragstack source retry` gives it new ones, and so does a new revision of it.",
    )
    source_backoff_s: float = Field(
        2.0, gt=0, description="Sources: the first retry's delay; each later one doubles it (± 20 %)."
    )
    source_backoff_max_s: float = Field(
        600.0, gt=0, description="Sources: the longest delay between two retries."
    )
    source_breaker_failures: int = Field(
        5,
        ge=1,
        le=1000,
        description="Sources: consecutive failed polls (the source unreachable or its listing refused) "
        "that open its circuit breaker; it is then not polled until the cool-down has passed.",
    )
    source_breaker_cooldown_s: float = Field(
        60.0,
        gt=0,
        description="Sources: how long an open breaker waits before one trial poll (half-open): success "
        "closes it, failure opens it again.",
    )
    source_max_items: int = Field(
        100_000, ge=1, description="Sources: items one source may list; past it the poll fails, naming it."
    )
    source_scan_timeout_s: float = Field(
        14_400.0,
        gt=0,
        description="Sources: the longest one scan of a source (its listing and one metadata check per "
        "item) may take; past it the poll or the sync fails, naming this setting, and the breaker "
        "counts it. It is looked at between requests: the one in flight then runs to its own deadline "
        "(ingest.crawl_page_timeout_s).",
    )
    source_watch: bool = Field(
        True,
        description="Sources: folders are watched for file-system events (inotify) and polled at once "
        "on a change, besides their schedule; false polls them on their schedule only.",
    )

    @field_validator("docling_serve_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("a base URL only: no credentials, query or fragment")
        return value.strip().rstrip("/")

    @model_validator(mode="after")
    def _converter_has_url(self) -> IngestConfig:
        if self.converter == "docling-serve" and not self.docling_serve_url:
            raise ValueError("ingest.converter is docling-serve: set ingest.docling_serve_url")
        return self


SOURCE_KINDS = ("folder", "http", "sitemap", "s3", "webdav")


class SourceConfig(_Strict):
    """A source kept in sync: `sources:` in the config, or `ragstack source add` (the AddSource RPC)."""

    name: str = Field(..., pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="The source's name.")
    kind: Literal["folder", "http", "sitemap", "s3", "webdav"] = Field(
        ...,
        description="folder (a folder under ingest.allowed_roots), http (one page or file by URL), "
        "sitemap (the pages a sitemap.xml lists), s3 (objects under an s3://bucket/prefix) or webdav "
        "(a WebDAV folder, walked).",
    )
    url: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="Where: a folder path, an http(s) URL, a sitemap's URL, s3://bucket/prefix, or the "
        "WebDAV folder's http(s) URL. Fetches go through the crawler's guard (ingest.fetch_allow).",
    )
    library: str = Field("", max_length=64, description="The library it feeds; empty means the default.")
    interval_s: float = Field(300.0, ge=1, le=30 * 86400, description="Seconds between two polls.")
    groups: list[str] = Field(
        default_factory=list, max_length=32, description="ACL groups of its documents; empty: public."
    )
    include: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Globs an item's path (relative to `url`) must match, e.g. `*.md` or `docs/*`; "
        "empty: every item.",
    )
    exclude: list[str] = Field(
        default_factory=list, max_length=64, description="Globs of items left out, e.g. `drafts/*`."
    )
    delete: Literal["prune", "keep"] = Field(
        "prune",
        description="An item gone from the source: `prune` removes its document from every store; "
        "`keep` leaves it indexed.",
    )
    endpoint: str | None = Field(
        None,
        max_length=2000,
        description="s3 only: the endpoint of an S3-compatible server (http(s)://host:port), checked "
        "against ingest.fetch_allow like every fetch; none: the environment's AWS_ENDPOINT_URL_S3, else "
        "AWS. Credentials come from the ingest service's environment (AWS_ACCESS_KEY_ID, ..., a role), "
        "never from the source, and sign only requests to AWS or to AWS_ENDPOINT_URL_S3: another "
        "endpoint gets unsigned requests.",
    )
    region: str | None = Field(
        None,
        max_length=64,
        description="s3 only: the bucket's region (signed into every request); none: AWS_REGION, else "
        "AWS_DEFAULT_REGION, else us-east-1.",
    )

    @field_validator("include", "exclude")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        for glob in value:
            if not glob or len(glob) > 256 or any(not ch.isprintable() for ch in glob):
                raise ValueError("a glob is 1 to 256 printable characters")
        return value

    @model_validator(mode="after")
    def _s3_options(self) -> SourceConfig:
        if self.kind != "s3" and (self.endpoint or self.region):
            raise ValueError("endpoint and region are for s3 sources only")
        return self


class RetrieveConfig(_Strict):
    top_k: int = Field(5, ge=1, description="Hits returned when a request leaves top_k at 0.")
    max_top_k: int = Field(100, ge=1, description="Largest top_k a request may ask for.")
    candidates: int = Field(50, ge=1, description="Hits each signal contributes before fusion.")
    fusion: Literal["rrf", "score"] = Field(
        policy.FUSION,
        description="Hybrid fusion: min-max normalised scores (score) or reciprocal rank (rrf).",
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    query_precision: Literal["auto", "int8", "fp32"] = Field(
        "auto",
        description="Search queries are embedded with the embedder's int8 weights (model.int8.onnx, "
        "about twice as fast on CPU; documents keep fp32 vectors) or with model.onnx (fp32); auto: int8 "
        "on CPU, fp32 on a GPU (where the int8 operators would run on the CPU).",
    )
    max_staleness_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="A retrieve replica serves the stores' newest committed version at most this old: "
        "it looks for new LanceDB versions and lexical snapshots at least this often (Stats, /metrics).",
    )
    batch_window_ms: float = Field(
        0.0,
        ge=0,
        le=50,
        description="How long the first query of a batch waits for others to embed with it (0: only "
        "those that arrived while the previous batch ran; a few ms pays on a GPU).",
    )
    dense_weight: float = Field(
        policy.DENSE_WEIGHT, ge=0, le=1, description="Score fusion: weight of dense; lexical gets the rest."
    )
    reranker: Literal["none", "cross-encoder"] = Field(
        "none",
        description="Rerank fused candidates with an ONNX cross-encoder from reranker_dir (none: no "
        "pretrained cross-encoder installs offline, so it is off until you export one).",
    )
    reranker_dir: Path = Field(
        default_factory=lambda: locations.models_dir() / CROSS_ENCODER,
        description="model.onnx + tokenizer.json (`ragstack models install cross-encoder --from DIR`).",
    )
    rerank_factor: int = Field(10, ge=1, le=50, description="Reranked candidates = top_k times this.")
    rerank_precision: Literal["fp32", "int8"] = Field(
        "fp32",
        description="The cross-encoder's weights: model.onnx, or model.int8.onnx beside it (`ragstack "
        "models install cross-encoder` writes both): int8 is about twice as fast on CPU, and `ragstack "
        "bench rerank` reports how closely its scores rank the candidates as fp32's do. fp32 by "
        "default: no trained cross-encoder here could show what int8 costs in ranking (README, Speed).",
    )
    page_search: bool = Field(
        False,
        description="Also search whole pages and lift the chunk each page hit maps to (off: README, "
        "Results).",
    )
    max_per_document: int = Field(3, ge=0, description="Hits kept per document (0: no cap).")
    max_context_chars: int = Field(6000, ge=100, description="Context expansion: longest context per hit.")
    memory_rows: int = Field(
        200_000,
        ge=0,
        description="Dense: libraries up to this many chunks are searched exactly in memory, their window "
        "vectors with them (`ragstack store stats` counts both: long chunks hold several windows each).",
    )
    ann_min_rows: int = Field(
        200_000, ge=256, description="Dense: ingest builds an IVF_PQ index once the table has this many rows."
    )
    ann_nprobes: int = Field(20, ge=1, description="Dense ANN: partitions probed per query.")
    ann_refine_factor: int = Field(10, ge=1, description="Dense ANN: candidates re-ranked exactly, times k.")
    heading_boost: float = Field(
        policy.HEADING_BOOST,
        ge=0,
        le=10,
        description="Lexical: weight of heading-path (and title) matches; text is 1.",
    )
    proximity_weight: float = Field(
        policy.PROXIMITY_WEIGHT,
        ge=0,
        le=10,
        description="Lexical: weight of term proximity, each pair of neighbouring query words found "
        "near each other in order (0: off).",
    )
    proximity_slop: int = Field(
        policy.PROXIMITY_SLOP, ge=0, le=50, description="Lexical: words allowed between such a pair."
    )
    max_score_texts: int = Field(512, ge=1, description="Most texts one Score request may carry.")
    graph_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Hybrid: weight of graph local search in score fusion (0: not searched; off: README, "
        "Results).",
    )
    graph_neighbours: int = Field(
        20, ge=0, le=200, description="Graph local search: neighbours followed per entity named in the query."
    )
    graph_communities: int = Field(
        3, ge=1, le=50, description="Graph global search: community summaries whose chunks are returned."
    )
    feedback_documents: int = Field(
        0,
        ge=0,
        le=50,
        description="Pseudo-relevance feedback (lexical and hybrid modes): the first search's best "
        "documents, taken as relevant, move a second search (0: off; it did not help on SciFact, "
        "MuSiQue or HotpotQA: README, Results).",
    )
    feedback_terms: int = Field(
        30, ge=1, le=200, description="Feedback: terms of those documents added to the lexical query (RM3)."
    )
    feedback_lexical_weight: float = Field(
        0.1,
        ge=0,
        le=0.9,
        description="Feedback: the added terms' share of the lexical query's weight (0: no second "
        "lexical search).",
    )
    feedback_dense_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Feedback: how far the query vector moves towards those documents' mean vector "
        "(Rocchio; 0: no second dense search).",
    )


class GenerationConfig(_Strict):
    abstain_threshold: float = Field(
        0.5, ge=0, le=1, description="Withhold the answer when the supported share of claims is lower."
    )
    verify_answers: bool = Field(True, description="Send every answer through the verify service.")
    max_answer_sentences: int = Field(3, ge=1, le=20, description="Extractive answers: sentences kept.")
    max_steps: int = Field(
        4, ge=1, le=10, description="Agent: searches per question (sub-questions and corrective retries)."
    )
    llm_router: bool = Field(
        True,
        description="Agent: route auto-mode questions by one structured LLM call when an LLM is reachable.",
    )
    route_timeout_s: float = Field(
        10.0, gt=0, description="Agent: the LLM router's deadline; past it the heuristic routes."
    )
    recall_memory: bool = Field(
        True, description="Agent: remember answered questions and search the documents of a similar one."
    )
    recall_threshold: float = Field(
        0.9, ge=0, le=1, description="Agent: cosine similarity at which an earlier question is recalled."
    )
    multi_hop_top_k: int = Field(
        policy.MULTI_HOP_TOP_K,
        ge=0,
        le=100,
        description="Agent, heuristic route: hits per search, and evidence kept, for a question that "
        "chains facts (two names or more, a clause about something it only describes, nested "
        "relations); 0 keeps retrieve.top_k.",
    )
    bridge_searches: int = Field(
        policy.BRIDGE_SEARCHES,
        ge=0,
        le=5,
        description="Agent: for a question that chains facts, follow-up searches made from the first "
        "search's top hits (the question and each hit's sentence that matches it best); 0: none.",
    )
    evidence_grader: Literal["score", "llm"] = Field(
        "score",
        description="Agent: grade each retrieval from the scoring signals, or by one structured LLM call "
        "when an LLM is reachable (the scores otherwise).",
    )
    llm_rewrite: bool = Field(
        True,
        description="Agent: rewrite follow-ups by one structured LLM call when reachable (else heuristics).",
    )
    read_neighbours: bool = Field(
        True, description="Agent: after evidence graded ambiguous, read the hits' neighbouring chunks once."
    )
    citation_policy: Literal["lenient", "strict", "keep"] = Field(
        "lenient",
        description="Agent: every sentence of an LLM's answer cites the documents ([n]) or says it is "
        "not from them; one with neither is removed (lenient) or withholds the answer (strict); keep "
        "leaves it for the verifier to judge unsupported.",
    )
    session_evidence: Literal["cited", "all", "none"] = Field(
        "cited",
        description="Agent, in a session: the earlier turns' evidence drafted from again: what their "
        "answers cited (cited: compacted), everything they were drafted from (all), or none.",
    )
    session_evidence_chunks: int = Field(
        6,
        ge=0,
        le=50,
        description="Agent, in a session: earlier turns' chunks carried at most, newest first.",
    )
    sessions_kept: int = Field(
        200,
        ge=1,
        description="Agent: each caller's most recently active sessions kept; an older one is forgotten "
        "(a follow-up in it starts afresh).",
    )
    session_turns_kept: int = Field(
        50, ge=3, description="Agent: the newest turns kept of each session (follow-ups read the last 3)."
    )
    feedback_kept: int = Field(
        1_000,
        ge=1,
        description="Agent: each caller's newest verdicts on answers kept (SendFeedback); older ones "
        "are forgotten.",
    )
    active_retrieval_rounds: int = Field(
        0,
        ge=0,
        le=3,
        description="Agent: FLARE-style active retrieval. After the draft is verified, its claims the "
        "verifier did not support are searched for, the new chunks join the evidence and the answer is "
        "drafted again, up to this many rounds; the first draft is held back until then. 0: off.",
    )
    active_retrieval_spans: int = Field(
        3, ge=1, le=10, description="Agent, active retrieval: unsupported claims searched for per round."
    )
    analysis_programs: bool = Field(
        True,
        description="Agent: for a question that needs computation over the found documents (totals, "
        "counts, averages over their tables; counts across files), have the LLM write a Python program "
        "run in the sandbox when an LLM is reachable; the deterministic analyses run when it fails or "
        "no LLM is reachable.",
    )
    analysis_repairs: int = Field(
        1,
        ge=0,
        le=3,
        description="Agent, analysis programs: times a failed program is sent back to the LLM with its "
        "error to be rewritten; 0: the first program only.",
    )
    analysis_timeout_s: float = Field(
        60.0, gt=0, le=600, description="Agent, analysis programs: the deadline of each reply of the LLM."
    )


class VerifyConfig(_Strict):
    support_threshold: float = Field(
        policy.SUPPORT_THRESHOLD,
        ge=0,
        le=1,
        description="Offline checker: score at or above which a claim is supported (ragstack/policy.py "
        "says what it was tuned on).",
    )
    partial_threshold: float = Field(
        policy.PARTIAL_THRESHOLD, ge=0, le=1, description="Offline checker: score for partial."
    )
    llm_judge: bool = Field(
        True, description="Decompose and judge claims with the LLM when one is reachable (offline otherwise)."
    )


class DatabaseConfig(_Strict):
    """A database attached to a library from the config file (`ragstack db attach` adds more)."""

    name: str = Field(..., pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Its name within the library.")
    url: str = Field(
        ...,
        min_length=1,
        description="sqlite:///abs/path.db (or a path, relative to this file), postgresql://role@host/db, "
        "duckdb:///abs/path.duckdb; ${NAME} is read from the environment when opened.",
    )
    library: str = Field("default", min_length=1, description="The library it answers for.")


class SqlConfig(_Strict):
    """Databases as sources: read-only, parsed SQL (see the README's fence)."""

    databases: list[DatabaseConfig] = Field(default_factory=list, description="Databases attached here.")
    max_rows: int = Field(200, ge=1, le=10_000, description="Row cap of one query (LIMIT added/tightened).")
    timeout_s: float = Field(5.0, gt=0, le=300, description="Statement timeout of one query.")
    schema_ttl_s: float = Field(
        60.0, ge=0, description="How long a database's introspected schema is reused."
    )
    answer_rows: int = Field(20, ge=1, le=200, description="Agent: rows of a result an answer lists.")
    allowed_roots: list[Path] = Field(
        default_factory=list,
        description="Folders under which SQLite and DuckDB files may be attached through the API "
        "(resolved, no symlink escape). Empty: none (databases in ragstack.yaml are not limited).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="PostgreSQL hosts (names or CIDR ranges; * is any) that AttachDatabase may name. "
        "Empty: none.",
    )
    secret_env: list[str] = Field(
        default_factory=list,
        description="Environment variables an attached URL may name as `${NAME}`, in the password "
        "position only. Empty: none.",
    )


class StorageConfig(_Strict):
    """Where the stores live beyond one machine: LanceDB on object storage, and lexical index
    snapshots that ingest publishes there for any number of retrieve replicas (deploy/README.md)."""

    lancedb_uri: str = Field(
        "",
        description="Where the LanceDB tables live: empty is <data_dir>/lancedb; s3://bucket/prefix, "
        "gs://bucket/prefix or az://container/prefix to share them between machines.",
    )
    options: dict[str, str] = Field(
        default_factory=dict,
        description="Object store options, LanceDB's keys (aws_endpoint, aws_region, allow_http, ...); "
        "credentials are best left to the environment (AWS_ACCESS_KEY_ID, ...).",
    )
    lexical_snapshots: str = Field(
        "",
        description="Object store URL (s3://, gs://, az://, file:///) where ingest publishes the lexical "
        "index after each commit and retrieve reads it; empty: the shared <data_dir>/tantivy.",
    )
    snapshot_poll_s: float = Field(
        5.0,
        gt=0,
        description="How often a retrieve replica looks for a new snapshot at a search; "
        "retrieve.max_staleness_s when that is shorter.",
    )

    def lancedb(self, data_dir: Path) -> Path | str:
        return self.lancedb_uri or data_dir / "lancedb"


class StateConfig(_Strict):
    """Where the shared state lives (catalog, job queue, sessions, recall memory, database
    registry, feedback, enrichment cache, sources): SQLite files in data_dir for one machine, or
    one PostgreSQL database that every service process shares (deploy/README.md)."""

    url: str = Field(
        "",
        description="Empty: SQLite files in data_dir. postgresql://user@host:5432/db: PostgreSQL, a "
        "schema per store; the password is best left to password_env.",
    )
    password_env: str = Field("", description="Environment variable holding the PostgreSQL password.")
    schema_prefix: str = Field(
        "ragstack",
        pattern=r"^[a-z][a-z0-9_]{0,30}$",
        description="PostgreSQL schemas are <prefix>_<store>: two deployments can share a database.",
    )
    auto_migrate: bool = Field(
        False,
        description="Apply a new release's schema changes at start; false: a service refuses to start "
        "until `ragstack migrate` has run. New stores are always created whole.",
    )
    connect_timeout_s: float = Field(10.0, gt=0, le=300, description="PostgreSQL connect timeout.")

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and urlsplit(value).scheme not in ("postgresql", "postgres"):
            raise ValueError("must be empty (SQLite) or a postgresql:// URL")
        return value


class LLMConfig(_Strict):
    enabled: bool = Field(True, description="Use Ollama when reachable; false forces the offline paths.")
    host: str = Field("http://127.0.0.1:11434", description="Ollama's base URL.")
    model: str = Field("llama3.2:3b", description="Model name as Ollama knows it.")
    timeout_s: float = Field(
        120.0,
        gt=0,
        le=86_400,
        description="Deadline of one generation, streamed or not (streamed: the waits for its "
        "pieces, summed): a draft still being written then is cut (DoneEvent.cut_by).",
    )
    max_output_tokens: int = Field(
        1024,
        ge=16,
        le=131072,
        description="Most tokens one generation writes (Ollama's num_predict; its own default is "
        "unlimited): a draft that reaches it is cut at its last finished sentence "
        "(DoneEvent.cut_by); a structured answer may write twice as many, past that it counts as "
        "failed.",
    )
    max_concurrent: int = Field(
        4,
        ge=1,
        le=256,
        description="Generations one process runs at once (set it to the server's OLLAMA_NUM_PARALLEL); "
        "callers waiting for one take turns, and a wait past llm.timeout_s takes the offline path.",
    )
    probe_timeout_s: float = Field(1.0, gt=0, description="Deadline of the reachability check.")
    temperature: float = Field(0.1, ge=0, le=2)


class DeadlinesConfig(_Strict):
    """Deadline (seconds) of every outbound RPC, per callee."""

    ingest_s: float = Field(3600.0, gt=0)
    retrieve_s: float = Field(10.0, gt=0)
    verify_s: float = Field(30.0, gt=0)
    agent_s: float = Field(300.0, gt=0)
    health_s: float = Field(2.0, gt=0)


class ApiKey(_Strict):
    """One API key: who it is, what it may do, where, and which documents it sees."""

    name: str = Field(..., pattern=r"^[A-Za-z0-9_.@-]{1,64}$", description="The principal's name.")
    key: str = Field("", description="The key itself (env-friendly), or give key_sha256 instead.")
    key_sha256: str = Field(
        "", pattern=r"^([0-9a-f]{64})?$", description="SHA-256 of the key, hex (the key not stored)."
    )
    role: Literal["reader", "writer", "admin"] = Field(
        "reader", description="reader: ask, read; writer: + ingest, delete; admin: + databases, stores."
    )
    libraries: list[str] = Field(
        default_factory=lambda: ["*"],
        min_length=1,
        description="Libraries it may use; * is all (an admin's must be *).",
    )
    groups: list[str] = Field(
        default_factory=list,
        description="ACL groups whose documents it sees besides those without groups; * is all "
        "(admins see all).",
    )

    @field_validator("key")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if value and len(value) < 16:
            raise ValueError("a key must be at least 16 characters")
        return value

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value == "local":
            raise ValueError("`local` is reserved for the caller without a key")
        return value

    @model_validator(mode="after")
    def _one_secret(self) -> ApiKey:
        if bool(self.key) == bool(self.key_sha256):
            raise ValueError("give exactly one of key and key_sha256")
        return self

    @model_validator(mode="after")
    def _admins_are_unscoped(self) -> ApiKey:
        # Snapshots, vacuum, statistics and everyone's jobs span every library: a scope on an admin
        # would read as a limit it is not.
        if self.role == "admin" and self.libraries != ["*"]:
            raise ValueError(
                f"key {self.name!r}: an admin uses every library, so its libraries must be ['*'] "
                f"(not {self.libraries[:5]}); give a library's keeper the writer role instead"
            )
        return self


class GatewayConfig(_Strict):
    max_upload_mb: float = Field(
        100.0, gt=0, description="POST /v1/ingest bodies over this are refused (413)."
    )
    max_request_kb: int = Field(64, ge=1, description="Other request bodies over this are refused (413).")
    api_keys: list[ApiKey | str] = Field(
        default_factory=list,
        description="Keys accepted in X-API-Key (or Authorization: Bearer) on every route but health; "
        "each {name, key or key_sha256, role, libraries, groups}. A plain string is an admin key (named "
        "key1, key2, ...). Empty: no authentication, every caller the local admin (loopback only). "
        "Env: comma-separated plain keys, or a JSON list.",
    )
    rate_limit_per_minute: int = Field(
        0, ge=0, description="Requests per minute per API key (per client address without keys); 0: no limit."
    )
    max_in_flight_per_caller: int = Field(
        64,
        ge=0,
        description="Requests one caller (API key, or client address without keys) may have in progress "
        "at once, a stream until it ends; past it 429, naming this setting. 0: no limit.",
    )
    cors_origins: list[str] = Field(default_factory=list, description="Origins allowed by CORS; empty: none.")
    keep_alive_s: int = Field(
        75,
        ge=1,
        le=3600,
        description="Seconds an idle HTTP connection is kept for the client's next request. Keep it above "
        "the idle timeout of the clients' connection pools and of a load balancer in front (often 60 s): "
        "a request sent on a connection just as the gateway closes it fails (a reset, or a 502 from the "
        "balancer).",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses (or CIDR ranges) of reverse proxies whose X-Forwarded-For gives the "
        "client's address; empty: none is believed, the peer's address counts.",
    )
    trusted_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"],
        description="Host headers accepted (e.g. rag.example.com; *.example.com; * is any). The default, "
        "loopback names, refuses DNS rebinding; set it when the gateway is reached by another name.",
    )
    mcp: Literal["off", "read-only", "on"] = Field(
        "on",
        description="The MCP server at /mcp (Streamable HTTP), with the API keys' roles and scopes: on; "
        "read-only (no ingest tool); off.",
    )

    @field_validator("mcp", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML (and so an environment override) reads a bare on/off as a boolean.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("api_keys", "cors_origins", "trusted_hosts", "trusted_proxies", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value


class TelemetryConfig(_Strict):
    otlp_endpoint: str | None = Field(None, description="OTLP/gRPC collector; none means no exporter.")
    service_name: str = "ragstack"
    log_format: Literal["text", "json"] = Field(
        "text", description="json: one JSON object per log line, with the request id."
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Prometheus /metrics of a service run alone (the gateway serves its own).",
    )


class TracesConfig(_Strict):
    enabled: bool = Field(True, description="Write one JSON trace per query.")
    retention: int = Field(
        200, ge=1, description="Each caller's newest traces kept; its older ones are deleted."
    )


class Config(_Strict):
    data_dir: Path = Field(
        default_factory=locations.data_dir,
        description="Stores, caches and traces (default: the user's data folder, RAGSTACK_HOME/data "
        "when that is set; a relative path is relative to the config file).",
    )
    library: str = Field("default", min_length=1, description="Library used when a request names none.")
    services: ServicesConfig = Field(default_factory=ServicesConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    retrieve: RetrieveConfig = Field(default_factory=RetrieveConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    sql: SqlConfig = Field(default_factory=SqlConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    deadlines: DeadlinesConfig = Field(default_factory=DeadlinesConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    sources: list[SourceConfig] = Field(
        default_factory=list,
        max_length=1000,
        description="Sources the ingest service keeps in sync (see `ragstack source`); names are unique.",
    )

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, value: list[SourceConfig]) -> list[SourceConfig]:
        names = [s.name for s in value]
        if len(names) != len(set(names)):
            raise ValueError("two sources have the same name")
        return value

    @property
    def traces_dir(self) -> Path:
        return self.data_dir / "traces"


def _apply_env(raw: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX):
            continue
        keys = [k.lower() for k in name[len(ENV_PREFIX) :].split("__") if k]
        if not keys:
            continue
        node = raw
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment {name}: {'.'.join(keys)} is not a section")
            node = child
        node[keys[-1]] = yaml.safe_load(value) if value != "" else None


def _describe(err: ValidationError, origin: str) -> str:
    lines = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(root)"
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{origin}: {key}: {msg}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Reads `path` (if given and present), applies environment overrides, validates.

    Relative paths in the config are resolved against the config file's folder, or the
    working directory when there is no file.
    """
    raw: dict[str, Any] = {}
    base = Path.cwd()
    origin = "defaults"
    if path is not None:
        if not path.exists():
            raise ConfigError(f"config file {path} does not exist")
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
        raw = loaded or {}
        base = path.resolve().parent
        origin = str(path)
    _apply_env(raw, environ or {})
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_describe(err, origin)) from None
    if not cfg.data_dir.is_absolute():
        cfg.data_dir = base / cfg.data_dir
    if not cfg.models.embedder_dir.is_absolute():
        cfg.models.embedder_dir = base / cfg.models.embedder_dir
    if not cfg.retrieve.reranker_dir.is_absolute():
        cfg.retrieve.reranker_dir = base / cfg.retrieve.reranker_dir
    if cfg.ingest.allowed_roots is not None:
        cfg.ingest.allowed_roots = [r if r.is_absolute() else base / r for r in cfg.ingest.allowed_roots]
    cfg.sql.allowed_roots = [r if r.is_absolute() else base / r for r in cfg.sql.allowed_roots]
    for source in cfg.sources:
        if source.kind == "folder" and not Path(source.url).expanduser().is_absolute():
            source.url = str(base / source.url)
    for db in cfg.sql.databases:  # a bare relative file path is relative to the config file
        if "://" not in db.url and not Path(db.url).expanduser().is_absolute():
            db.url = str(base / db.url)
    return cfg


def default_config_path(cwd: Path | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """`./ragstack.yaml` when it exists, else the user's (see `locations.user_config`), else none."""
    for candidate in ((cwd or Path.cwd()) / locations.CONFIG_NAME, locations.user_config(environ)):
        if candidate.is_file():
            return candidate
    return None
