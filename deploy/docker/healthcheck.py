"""Container health probe: `python healthcheck.py [SERVICE] [--ready]`, exit 0 when healthy.

gRPC services (ingest, retrieve, agent, verify) are asked `grpc.health.v1.Health/Check` for their full
service name (e.g. `ragstack.v1.RetrieveService`), which reports SERVING once the server is up and
NOT_SERVING while it drains. The gateway is asked `GET /health/live` (`--ready`: `/health/ready`, which
is 503 until every peer is SERVING).

SERVICE defaults to $RAGSTACK_SERVICE (set by each image target); the port to
$RAGSTACK__SERVICES__<SERVICE>__PORT, else the default port. The probe dials loopback: the service
binds 0.0.0.0 in its container. It imports only grpc and the standard library, so it is quick
enough to run every few seconds.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

# name: (full gRPC service name, default port); the gateway speaks HTTP.
SERVICES = {
    "ingest": ("ragstack.v1.IngestService", 50051),
    "retrieve": ("ragstack.v1.RetrieveService", 50052),
    "agent": ("ragstack.v1.AgentService", 50053),
    "verify": ("ragstack.v1.VerifyService", 50054),
    "gateway": ("", 8080),
}
TIMEOUT_S = 3.0


def _port(name: str) -> int:
    raw = os.environ.get(f"RAGSTACK__SERVICES__{name.upper()}__PORT", "")
    return int(raw) if raw.strip() else SERVICES[name][1]


def check_grpc(service_name: str, port: int) -> str | None:
    """None when SERVING, else the reason."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service_name), timeout=TIMEOUT_S)
        except grpc.RpcError as err:
            return f"{err.code().name}: {err.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return None


def check_http(port: int, ready: bool) -> str | None:
    url = f"http://127.0.0.1:{port}/health/{'ready' if ready else 'live'}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
            return None if reply.status == 200 else f"HTTP {reply.status}"
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except OSError as err:
        return str(err)


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    ready = "--ready" in argv
    name = args[0] if args else os.environ.get("RAGSTACK_SERVICE", "")
    if name not in SERVICES:
        print(f"usage: healthcheck.py {{{','.join(SERVICES)}}} [--ready]", file=sys.stderr)
        return 2
    service_name, _ = SERVICES[name]
    port = _port(name)
    problem = check_http(port, ready) if name == "gateway" else check_grpc(service_name, port)
    if problem:
        print(f"{name} on port {port}: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
