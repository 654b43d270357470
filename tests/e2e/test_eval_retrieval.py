"""`ragstack eval retrieval` on a small BEIR folder made here, through the real services."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstack.errors import InvalidArgument
from ragstack.evals import beir
from ragstack.evals.retrieval import evaluate
from tests.conftest import make_config

DOCS = {
    "d1": ("Aspirin", "Aspirin reduces fever and mild pain by inhibiting cyclooxygenase."),
    "d2": ("Statins", "Statins lower LDL cholesterol and the risk of heart attacks."),
    "d3": ("Insulin", "Insulin lets cells absorb glucose; type 1 diabetes lacks it."),
    "d4": ("Vitamin D", "Vitamin D is made in the skin under sunlight and supports bones."),
}
QUERIES = {
    "q1": "which drug lowers cholesterol",
    "q2": "hormone missing in type 1 diabetes",
    "q3": "sunlight vitamin for bone health",
}
QRELS = [("q1", "d2", 1), ("q2", "d3", 1), ("q3", "d4", 2)]


def make_beir(folder: Path, split: str = "test") -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items())
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items())
    )
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS)
    )
    return folder


def test_loader_reports_what_is_missing(tmp_path: Path) -> None:
    folder = make_beir(tmp_path / "mini")
    data = beir.load(folder, "test")
    assert data.library == "beir-mini" and set(data.queries) == {"q1", "q2", "q3"}
    assert data.qrels["q3"] == {"d4": 2}
    with pytest.raises(InvalidArgument, match=r"dev\.tsv is missing \(splits here: test\)"):
        beir.load(folder, "dev")


@pytest.mark.parametrize("mode", ["lexical", "dense", "hybrid"])
async def test_eval_through_the_services(tmp_path: Path, mode: str, resources) -> None:  # type: ignore[no-untyped-def]
    folder = make_beir(tmp_path / "mini")
    cfg = make_config(tmp_path / "data")
    seen: list[str] = []
    report = await evaluate(cfg, folder, "test", mode, lambda stage, done, total: seen.append(stage))
    assert report["queries"] == 3 and report["documents_indexed"] == 4 and report["embedded"]
    assert report["ndcg@10"] > 0.9 and report["recall@10"] == 1.0
    assert set(seen) == {"ingest", "queries"}
    again = await evaluate(cfg, folder, "test", mode)
    assert again["documents_unchanged"] == 4 and again["documents_indexed"] == 0
    assert again["ndcg@10"] == report["ndcg@10"]
