"""`ragstack eval qa`: the metrics on hand-computed examples, and a small folder asked through the
real services end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstack.evals.qa import _report, contains_answer, evaluate_qa, exact_match, f1, normalize
from tests.conftest import make_config
from tests.e2e.test_eval_retrieval import DOCS


def test_squad_normalisation_em_and_f1() -> None:
    assert normalize("The  Normans, of France!") == "normans of france"
    assert exact_match("the Normans", ["Normans", "Norse"]) == 1.0
    # prediction "normans in france" vs truth "normans": precision 1/3, recall 1 -> F1 0.5
    assert f1("Normans in France", ["Normans"]) == pytest.approx(0.5)
    assert f1("", []) == 1.0 and f1("something", []) == 0.0  # unanswerable: only silence is right
    assert contains_answer("It was founded by the Normans in 911.", ["Normans"])
    assert not contains_answer("Normandy", ["Norman"])  # whole words only


def test_report_aggregates_abstention_and_supporting_recall() -> None:
    row = {
        "em": 0.0,
        "f1": 0.5,
        "has_answer": True,
        "contains": True,
        "abstained": False,
        "impossible": False,
        "evidence": 4,
    }
    rows = [
        {**row, "supported": True, "supporting_share": 1.0, "ms": 10.0},
        {**row, "contains": False, "supported": False, "supporting_share": 0.5, "ms": 30.0},
        {
            **row,
            "em": 1.0,
            "f1": 1.0,
            "has_answer": False,
            "contains": None,
            "abstained": True,
            "impossible": True,
            "supported": None,
            "supporting_share": None,
            "ms": 20.0,
        },
    ]
    report = _report("set", "auto", rows)
    assert report["answer_recall"] == 0.5 and report["abstention_precision"] == 1.0
    assert report["abstention_recall"] == 1.0 and report["no_answer_accuracy"] == 1.0
    assert report["supporting_all_found"] == 0.5 and report["supporting_recall"] == 0.75
    assert report["latency_ms_p50"] == 20.0 and report["evidence_chunks_mean"] == 4.0
    assert "active_retrieval" not in report  # off: not reported
    from ragstack.domain import ActiveRetrieval

    rows[0]["active"] = ActiveRetrieval(1, ("a claim",), ("d:1", "d:2"), True)
    rows[1]["active"] = ActiveRetrieval()
    rows[2]["active"] = ActiveRetrieval(1, ("another",), (), False)
    assert _report("set", "auto", rows)["active_retrieval"] == {
        "searched": 2,
        "redrafted": 1,
        "added_chunks_mean": 0.6667,
    }


async def test_eval_qa_through_the_services(tmp_path: Path, resources) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "mini"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items())
    )
    questions = [
        {
            "id": "q1",
            "question": "Which drug lowers LDL cholesterol?",
            "answers": ["Statins"],
            "supporting_ids": ["d2"],
            "type": "drug",
        },
        {
            "id": "q2",
            "question": "What hormone do cells need to absorb glucose?",
            "answers": ["Insulin"],
            "supporting_ids": ["d3"],
            "type": "hormone",
        },
    ]
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    report = await evaluate_qa(make_config(tmp_path / "data"), folder)
    assert report["questions"] == 2 and report["dataset"] == "mini"
    assert report["supporting_all_found"] == 1.0 and report["answer_recall"] == 1.0
    assert "abstention_recall" not in report  # the set says nothing about unanswerable questions
    assert report["embedded"] is True and 1 <= report["evidence_chunks_mean"] <= 5
    assert set(report["by_type"]) == {"drug", "hormone"} and report["by_type"]["drug"]["questions"] == 1
