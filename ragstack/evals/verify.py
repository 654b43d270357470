"""`ragstack eval verify`: SciFact's labelled claims checked against the abstracts they cite,
through the verify service over gRPC. A claim should come back supported exactly when its label is
SUPPORT; CONTRADICT and unlabelled (not enough information) rows should not.

`part` halves the rows by the abstract they cite (a stable hash of its id, so that claims about one
abstract stay together): the checker's threshold is tuned on `tune` and reported on `report`."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.errors import InvalidArgument
from ragstack.evals.metrics import percentile
from ragstack.rpc.clients import VerifyClient

LABELS = ("SUPPORT", "CONTRADICT", "NEI")
PARTS = ("all", "tune", "report")


@dataclass(frozen=True)
class LabelledClaim:
    claim_id: str
    claim: str
    doc_id: str
    label: str  # SUPPORT, CONTRADICT or NEI (no label: not enough information)
    abstract: tuple[str, ...]


def load_claims(folder: Path, split: str = "train") -> list[LabelledClaim]:
    """One row per (claim, cited abstract): the evidence document when the row has one, else the
    first cited document (rows repeated per evidence sentence set count once)."""
    claims_file, sentences_file = folder / f"claims_{split}.csv", folder / "corpus_sentences.jsonl"
    for f in (claims_file, sentences_file):
        if not f.is_file():
            raise InvalidArgument(
                f"{f} not found: eval verify needs claims_<split>.csv and corpus_sentences.jsonl"
            )
    abstracts: dict[str, tuple[str, ...]] = {}
    with sentences_file.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                doc = json.loads(line)
                abstracts[str(doc["doc_id"])] = tuple(doc["abstract"])
    rows: list[LabelledClaim] = []
    seen: set[tuple[str, str]] = set()
    with claims_file.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            cited = re.findall(r"\d+", row["cited_doc_ids"])  # numpy-printed lists: "[ 33370 38355793]"
            doc_id = row["evidence_doc_id"] or (cited[0] if cited else "")
            if doc_id not in abstracts:
                continue
            label = row["evidence_label"] or "NEI"
            if (row["id"], doc_id) not in seen:  # one row per evidence sentence set: judge the pair once
                seen.add((row["id"], doc_id))
                rows.append(LabelledClaim(row["id"], row["claim"], doc_id, label, abstracts[doc_id]))
    return rows


def in_part(row: LabelledClaim, part: str) -> bool:
    if part not in PARTS:
        raise InvalidArgument(f"part must be one of {', '.join(PARTS)}, not {part!r}")
    half = "tune" if hashlib.sha256(row.doc_id.encode()).digest()[0] % 2 == 0 else "report"
    return part in ("all", half)


async def evaluate_verify(
    cfg: Config,
    folder: Path,
    split: str = "train",
    limit: int = 0,
    on_progress: Callable[[str, int, int], None] = lambda stage, done, total: None,
    part: str = "all",
) -> dict[str, Any]:
    rows = [r for r in load_claims(folder, split) if in_part(r, part)]
    if limit:
        rows = rows[:limit]
    confusion: dict[str, Counter[str]] = {label: Counter() for label in LABELS}
    latencies: list[float] = []
    method = ""
    async with connect(cfg, needed=("verify",), start=("verify",)) as session:
        client = VerifyClient(session.channels["verify"], cfg.deadlines.verify_s)
        for n, row in enumerate(rows, start=1):
            start = time.perf_counter()
            result = await client.verify(
                f"{row.claim} [1]", [d.Evidence("1", f"{row.doc_id}:0", " ".join(row.abstract))], 1.0
            )
            latencies.append((time.perf_counter() - start) * 1000)
            method = result.manifest.method
            verdicts = {c.verdict for c in result.manifest.claims}
            if verdicts == {d.Verdict.SUPPORTED}:
                verdict = "supported"
            elif d.Verdict.SUPPORTED in verdicts or d.Verdict.PARTIAL in verdicts:
                verdict = "partial"
            else:
                verdict = "unsupported"
            confusion[row.label][verdict] += 1
            on_progress("claims", n, len(rows))
    supported = {label: confusion[label]["supported"] for label in LABELS}
    predicted = sum(supported.values())
    positives = sum(confusion["SUPPORT"].values())
    precision = supported["SUPPORT"] / predicted if predicted else 0.0
    recall = supported["SUPPORT"] / positives if positives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "dataset": folder.name,
        "split": split,
        "part": part,
        "support_threshold": cfg.verify.support_threshold,
        "method": method,
        "rows": len(rows),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "confusion": {label: dict(confusion[label]) for label in LABELS},
        "latency_ms_p50": round(percentile(latencies, 50), 1),
        "latency_ms_p95": round(percentile(latencies, 95), 1),
    }
