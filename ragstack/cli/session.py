"""Reaches the services for one CLI command: the running server when one answers at the configured
address, otherwise an embedded stack started in this process for the command's duration."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from ragstack.config import Config
from ragstack.domain import FileStage, IngestSummary
from ragstack.guard.paths import default_roots
from ragstack.rpc.clients import GRPC_SERVICES, check_health, open_channel


@dataclass
class Session:
    channels: dict[str, grpc.aio.Channel]
    embedded: bool
    addresses: dict[str, str]  # where each channel goes


async def _serving(address: str, service: str) -> bool:
    channel = open_channel(address)
    try:
        return await check_health(channel, GRPC_SERVICES[service], 0.5) == "SERVING"
    finally:
        await channel.close()


def embedded_config(cfg: Config, data_dir: Path | None = None, allow_paths: Sequence[str] = ()) -> Config:
    """`cfg` for services started inside a command: free loopback ports, optionally other stores;
    the ingest service may read the paths the command's user named (`allow_paths`) besides its
    configured roots."""
    local = cfg.model_copy(deep=True)
    for name in GRPC_SERVICES:
        getattr(local.services, name).port = 0
        getattr(local.services, name).dial = ""  # the command's own services, not a deployment's
    if data_dir is not None:
        local.data_dir = data_dir
    local.ingest.source_polling = False  # a command's own service lives as long as the command
    if allow_paths:
        roots = local.ingest.allowed_roots
        base = default_roots(local.data_dir) if roots is None else roots
        local.ingest.allowed_roots = [*base, *(Path(p).expanduser().resolve() for p in allow_paths)]
    # No API is exposed here: the command's user attaches the database files and servers they can
    # reach anyway (RAGStack's own data_dir stays refused; `${NAME}` still needs sql.secret_env).
    # A server started later opens them only if its own sql.allowed_roots / allowed_hosts allow.
    local.sql.allowed_roots = [*local.sql.allowed_roots, Path("/")]
    local.sql.allowed_hosts = [*local.sql.allowed_hosts, "*"]
    return local


@contextlib.asynccontextmanager
async def connect(
    cfg: Config, needed: Sequence[str], start: Sequence[str], allow_paths: Sequence[str] = ()
) -> AsyncIterator[Session]:
    """Channels to `needed` services. When the first of them is not serving at its configured
    address, `start` services run embedded on free loopback ports until the block exits, allowed to
    read `allow_paths` (a running server reads only under its own ingest.allowed_roots)."""
    first = needed[0]
    if await _serving(getattr(cfg.services, first).target, first):
        channels = {
            n: open_channel(getattr(cfg.services, n).target, token=cfg.services.token) for n in needed
        }
        try:
            yield Session(channels, False, {n: getattr(cfg.services, n).target for n in needed})
        finally:
            for c in channels.values():
                await c.close()
        return

    from ragstack.serve import start_stack

    stack = await start_stack(embedded_config(cfg, allow_paths=allow_paths), services=start, gateway=False)
    channels = {n: open_channel(stack.peers[n], token=cfg.services.token) for n in needed}
    try:
        yield Session(channels, True, {n: stack.peers[n] for n in needed})
    finally:
        for c in channels.values():
            await c.close()
        await stack.stop()


async def ingest_with_progress(
    cfg: Config,
    channel: grpc.aio.Channel,
    paths: Sequence[str],
    library: str,
    on_progress: Callable[[str, int, int], None],
    stage: str = "ingest",
) -> IngestSummary:
    """Ingests `paths` into `library`, reporting (stage, done, total) per finished document."""
    from ragstack.rpc.clients import IngestClient

    summary = IngestSummary()
    async for event in IngestClient(channel, cfg.deadlines.ingest_s).ingest(paths=paths, library=library):
        if isinstance(event, IngestSummary):
            summary = event
        elif event.stage in (FileStage.INDEXED, FileStage.UNCHANGED, FileStage.FAILED):
            on_progress(stage, event.index, event.total)
    return summary
