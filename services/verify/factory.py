"""Builds the verify service."""

from __future__ import annotations

from collections.abc import Mapping

from ragstack.resources import Resources
from ragstack.service import ServiceSpec
from services.verify.checker import OfflineChecker, Verifier
from services.verify.llm_judge import LLMJudge
from services.verify.servicer import VerifyServicer, register


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    checker = OfflineChecker(res.embedder, cfg.verify.support_threshold, cfg.verify.partial_threshold)
    judge = LLMJudge(res.llm) if cfg.verify.llm_judge and cfg.llm.enabled else None
    verifier = Verifier(checker, cfg.generation.abstain_threshold, judge)
    return ServiceSpec(name="verify", register=register(VerifyServicer(verifier)))
