"""The offline claim checker: semantic similarity plus consistency checks on numbers, names,
negation and the direction of an effect.

A claim is judged only against the evidence its refs point at. A claim with no ref, or with refs
that match no evidence, cannot be judged and is unsupported (fail closed). A number or a coded name
in the claim that the cited evidence does not contain makes the claim unsupported, however similar
the text; so does a negation, or an effect going the other way, against the closest evidence sentence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ragstack import policy
from ragstack.domain import (
    MAX_ANSWER_CHARS,
    MAX_EVIDENCE_CHARS,
    Claim,
    Evidence,
    Manifest,
    Verdict,
    Verification,
)
from ragstack.errors import InvalidArgument
from ragstack.text import content_words, numbers, split_sentences
from services.verify.claims import DraftClaim, split_claims
from services.verify.llm_judge import LLMJudge

_MONTH = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b"
)
# Names that must appear in the evidence as they are: codes, genes, acronyms ("PPM1D", "MafA", "BM25").
_NAMED = re.compile(r"\b(?=\w*[A-Z]\w*[A-Z0-9])[A-Za-z][A-Za-z0-9-]{1,15}\b")


class SentenceEmbedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class OfflineChecker:
    method = "offline"

    def __init__(
        self, embedder: SentenceEmbedder, support_threshold: float, partial_threshold: float
    ) -> None:
        self._embedder = embedder
        self._support = support_threshold
        self._partial = partial_threshold

    def guard(self, claim: DraftClaim, evidence: Mapping[str, Evidence]) -> Claim | None:
        """The checks no judge may overrule: refs that point at evidence, and numbers and coded
        names the cited evidence contains. An unsupported verdict, or None when they pass."""
        if not claim.refs:
            return self.verdict(claim, Verdict.UNSUPPORTED, 1.0, "cites no evidence")
        unknown = [r for r in claim.refs if r not in evidence]
        if unknown:  # a made-up source beside real ones is still a made-up source
            return self.verdict(claim, Verdict.UNSUPPORTED, 1.0, f"refs {unknown} match no evidence")
        cited = [evidence[r] for r in claim.refs]
        text = " ".join(e.text for e in cited)
        missing = numbers(claim.text) - numbers(text)
        if missing:
            return self.verdict(
                claim,
                Verdict.UNSUPPORTED,
                policy.CONFIDENCE_MISSING_NUMBER,
                f"number {sorted(missing)[0]} is not in the cited evidence",
            )
        named = [n for n in _NAMED.findall(claim.text) + _MONTH.findall(claim.text) if not _mentions(text, n)]
        if named:
            reason = f"{named[0]} is not in the cited evidence"
            return self.verdict(claim, Verdict.UNSUPPORTED, policy.CONFIDENCE_MISSING_NAME, reason)
        return None

    def judge(
        self, claim: DraftClaim, evidence: Mapping[str, Evidence], seen: dict[str, np.ndarray] | None = None
    ) -> Claim:
        """`seen`: the sentence vectors of earlier claims' evidence, reused (and added to)."""
        refused = self.guard(claim, evidence)
        if refused is not None:
            return refused
        cited = [evidence[r] for r in claim.refs if r in evidence]
        text = " ".join(e.text for e in cited)
        sentences = [s for e in cited for s in split_sentences(e.text)] or [text]
        seen = {} if seen is None else seen
        new = [s for s in dict.fromkeys(sentences) if s not in seen]
        vectors = self._embedder.embed([claim.text, *new])
        seen.update(zip(new, vectors[1:], strict=True))
        sims = np.stack([seen[s] for s in sentences]) @ vectors[0]
        words = content_words(claim.text)
        coverage = len(words & content_words(text)) / len(words) if words else 0.0
        w = policy.CLAIM_SIMILARITY_WEIGHT
        score = w * float(sims.max()) + (1 - w) * coverage
        # The closest sentence by meaning and wording both: where a negation must agree.
        per_sentence = [
            w * float(sims[i]) + (1 - w) * (len(words & content_words(s)) / len(words) if words else 0.0)
            for i, s in enumerate(sentences)
        ]
        best = int(np.argmax(per_sentence))
        # The number must be where the claim is stated, not anywhere in the abstract.
        misplaced = numbers(claim.text) - numbers(sentences[best])
        if misplaced:
            return self.verdict(
                claim,
                Verdict.UNSUPPORTED,
                policy.CONFIDENCE_MISSING_NAME,
                f"number {sorted(misplaced)[0]} is not in the closest evidence sentence",
            )
        if bool(policy.NEGATION.search(claim.text)) != bool(policy.NEGATION.search(sentences[best])):
            return self.verdict(
                claim,
                Verdict.UNSUPPORTED,
                policy.CONFIDENCE_CONTRADICTION,
                f"negation differs from the closest evidence (score {score:.2f})",
            )
        claimed = _direction(claim.text)
        if claimed and _direction(sentences[best]) == -claimed:
            return self.verdict(
                claim,
                Verdict.UNSUPPORTED,
                policy.CONFIDENCE_CONTRADICTION,
                f"the effect goes the other way in the closest evidence (score {score:.2f})",
            )
        if score >= self._support:
            return self.verdict(
                claim, Verdict.SUPPORTED, score, f"matches cited evidence (score {score:.2f})"
            )
        if score >= self._partial:
            return self.verdict(claim, Verdict.PARTIAL, score, f"partly matches (score {score:.2f})")
        return self.verdict(
            claim, Verdict.UNSUPPORTED, 1.0 - score, f"not found in cited evidence (score {score:.2f})"
        )

    @staticmethod
    def verdict(claim: DraftClaim, verdict: Verdict, confidence: float, reason: str) -> Claim:
        return Claim(
            claim.claim_id, claim.text, claim.refs, verdict, round(min(max(confidence, 0.0), 1.0), 4), reason
        )


