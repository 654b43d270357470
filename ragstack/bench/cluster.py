"""A cluster on one machine: each service replica a `ragstack serve --service X` process of its own,
with a config file of its own; the shared state on a throwaway PostgreSQL server (ragstack/bench/
postgres.py). Used by `ragstack bench scale` and by the scale-out test (tests/e2e/test_scale_out.py).

    with PostgresServer(200) as pg, Cluster(root, base, {"retrieve": 2, "ingest": 1}) as cluster:
        base["state"] = {"url": pg.database("state")}      # before the first start
        cluster.start_all()
        cluster.procs["retrieve"][0].kill()                 # SIGKILL

Peers dial every replica of a service (`services.<name>.dial: ipv4:127.0.0.1:P1,127.0.0.1:P2`), and
each process serves Prometheus /metrics on a port of its own (the gateway on its HTTP port)."""

from __future__ import annotations

import copy
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import yaml

RAGSTACK = [sys.executable, "-m", "ragstack.cli.main"]
# Peers before their callers, as in one process (ragstack/serve.py).
ORDER = ("retrieve", "verify", "ingest", "agent", "gateway")


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports that were free a moment ago, below the kernel's ephemeral range.
    A port picked now is bound later, by a process started after others: one from the ephemeral
    range (a bind to port 0) could meanwhile be taken by any outgoing connection of those others (to
    PostgreSQL, to an S3 server), and the process then fails to bind it."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    picked: list[int] = []
    while len(picked) < n:
        port = rng.randrange(max(1024, low - 16384), low)
        if port in picked:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        picked.append(port)
    return picked


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Replica:
    """One `ragstack serve --service X` process."""

    name: str  # e.g. retrieve-1
    service: str
    port: int
    metrics_port: int
    config: Path
    log: Path
    proc: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The gateway's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text

    def rpcs_served(self, method: str) -> int:
        """Calls of `method` (e.g. /ragstack.v1.RetrieveService/Search) this process answered OK."""
        pattern = rf'ragstack_rpc_requests_total\{{code="OK",method="{re.escape(method)}"\}} (\S+)'
        found = re.search(pattern, self.metrics())
        return int(float(found.group(1))) if found else 0

    def kill(self) -> None:
        """SIGKILL: no shutdown, as a crash or an OOM kill."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class Cluster:
    """`replicas` processes per service, under `root` (configs, logs, each one's data_dir). Every
    process gets `base` (a config as a dict) with the services' ports and dial targets set."""

    def __init__(self, root: Path, base: dict[str, Any], replicas: Mapping[str, int]) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.base = base
        self.ports = {s: free_ports(n) for s, n in replicas.items()}
        self.procs: dict[str, list[Replica]] = {s: [] for s in replicas}
        services = base.setdefault("services", {})
        for service, ports in self.ports.items():
            entry = services.setdefault(service, {})
            entry["port"] = ports[0]
            if service != "gateway":  # the gateway is HTTP: its callers pick an address themselves
                entry["dial"] = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def target(self, service: str) -> str:
        """The gRPC target that reaches every replica of `service`."""
        return str(self.base["services"][service]["dial"])

    def start(self, service: str, index: int, extra: Mapping[str, Any] | None = None) -> Replica:
        """Starts replica `index` of `service` (not waiting for it), with `extra` merged into its
        config; a replica started again after a kill keeps its port and data_dir."""
        name = f"{service}-{index + 1}"
        port = self.ports[service][index]
        metrics = port if service == "gateway" else free_ports(1)[0]
        own: dict[str, Any] = {
            "data_dir": str(self.root / name),
            "services": {service: {"port": port}},
        }
        if service != "gateway":
            own["telemetry"] = {"metrics_port": metrics}
        raw = _merge(_merge(self.base, own), extra or {})
        config = self.root / f"{name}.yaml"
        config.write_text(yaml.safe_dump(raw))
        log = self.root / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [*RAGSTACK, "-c", str(config), "serve", "--service", service],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
        replica = Replica(name, service, port, metrics, config, log, proc)
        procs = self.procs[service]
        if index < len(procs):
            procs[index] = replica
        else:
            procs.append(replica)
        return replica

    def start_all(self, extra: Mapping[str, Mapping[str, Any]] | None = None, timeout_s: float = 300) -> None:
        """Every replica of every service, peers first; returns when all serve. The first replica
        of each service starts alone, as in a rollout: it creates the stores the others open.
        `extra`: config merged into each replica of a service, by service."""
        services = sorted(self.ports, key=ORDER.index)
        for first in (True, False):
            started = []
            for service in services:
                indexes = [0] if first else range(1, len(self.ports[service]))
                started += [self.start(service, i, (extra or {}).get(service)) for i in indexes]
            for replica in started:
                self.wait_ready(replica, timeout_s)

    def wait_ready(self, replica: Replica, timeout_s: float = 300) -> None:
        """Until the process answers on its metrics port (opened once its services serve) or, for
        the gateway, /health/live."""
        path = "/health/live" if replica.service == "gateway" else "/metrics"
        deadline = time.monotonic() + timeout_s
        while True:
            if not replica.alive():
                raise RuntimeError(
                    f"{replica.name} exited ({replica.proc.returncode}):\n{replica.log_tail()}"
                )
            try:
                if httpx.get(f"http://127.0.0.1:{replica.metrics_port}{path}", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{replica.name} not serving after {timeout_s:.0f} s:\n{replica.log_tail()}"
                )
            time.sleep(0.3)

    def stop(self, service: str) -> None:
        for replica in self.procs.get(service, []):
            replica.stop()

    def close(self) -> None:
        """SIGTERM to every live process (callers first), SIGKILL to any that does not stop."""
        for service in reversed(ORDER):
            self.stop(service)


def sum_rpcs(replicas: Sequence[Replica], method: str) -> list[int]:
    """Each live replica's count of `method` calls answered (0 for a dead one)."""
    return [r.rpcs_served(method) if r.alive() else 0 for r in replicas]
