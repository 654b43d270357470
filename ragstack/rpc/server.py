"""Starts one gRPC service: grpc.aio, standard health, reflection, error mapping, tracing, graceful stop."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ragstack.config import Endpoint
from ragstack.rpc.clients import KEEPALIVE_MS
from ragstack.rpc.interceptors import ServiceInterceptor

MAX_CONNECTION_AGE_MS = 300_000  # see start_server
log = logging.getLogger(__name__)


@dataclass
class RunningServer:
    name: str
    service_name: str
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    host: str

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def stop(self, grace_s: float) -> None:
        """Reports NOT_SERVING, then lets in-flight RPCs finish within `grace_s`."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)


async def start_server(
    name: str,
    service_name: str,
    register: Callable[[grpc.aio.Server], None],
    endpoint: Endpoint,
    max_message_mb: int,
    token: str = "",
    default_library: str = "default",
) -> RunningServer:
    """Binds `endpoint` (port 0 picks one), registers the servicer and starts serving.

    `service_name` is the full proto name (e.g. `ragstack.v1.RetrieveService`); health reports
    SERVING for it and for the empty name once the server is up.
    """
    limit = max_message_mb * 1024 * 1024
    server = grpc.aio.server(
        interceptors=[ServiceInterceptor(token, default_library)],
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            # The clients' keepalive pings (ragstack/rpc/clients.py), idle connections included.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
            # A connection is closed gracefully after this long (calls in flight finish): clients
            # then resolve the name again, so replicas added later get their share of calls.
            ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_MS),
        ],
    )
    register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (service_name, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    port = server.add_insecure_port(endpoint.address)
    if port == 0:
        raise OSError(f"{name}: cannot bind {endpoint.address}")
    await server.start()
    for svc in (service_name, ""):
        await health_servicer.set(svc, health_pb2.HealthCheckResponse.SERVING)
    log.info("%s serving on %s:%d", name, endpoint.host, port)
    return RunningServer(name, service_name, server, health_servicer, port, endpoint.host)
