"""Builds the agent service, with gRPC clients of its peers (retrieve, verify)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragstack import domain as d
from ragstack.resources import Resources
from ragstack.rpc.clients import RetrieveClient, VerifyClient, open_channel
from ragstack.service import ServiceSpec
from ragstack.state import open_state
from ragstack.traces import TraceStore
from services.agent import feedback as feedback_store
from services.agent import sessions as session_store
from services.agent.ask import Agent
from services.agent.feedback import FeedbackStore
from services.agent.instructions import InstructionDetector
from services.agent.servicer import AgentServicer, register
from services.agent.sessions import SessionStore

# The stores of shared state this service opens (`ragstack migrate` brings them all up to date).
STATE = (feedback_store, session_store)


class AgentRetriever(RetrieveClient):
    """The agent's searches and scores: a query it derived from a question (a rewrite, a bridge, a
    sentence it drafted), or a passage it scores, is cut at the retrieve service's limit rather than
    refused, so it never fails an ask (the embedder reads a text's first 256 word pieces anyway)."""

    async def search(self, query: str, *args: Any, **kwargs: Any) -> tuple[list[d.SearchHit], d.SearchMode]:
        return await super().search(query[: d.MAX_QUERY_CHARS], *args, **kwargs)

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return await super().score(query[: d.MAX_QUERY_CHARS], [t[: d.MAX_SCORE_TEXT_CHARS] for t in texts])


def build(res: Resources, peers: Mapping[str, str]) -> ServiceSpec:
    cfg = res.cfg
    mb = cfg.services.max_message_mb
    retrieve_channel = open_channel(peers["retrieve"], mb, cfg.services.token)
    verify_channel = open_channel(peers["verify"], mb, cfg.services.token)
    sessions = SessionStore(
        open_state(cfg.state, cfg.data_dir, session_store.STORE, session_store.MIGRATIONS),
        cfg.generation.sessions_kept,
        cfg.generation.session_turns_kept,
    )
    feedback = FeedbackStore(
        open_state(cfg.state, cfg.data_dir, feedback_store.STORE, feedback_store.MIGRATIONS),
        cfg.generation.feedback_kept,
    )
    agent = Agent(
        retriever=AgentRetriever(retrieve_channel, cfg.deadlines.retrieve_s),
        verifier=VerifyClient(verify_channel, cfg.deadlines.verify_s),
        llm=res.llm,
        traces=TraceStore(cfg.traces_dir, cfg.traces.retention, cfg.traces.enabled),
        generation=cfg.generation,
        default_top_k=cfg.retrieve.top_k,
        sessions=sessions,
        sql_answer_rows=cfg.sql.answer_rows,
        directed=InstructionDetector(res.parser).directed,
        feedback=feedback,
    )

    async def close() -> None:
        await retrieve_channel.close()
        await verify_channel.close()
        sessions.close()
        feedback.close()

    return ServiceSpec(name="agent", register=register(AgentServicer(agent, cfg.library)), aclose=close)
