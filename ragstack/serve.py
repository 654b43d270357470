"""The composition root: starts some or all services (and the gateway) in this process.

Embedded mode starts all four on loopback plus the gateway; they still call each other through
gRPC. Split mode starts one service and dials its peers at the addresses in the config.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import signal
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field

from ragstack.config import Config
from ragstack.resources import Resources
from ragstack.rpc.clients import GRPC_SERVICES
from ragstack.rpc.server import RunningServer, start_server
from ragstack.service import ServiceSpec
from ragstack.telemetry import setup_tracing

log = logging.getLogger(__name__)

# Peers first: the agent dials retrieve and verify; the gateway dials everyone.
START_ORDER = ("retrieve", "verify", "ingest", "agent")


@dataclass
class Stack:
    cfg: Config
    servers: dict[str, RunningServer] = field(default_factory=dict)
    specs: list[ServiceSpec] = field(default_factory=list)
    peers: dict[str, str] = field(default_factory=dict)
    gateway_port: int | None = None
    _gateway: object | None = None
    _gateway_task: asyncio.Task[None] | None = None
    _gateway_close: Callable[[], Awaitable[None]] | None = None

    @property
    def gateway_url(self) -> str:
        return f"http://{self.cfg.services.gateway.host}:{self.gateway_port}"

    async def stop(self) -> None:
        """Gateway first (no new requests), then each service drains in-flight RPCs."""
        if self._gateway is not None and self._gateway_task is not None:
            self._gateway.should_exit = True  # type: ignore[attr-defined]
            await self._gateway_task
        if self._gateway_close is not None:
            await self._gateway_close()
        grace = self.cfg.services.grace_s
        for name in reversed(START_ORDER):
            if name in self.servers:
                await self.servers[name].stop(grace)
        for spec in self.specs:
            await spec.aclose()


async def start_stack(
    cfg: Config,
    services: Sequence[str] = START_ORDER,
    gateway: bool = True,
    resources: Resources | None = None,
) -> Stack:
    setup_tracing(cfg.telemetry)  # before any server or channel: spans need the provider
    _one_blas_thread()
    res = resources or Resources(cfg)
    stack = Stack(cfg)
    stack.peers = {name: getattr(cfg.services, name).target for name in GRPC_SERVICES}
    try:
        for name in START_ORDER:
            if name not in services:
                continue
            factory = importlib.import_module(f"services.{name}.factory")
            spec: ServiceSpec = factory.build(res, stack.peers)
            stack.specs.append(spec)
            running = await start_server(
                name,
                GRPC_SERVICES[name],
                spec.register,
                getattr(cfg.services, name),
                cfg.services.max_message_mb,
                cfg.services.token,
                cfg.library,
            )
            stack.servers[name] = running
            stack.peers[name] = running.address
        if gateway:
            await _start_gateway(stack)
    except BaseException:
        await stack.stop()
        raise
    # What startup built (models, parsers, schemas, snapshots) lives as long as the process: kept
    # out of the collector's view, a full collection no longer walks it while requests wait.
    gc.collect()
    gc.freeze()
    return stack


def _one_blas_thread() -> None:
    """A server's parallelism is its concurrent requests: numpy's BLAS runs each product on the
    calling thread. OpenBLAS's own pool, one thread per core, spins between calls and starves the
    model threads and the event loop (measured: 8 concurrent dense searches ran at half the rate)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, "blas")


async def _start_gateway(stack: Stack) -> None:
    import uvicorn

    from gateway.factory import build

    if stack.cfg.gateway.api_keys and not stack.cfg.services.token:
        log.warning(
            "gateway.api_keys is set but services.token is not: any process that reaches the gRPC ports "
            "acts as the local admin; set services.token (README, Security)"
        )
    app, close = build(stack.cfg, stack.peers)
    stack._gateway_close = close
    endpoint = stack.cfg.services.gateway

    class GatewayServer(uvicorn.Server):
        """Leaves signals to the composition root, which stops the gateway, then the services."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = GatewayServer(
        uvicorn.Config(
            app,
            host=endpoint.host,
            port=endpoint.port,
            log_level="warning",
            timeout_keep_alive=stack.cfg.gateway.keep_alive_s,
            lifespan="on",  # the MCP endpoint's session manager runs in it
            # The client address (the rate limit's bucket without a valid key) comes from
            # X-Forwarded-For only when the peer is one of gateway.trusted_proxies.
            proxy_headers=bool(stack.cfg.gateway.trusted_proxies),
            forwarded_allow_ips=list(stack.cfg.gateway.trusted_proxies) or None,
            # Open streams (a long ingest's SSE) get the grace, then are cancelled, and with them
            # the calls to the services behind them.
            timeout_graceful_shutdown=max(1, round(stack.cfg.services.grace_s)),
        )
    )
    stack._gateway = server
    stack._gateway_task = asyncio.create_task(server.serve())
    while not server.started:
        if stack._gateway_task.done():
            await stack._gateway_task
            raise OSError(f"gateway could not start on {endpoint.address}")
        await asyncio.sleep(0.02)
    stack.gateway_port = server.servers[0].sockets[0].getsockname()[1]
    log.info("gateway serving on http://%s:%d", endpoint.host, stack.gateway_port)


async def serve_until_signal(
    cfg: Config, services: Sequence[str], gateway: bool, on_ready: Callable[[Stack], None] | None = None
) -> None:
    """Runs until SIGTERM or SIGINT, then shuts down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stack = await start_stack(cfg, services, gateway)
    if cfg.telemetry.metrics_port and not gateway:  # the gateway serves /metrics itself
        from prometheus_client import start_http_server

        host = getattr(cfg.services, services[0]).host  # beside the service it measures
        start_http_server(cfg.telemetry.metrics_port, addr=host)
        log.info("metrics on http://%s:%d/metrics", host, cfg.telemetry.metrics_port)
    if on_ready:
        on_ready(stack)
    await stop.wait()
    log.info("shutting down (grace %.1fs)", cfg.services.grace_s)
    await stack.stop()
