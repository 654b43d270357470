"""Verify: every claim of the draft checked against the evidence it cites (the verify service)."""

from __future__ import annotations

from dataclasses import asdict

from opentelemetry.trace import get_tracer

from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.query_trace import QueryTrace
from services.agent.ports import VerifierPort
from services.agent.stages.draft import Draft

tracer = get_tracer("ragstack.agent")


class Verify:
    def __init__(self, verifier: VerifierPort, generation: GenerationConfig) -> None:
        self._verifier = verifier
        self._gen = generation

    async def run(self, draft: Draft, evidence_score: float, trace: QueryTrace) -> d.Verification:
        """Nothing drafted is an abstention; with `generation.verify_answers` off the manifest says
        the answer went unverified."""
        if not draft.text:
            verification = d.Verification(d.Manifest(method="none", verified=False), 0.0, True)
        elif self._gen.verify_answers:
            with tracer.start_as_current_span("agent.verify"):
                verification = await self._verifier.verify(
                    draft.text,
                    [d.Evidence(e.ref, e.hit.chunk.chunk_id, e.hit.chunk.text) for e in draft.evidence],
                    min(max(evidence_score, 0.0), 1.0),  # the service refuses a grade out of 0..1
                )
        else:
            verification = d.Verification(
                d.Manifest(method="disabled", verified=False), round(evidence_score, 4), False
            )
        trace.verification = asdict(verification)
        return verification
