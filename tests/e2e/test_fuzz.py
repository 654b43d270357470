"""The gateway fuzzed from its own OpenAPI document by schemathesis, against `ragstack serve` in its
own process with an API key: every operation, generated inputs, zero server errors (5xx)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_processes import _wait_ready, env, serve, write_config

KEY = "fuzz-key-5d2c"


@pytest.mark.slow
def test_no_server_errors_under_fuzzing(tmp_path: Path) -> None:
    config, ports = write_config(tmp_path)
    raw = yaml.safe_load(config.read_text())
    raw["gateway"] = {"api_keys": [KEY]}
    config.write_text(yaml.safe_dump(raw))
    base = f"http://127.0.0.1:{ports['gateway']}"
    server = serve(config)
    try:
        _wait_ready(f"{base}/health/ready", server)
        fuzz = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"),
                "run",
                f"{base}/openapi.json",
                "--checks",
                "not_a_server_error",
                "--header",
                f"x-api-key: {KEY}",
                "--max-examples",
                "20",
                "--seed",
                "7",
                "--workers",
                "1",
                "--request-timeout",
                "60",
                "--generation-database",
                "none",
            ],
            capture_output=True,
            text=True,
            env=env(),
            timeout=900,
        )
        assert fuzz.returncode == 0, fuzz.stdout[-6000:] + fuzz.stderr[-2000:]
        print(fuzz.stdout)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)
