"""Verification by the LLM through the real `ollama` client against a scripted Ollama-protocol
server: decomposition with refs kept honest, verdicts matched by id (fail closed), the offline
guards overruling the judge, and the offline path when the LLM answers nonsense twice."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragstack.config import LLMConfig
from ragstack.domain import Evidence, Verdict
from ragstack.llm import LLM
from services.verify.checker import OfflineChecker, Verifier
from services.verify.llm_judge import LLMJudge
from tests.tools.ollama_server import OllamaServer

EVIDENCE = [
    Evidence("1", "bm25:0", "Lucene and tantivy default to k1 = 1.2 and b = 0.75."),
    Evidence("2", "rrf:0", "Reciprocal rank fusion uses a constant k, usually 60."),
]
ANSWER = "Tantivy defaults to k1 = 1.2 and b = 0.75 [1], and RRF uses k = 60 [2]. It is fast [9]."


def server(decomposition: Any, verdicts: Any) -> OllamaServer:
    def reply(request: dict[str, Any]) -> str:
        system = request["messages"][0]["content"]
        answer = decomposition if system.startswith("You split") else verdicts
        return answer if isinstance(answer, str) else json.dumps(answer)

    return OllamaServer("test", reply)


@pytest.fixture(scope="module")
def checker(embedder) -> OfflineChecker:  # type: ignore[no-untyped-def]
    return OfflineChecker(embedder, 0.55, 0.4)


def verifier_for(fake: OllamaServer, checker: OfflineChecker) -> Verifier:
    return Verifier(checker, 0.5, LLMJudge(LLM(LLMConfig(host=fake.url, model="test", timeout_s=10))))


CLAIMS = {
    "claims": [
        {"id": "c1", "text": "Tantivy defaults to k1 = 1.2.", "refs": ["1"]},
        {
            "id": "c2",
            "text": "Tantivy defaults to b = 0.75, up from 0.9.",
            "refs": ["1"],
        },  # 0.9: not in the evidence
        {"id": "c3", "text": "RRF uses k = 60.", "refs": ["2", "7"]},  # 7 is no marker of the answer
        {"id": "c4", "text": "Tantivy is fast.", "refs": ["9"]},
    ]
}


def test_llm_decomposes_and_judges_with_guards_and_fail_closed(checker: OfflineChecker) -> None:
    verdicts = {
        "verdicts": [
            {"id": "c1", "verdict": "supported", "confidence": 0.9, "reason": "stated"},
            {"id": "c2", "verdict": "supported", "confidence": 0.8, "reason": "wrongly"},  # overruled
            # c3 gets no verdict: unsupported
            {"id": "c99", "verdict": "supported", "confidence": 1.0, "reason": "no such claim"},
        ]
    }
    with server(CLAIMS, verdicts).serve() as fake:
        v = verifier_for(fake, checker).verify(ANSWER, EVIDENCE, 0.9)
    claims = {c.claim_id: c for c in v.manifest.claims}
    assert v.manifest.method == "llm:test"
    assert claims["c1"].verdict == Verdict.SUPPORTED and claims["c1"].reason == "stated"
    assert claims["c2"].verdict == Verdict.UNSUPPORTED and "0.9" in claims["c2"].reason
    assert claims["c3"].refs == ("2",) and claims["c3"].reason == "not judged"
    assert claims["c4"].verdict == Verdict.UNSUPPORTED and "match no evidence" in claims["c4"].reason
    assert v.manifest.supported_ratio == 0.25 and v.abstain and v.confidence <= 0.25
    judged = fake.requests[-1]["messages"][1]["content"]
    assert '<evidence ref="1">' in judged and "c4" not in judged  # guarded claims are not sent


def test_invalid_json_twice_means_the_offline_path(checker: OfflineChecker) -> None:
    with server("not json", {"verdicts": "no"}).serve() as fake:
        v = verifier_for(fake, checker).verify(ANSWER, EVIDENCE, 0.9)
    # Decomposition asked twice, then the sentence split; the judge asked twice, then offline.
    assert len(fake.requests) == 4
    assert v.manifest.method == "offline" and [c.claim_id for c in v.manifest.claims] == ["c1", "c2"]


def test_unreachable_llm_means_offline(checker: OfflineChecker) -> None:
    with server(CLAIMS, {}).serve() as fake:
        url = fake.url
    v = Verifier(checker, 0.5, LLMJudge(LLM(LLMConfig(host=url, model="test", probe_timeout_s=0.5)))).verify(
        ANSWER, EVIDENCE, 0.9
    )
    assert v.manifest.method == "offline" and [c.claim_id for c in v.manifest.claims] == ["c1", "c2"]


def test_a_decomposition_that_drops_a_number_is_not_used(checker: OfflineChecker) -> None:
    lossy = {"claims": [{"id": "c1", "text": "Tantivy has a default k1.", "refs": ["1"]}]}
    verdicts = {"verdicts": [{"id": "c1", "verdict": "supported", "confidence": 0.9, "reason": "ok"}]}
    with server(lossy, verdicts).serve() as fake:
        v = verifier_for(fake, checker).verify("Tantivy defaults to k1 = 1.5 [1].", EVIDENCE, 0.9)
    (claim,) = v.manifest.claims
    assert claim.claim == "Tantivy defaults to k1 = 1.5." and claim.verdict == Verdict.UNSUPPORTED
