"""`ragstack bench ingest`: a corpus ingested from scratch through the ingest service, with the time
per stage (from the pipeline's own spans: parse, chunk, embed, graph extraction, index,
communities; parsing and chunking run on their own thread ahead of the embedder, graph extraction
and index writes on the writer thread, so these overlap), the embedder alone on the same chunk
texts, peak memory, and a re-ingest after one document changed."""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from ragstack import domain as d
from ragstack.cli.session import embedded_config, ingest_with_progress
from ragstack.config import Config
from ragstack.resources import Resources
from ragstack.rpc.clients import open_channel
from ragstack.serve import start_stack
from ragstack.telemetry import setup_tracing


class _StageClock(SpanProcessor):
    """Sums the duration of the pipeline's spans by name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith("ingest.") and span.start_time and span.end_time:
            self.seconds[span.name] += (span.end_time - span.start_time) / 1e9


async def _ingest(
    cfg: Config,
    res: Resources,
    paths: Sequence[str],
    library: str,
    on_progress: Callable[[str, int, int], None],
    stage: str,
) -> tuple[d.IngestSummary, float]:
    stack = await start_stack(cfg, services=("ingest",), gateway=False, resources=res)
    channel = open_channel(stack.peers["ingest"], token=cfg.services.token)
    start = time.perf_counter()
    try:
        summary = await ingest_with_progress(cfg, channel, paths, library, on_progress, stage)
    finally:
        wall = time.perf_counter() - start
        await channel.close()
        await stack.stop()
    return summary, wall


def bench_ingest(cfg: Config, corpus: Path, on_progress: Callable[[str, int, int], None]) -> dict[str, Any]:
    setup_tracing(cfg.telemetry)
    clock = _StageClock()
    trace.get_tracer_provider().add_span_processor(clock)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as tmp:
        local = embedded_config(cfg, Path(tmp) / "data", allow_paths=[tmp])
        res = Resources(local)
        res.embedder.embed(["warm-up"])
        copy = Path(tmp) / corpus.name
        shutil.copy(corpus, copy)
        summary, wall = asyncio.run(_ingest(local, res, [str(copy)], "bench", on_progress, "ingest"))
        stages = {k.removeprefix("ingest."): round(v, 1) for k, v in sorted(clock.seconds.items())}
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # The embedder alone, on exactly the texts (windows) the pipeline embedded.
        from ragstack.stores.vectors import VectorStore
        from services.ingest.dense_windows import window_texts

        rows = VectorStore(local.data_dir / "lancedb", res.embedder.dimension)._open().to_arrow()
        texts = [
            window
            for t, h in zip(rows["text"].to_pylist(), rows["heading_path"].to_pylist(), strict=True)
            for window in window_texts(tuple(h), t, local.models.window_tokens, res.embedder)
        ]
        start = time.perf_counter()
        batch = local.ingest.batch_chunks
        for i in range(0, len(texts), batch):
            res.embedder.embed(texts[i : i + batch])
        embed_alone = time.perf_counter() - start

        # One document changed: only it is parsed, embedded and written again.
        lines = copy.read_text(encoding="utf-8").splitlines()
        first = json.loads(lines[0])
        first["text"] = first.get("text", "") + " (revised)"
        lines[0] = json.dumps(first)
        copy.write_text("\n".join(lines) + "\n", encoding="utf-8")
        again, rewall = asyncio.run(_ingest(local, res, [str(copy)], "bench", on_progress, "re-ingest"))
    return {
        "corpus": str(corpus),
        "documents": summary.indexed,
        "chunks": summary.chunks,
        "failed": summary.failed,
        "wall_s": round(wall, 1),
        "documents_per_s": round(summary.indexed / wall, 1),
        "chunks_per_s": round(summary.chunks / wall, 1),
        "stage_seconds": stages,
        "embed_share": round(stages.get("embed", 0.0) / wall, 3),
        "graph_share": round((stages.get("graph", 0.0) + stages.get("communities", 0.0)) / wall, 3),
        "extraction_chunks_per_s": round(summary.chunks / stages["graph"], 1)
        if stages.get("graph")
        else None,
        "entities": summary.entities,
        "relations": summary.relations,
        "communities": summary.communities,
        "embedder_alone_s": round(embed_alone, 1),
        "wall_over_embedder_alone": round(wall / embed_alone, 2),
        "peak_rss_mb": round(peak_mb),
        "reingest_one_changed_s": round(rewall, 2),
        "reingest_indexed": again.indexed,
        "reingest_unchanged": again.unchanged,
        "reingest_communities_summarized": again.communities_summarized,
    }
