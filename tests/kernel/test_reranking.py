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
from ragstack.models import QUANTIZED
from ragstack.reranking import CrossEncoder
from tests.conftest import ROOT

TOOL_PY = ROOT / ".venv-export" / "bin" / "python"
PAIRS = [
    ["what is bm25", "BM25 is a ranking function used by search engines."],
    ["what is bm25", "Cats purr when they are content."],
    ["how are chunks cut", "Chunks never split a code block or a table row, and carry their heading path."],
    ["x", "a much longer passage " * 40],
]


Installed = tuple[Path, np.ndarray]  # the model folder, and PyTorch's logits for PAIRS


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The test cross-encoder, installed as a user would, and PyTorch's logits for PAIRS."""
    if not TOOL_PY.exists():
        pytest.fail("no tool environment at .venv-export: run `make models`")
    tmp_path = tmp_path_factory.mktemp("cross-encoder")
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
    return onnx_dir, expected


@pytest.mark.slow
def test_onnx_cross_encoder_matches_pytorch(installed: Installed) -> None:
    onnx_dir, expected = installed
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


@pytest.mark.slow
def test_int8_weights_are_installed_beside_and_score_each_pair_alone(installed: Installed) -> None:
    onnx_dir, expected = installed
    assert (onnx_dir / QUANTIZED).is_file()
    ce = CrossEncoder(onnx_dir, provider="cpu", batch_size=2, file=QUANTIZED)
    assert ce.name.endswith(QUANTIZED) and ce._model.rows_alone and ce._model.lanes is not None
    alone = np.concatenate([ce.score(q, [p]) for q, p in PAIRS])
    assert np.array_equal(ce.score_pairs([(q, p) for q, p in PAIRS]), alone)  # batch-mates change nothing
    # Near fp32's logits: this head is untrained, so they lie close together (0.005 to 0.05).
    assert np.abs(alone - expected).max() < 0.25 * np.ptp(expected)


@pytest.mark.slow
def test_bench_rerank_times_both_and_says_how_int8_ranks(installed: Installed, tmp_path) -> None:
    from ragstack.bench.rerank import bench_rerank
    from tests.conftest import make_config

    onnx_dir, _ = installed
    report = bench_rerank(make_config(tmp_path), onnx_dir, None, candidates=12, n_queries=3)
    assert report["candidates"] == 12 and report["ms_per_pair"] > 0
    int8 = report["int8"]
    assert int8["ms_per_pair"] > 0 and 0.5 < int8["spearman_to_fp32_mean"] <= 1.0
    assert 0 <= int8["fp32_top10_kept_min"] <= int8["fp32_top10_kept_mean"] <= 10


@pytest.mark.slow
def test_the_retrieve_service_reranks_on_the_weights_configured(
    installed: Installed, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    from ragstack.resources import Resources
    from services.retrieve.factory import _reranker
    from tests.conftest import make_config

    onnx_dir, _ = installed

    def reranker(folder: Path, precision: str) -> CrossEncoder | None:
        retrieve = {"reranker": "cross-encoder", "reranker_dir": str(folder), "rerank_precision": precision}
        return _reranker(Resources(make_config(tmp_path / precision, retrieve=retrieve)))

    assert reranker(onnx_dir, "fp32").name == f"cross-encoder:{onnx_dir.name}"  # type: ignore[union-attr]
    assert reranker(onnx_dir, "int8").name.endswith(QUANTIZED)  # type: ignore[union-attr]
    older = tmp_path / "older"  # installed before int8 weights came with it
    older.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (older / name).symlink_to(onnx_dir / name)
    assert reranker(older, "int8").name == "cross-encoder:older"  # type: ignore[union-attr]
    assert "has no model.int8.onnx" in caplog.text and "models install cross-encoder" in caplog.text


def test_missing_model_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ModelMissing, match="ragstack models install cross-encoder --from DIR"):
        CrossEncoder(tmp_path)


@pytest.mark.slow
def test_an_install_without_int8_weights_gets_them_at_the_next(installed: Installed, tmp_path) -> None:
    import shutil

    onnx_dir, _ = installed
    older = tmp_path / "older"  # from before int8 weights came with it, or an ONNX export copied in
    older.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy2(onnx_dir / name, older / name)
    again = CliRunner().invoke(
        cli,
        ["models", "install", "cross-encoder", "--tool-env", str(TOOL_PY.parent.parent)],
        env={"RAGSTACK__RETRIEVE__RERANKER_DIR": str(older)},
    )
    assert again.exit_code == 0, again.output
    assert "writing model.int8.onnx" in again.output and (older / QUANTIZED).is_file()
