"""`ragstack bench load` on the sample corpus: questions through the gateway while half the corpus is
ingested; no errors and no partial reads (every document the catalog lists comes back whole)."""

from __future__ import annotations

from pathlib import Path

from ragstack.bench.load import bench_load
from tests.conftest import SAMPLES, make_config


async def test_queries_during_an_ingest(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "data")
    report = await bench_load(cfg, SAMPLES, clients=2)
    assert report["documents"] == {"before": 6, "during": 6} and report["ingest_failed"] == 0
    assert report["queries"] > 0 and report["errors"] == 0, report["error_examples"]
    assert report["consistency_checks"] > 0 and report["partial_reads"] == 0
    assert 0 < report["latency_ms"]["p50"] <= report["latency_ms"]["p95"]
