"""Builds the verify service."""

from __future__ import annotations

from collections.abc import Mapping

from ragstack.resources import Resources
from ragstack.service import ServiceSpec
from services.verify.checker import OfflineChecker, Verifier
from services.verify.servicer import VerifyServicer, register


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    checker = OfflineChecker(res.embedder, cfg.verify.support_threshold, cfg.verify.partial_threshold)
    verifier = Verifier(checker, cfg.generation.abstain_threshold)
    return ServiceSpec(name="verify", register=register(VerifyServicer(verifier)))
