"""The ingest pipeline the store-level tests write with: every store in `root` (LanceDB in `lance`),
small chunks, the knowledge graph on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragstack.config import StateConfig
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.graph import GraphStore
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest.graph_extract import EntityExtractor
from services.ingest.graph_index import GraphIndex
from services.ingest.pipeline import IngestPipeline
from tests.tools import state as state_tools


def plain_pipeline(
    root: Path,
    embedder: Any,
    chunk_tokens: int,
    max_file_bytes: int,
    lance: Path | None = None,
    **options: Any,
) -> IngestPipeline:
    """A pipeline without the graph, its stores in `root` (LanceDB in `lance`, else `root/lance`)."""
    return IngestPipeline(
        Catalog(state_tools.store(StateConfig(), root, catalog_store)),
        VectorStore(lance or root / "lance", embedder.dimension, writer=True),
        LexicalStore(root / "tantivy", writer=True),
        embedder,
        chunk_tokens=chunk_tokens,
        overlap_sentences=1,
        max_file_bytes=max_file_bytes,
        **options,
    )


def graph_pipeline(
    root: Path, lance: Path, embedder: Any, extractor: EntityExtractor, **options: Any
) -> tuple[IngestPipeline, VectorStore]:
    """The pipeline and its vector store (the writer); `options` as IngestPipeline takes them (with
    `shared`, a SharedLock, it is one of several workers on the stores, as a process of its own)."""
    vectors = VectorStore(lance, embedder.dimension, writer=True)
    pipeline = IngestPipeline(
        Catalog(state_tools.store(StateConfig(), root, catalog_store)),
        vectors,
        LexicalStore(root / "tantivy", writer=True, shared="shared" in options),
        embedder,
        chunk_tokens=256,
        overlap_sentences=1,
        max_file_bytes=200_000,
        graph=GraphIndex(GraphStore(lance, embedder.dimension, writer=True), extractor, vectors, seed=7),
        **options,
    )
    return pipeline, vectors
