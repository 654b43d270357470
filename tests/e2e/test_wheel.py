"""The wheel, as a user installs it: built from the checkout, installed with its base dependencies
alone into a fresh virtual environment, and run from a folder far from the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import MODEL_DIR, ROOT


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_wheel_installs_and_runs_anywhere(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(dist)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("ragstack-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    # The contract, the stubs and the config reference travel inside the package.
    assert "ragstack/proto/ragstack/v1/agent.proto" in names
    assert "ragstack/v1/agent_pb2.py" in names and "ragstack/config.example.yaml" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    pip = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert pip.returncode == 0, pip.stderr

    work, home = tmp_path / "work", tmp_path / "home"
    (work / "notes").mkdir(parents=True)
    (work / "notes" / "tea.md").write_text(
        "# Tea\n\nThe Quellen tea house steeps its green tea for exactly 90 seconds.\n"
    )
    (work / "notes" / "minutes.docx").write_bytes(b"PK\x03\x04 not really a document")
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "RAGSTACK_HOME": str(home), "HOME": str(tmp_path)}

    def ragstack(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(env_dir / "bin" / "ragstack"), *args], cwd=work, env=env, capture_output=True, text=True
        )

    installed = ragstack("models", "install", "--from", str(MODEL_DIR))
    assert installed.returncode == 0, installed.stderr
    assert ragstack("init").returncode == 0 and (work / "ragstack.yaml").exists()

    ingested = ragstack("ingest", "notes")
    out = ingested.stdout + ingested.stderr
    assert ingested.returncode == 0, out
    assert "1 indexed" in out and "1 failed" in out
    # The base install reads text formats; Office files name the extra that reads them.
    assert "needs the `docling` extra: pip install 'ragstack[docling]'" in " ".join(out.split())

    asked = ragstack("ask", "How long does the Quellen tea house steep green tea?", "--json")
    assert asked.returncode == 0, asked.stderr
    done = json.loads(asked.stdout)
    assert "90 seconds" in done["answer"] and done["citations"]
    assert done["manifest"]["verified"]

    listed = json.loads(ragstack("models", "list", "--json").stdout)
    state = {m["name"]: m["installed"] for m in listed}
    assert state["embedder"] and state["spacy"] and not state["ocr"]
    assert sorted(os.listdir(work)) == ["notes", "ragstack.yaml"]  # stores went to RAGSTACK_HOME
