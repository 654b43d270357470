"""`ragstack bench query` on a small BEIR folder of our own: every mode at every concurrency, from
clients in a process of their own, against the embedded retrieve service."""

from __future__ import annotations

import json
from pathlib import Path

from ragstack.bench.query import bench_query
from tests.conftest import make_config

PASSAGES = {
    "p1": "Tidal locking makes a moon show the same face to its planet.",
    "p2": "Sourdough rises because wild yeast and lactic bacteria ferment the flour.",
    "p3": "A heat pump moves heat against its gradient using a refrigerant cycle.",
    "p4": "Glaciers carve U-shaped valleys as they slide over bedrock.",
}
QUESTIONS = {
    "q1": "why does the moon always show the same side",
    "q2": "what makes sourdough bread rise",
    "q3": "how does a heat pump work",
}


def beir_folder(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in PASSAGES.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUESTIONS.items())
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\tp{i}\t1\n" for i in (1, 2, 3))
    )
    return root


async def test_every_mode_at_every_concurrency(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "data")
    report = await bench_query(
        cfg, beir_folder(tmp_path / "set"), "test", ["lexical", "hybrid"], [1, 2], limit=3, top_k=2
    )
    assert report["documents"] == 4 and report["queries"] == 3 and report["embedded"]
    # The calibration runs the search queries' model on fixed texts before and after the runs.
    for when in ("before", "after"):
        assert report["calibration"][when]["query_p50_ms"] > 0
        assert report["calibration"][when]["batch_texts_per_s"] > 0
    rows = {(r["mode"], r["concurrency"]): r for r in report["results"]}
    assert set(rows) == {("lexical", 1), ("lexical", 2), ("hybrid", 1), ("hybrid", 2)}
    for row in rows.values():
        assert row["qps"] > 0 and 0 < row["p50_ms"] <= row["p95_ms"]
        # Each query cost the serving process and the clients' some CPU (a search is not free).
        assert row["server_cpu"] > 0 and row["client_cpu"] > 0
        # Concurrent searches find what each finds alone (the query model's batches change no vector).
        assert row["hits_changed"] == 0
