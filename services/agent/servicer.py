"""AgentService over gRPC: protobuf in, Agent calls, protobuf out."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import grpc

from ragstack import convert
from ragstack.domain import library_name, list_limit
from ragstack.traces import check_trace_id
from ragstack.v1 import agent_pb2, agent_pb2_grpc
from services.agent.ask import Agent

MAX_LISTED = 1_000  # the most feedback entries or sessions one List call returns


class AgentServicer(agent_pb2_grpc.AgentServiceServicer):
    def __init__(self, agent: Agent, default_library: str) -> None:
        self._agent = agent
        self._default_library = default_library

    async def Ask(
        self, request: agent_pb2.AskRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[agent_pb2.AskResponse]:
        events = self._agent.ask(
            request.question,
            library_name(request.library, self._default_library),
            convert.mode_of_request(request.mode),
            request.top_k,
            request.session_id,
            skip_memory=request.skip_memory,
            query_mode=convert.query_mode_of_request(request.query_mode),
        )
        async for event in events:
            yield convert.ask_event_to_pb(event)

    async def GetTrace(
        self, request: agent_pb2.GetTraceRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.GetTraceResponse:
        trace = self._agent.trace(check_trace_id(request.trace_id))
        return agent_pb2.GetTraceResponse(trace_json=json.dumps(trace, ensure_ascii=False))

    async def SendFeedback(
        self, request: agent_pb2.SendFeedbackRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.SendFeedbackResponse:
        given = self._agent.give_feedback(
            check_trace_id(request.trace_id), convert.rating_from_pb(request.rating), request.comment
        )
        return agent_pb2.SendFeedbackResponse(feedback=convert.feedback_to_pb(given))

    async def ListFeedback(
        self, request: agent_pb2.ListFeedbackRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.ListFeedbackResponse:
        library = library_name(request.library, self._default_library) if request.library else ""
        found = self._agent.feedback(list_limit(request.limit, MAX_LISTED), library)
        return agent_pb2.ListFeedbackResponse(feedback=[convert.feedback_to_pb(f) for f in found])

    async def ListSessions(
        self, request: agent_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> agent_pb2.ListSessionsResponse:
        found = self._agent.sessions(list_limit(request.limit, MAX_LISTED))
        return agent_pb2.ListSessionsResponse(
            sessions=[
                agent_pb2.Session(
                    session_id=x.session_id,
                    turns=x.turns,
                    last_question=x.last_question,
                    updated_at=x.updated_at,
                )
                for x in found
            ]
        )


def register(servicer: AgentServicer) -> Callable[[grpc.aio.Server], None]:
    return lambda server: agent_pb2_grpc.add_AgentServiceServicer_to_server(servicer, server)
