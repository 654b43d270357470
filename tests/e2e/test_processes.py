"""The CLI and `ragstack serve` as a user runs them: separate processes, real ports, signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ragstack.bench.cluster import free_ports
from tests.conftest import MODEL_DIR, SAMPLES

RAGSTACK = [sys.executable, "-m", "ragstack.cli.main"]


def write_config(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    names = ("ingest", "retrieve", "agent", "verify", "gateway")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    cfg = {
        "data_dir": str(tmp_path / "data"),
        "models": {"embedder_dir": str(MODEL_DIR)},
        "services": {n: {"port": p} for n, p in ports.items()},
        "llm": {"enabled": False},
    }
    path = tmp_path / "ragstack.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, ports


def env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1"}


def test_help_is_light() -> None:
    """`ragstack --help` must not import the heavy stacks (models, stores, servers)."""
    code = (
        "import sys; from click.testing import CliRunner; from ragstack.cli.main import cli;"
        "r = CliRunner().invoke(cli, ['--help']); assert r.exit_code == 0, r.output;"
        "heavy = ('onnxruntime', 'lancedb', 'tantivy', 'grpc', 'fastapi', 'numpy');"
        "heavy = [m for m in heavy if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env())
    assert out.stdout.strip() == ""


@pytest.mark.timeout(900)  # six CLI processes, each loading the models: over 300 s on a loaded machine
def test_cli_ingest_then_ask_embedded(tmp_path: Path) -> None:
    config, _ = write_config(tmp_path)
    ingest = subprocess.run(
        [*RAGSTACK, "-c", str(config), "ingest", str(SAMPLES)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert ingest.returncode == 0, ingest.stderr
    assert "12 files: 12 indexed, 0 unchanged, 0 failed, 0 removed" in ingest.stderr
    again = subprocess.run(
        [*RAGSTACK, "-c", str(config), "ingest", str(SAMPLES)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert "0 indexed, 12 unchanged" in again.stderr
    ask = subprocess.run(
        [*RAGSTACK, "-c", str(config), "ask", "Who proposed reciprocal rank fusion?", "--json"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert ask.returncode == 0, ask.stderr
    done = json.loads(ask.stdout)
    assert "Cormack" in done["answer"] and done["citations"] and done["manifest"]["claims"]
    assert (tmp_path / "data" / "traces" / f"{done['trace_id']}.json").exists()
    listed = subprocess.run(
        [*RAGSTACK, "-c", str(config), "traces", "list"],
        capture_output=True,
        text=True,
        env=env(),
        check=True,
    )
    assert done["trace_id"] in listed.stdout and "Who proposed" in listed.stdout
    shown = subprocess.run(
        [*RAGSTACK, "-c", str(config), "traces", "show", done["trace_id"]],
        capture_output=True,
        text=True,
        env=env(),
        check=True,
    )
    assert json.loads(shown.stdout)["answer"] == done["answer"]
    text = subprocess.run(
        [*RAGSTACK, "-c", str(config), "ask", "Who proposed reciprocal rank fusion?"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
    )
    assert "Sources" in text.stdout and "Verification (offline)" in text.stdout


def test_bad_config_fails_at_start_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "ragstack.yaml"
    bad.write_text("retrieve:\n  top_kk: 3\n")
    out = subprocess.run([*RAGSTACK, "-c", str(bad), "ask", "x"], capture_output=True, text=True, env=env())
    assert out.returncode != 0 and "retrieve.top_kk: unknown key" in out.stderr


def serve(config: Path, *args: str) -> subprocess.Popen[str]:
    """`ragstack serve ARGS` in a process of its own, stdout and stderr captured together."""
    return subprocess.Popen(
        [*RAGSTACK, "-c", str(config), "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env(),
    )


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited early: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("not ready in time")


@pytest.mark.slow
def test_serve_all_then_cli_uses_it_then_sigterm(tmp_path: Path) -> None:
    config, ports = write_config(tmp_path)
    proc = serve(config)
    try:
        _wait_ready(f"http://127.0.0.1:{ports['gateway']}/health/ready", proc)

        # The CLI finds the running server and goes through it (the server holds the writer lock),
        # which reads files only under its ingest.allowed_roots (by default <data_dir>/inbox).
        def cli_ingest(path: Path) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*RAGSTACK, "-c", str(config), "ingest", str(path)],
                capture_output=True,
                text=True,
                env=env(),
                timeout=120,
            )

        refused = cli_ingest(SAMPLES / "bm25.md")
        assert refused.returncode == 1 and "PERMISSION_DENIED" in refused.stderr
        assert f"running at 127.0.0.1:{ports['ingest']}" in refused.stderr and "inbox" in refused.stderr
        inbox = tmp_path / "data" / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        shutil.copy(SAMPLES / "bm25.md", inbox)
        ingest = cli_ingest(inbox / "bm25.md")
        assert ingest.returncode == 0 and "1 indexed" in ingest.stderr and "embedded" not in ingest.stderr
        resp = httpx.post(
            f"http://127.0.0.1:{ports['gateway']}/v1/query",
            json={"question": "What does the b parameter of BM25 control?", "stream": False},
            timeout=60,
        )
        assert resp.status_code == 200 and resp.json()["citations"]
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    for name in ("ingest", "retrieve", "agent", "verify"):
        assert f"{name:9} SERVING" in out
    assert "shutting down" in out


@pytest.mark.slow
def test_split_mode_one_service_per_process(tmp_path: Path) -> None:
    config, ports = write_config(tmp_path)
    procs = {name: serve(config, "--service", name) for name in ("retrieve", "verify", "agent")}
    try:
        import grpc
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        deadline = time.monotonic() + 120
        for name in procs:
            while True:
                with grpc.insecure_channel(f"127.0.0.1:{ports[name]}") as ch:
                    try:
                        status = health_pb2_grpc.HealthStub(ch).Check(
                            health_pb2.HealthCheckRequest(), timeout=1
                        )
                        if status.status == health_pb2.HealthCheckResponse.SERVING:
                            break
                    except grpc.RpcError:
                        pass
                assert time.monotonic() < deadline and procs[name].poll() is None, name
                time.sleep(0.3)
        # The agent in its own process reaches retrieve and verify in theirs (empty library: withheld).
        ask = subprocess.run(
            [*RAGSTACK, "-c", str(config), "ask", "anything about BM25?", "--json"],
            capture_output=True,
            text=True,
            env=env(),
            timeout=120,
        )
        assert ask.returncode == 0, ask.stderr
        assert json.loads(ask.stdout)["abstained"] is True
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        for p in procs.values():
            p.communicate(timeout=30)
    assert all(p.returncode == 0 for p in procs.values())
