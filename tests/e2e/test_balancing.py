"""Two retrieve replicas, each `ragstack serve --service retrieve` in a process of its own: one
channel balances calls over both (round-robin, as over a headless Service's addresses), each
replica's own /metrics counts its share, and after one is killed with SIGKILL no call fails."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from ragstack import domain as d
from ragstack.rpc.clients import RetrieveClient, open_channel
from tests.e2e.test_processes import RAGSTACK, SAMPLES, env, free_ports, write_config

SEARCH = re.compile(
    r'ragstack_rpc_requests_total\{code="OK",method="/ragstack.v1.RetrieveService/Search"\} (\S+)'
)


def replica(config: Path, port: int, metrics: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*RAGSTACK, "-c", str(config), "serve", "--service", "retrieve"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={
            **env(),
            "RAGSTACK__SERVICES__RETRIEVE__PORT": str(port),
            "RAGSTACK__TELEMETRY__METRICS_PORT": str(metrics),
        },
    )


def searches_served(metrics: int) -> int:
    """The replica's own count of the searches it answered, from its /metrics."""
    found = SEARCH.search(httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=5).text)
    return int(float(found.group(1))) if found else 0


def wait_serving(metrics: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while True:
        assert proc.poll() is None and time.monotonic() < deadline, "replica did not start"
        try:
            httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.3)


@pytest.mark.slow
def test_calls_spread_over_two_replicas_and_survive_one_killed(tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    ingested = subprocess.run(
        [*RAGSTACK, "-c", str(config), "ingest", str(SAMPLES)], capture_output=True, text=True, env=env()
    )
    assert ingested.returncode == 0, ingested.stderr
    found = free_ports(4)  # in one call: two calls can hand out the same port twice
    ports, metrics = found[:2], found[2:]
    procs = [replica(config, p, m) for p, m in zip(ports, metrics, strict=True)]
    try:
        for m, proc in zip(metrics, procs, strict=True):
            wait_serving(m, proc)
        target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
        first, shares, second = asyncio.run(_search_around_a_kill(target, procs[0], metrics))
        assert all(first) and all(second)  # no call failed
        assert sum(shares) == len(first) and min(shares) >= 10, shares  # both took calls
        assert searches_served(metrics[1]) == shares[1] + len(second)  # the live one took the rest
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


async def _search_around_a_kill(
    target: str, victim: subprocess.Popen[str], metrics: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """40 searches over one channel, each replica's count of them, then SIGKILL to one replica and
    30 more searches on the same channel: calls the dead replica was picked for fail with
    UNAVAILABLE and are retried on the other."""
    channel = open_channel(target)
    client = RetrieveClient(channel, 10.0)

    async def searches(n: int) -> list[int]:
        found = []
        for _ in range(n):
            hits, *_ = await client.search("reciprocal rank fusion", "default", 3, d.SearchMode.LEXICAL)
            found.append(len(hits))
        return found

    try:
        await channel.channel_ready()
        first = await searches(40)
        shares = [searches_served(m) for m in metrics]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        return first, shares, await searches(30)
    finally:
        await channel.close()
