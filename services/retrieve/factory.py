"""Builds the retrieve service: a reader of the stores that ingest writes."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from ragstack.models import QUANTIZED, int8_installed
from ragstack.reranking import CrossEncoder
from ragstack.resources import Resources
from ragstack.service import ServiceSpec
from ragstack.state import open_state
from ragstack.stores import databases as database_store
from ragstack.stores.databases import DatabaseRegistry
from ragstack.stores.graph import GraphStore
from ragstack.stores.layout import check_layout
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.lexical_snapshots import SnapshotReader, open_store
from ragstack.stores.originals import Originals
from ragstack.stores.vectors import VectorStore
from services.retrieve.databases import Databases
from services.retrieve.freshness import Freshness
from services.retrieve.graph_search import GraphSearch
from services.retrieve.page_picture import ChunkPictures
from services.retrieve.searcher import Feedback, Searcher
from services.retrieve.servicer import RetrieveServicer, register

# The stores of shared state this service opens (`ragstack migrate` brings them all up to date).
STATE = (database_store,)


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    check_layout(cfg.data_dir)
    embedder = res.embedder
    lancedb_at, options = cfg.storage.lancedb(cfg.data_dir), cfg.storage.options
    staleness = cfg.retrieve.max_staleness_s
    vectors = VectorStore(
        lancedb_at,
        embedder.dimension,
        memory_rows=cfg.retrieve.memory_rows,
        nprobes=cfg.retrieve.ann_nprobes,
        refine_factor=cfg.retrieve.ann_refine_factor,
        storage_options=options,
        max_staleness_s=staleness,
    )
    snapshots = None
    if cfg.storage.lexical_snapshots:  # a replica: the index ingest published, cached locally
        snapshots = SnapshotReader(
            open_store(cfg.storage.lexical_snapshots, options),
            cfg.data_dir / "tantivy-replica",
            min(cfg.storage.snapshot_poll_s, staleness),  # the bound wins over a slower poll
        )
    lexical = LexicalStore(
        cfg.data_dir / "tantivy" / "chunks",
        heading_boost=cfg.retrieve.heading_boost,
        snapshots=snapshots,
        proximity=cfg.retrieve.proximity_weight,
        proximity_slop=cfg.retrieve.proximity_slop,
    )
    graph = GraphStore(lancedb_at, embedder.dimension, storage_options=options, max_staleness_s=staleness)
    freshness = Freshness([vectors.refresh, graph.refresh, lambda: {"lexical": lexical.refresh()}], staleness)
    searcher = Searcher(
        embedder=embedder,
        dense=vectors,
        lexical=lexical,
        default_top_k=cfg.retrieve.top_k,
        max_top_k=cfg.retrieve.max_top_k,
        candidates=cfg.retrieve.candidates,
        rrf_k=cfg.retrieve.rrf_k,
        max_score_texts=cfg.retrieve.max_score_texts,
        fusion=cfg.retrieve.fusion,
        dense_weight=cfg.retrieve.dense_weight,
        max_per_document=cfg.retrieve.max_per_document,
        max_context_chars=cfg.retrieve.max_context_chars,
        reranker=_reranker(res),
        rerank_factor=cfg.retrieve.rerank_factor,
        page_search=cfg.retrieve.page_search,
        graph=GraphSearch(
            graph,
            vectors,
            neighbours=cfg.retrieve.graph_neighbours,
            communities=cfg.retrieve.graph_communities,
        ),
        graph_weight=cfg.retrieve.graph_weight,
        query_embedder=res.query_embedder,
        tuned_queries=res.tuned_query_embedders.get,
        max_batch=cfg.models.batch_size,
        batch_window_s=cfg.retrieve.batch_window_ms / 1000,
        feedback=Feedback(
            documents=cfg.retrieve.feedback_documents,
            terms=cfg.retrieve.feedback_terms,
            lexical_weight=cfg.retrieve.feedback_lexical_weight,
            dense_weight=cfg.retrieve.feedback_dense_weight,
        ),
    )
    registry = DatabaseRegistry(
        open_state(cfg.state, cfg.data_dir, database_store.STORE, database_store.MIGRATIONS),
        cfg.sql.databases,
        res.database_guard,
    )
    databases = Databases(registry, cfg.sql, embedder)

    freshness.start()

    async def close() -> None:
        await asyncio.to_thread(freshness.close)  # waits for a check in flight
        registry.close()
        searcher.close()

    return ServiceSpec(
        name="retrieve",
        register=register(
            RetrieveServicer(
                searcher,
                databases,
                cfg.library,
                ChunkPictures(searcher.chunk, Originals(vectors.connection())),
                freshness,
            )
        ),
        aclose=close,
    )


def _reranker(res: Resources) -> CrossEncoder | None:
    r = res.cfg.retrieve
    if r.reranker == "none":
        return None
    int8 = r.rerank_precision == "int8" and int8_installed(
        r.reranker_dir, "retrieve.rerank_precision", "ragstack models install cross-encoder"
    )
    file = QUANTIZED if int8 else "model.onnx"
    return CrossEncoder(r.reranker_dir, res.cfg.models.provider, res.cfg.models.batch_size, file=file)
