"""The ingest pipeline: read → fingerprint → parse → chunk → embed → extract entities → write the
stores → catalog; after the run, the graph's communities.

Documents are prepared one by one and written in batches: the chunks of a batch are embedded in
one call (sorted by length, so little padding) and each store is written once per batch. Three
stages overlap: while one thread embeds batch N, another reads, parses and chunks the documents
of batch N+1, and a third writes batch N-1 to the stores, then extracts the entities of batch N
(at most a batch ahead and one in flight, so memory stays bounded and the writes stay in order).
A file that fails is reported and skipped; the batch goes on. The catalog row (with the
fingerprint) is written after the stores, so a crash before it leaves the documents to be redone
by the next run.

Document ACLs: the groups of an ingest go with every document it writes, onto each of its chunks
and pages in every store and onto its graph rows. A document is unchanged only when its content and
its groups are: one ingested again with other groups is indexed again, so the new ACL reaches every
store in the same batch commit as any other change. Nor is one whose build (services/ingest/build.py:
the pipeline's version and chunk settings) is not this pipeline's: a fix or a new setting reaches it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import numpy as np
from opentelemetry import trace

from ragstack.config import WINDOW_TOKENS
from ragstack.disk import full_disk
from ragstack.domain import (
    Chunk,
    Document,
    FileProgress,
    FileStage,
    IngestSummary,
    PageText,
    acl_allows,
    acl_groups,
)
from ragstack.errors import (
    Cancelled,
    DocumentNotFound,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    RagstackError,
    ResourceExhausted,
    Unavailable,
)
from ragstack.knowledge_graph import EntityMention, Relation
from ragstack.state.locks import SharedLock
from ragstack.stores.catalog import EVERY_COMMUNITY, Catalog
from ragstack.stores.originals import Original, Originals
from ragstack.stores.vectors import EmbedderChanged
from ragstack.telemetry import stoppable_span
from services.ingest import readers
from services.ingest.ahead import Ahead
from services.ingest.budgets import Budgets
from services.ingest.build import index_build, why_again
from services.ingest.chunker import chunk_markdown, split_pages
from services.ingest.dense_windows import embed_chunks
from services.ingest.enrich import Enricher
from services.ingest.graph_index import CommunityCounts, GraphIndex
from services.ingest.parse_worker import ParsePool, is_heavy
from services.ingest.remote_convert import DoclingServe
from services.ingest.sources import DocItem, Rejected, SourceItem, expand
from services.ingest.unit_of_work import Change, LexicalWriter, UnitOfWork, VectorWriter

log = logging.getLogger(__name__)
tracer = trace.get_tracer("ragstack.ingest")


class EmbedderPort(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
    def count_tokens(self, text: str) -> int: ...


@dataclass
class _Prepared:
    index: int
    item: DocItem
    document: Document
    chunks: list[Chunk]
    pages: list[PageText]
    original: Original | None = None  # a PDF kept for its pictures
    again: str = ""  # why a document with unchanged bytes is indexed again (its build changed)


class IngestPipeline:
    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorWriter,
        lexical: LexicalWriter,
        embedder: EmbedderPort,
        chunk_tokens: int,
        overlap_sentences: int,
        max_file_bytes: int,
        batch_chunks: int = 256,
        ann_min_rows: int = 200_000,
        graph: GraphIndex | None = None,
        enricher: Enricher | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        clock: Callable[[], float] = time.monotonic,
        budgets: Budgets | None = None,
        parser: ParsePool | None = None,
        originals: Originals | None = None,
        page_pictures: bool = True,
        converter: DoclingServe | None = None,
        shared: SharedLock | None = None,
        tuned: Callable[[str], EmbedderPort] | None = None,
        window_tokens: int = WINDOW_TOKENS,
        rebuild: bool = True,
        room: Callable[[], None] = lambda: None,
    ) -> None:
        """`budgets`: of one document (services/ingest/budgets.py); `parser`: the worker process
        pool that parses the formats whose parsers can run away (in this process when None);
        `originals`: where PDFs are kept with their lines' positions (when `page_pictures`; a
        removed document's go in any case); `converter`: a docling-serve server that converts PDF,
        Office and HTML files instead of Docling here (`ingest.converter`); `shared`: the lock of
        the ingest workers in other processes that write the same stores (services/ingest/unit_of_work.py);
        `tuned`: a tuned embedder by name, for a library whose vectors one made (ragstack/tuning);
        `window_tokens`: a longer chunk is embedded in windows (services/ingest/dense_windows.py);
        `rebuild`: a document of another build (services/ingest/build.py) is indexed again, else it
        counts as unchanged until its bytes or groups change (`ingest.rebuild`); `room`: raises
        ResourceExhausted when the stores' disk is too full to write (before a run and each batch)."""
        self._catalog = catalog
        self._vectors = vectors
        self._lexical = lexical
        self._embedder = embedder
        self._tuned = tuned
        self._window_tokens = window_tokens
        self._chunk_tokens = chunk_tokens
        self._overlap = overlap_sentences
        self._build = index_build(chunk_tokens, overlap_sentences)
        self._rebuild = rebuild
        self._room = room
        self._max_bytes = max_file_bytes
        self._batch_chunks = batch_chunks
        self._ann_min_rows = ann_min_rows
        self._graph = graph
        self._enricher = enricher
        self._now = now
        self._clock = clock
        self._budgets = budgets or Budgets()
        self._parser = parser
        self._converter = converter
        # Runs go on side by side (a small ingest beside a long one); their batches, removals and
        # deletes are written one unit at a time, and the ANN build and the graph's refresh wait.
        self._keep_originals = originals is not None and page_pictures
        self._stores = UnitOfWork(catalog, vectors, lexical, graph, originals, shared)
        self._extract_lock = threading.Lock()  # spaCy's pipeline is not to be run by two threads
        self._stores.recover()  # a unit a crash interrupted: finished or undone before anything else

    @property
    def build(self) -> str:
        """The index build this pipeline writes (services/ingest/build.py)."""
        return self._build

    def holds(self, build: str) -> bool:
        """Whether a document of this build, its bytes and groups unchanged, is not indexed again."""
        return build == self._build or not self._rebuild

    def run(
        self,
        items: Sequence[SourceItem | Rejected],
        library: str,
        prune_roots: Sequence[str] = (),
        enrich: bool = False,
        groups: Sequence[str] = (),
        caller: tuple[str, ...] | None = None,
        removals: Sequence[str] = (),
        cancelled: threading.Event | None = None,
    ) -> Generator[FileProgress | IngestSummary, None, None]:
        """Yields per-document progress events, then the summary. With `prune_roots`, documents of
        the library whose source lies under one of them but was not seen this time are removed.
        With `enrich`, every new chunk gets the LLM's situating sentence first (when one answers).
        `groups`: the ACL groups of every document written (empty: public). `caller`: the ACL of
        who ingests (None: sees all); a document it may not see is neither replaced nor pruned.
        `removals`: ids of documents to remove (a source's items gone), with the pruned ones. Once
        `cancelled` is set, a parse or conversion in flight fails (see ParsePool, DoclingServe), a
        batch being embedded, enriched or having its entities extracted is dropped when the slice
        of it in hand is done, and the run raises Cancelled once the batch before it is written (a
        run that had nothing left to embed ends as usual)."""
        if not items and not prune_roots and not removals:
            raise InvalidArgument("nothing to ingest: give paths or files")
        acl = acl_groups(groups)
        self._room()
        checkpoint = _checkpoint(cancelled)
        start = self._clock()
        docs = expand(items, library)
        summary = IngestSummary(files=len(docs))
        enriching = False
        if enrich:
            enriching = self._enricher is not None and self._enricher.available()
            if not enriching:
                summary.notes.append(
                    "enrichment skipped: no LLM reachable (llm.host), chunks indexed as they are"
                )
        known = self._catalog.states(library)

        # Files a docling-serve server converts are prepared up to its cap at once (the waits on
        # it overlap); the run's other files one at a time, as on one thread: a run holds at most
        # one parser process, and parsing here is no faster for being spread over threads.
        remote = self._converter
        workers = remote.max_concurrent if remote is not None else 1
        local = threading.Lock()

        def prepare(entry: tuple[int, DocItem | Rejected]) -> _Prepared | None:
            index, doc = entry
            if isinstance(doc, Rejected):
                return None
            if remote is not None and remote.converts(doc.source, doc.kind):
                return self._prepare(doc, library, known, index, acl, caller, cancelled)
            with local:
                return self._prepare(doc, library, known, index, acl, caller, cancelled)

        pending: list[_Prepared] = []
        # Leaving the block stops the parsing ahead (the files in hand are finished) and waits for
        # the batch in flight, also when the caller stops reading. The parsing stays at most a
        # batch of chunks ahead, plus the files in hand; events and writes keep the files' order.
        with (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-write") as writer,
            Ahead(
                enumerate(docs, start=1),
                prepare,
                _chunk_count,
                self._batch_chunks,
                "ingest-parse",
                workers=workers,
            ) as ahead,
        ):
            in_flight: Future[list[FileProgress]] | None = None
            try:
                for (index, doc), prepared in ahead:
                    ready = yield from _announce(index, doc, prepared, summary, len(docs))
                    if ready is None:
                        continue
                    pending.append(ready)
                    if sum(len(p.chunks) for p in pending) >= self._batch_chunks:
                        in_flight = yield from self._flush(
                            pending, library, summary, len(docs), writer, in_flight, enriching, checkpoint
                        )
                        pending = []
                in_flight = yield from self._flush(
                    pending, library, summary, len(docs), writer, in_flight, enriching, checkpoint
                )
            except Cancelled:  # the batch handed over before is written all the same: its outcomes count
                yield from _drain(summary, in_flight)
                raise
            yield from _drain(summary, in_flight)
        if summary.indexed or not self._vectors.has_ann_index():  # (one a stopped run left out)
            try:
                with tracer.start_as_current_span("ingest.ann_index"), self._stores.exclusive():
                    self._vectors.build_ann_index(self._ann_min_rows)
            except Exception:  # exact search still works; the next run tries again
                log.exception("building the ANN index failed")
        if summary.rebuilt:
            summary.notes.append(
                f"{summary.rebuilt} documents with unchanged bytes were indexed again: they had been built"
                f" other than {self._build} (by an older pipeline, or with other ingest.chunk_tokens or"
                " ingest.overlap_sentences)"
            )
        seen = {doc.document_id for doc in docs if isinstance(doc, DocItem)}
        yield from self._prune(library, prune_roots, seen, summary, len(docs), caller, set(removals))
        if self._graph is not None:
            self._refresh_graph(library, summary)
        summary.seconds = self._clock() - start
        yield summary

    def _refresh_graph(self, library: str, summary: IngestSummary) -> None:
        """The library's communities made again when writes touched its graph since they were last
        made (in this run or in any other: the catalog says), else only counted; and those of any
        library emptied since its own refresh failed, which would otherwise outlive its documents."""
        try:
            emptied = [e for e in self._catalog.graph_emptied() if e != library]
        except Exception:  # what this run or delete did is done: only that cleaning waits
            log.exception("listing the emptied libraries' communities failed")
            emptied = []
        for other in emptied:
            self._refresh_communities(other, emptied=True)
        counts = self._refresh_communities(library)
        if counts is not None:
            summary.entities, summary.relations = counts.entities, counts.relations
            summary.communities, summary.communities_summarized = counts.communities, counts.summarized

    def _refresh_communities(self, library: str, emptied: bool = False) -> CommunityCounts | None:
        """`emptied`: only if the library still has no documents (another worker may have begun
        writing to it since it was listed; its own run will refresh it)."""
        assert self._graph is not None
        try:
            with tracer.start_as_current_span("ingest.communities"), self._stores.exclusive():
                if emptied and library not in self._catalog.graph_emptied():
                    return None
                touched = self._catalog.graph_touched(library)  # under the lock: no write in between
                if not touched:
                    return self._graph.counts(library)
                counts = self._graph.refresh(library, None if EVERY_COMMUNITY in touched else touched)
                self._catalog.graph_refreshed(library)
                return counts
        except Exception:  # the chunks are indexed; the touched keys stay: the next run tries again
            log.exception("refreshing the graph communities of %s failed", library)
            return None

    def _prune(
        self,
        library: str,
        roots: Sequence[str],
        seen: set[str],
        summary: IngestSummary,
        total: int,
        caller: tuple[str, ...] | None,
        removals: set[str],
    ) -> Iterator[FileProgress]:
        if not roots and not removals:
            return
        gone = [
            doc
            for doc in self.list_documents(library, caller)
            if doc.document_id not in seen
            and (doc.document_id in removals or any(_under(doc.source, r) for r in roots))
        ]
        if not gone:
            return
        # All of them or none (a failure raises); the graph's communities are refreshed after the run.
        self._stores.apply(Change(library, [doc.document_id for doc in gone]))
        for doc in gone:
            summary.removed += 1
            yield FileProgress(doc.source, FileStage.REMOVED, total, total, doc.document_id)

    def _prepare(
        self,
        item: DocItem,
        library: str,
        known: dict[str, tuple[str, tuple[str, ...], str]],
        index: int,
        groups: tuple[str, ...],
        caller: tuple[str, ...] | None,
        cancelled: threading.Event | None,
    ) -> _Prepared | None:
        state = known.get(item.document_id)
        if state is not None and not acl_allows(caller, state[1]):
            # Said before the file is read or compared, so the answer is the same whatever the
            # hidden document holds; only that one exists at this source is told.
            raise PermissionDenied(
                "a document you may not see (its ACL groups) is already indexed from this source; "
                "it is replaced only by a caller in one of its groups"
            )
        if item.size > self._max_bytes:
            raise InvalidArgument(
                f"file is {item.size / 1e6:.1f} MB, over the limit of {self._max_bytes / 1e6:.1f} MB "
                "(ingest.max_file_mb)"
            )
        data = item.read()
        fingerprint = hashlib.sha256(data).hexdigest()
        again = ""
        if state is not None and state[:2] == (fingerprint, groups):
            if self.holds(state[2]):
                return None
            again = why_again(state[2], self._build)
        with stoppable_span(tracer, "ingest.parse", {"source": item.source}):
            if self._converter is not None and self._converter.converts(item.source, item.kind):
                # On this thread, not in a parser process: why in services/ingest/remote_convert.py.
                parsed = self._converter.parse(
                    item.source, data, item.kind, self._budgets, self._parser, cancelled
                )
            elif self._parser is not None and is_heavy(item.source, item.kind):
                parsed = self._parser.parse(item.source, data, item.kind, cancelled)
            else:
                parsed = readers.parse(item.source, data, item.kind, self._budgets)
        with tracer.start_as_current_span("ingest.chunk"):
            pieces = chunk_markdown(
                parsed.markdown, parsed.title, self._chunk_tokens, self._overlap, self._embedder.count_tokens
            )
        self._budgets.check_chunks(len(pieces))
        if not pieces:
            raise InvalidArgument("no text to index")
        chunks = [
            Chunk(
                chunk_id=f"{item.document_id}:{i}",
                document_id=item.document_id,
                library=library,
                text=p.text,
                heading_path=p.heading_path,
                pages=p.pages,
                position=i,
                title=parsed.title,
                source=item.source,
                media_type=parsed.media_type,
                groups=groups,
            )
            for i, p in enumerate(pieces)
        ]
        document = Document(
            document_id=item.document_id,
            library=library,
            source=item.source,
            revision=item.revision,
            fingerprint=fingerprint,
            title=parsed.title,
            media_type=parsed.media_type,
            chunk_count=len(chunks),
            groups=groups,
            build=self._build,
        )
        # Whole pages go to the lexical index too; a page-less document split into several chunks
        # goes whole, as page 0.
        page_texts = split_pages(parsed.markdown) or ([(0, parsed.markdown)] if len(chunks) > 1 else [])
        pages = [
            PageText(item.document_id, library, page, text, parsed.title, parsed.media_type, groups)
            for page, text in page_texts
        ]
        original = None
        if self._keep_originals and parsed.layout is not None:
            original = Original(item.document_id, parsed.media_type, data, parsed.layout)
        return _Prepared(index, item, document, chunks, pages, original, again)

    def _flush(
        self,
        batch: list[_Prepared],
        library: str,
        summary: IngestSummary,
        total: int,
        writer: ThreadPoolExecutor,
        in_flight: Future[list[FileProgress]] | None,
        enriching: bool,
        checkpoint: Callable[[], None],
    ) -> Generator[FileProgress, None, Future[list[FileProgress]] | None]:
        """Embeds the batch here, waits for the batch before it to be written, then hands this one
        to the writer thread; returns its future. `checkpoint` raises Cancelled once the run is
        cancelled: the batch is dropped."""
        if not batch:
            return in_flight
        self._room()  # the batches before are written (or in flight); this one is not started
        chunks = [c for p in batch for c in p.chunks]
        if enriching and self._enricher is not None:
            with stoppable_span(tracer, "ingest.enrich", {"chunks": len(chunks)}):
                excerpts = {p.item.document_id: "\n\n".join(c.text for c in p.chunks[:4]) for p in batch}
                chunks = self._enricher.enrich(chunks, excerpts, checkpoint)
        # The entities need no vectors: the writer thread extracts them while this batch is embedded
        # (after writing the batch before it), so the last batch's extraction is no tail either.
        dropped = threading.Event()  # set unless the batch is handed to the writer: extraction stops
        extracted = writer.submit(self._extract, chunks, dropped)
        handed = False
        try:
            try:
                with stoppable_span(tracer, "ingest.embed", {"chunks": len(chunks)}):
                    embedder = self._vectors.library_embedder(library)
                    vectors = self.embed(embedder, chunks, checkpoint)
            except Cancelled:
                raise
            except Exception as err:
                for p in batch:
                    yield _count(
                        summary, _failed(p.item.source, p.item.document_id, p.index, total, _reason(err))
                    )
                return in_flight
            for p in batch:
                yield FileProgress(
                    p.item.source, FileStage.EMBEDDED, p.index, total, p.item.document_id, len(p.chunks)
                )
            yield from _drain(summary, in_flight)
            written = writer.submit(
                self._write, batch, library, chunks, (embedder, vectors), extracted, total
            )
            handed = True
            return written
        finally:
            if not handed:  # failed, cancelled, or the run closed: nobody waits for its entities
                dropped.set()

    def embed(
        self,
        name: str,
        chunks: Sequence[Chunk | tuple[Sequence[str], str]],
        checkpoint: Callable[[], None] = lambda: None,
    ) -> list[np.ndarray]:
        """Each chunk's (or (heading path, text)'s) window vectors, by the configured embedder ("")
        or a tuned one; `checkpoint` runs between slices of the work (it raises to stop it)."""
        items = [(c.heading_path, c.text) if isinstance(c, Chunk) else c for c in chunks]
        return embed_chunks(self.embedder(name), items, self._window_tokens, checkpoint)

    def embedder(self, name: str) -> EmbedderPort:
        """The configured embedder (""), or a tuned one by name."""
        if not name:
            return self._embedder
        if self._tuned is None:
            raise FailedPrecondition(f"this ingest service has no tuned embedders, and {name!r} is one")
        return self._tuned(name)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """The stores to oneself (services/ingest/unit_of_work.py), for a write outside a unit."""
        with self._stores.exclusive():
            yield

    def _write(
        self,
        batch: list[_Prepared],
        library: str,
        chunks: list[Chunk],
        embedded: tuple[str, list[np.ndarray]],
        extracted: Future[tuple[list[EntityMention], list[Relation]]],
        total: int,
    ) -> list[FileProgress]:
        """Writes the batch to every store (on the writer thread, after its extraction, which the
        same thread ran first); returns its documents' outcomes. `embedded`: the model the vectors
        come from, and the vectors; when a tuning gave the library another since, the batch is
        embedded again with that one."""
        embedder, vectors = embedded
        ids = [p.item.document_id for p in batch]
        graph = extracted.result()
        indexed_at = self._now().isoformat()
        docs = [Document(**{**p.document.__dict__, "indexed_at": indexed_at}) for p in batch]
        change = Change(
            library,
            ids,
            docs,
            chunks,
            vectors,
            [pg for p in batch for pg in p.pages],
            *graph,
            groups={p.item.document_id: p.document.groups for p in batch},
            originals=[p.original for p in batch if p.original is not None],
            embedder=embedder,
        )
        try:
            for _ in range(3):
                try:
                    self._stores.apply(change)
                    break
                except EmbedderChanged as changed:
                    vectors = self.embed(changed.embedder, chunks)
                    change = replace(change, vectors=vectors, embedder=changed.embedder)
            else:
                raise Unavailable(f"library {library!r}'s embedder kept changing while a batch was written")
        except Exception as err:
            # A full disk fails every batch after this one too: the run stops, as the room check
            # stops it before a batch (a failure that left the disk under its floor says so too).
            if (full := full_disk(err)) is not None:
                log.error("writing a batch of %d documents failed (%s); it was rolled back", len(batch), full)
                raise ResourceExhausted(
                    f"writing a batch of {len(batch)} documents failed: a disk the stores write to is "
                    f"full ({full}). The batch's writes are undone (at once, or before the next write "
                    "where the full disk stopped that too), the documents before it stay indexed, and "
                    "the run stopped: free space, then ingest again (ingest.min_free_mb keeps room "
                    "on the data directory's disk, so that a run stops before a store's write fails)"
                ) from None
            log.exception("writing a batch of %d documents failed; it was rolled back", len(batch))
            self._room()
            return [_failed(p.item.source, p.item.document_id, p.index, total, _reason(err)) for p in batch]
        return [
            FileProgress(
                p.item.source, FileStage.INDEXED, p.index, total, p.item.document_id, len(p.chunks), p.again
            )
            for p in batch
        ]

    def _extract(
        self, chunks: list[Chunk], dropped: threading.Event
    ) -> tuple[list[EntityMention], list[Relation]]:
        """Entities and relations of a batch; none (logged) when extraction fails, which never
        fails the documents themselves; none, stopping at the next chunk, once the batch is
        `dropped` (it will not be written)."""
        if self._graph is None:
            return [], []
        try:
            with tracer.start_as_current_span("ingest.graph", attributes={"chunks": len(chunks)}):
                with self._extract_lock:
                    return self._graph.extract(chunks, _checkpoint(dropped))
        except Cancelled:
            return [], []
        except Exception:
            log.exception("entity extraction failed for a batch of %d chunks", len(chunks))
            return [], []

    def libraries(self) -> list[tuple[str, int, int, str]]:
        return self._catalog.libraries()

    def list_documents(self, library: str, acl: tuple[str, ...] | None = None) -> list[Document]:
        """The library's documents that a caller who sees `acl` may see (None: all)."""
        return [d for d in self._catalog.list(library) if acl_allows(acl, d.groups)]

    def get_document(self, library: str, document_id: str, acl: tuple[str, ...] | None = None) -> Document:
        """The document; one the caller may not see is not found, exactly like an unknown one."""
        doc = self._catalog.get(library, document_id)
        if doc is None or not acl_allows(acl, doc.groups):
            raise DocumentNotFound(document_id)
        return doc

    def note_revisions(self, library: str, revisions: Mapping[str, str]) -> None:
        """Records the backend revisions of documents found unchanged (same bytes, a new mtime or
        ETag), so that their source's next poll needs no read to tell."""
        self._catalog.set_revisions(library, revisions)

    def remove_documents(self, library: str, document_ids: Sequence[str]) -> int:
        """Removes those of the documents that are indexed from every store, all or none; returns
        how many were."""
        wanted = set(document_ids)
        present = [d.document_id for d in self._catalog.list(library) if d.document_id in wanted]
        if present:
            self._stores.apply(Change(library, present))
            if self._graph is not None:
                self._refresh_graph(library, IngestSummary())
        return len(present)

    def delete_document(self, library: str, document_id: str, acl: tuple[str, ...] | None = None) -> int:
        """Removes the document from every store, all or nothing; returns its number of chunks."""
        doc = self.get_document(library, document_id, acl)
        self._stores.apply(Change(library, [document_id]))
        if self._graph is not None:
            self._refresh_graph(library, IngestSummary())
        return doc.chunk_count


