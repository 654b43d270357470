"""What a service factory hands the composition root."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


async def _nothing() -> None:
    return None


@dataclass
class ServiceSpec:
    name: str  # ingest | retrieve | agent | verify
    register: Callable[[Any], None]  # adds the servicer to a grpc.aio.Server
    aclose: Callable[[], Awaitable[None]] = _nothing
