"""The one place domain errors become gRPC status codes."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from ragstack.errors import RagstackError

log = logging.getLogger(__name__)


def status_for(err: RagstackError) -> grpc.StatusCode:
    return getattr(grpc.StatusCode, err.code, grpc.StatusCode.INTERNAL)


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if isinstance(exc, RagstackError):
        await context.abort(status_for(exc), str(exc))
    log.exception("unhandled error in %s", method)
    # Never leak a stack trace to the caller; the log has it.
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}; see the service log")


class ErrorMappingInterceptor(grpc.aio.ServerInterceptor):
    """Maps `RagstackError` subclasses to their status code, anything else to INTERNAL."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method
        if handler.unary_unary is not None:
            inner_uu = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    return await inner_uu(request, context)
                except Exception as exc:
                    if _is_abort(exc):
                        raise
                    await _abort(context, exc, method)

            return grpc.unary_unary_rpc_method_handler(
                unary_unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_us = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                try:
                    async for item in inner_us(request, context):
                        yield item
                except Exception as exc:
                    if _is_abort(exc):
                        raise
                    await _abort(context, exc, method)

            return grpc.unary_stream_rpc_method_handler(
                unary_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _is_abort(exc: Exception) -> bool:
    # context.abort() raises grpc.aio.AbortError (an internal type); let it through untouched.
    return type(exc).__name__ == "AbortError"