def _under(source: str, root: str) -> bool:
    """Whether a document's source is `root` or lies under it (a file in a folder, a corpus line)."""
    return source == root or source.startswith((root.rstrip("/") + "/", root + "#"))


def _chunk_count(prepared: _Prepared | None) -> int:
    return len(prepared.chunks) if prepared is not None else 0


def _failed(source: str, document_id: str, index: int, total: int, reason: str) -> FileProgress:
    return FileProgress(source, FileStage.FAILED, index, total, document_id, 0, reason)


def _checkpoint(cancelled: threading.Event | None) -> Callable[[], None]:
    """What a run calls between the slices of a batch's embedding, enrichment and extraction:
    Cancelled once `cancelled` is set."""

    def check() -> None:
        if cancelled is not None and cancelled.is_set():
            raise Cancelled("the ingest was cancelled; the batch in hand was dropped")

    return check


def _count(summary: IngestSummary, event: FileProgress) -> FileProgress:
    """Adds a document's outcome to the summary (on the thread that yields it)."""
    if event.stage is FileStage.FAILED:
        summary.failed += 1
        summary.failures.append(f"{event.source}: {event.reason}")
    elif event.stage is FileStage.INDEXED:
        summary.indexed += 1
        summary.chunks += event.chunk_count
        summary.rebuilt += bool(event.reason)
    return event


