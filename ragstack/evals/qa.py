"""`ragstack eval qa`: every question of a `questions.jsonl` asked through the agent service, on the
folder's corpus (ingested into its own library, reused while unchanged).

Reported: EM and F1 with SQuAD's normalisation (an abstention is the empty answer, right exactly for
unanswerable questions), answer recall (the answer contains a gold answer), abstention precision and
recall where `is_impossible` exists, supporting-paragraph recall where `supporting_ids` exist, and
latency; by question type too where the set gives one (`type`). A supporting paragraph counts as
found only when it was in the evidence the answer was drafted from (`done.evidence_chunk_ids`): a
search graded incorrect and set aside finds nothing, and a withheld draft still counts what it was
written from. Each question is asked with `skip_memory`, so no answer depends on the questions
asked before it, on a running server too."""

from __future__ import annotations

import json
import re
import string
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import connect, ingest_with_progress
from ragstack.config import Config
from ragstack.errors import InvalidArgument
from ragstack.evals.beir import library_for
from ragstack.evals.metrics import percentile
from ragstack.rpc.clients import AgentClient


@dataclass(frozen=True)
class Question:
    qid: str
    text: str
    answers: tuple[str, ...]
    impossible: bool | None  # None: the set does not say
    supporting: tuple[str, ...]
    kind: str = ""  # the set's question type (HotpotQA: bridge or comparison), reported apart


def load_questions(folder: Path) -> tuple[str, list[Question]]:
    """The dataset's name (its folder's) and its questions."""
    path = folder / "questions.jsonl"
    if not path.is_file() or not (folder / "corpus.jsonl").is_file():
        raise InvalidArgument(f"eval qa needs {path} and {folder / 'corpus.jsonl'}")
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            out.append(
                Question(
                    str(q["id"]),
                    q["question"],
                    tuple(q.get("answers") or ()),
                    q.get("is_impossible"),
                    tuple(q.get("supporting_ids") or ()),
                    str(q.get("type") or ""),
                )
            )
    return folder.resolve().name, out


def normalize(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def exact_match(prediction: str, gold: Sequence[str]) -> float:
    if not gold:
        return float(prediction == "")
    return max(float(normalize(prediction) == normalize(g)) for g in gold)


def f1(prediction: str, gold: Sequence[str]) -> float:
    if not gold:
        return float(prediction == "")
    best = 0.0
    predicted = normalize(prediction).split()
    for g in gold:
        truth = normalize(g).split()
        common = sum((Counter(predicted) & Counter(truth)).values())
        if common:
            p, r = common / len(predicted), common / len(truth)
            best = max(best, 2 * p * r / (p + r))
    return best


def contains_answer(prediction: str, gold: Sequence[str]) -> bool:
    padded = f" {normalize(prediction)} "
    return any(normalize(g) and f" {normalize(g)} " in padded for g in gold)


async def evaluate_qa(
    cfg: Config,
    folder: Path,
    mode: str = "auto",
    limit: int = 0,
    on_progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
) -> dict[str, Any]:
    dataset, questions = load_questions(folder)
    questions = questions[: limit or None]
    library = library_for(dataset)
    rows: list[dict[str, Any]] = []
    async with connect(
        cfg,
        needed=("agent", "ingest"),
        start=("ingest", "retrieve", "verify", "agent"),
        allow_paths=[str(folder / "corpus.jsonl")],
    ) as session:
        await ingest_with_progress(
            cfg, session.channels["ingest"], [str(folder / "corpus.jsonl")], library, on_progress
        )
        agent = AgentClient(session.channels["agent"], cfg.deadlines.agent_s)
        for n, q in enumerate(questions, start=1):
            start = time.perf_counter()
            done: d.DoneEvent | None = None
            document_of: dict[str, str] = {}
            async for event in agent.ask(q.text, library, d.SearchMode(mode), skip_memory=True):
                if isinstance(event, d.EvidenceEvent):
                    document_of.update((h.chunk.chunk_id, h.chunk.document_id) for h in event.hits)
                elif isinstance(event, d.DoneEvent):
                    done = event
            assert done is not None
            answer = "" if done.abstained else done.answer
            drafted_from = {document_of.get(c, "") for c in done.evidence_chunk_ids}
            gold = () if q.impossible else q.answers
            rows.append(
                {
                    "em": exact_match(answer, gold),
                    "f1": f1(answer, gold),
                    "has_answer": not q.impossible,
                    "contains": contains_answer(answer, q.answers)
                    if q.answers and not q.impossible
                    else None,
                    "abstained": done.abstained,
                    "impossible": q.impossible,
                    "supported": set(q.supporting) <= drafted_from if q.supporting else None,
                    "supporting_share": len(set(q.supporting) & drafted_from) / len(q.supporting)
                    if q.supporting
                    else None,
                    "evidence": len(done.evidence_chunk_ids),
                    "kind": q.kind,
                    "ms": (time.perf_counter() - start) * 1000,
                    "active": done.active_retrieval,
                }
            )
            on_progress("questions", n, len(questions))
    report = _report(dataset, mode, rows)
    kinds = sorted({r["kind"] for r in rows if r["kind"]})
    if kinds:  # e.g. HotpotQA's bridge and comparison questions, whose choices were tuned apart
        report["by_type"] = {k: _report(dataset, mode, [r for r in rows if r["kind"] == k]) for k in kinds}
    gen = cfg.generation
    settings = {
        "multi_hop_top_k": gen.multi_hop_top_k,
        "bridge_searches": gen.bridge_searches,
        "active_retrieval_rounds": gen.active_retrieval_rounds,
    }
    return {**report, "embedded": session.embedded, "settings": settings}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _report(dataset: str, mode: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["has_answer"]]
    unanswerable = [r for r in rows if r["impossible"]]
    abstained = [r for r in rows if r["abstained"]]
    report: dict[str, Any] = {
        "dataset": dataset,
        "mode": mode,
        "questions": len(rows),
        "em": _mean([r["em"] for r in rows]),
        "f1": _mean([r["f1"] for r in rows]),
        "answer_recall": _mean([float(r["contains"]) for r in answerable if r["contains"] is not None]),
        "abstained": len(abstained),
    }
    if unanswerable:
        hits = sum(1 for r in abstained if r["impossible"])
        report.update(
            has_answer_em=_mean([r["em"] for r in answerable]),
            has_answer_f1=_mean([r["f1"] for r in answerable]),
            no_answer_accuracy=_mean([r["em"] for r in unanswerable]),
            abstention_precision=round(hits / len(abstained), 4) if abstained else None,
            abstention_recall=round(hits / len(unanswerable), 4),
        )
    supported = [r for r in rows if r["supported"] is not None]
    if supported:
        report.update(
            supporting_all_found=_mean([float(r["supported"]) for r in supported]),
            supporting_recall=_mean([r["supporting_share"] for r in supported]),
        )
    report["evidence_chunks_mean"] = _mean([float(r["evidence"]) for r in rows])
    active = [r["active"] for r in rows if r.get("active") is not None]
    if active:  # generation.active_retrieval_rounds was on
        report["active_retrieval"] = {
            "searched": sum(1 for a in active if a.rounds),
            "redrafted": sum(1 for a in active if a.redrafted),
            "added_chunks_mean": _mean([float(len(a.added_chunk_ids)) for a in active]),
        }
    latencies = [r["ms"] for r in rows]
    report.update(
        latency_ms_p50=round(percentile(latencies, 50), 1), latency_ms_p95=round(percentile(latencies, 95), 1)
    )
    return report
