"""The ONNX cross-encoder runtime is exact against PyTorch on the same weights.

No pretrained cross-encoder installs offline here, so the test builds one from the bundled MiniLM
encoder (seeded classification head) in the tool environment, installs it exactly as a user would
(`ragstack models install cross-encoder --from DIR`: optimum's export), and compares the logits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ragstack.cli.main import cli
from ragstack.errors import ModelMissing
from ragstack.reranking import CrossEncoder
from tests.conftest import ROOT

TOOL_PY = ROOT / ".venv-export" / "bin" / "python"
PAIRS = [
    ["what is bm25", "BM25 is a ranking function used by search engines."],
    ["what is bm25", "Cats purr when they are content."],
    ["how are chunks cut", "Chunks never split a code block or a table row, and carry their heading path."],
    ["x", "a much longer passage " * 40],
]


@pytest.mark.slow
def test_onnx_cross_encoder_matches_pytorch(tmp_path: Path) -> None:
    if not TOOL_PY.exists():
        pytest.fail("no tool environment at .venv-export: run `make models`")
    model_dir, onnx_dir = tmp_path / "hf", tmp_path / "onnx"
    ref = subprocess.run(
        [
            str(TOOL_PY),
            str(ROOT / "tests" / "tools" / "make_cross_encoder.py"),
            str(model_dir),
            json.dumps(PAIRS),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    expected = np.array(json.loads(ref.stdout.strip().splitlines()[-1]))
    installed = CliRunner().invoke(
        cli,
        [
            "models",
            "install",
            "cross-encoder",
            "--from",
            str(model_dir),
            "--tool-env",
            str(TOOL_PY.parent.parent),
        ],
        env={"RAGSTACK__RETRIEVE__RERANKER_DIR": str(onnx_dir)},
    )
    assert installed.exit_code == 0, installed.output
    assert f"cross-encoder: installed at {onnx_dir}" in installed.output
    listed = CliRunner().invoke(
        cli, ["models", "list", "--json"], env={"RAGSTACK__RETRIEVE__RERANKER_DIR": str(onnx_dir)}
    )
    entry = next(m for m in json.loads(listed.output) if m["name"] == "cross-encoder")
    assert entry["installed"] and len(entry["sha256"]) == 64 and entry["path"] == str(onnx_dir)
    ce = CrossEncoder(onnx_dir, provider="cpu", batch_size=2)
    got = np.concatenate([ce.score(q, [p]) for q, p in PAIRS])
    assert np.allclose(got, expected, atol=1e-4), (got, expected)
    # Batching (sorted by length, padded) changes nothing.
    by_query = ce.score(PAIRS[0][0], [PAIRS[0][1], PAIRS[1][1]])
    assert np.allclose(by_query, expected[:2], atol=1e-4)


def test_missing_model_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ModelMissing, match="ragstack models install cross-encoder --from DIR"):
        CrossEncoder(tmp_path)
