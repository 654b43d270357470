"""Builds the gateway app with clients of the services it fronts."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import grpc
from fastapi import FastAPI

from gateway.app import create_app
from gateway.deps import Upstreams
from ragstack.config import Config
from ragstack.rpc.clients import (
    GRPC_SERVICES,
    AgentClient,
    IngestClient,
    RetrieveClient,
    check_health,
    open_channel,
)


def build(cfg: Config, peers: Mapping[str, str]) -> tuple[FastAPI, Callable[[], Awaitable[None]]]:
    mb = cfg.services.max_message_mb
    channels = {name: open_channel(peers[name], mb, cfg.services.token) for name in GRPC_SERVICES}

    async def close() -> None:
        for channel in channels.values():
            await channel.close()

    return create_app(upstreams_of(cfg, channels), cfg.gateway, cfg.library), close


def upstreams_of(cfg: Config, channels: Mapping[str, grpc.aio.Channel]) -> Upstreams:
    """The clients of the services, over `channels` (by service name); ready when each serves."""

    async def readiness() -> dict[str, str]:
        names = list(channels)
        results = await asyncio.gather(
            *(check_health(channels[n], GRPC_SERVICES[n], cfg.deadlines.health_s) for n in names)
        )
        return dict(zip(names, results, strict=True))

    return Upstreams(
        agent=AgentClient(channels["agent"], cfg.deadlines.agent_s),
        ingest=IngestClient(channels["ingest"], cfg.deadlines.ingest_s),
        retrieve=RetrieveClient(channels["retrieve"], cfg.deadlines.retrieve_s),
        readiness=readiness,
    )