def _announce(
    index: int,
    doc: DocItem | Rejected,
    prepared: _Prepared | Exception | None,
    summary: IngestSummary,
    total: int,
) -> Generator[FileProgress, None, _Prepared | None]:
    """A file's events up to its batch; returns it when it has chunks to index (None: it failed or is
    unchanged)."""
    if isinstance(doc, Rejected):
        yield _count(summary, _failed(doc.source, "", index, total, doc.reason))
        return None
    if isinstance(prepared, Exception):
        yield _count(summary, _failed(doc.source, doc.document_id, index, total, _reason(prepared)))
        return None
    if prepared is None:
        summary.unchanged += 1
        yield FileProgress(doc.source, FileStage.UNCHANGED, index, total, doc.document_id)
        return None
    yield FileProgress(doc.source, FileStage.PARSED, index, total, doc.document_id)
    yield FileProgress(doc.source, FileStage.CHUNKED, index, total, doc.document_id, len(prepared.chunks))
    return prepared


def _drain(summary: IngestSummary, in_flight: Future[list[FileProgress]] | None) -> Iterator[FileProgress]:
    """The outcomes of the batch the writer thread has in hand, once it is written."""
    if in_flight is not None:
        for event in in_flight.result():
            yield _count(summary, event)


def _reason(err: Exception) -> str:
    if isinstance(err, RagstackError):
        return str(err)
    log.error("ingest failed: %s: %s", type(err).__name__, err)  # a parser bug fails one file, not the batch
    return f"{type(err).__name__}: {err}"
