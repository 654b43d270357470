"""The ingest pipeline: read → fingerprint → parse → chunk → embed → write the stores → catalog.

A file that fails is reported and skipped; the batch goes on. Writes of a document replace its
previous chunks in each store, and the catalog (with the fingerprint) is written last, so a
crash before it leaves the document to be redone by the next run.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import numpy as np
from opentelemetry import trace

from ragstack.domain import Chunk, Document, FileProgress, FileStage, IngestSummary
from ragstack.errors import DocumentNotFound, InvalidArgument, RagstackError
from ragstack.stores.catalog import Catalog
from services.ingest import readers
from services.ingest.chunker import chunk_markdown

log = logging.getLogger(__name__)
tracer = trace.get_tracer("ragstack.ingest")


class EmbedderPort(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
    def count_tokens(self, text: str) -> int: ...


class VectorWriter(Protocol):
    def replace_document(self, document_id: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None: ...
    def delete_document(self, document_id: str) -> int: ...


class LexicalWriter(Protocol):
    def replace_document(self, document_id: str, chunks: Sequence[Chunk]) -> None: ...
    def delete_document(self, document_id: str) -> None: ...


@dataclass(frozen=True)
class SourceItem:
    """One file to ingest: where it came from, its backend revision, and how to read it."""

    source: str
    revision: str
    read: Callable[[], bytes]
    size: int


def document_id_for(library: str, source: str) -> str:
    return hashlib.sha256(f"{library}\0{source}".encode()).hexdigest()[:20]


def collect_paths(paths: Iterable[str]) -> list[SourceItem]:
    """Files named or found under the folders named (hidden files and folders skipped)."""
    items: list[SourceItem] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise InvalidArgument(f"path does not exist: {raw}")
        files = (
            sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if path.is_dir()
            else [path]
        )
        for f in files:
            st = f.stat()
            mtime = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
            items.append(SourceItem(str(f.resolve()), mtime, f.read_bytes, st.st_size))
    return items


def upload_items(files: Iterable[tuple[str, bytes]]) -> list[SourceItem]:
    return [SourceItem(name, "", functools.partial(bytes, content), len(content)) for name, content in files]


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
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._catalog = catalog
        self._vectors = vectors
        self._lexical = lexical
        self._embedder = embedder
        self._chunk_tokens = chunk_tokens
        self._overlap = overlap_sentences
        self._max_bytes = max_file_bytes
        self._now = now
        self._clock = clock

    def run(self, items: Sequence[SourceItem], library: str) -> Iterator[FileProgress | IngestSummary]:
        """Yields per-file progress events, then the summary."""
        if not items:
            raise InvalidArgument("nothing to ingest: give paths or files")
        start = self._clock()
        summary = IngestSummary(files=len(items))
        for index, item in enumerate(items, start=1):
            doc_id = document_id_for(library, item.source)

            def event(
                stage: FileStage,
                chunks: int = 0,
                reason: str = "",
                _i: int = index,
                _s: str = item.source,
                _d: str = doc_id,
            ) -> FileProgress:
                return FileProgress(_s, stage, _i, len(items), _d, chunks, reason)

            try:
                # Stage spans are opened and closed between yields: this generator is resumed from
                # worker threads, so no span may stay attached across a yield.
                yield from self._one(item, library, doc_id, event, summary)
            except RagstackError as err:
                summary.failed += 1
                summary.failures.append(f"{item.source}: {err}")
                yield event(FileStage.FAILED, reason=str(err))
            except Exception as err:  # a parser bug must fail the file, not the batch
                log.exception("ingest of %s failed", item.source)
                summary.failed += 1
                summary.failures.append(f"{item.source}: {type(err).__name__}: {err}")
                yield event(FileStage.FAILED, reason=f"{type(err).__name__}: {err}")
        summary.seconds = self._clock() - start
        yield summary

    def _one(
        self,
        item: SourceItem,
        library: str,
        doc_id: str,
        event: Callable[..., FileProgress],
        summary: IngestSummary,
    ) -> Iterator[FileProgress]:
        if item.size > self._max_bytes:
            raise InvalidArgument(
                f"file is {item.size / 1e6:.1f} MB, over the limit of {self._max_bytes / 1e6:.1f} MB "
                "(ingest.max_file_mb)"
            )
        data = item.read()
        fingerprint = hashlib.sha256(data).hexdigest()
        previous = self._catalog.get(doc_id)
        if previous is not None and previous.fingerprint == fingerprint:
            summary.unchanged += 1
            yield event(FileStage.UNCHANGED, previous.chunk_count)
            return
        with tracer.start_as_current_span("ingest.parse", attributes={"source": item.source}):
            parsed = readers.parse(item.source, data)
        yield event(FileStage.PARSED)
        with tracer.start_as_current_span("ingest.chunk"):
            pieces = chunk_markdown(
                parsed.markdown, parsed.title, self._chunk_tokens, self._overlap, self._embedder.count_tokens
            )
        if not pieces:
            raise InvalidArgument("no text to index")
        chunks = [
            Chunk(
                chunk_id=f"{doc_id}:{i}",
                document_id=doc_id,
                library=library,
                text=p.text,
                heading_path=p.heading_path,
                position=i,
                title=parsed.title,
                source=item.source,
            )
            for i, p in enumerate(pieces)
        ]
        yield event(FileStage.CHUNKED, len(chunks))
        with tracer.start_as_current_span("ingest.embed", attributes={"chunks": len(chunks)}):
            # The heading path goes into the embedded text: it situates the chunk in its document.
            vectors = self._embedder.embed([" > ".join(c.heading_path) + "\n" + c.text for c in chunks])
        yield event(FileStage.EMBEDDED, len(chunks))
        with tracer.start_as_current_span("ingest.index"):
            self._vectors.replace_document(doc_id, chunks, vectors)
            self._lexical.replace_document(doc_id, chunks)
            self._catalog.upsert(
                Document(
                    document_id=doc_id,
                    library=library,
                    source=item.source,
                    revision=item.revision,
                    fingerprint=fingerprint,
                    title=parsed.title,
                    media_type=parsed.media_type,
                    chunk_count=len(chunks),
                    indexed_at=self._now().isoformat(),
                )
            )
        summary.indexed += 1
        summary.chunks += len(chunks)
        yield event(FileStage.INDEXED, len(chunks))

    def list_documents(self, library: str) -> list[Document]:
        return self._catalog.list(library)

    def get_document(self, document_id: str) -> Document:
        doc = self._catalog.get(document_id)
        if doc is None:
            raise DocumentNotFound(document_id)
        return doc

    def delete_document(self, document_id: str) -> int:
        self.get_document(document_id)
        removed = self._vectors.delete_document(document_id)
        self._lexical.delete_document(document_id)
        self._catalog.delete(document_id)
        return removed
