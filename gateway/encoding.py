"""Protobuf messages and stream events as the gateway's JSON and Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from google.protobuf.json_format import MessageToDict

from ragstack import convert
from ragstack.errors import RagstackError, RpcError


def pb_json(message: Any) -> dict[str, Any]:
    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def event_json(response: Any) -> tuple[str, dict[str, Any]]:
    """A stream response's event: the name of its oneof field, and that field as JSON."""
    kind = response.WhichOneof("event")
    return kind, pb_json(getattr(response, kind))


def doc_json(doc: Any) -> dict[str, Any]:
    return pb_json(convert.document_to_pb(doc))


def error_message(exc: RagstackError) -> str:
    return exc.message if isinstance(exc, RpcError) else str(exc)


async def sse(responses: AsyncIterator[Any]) -> AsyncIterator[dict[str, str]]:
    """A stream's events as SSE: the oneof field names the event, its JSON is the data. A failure
    midway becomes a last `error` event (the status line is already sent)."""
    try:
        async for response in responses:
            kind, data = event_json(response)
            yield {"event": kind, "data": json.dumps(data, ensure_ascii=False)}
    except RagstackError as exc:
        yield {"event": "error", "data": json.dumps({"code": exc.code, "message": error_message(exc)})}
