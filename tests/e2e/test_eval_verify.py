"""`ragstack eval verify` on a small SciFact-layout folder made here, through the real verify
service; and the checker on claims built from the real SciFact abstracts by changing a number."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from ragstack.domain import Evidence, Verdict
from ragstack.errors import InvalidArgument
from ragstack.evals.verify import evaluate_verify, in_part, load_claims
from services.verify.checker import OfflineChecker, Verifier
from tests.conftest import SHARED, make_config

ABSTRACTS = {
    11: ["Statins lower LDL cholesterol by about 30 percent.", "They reduce the risk of heart attacks."],
    12: ["Aspirin reduces fever by inhibiting cyclooxygenase.", "It has no effect on viral load."],
}
CLAIMS = [  # id, claim, evidence doc, label, evidence sentences, cited docs (as SciFact prints them)
    (1, "Statins lower LDL cholesterol.", 11, "SUPPORT", "[0]", "[11]"),
    (1, "Statins lower LDL cholesterol.", 11, "SUPPORT", "[1]", "[11]"),  # same pair again: counted once
    (2, "Statins raise the risk of heart attacks.", 11, "CONTRADICT", "[1]", "[11]"),
    (3, "Aspirin cures measles.", "", "", "[]", "[  12 11]"),
    (4, "Aspirin reduces fever.", 12, "SUPPORT", "[0]", "[12]"),
]


def make_scifact(folder: Path) -> Path:
    folder.mkdir()
    (folder / "corpus_sentences.jsonl").write_text(
        "".join(json.dumps({"doc_id": k, "title": "t", "abstract": v}) + "\n" for k, v in ABSTRACTS.items())
    )
    lines = ["id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids"]
    lines += [
        ",".join(f'"{x}"' if isinstance(x, str) and "," in x else str(x) for x in row) for row in CLAIMS
    ]
    (folder / "claims_train.csv").write_text("\n".join(lines) + "\n")
    return folder


def test_loader_pairs_claims_with_their_abstracts(tmp_path: Path) -> None:
    rows = load_claims(make_scifact(tmp_path / "mini"))
    assert [(r.claim_id, r.doc_id, r.label) for r in rows] == [
        ("1", "11", "SUPPORT"),
        ("2", "11", "CONTRADICT"),
        ("3", "12", "NEI"),  # no evidence document: the first cited one
        ("4", "12", "SUPPORT"),
    ]
    with pytest.raises(InvalidArgument, match=r"claims_dev\.csv"):
        load_claims(tmp_path / "mini", "dev")


def test_the_halves_split_the_real_claims_by_abstract() -> None:
    rows = load_claims(SHARED / "data" / "scifact")
    tune = [r for r in rows if in_part(r, "tune")]
    report = [r for r in rows if in_part(r, "report")]
    assert len(tune) + len(report) == len(rows) and min(len(tune), len(report)) > 0.4 * len(rows)
    assert not {r.doc_id for r in tune} & {r.doc_id for r in report}  # an abstract stays in one half
    assert {r.label for r in tune} == {r.label for r in report} == {"SUPPORT", "CONTRADICT", "NEI"}
    with pytest.raises(InvalidArgument, match="part"):
        in_part(rows[0], "dev")


async def test_eval_verify_through_the_service(tmp_path: Path, resources) -> None:  # type: ignore[no-untyped-def]
    report = await evaluate_verify(make_config(tmp_path / "data"), make_scifact(tmp_path / "mini"))
    confusion = report["confusion"]
    assert report["rows"] == 4 == sum(sum(c.values()) for c in confusion.values())
    assert confusion["SUPPORT"] == {"supported": 2} and "supported" not in confusion["CONTRADICT"]
    assert report["precision"] == 1.0 and report["recall"] == 1.0 and report["method"] == "offline"
    assert report["part"] == "all" and report["support_threshold"] == 0.55


def test_a_changed_number_is_never_supported_on_real_abstracts(embedder) -> None:  # type: ignore[no-untyped-def]
    """Claims made from SciFact sentences by changing one number: none may pass."""
    verifier = Verifier(OfflineChecker(embedder, 0.55, 0.4), abstain_threshold=0.5)
    lines = (SHARED / "data" / "scifact" / "corpus_sentences.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    rng = random.Random(7)
    pairs = []
    for doc in rng.sample(docs, 400):
        for sentence in doc["abstract"]:
            found = re.search(r"(?<![\w.])(\d+)(?:\.\d+)?(?![\w.])", sentence)
            if found and len(sentence) < 300:
                changed = sentence[: found.start(1)] + str(int(found.group(1)) + 7) + sentence[found.end(1) :]
                pairs.append((changed, sentence, " ".join(doc["abstract"])))
                break
    assert len(pairs) >= 100
    for changed, original, abstract in pairs[:100]:
        v = verifier.verify(f"{changed} [1]", [Evidence("1", "d:0", abstract)], 1.0)
        assert all(c.verdict == Verdict.UNSUPPORTED for c in v.manifest.claims), (changed, original)
        assert v.abstain and v.confidence <= 0.25