def _judged_offline(
    checker: OfflineChecker, drafts: Sequence[DraftClaim], evidence: Mapping[str, Evidence]
) -> dict[str, Claim]:
    seen: dict[str, np.ndarray] = {}  # each evidence sentence embedded once, however many claims cite it
    return {c.claim_id: checker.judge(c, evidence, seen) for c in drafts}


def _check_request(
    answer: str, evidence: Sequence[Evidence], evidence_score: float, threshold: float
) -> None:
    """The request's limits (ragstack.domain), each refusal naming its own."""
    if not answer.strip():
        raise InvalidArgument("answer is empty")
    if len(answer) > MAX_ANSWER_CHARS:
        raise InvalidArgument(f"answer is {len(answer)} characters, over the limit of {MAX_ANSWER_CHARS}")
    size = sum(len(e.text) for e in evidence)
    if size > MAX_EVIDENCE_CHARS:
        raise InvalidArgument(f"evidence is {size} characters in all, over the limit of {MAX_EVIDENCE_CHARS}")
    for name, value in (("evidence_score", evidence_score), ("abstain_threshold", threshold)):
        if not 0.0 <= value <= 1.0:  # NaN too
            raise InvalidArgument(f"{name} {value} is not between 0 and 1")


def _mentions(text: str, name: str) -> bool:
    """The name as written, or an acronym spelled out ("RRF" by "reciprocal rank fusion")."""
    if name.lower() in text.lower():
        return True
    if not (name.isalpha() and name.isupper()):
        return False
    initials = "".join(w[0] for w in re.findall(r"[A-Za-z]+", text)).upper()
    return name in initials


def _direction(text: str) -> int:
    """+1 when a text's effect words say up, -1 down, 0 neither or both."""
    up, down = len(policy.UP.findall(text)), len(policy.DOWN.findall(text))
    return (up > down) - (down > up)


class Verifier:
    def __init__(
        self, checker: OfflineChecker, abstain_threshold: float, judge: LLMJudge | None = None
    ) -> None:
        self._checker = checker
        self._abstain_threshold = abstain_threshold
        self._judge = judge

    def verify(
        self,
        answer: str,
        evidence: Sequence[Evidence],
        evidence_score: float,
        abstain_threshold: float = 0.0,
    ) -> Verification:
        _check_request(answer, evidence, evidence_score, abstain_threshold)
        by_ref = {e.ref: e for e in evidence}
        drafts, judged, method = self._judged(answer, by_ref)
        # Verdicts are matched to claims by id; a claim without a verdict is unsupported.
        claims = tuple(
            judged.get(c.claim_id)
            or Claim(c.claim_id, c.text, c.refs, Verdict.UNSUPPORTED, 1.0, "not judged")
            for c in drafts
        )
        partial = policy.PARTIAL_CLAIM_WEIGHT
        weight = {Verdict.SUPPORTED: 1.0, Verdict.PARTIAL: partial, Verdict.UNSUPPORTED: 0.0}
        ratio = sum(weight[c.verdict] for c in claims) / len(claims) if claims else 0.0
        threshold = abstain_threshold or self._abstain_threshold
        abstain = ratio < threshold or not claims
        w = policy.CONFIDENCE_CLAIMS_WEIGHT
        confidence = w * ratio + (1 - w) * evidence_score
        if abstain:
            confidence = min(confidence, policy.ABSTAIN_CONFIDENCE_CAP)
        manifest = Manifest(claims, round(ratio, 4), method, True)
        return Verification(manifest, round(confidence, 4), abstain)

    def _judged(
        self, answer: str, evidence: Mapping[str, Evidence]
    ) -> tuple[list[DraftClaim], dict[str, Claim], str]:
        """The claims and their verdicts: by the LLM when one is reachable (the offline guards
        still overrule it), else offline. Also says which method ran."""
        if self._judge is None or not self._judge.available():
            drafts = split_claims(answer)
            return drafts, _judged_offline(self._checker, drafts, evidence), self._checker.method
        drafts = self._judge.decompose(answer)
        guarded = {c.claim_id: g for c in drafts if (g := self._checker.guard(c, evidence)) is not None}
        verdicts = self._judge.judge([c for c in drafts if c.claim_id not in guarded], evidence)
        if verdicts is None:
            return drafts, _judged_offline(self._checker, drafts, evidence), self._checker.method
        return drafts, {**verdicts, **guarded}, self._judge.name
