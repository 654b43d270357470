"""Builds the retrieve service: a reader of the stores that ingest writes."""

from __future__ import annotations

from collections.abc import Mapping

from ragstack.reranking import CrossEncoder
from ragstack.resources import Resources
from ragstack.service import ServiceSpec
from ragstack.stores.layout import check_layout
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.retrieve.searcher import Searcher
from services.retrieve.servicer import RetrieveServicer, register


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    check_layout(cfg.data_dir)
    embedder = res.embedder
    searcher = Searcher(
        embedder=embedder,
        dense=VectorStore(
            cfg.data_dir / "lancedb",
            embedder.dimension,
            memory_rows=cfg.retrieve.memory_rows,
            nprobes=cfg.retrieve.ann_nprobes,
            refine_factor=cfg.retrieve.ann_refine_factor,
        ),
        lexical=LexicalStore(cfg.data_dir / "tantivy" / "chunks", heading_boost=cfg.retrieve.heading_boost),
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
    )
    return ServiceSpec(name="retrieve", register=register(RetrieveServicer(searcher, cfg.library)))


def _reranker(res: Resources) -> CrossEncoder | None:
    r = res.cfg.retrieve
    if r.reranker == "none":
        return None
    return CrossEncoder(r.reranker_dir, res.cfg.models.provider, res.cfg.models.batch_size)
