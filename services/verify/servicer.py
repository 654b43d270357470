"""VerifyService over gRPC: protobuf in, Verifier calls, protobuf out."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from ragstack import convert
from ragstack.domain import Evidence
from ragstack.v1 import verify_pb2, verify_pb2_grpc
from services.verify.checker import Verifier


class VerifyServicer(verify_pb2_grpc.VerifyServiceServicer):
    def __init__(self, verifier: Verifier) -> None:
        self._verifier = verifier

    async def Verify(
        self, request: verify_pb2.VerifyRequest, context: grpc.aio.ServicerContext
    ) -> verify_pb2.VerifyResponse:
        evidence = [Evidence(e.ref, e.chunk_id, e.text) for e in request.evidence]
        result = await asyncio.to_thread(
            self._verifier.verify, request.answer, evidence, request.evidence_score, request.abstain_threshold
        )
        return verify_pb2.VerifyResponse(
            manifest=convert.manifest_to_pb(result.manifest),
            confidence=result.confidence,
            abstain=result.abstain,
        )


def register(servicer: VerifyServicer) -> Callable[[grpc.aio.Server], None]:
    return lambda server: verify_pb2_grpc.add_VerifyServiceServicer_to_server(servicer, server)
