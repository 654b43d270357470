"""What every gRPC call passes through besides error mapping: the shared token (when configured),
the request id (from the caller's `x-request-id`, into logs and traces), and Prometheus metrics per
method and status. The client side adds the token and the current request id to every call."""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import Counter, Histogram

from ragstack.telemetry import REQUEST_ID

RPC_REQUESTS = Counter(
    "ragstack_rpc_requests_total", "gRPC calls served, by method and status.", ["method", "code"]
)
RPC_SECONDS = Histogram(
    "ragstack_rpc_duration_seconds", "gRPC call duration (streams: until the last message).", ["method"]
)

# Probes and discovery stay open: load balancers and grpcurl need them without the token.
_OPEN = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _metadata(details: grpc.HandlerCallDetails) -> dict[str, str]:
    return {k: v for k, v in (details.invocation_metadata or ()) if isinstance(v, str)}


class GuardInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, token: str = "") -> None:
        self._token = token.encode()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        method = details.method
        metadata = _metadata(details)
        allowed = not self._token or method.startswith(_OPEN) or self._authorized(metadata)
        request_id = metadata.get("x-request-id", "")[:128]

        async def deny(context: grpc.aio.ServicerContext) -> None:
            RPC_REQUESTS.labels(method, "UNAUTHENTICATED").inc()
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token (services.token)")

        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if not allowed:
                    await deny(context)
                REQUEST_ID.set(request_id)
                start, code = time.perf_counter(), "OK"
                try:
                    return await inner_uu(request, context)
                except BaseException:
                    code = _code(context)
                    raise
                finally:
                    _observe(method, code, start)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                if not allowed:
                    await deny(context)
                REQUEST_ID.set(request_id)
                start, code = time.perf_counter(), "OK"
                try:
                    async for item in inner_us(request, context):
                        yield item
                except BaseException:
                    code = _code(context)
                    raise
                finally:
                    _observe(method, code, start)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _authorized(self, metadata: dict[str, str]) -> bool:
        given = metadata.get("authorization", "").removeprefix("Bearer ").strip().encode()
        return hmac.compare_digest(given, self._token)


def _code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "CANCELLED"


def _observe(method: str, code: str, start: float) -> None:
    RPC_REQUESTS.labels(method, code).inc()
    RPC_SECONDS.labels(method).observe(time.perf_counter() - start)


class _Metadata:
    """Adds the token and the current request id to an outgoing call."""

    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()))
        if self._token:
            metadata.add("authorization", f"Bearer {self._token}")
        if request_id := REQUEST_ID.get():
            metadata.add("x-request-id", request_id)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class MetadataUnary(_Metadata, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)


class MetadataStream(_Metadata, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._details(details), request)
