"""Builds the ingest service from the config: the single writer of every store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from ragstack.cli.models import check_embedder
from ragstack.disk import require_free
from ragstack.guard.paths import PathGuard, default_roots
from ragstack.resources import Resources
from ragstack.service import ServiceSpec
from ragstack.state import open_state
from ragstack.state.locks import SharedLock
from ragstack.stores import catalog as catalog_store
from ragstack.stores import databases as database_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.databases import DatabaseRegistry
from ragstack.stores.graph import GraphStore
from ragstack.stores.layout import check_layout
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.lexical_snapshots import SnapshotPublisher, open_store
from ragstack.stores.originals import Originals
from ragstack.stores.snapshots import StoreLifecycle
from ragstack.stores.vectors import VectorStore
from services.ingest import enrich as enrich_store
from services.ingest import jobs as job_store
from services.ingest.budgets import Budgets
from services.ingest.crawler import CrawlLimits
from services.ingest.enrich import Enricher
from services.ingest.graph_extract import EntityExtractor
from services.ingest.graph_index import GraphIndex
from services.ingest.jobs import JobStore
from services.ingest.llm_extract import LLMExtractor
from services.ingest.parse_worker import ParsePool
from services.ingest.pipeline import IngestPipeline
from services.ingest.remote_convert import DoclingServe
from services.ingest.servicer import IngestServicer, register
from services.ingest.syncing import state as source_state
from services.ingest.syncing.registry import build_sources
from services.ingest.tuning import Tuner, same_dimension

# The stores of shared state this service opens (`ragstack migrate` brings them all up to date).
STATE = (catalog_store, database_store, enrich_store, source_state, job_store)


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    check_layout(cfg.data_dir)
    embedder = res.embedder
    catalog = Catalog(open_state(cfg.state, cfg.data_dir, catalog_store.STORE, catalog_store.MIGRATIONS))
    lancedb_at, options = cfg.storage.lancedb(cfg.data_dir), cfg.storage.options
    publisher = None
    if cfg.storage.lexical_snapshots:  # replicas elsewhere read the index from object storage
        publisher = SnapshotPublisher(
            cfg.data_dir / "tantivy" / "chunks", open_store(cfg.storage.lexical_snapshots, options)
        )
    # PostgreSQL state: ingest workers in other processes may write these stores too; they take
    # turns per unit under a lock of the state, and tantivy's writer is held only for a turn.
    shared = SharedLock(cfg.state, cfg.data_dir, "ingest-commit") if cfg.state.url else None
    lexical = LexicalStore(
        cfg.data_dir / "tantivy" / "chunks", writer=True, publisher=publisher, shared=shared is not None
    )
    if publisher is not None and shared is None:
        # What is already indexed, for replicas that start before the next batch. Shared workers
        # published every commit as they made it; the folder of a new one holds nothing to publish.
        publisher.publish()
    # A writer when ingest builds the graph; otherwise read for the stats only.
    graph_store = GraphStore(lancedb_at, embedder.dimension, writer=cfg.ingest.graph, storage_options=options)
    vectors = VectorStore(lancedb_at, embedder.dimension, writer=True, storage_options=options)
    graph = None
    if cfg.ingest.graph:
        llm = res.llm if cfg.ingest.graph_llm and cfg.llm.enabled else None
        offline = EntityExtractor()
        graph = GraphIndex(
            graph_store,
            LLMExtractor(llm, offline) if llm is not None else offline,
            vectors,
            seed=cfg.ingest.graph_seed,
            resolution=cfg.ingest.graph_resolution,
            llm=llm,
        )
    enricher = Enricher(
        res.llm if cfg.llm.enabled else None,
        open_state(cfg.state, cfg.data_dir, enrich_store.STORE, enrich_store.MIGRATIONS),
    )
    budgets = Budgets.from_config(cfg.ingest)
    parser = ParsePool(budgets, cfg.ingest.parse_workers)
    converter = DoclingServe.from_config(cfg.ingest)  # None: Docling converts here
    min_free = cfg.ingest.min_free_mb * 2**20
    pipeline = IngestPipeline(
        catalog=catalog,
        vectors=vectors,
        lexical=lexical,
        embedder=embedder,
        chunk_tokens=cfg.ingest.chunk_tokens,
        overlap_sentences=cfg.ingest.overlap_sentences,
        max_file_bytes=int(cfg.ingest.max_file_mb * 1024 * 1024),
        batch_chunks=cfg.ingest.batch_chunks,
        ann_min_rows=cfg.retrieve.ann_min_rows,
        graph=graph,
        enricher=enricher,
        budgets=budgets,
        parser=parser,
        originals=Originals(vectors.connection()),
        page_pictures=cfg.ingest.page_pictures,
        converter=converter,
        shared=shared,
        tuned=res.tuned_embedders.get,
        window_tokens=cfg.models.window_tokens,
        rebuild=cfg.ingest.rebuild,
        room=lambda: require_free(cfg.data_dir, min_free, "the ingest"),
    )
    tuner = Tuner(
        vectors,
        pipeline.exclusive,
        pipeline.embed,
        cfg.models.tuned_folder,
        cfg.models.tool_env,
        same_dimension(check_embedder(cfg), embedder.dimension),
        recentre=graph.recentre if graph is not None else None,
    )

    lifecycle = StoreLifecycle(
        cfg.data_dir,
        catalog,
        vectors,
        lexical,
        graph_store,
        build=pipeline.build,
        max_snapshots=cfg.ingest.max_snapshots,
        min_free_bytes=min_free,
    )
    lifecycle.resume()  # a restore a crash interrupted is finished before anything else runs
    databases = DatabaseRegistry(
        open_state(cfg.state, cfg.data_dir, database_store.STORE, database_store.MIGRATIONS),
        cfg.sql.databases,
        res.database_guard,
    )
    roots = cfg.ingest.allowed_roots
    paths = PathGuard(default_roots(cfg.data_dir) if roots is None else roots)

    jobs = JobStore(
        open_state(cfg.state, cfg.data_dir, job_store.STORE, job_store.MIGRATIONS),
        lease_s=cfg.ingest.job_lease_s,
        attempts=cfg.ingest.job_attempts,
        backoff_s=cfg.ingest.job_backoff_s,
        pending_limit=cfg.ingest.job_pending_limit,
        pending_bytes=int(cfg.ingest.job_pending_mb * 2**20),
    )
    job_store.QUEUE_METRICS.store = jobs
    sources = build_sources(cfg, pipeline, jobs, paths, lambda: servicer.wake())
    servicer = IngestServicer(
        pipeline,
        cfg.library,
        CrawlLimits.from_config(cfg.ingest),
        databases,
        lifecycle=lifecycle,
        retention_days=cfg.ingest.retention_days,
        jobs=jobs,
        paths=paths,
        crawl_slots=cfg.ingest.max_crawls,
        sources=sources,
        tuner=tuner,
    )
    tasks = [asyncio.get_running_loop().create_task(servicer.work(), name="ingest-jobs")]
    if cfg.ingest.source_polling:
        tasks.append(asyncio.get_running_loop().create_task(sources.poller.run(), name="ingest-sources"))

    async def close() -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        sources.close()
        jobs.close()
        parser.close()
        if converter is not None:
            converter.close()
        enricher.close()
        lexical.close()
        catalog.close()
        databases.close()
        if shared is not None:
            shared.close()

    return ServiceSpec(name="ingest", register=register(servicer), aclose=close)
