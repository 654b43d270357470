"""`ragstack` from any folder, as a new user runs it: no config, no checkout around it. Models and
stores are found in the user's RAGStack folders (RAGSTACK_HOME here), the config in the working
folder or the user's; `models` and `init` manage them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ragstack.cli.main import cli
from ragstack.config import Config
from tests.conftest import MODEL_DIR, ROOT, SAMPLES

RAGSTACK = [sys.executable, "-m", "ragstack.cli.main"]


def home_with_models(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    (home / "models" / MODEL_DIR.name).symlink_to(MODEL_DIR, target_is_directory=True)
    return home


def run(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAGSTACK_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("RAGSTACK_CONFIG", None)
    return subprocess.run([*RAGSTACK, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_ingest_and_ask_from_a_folder_of_ones_own(tmp_path: Path) -> None:
    home, elsewhere = home_with_models(tmp_path), tmp_path / "notes"
    elsewhere.mkdir()
    (elsewhere / "kettles.md").write_text(
        "# Kettles\n\nThe Brek kettle switches itself off at 96 degrees to save power.\n"
    )
    ingested = run(["ingest", "."], elsewhere, home)
    assert ingested.returncode == 0, ingested.stderr
    assert "1 indexed" in ingested.stdout + ingested.stderr
    asked = run(["ask", "At what temperature does the Brek kettle switch off?", "--json"], elsewhere, home)
    assert asked.returncode == 0, asked.stderr
    done = json.loads(asked.stdout)
    assert "96 degrees" in done["answer"] and done["citations"]
    # The stores are in the user's data folder; the working folder holds only the user's file.
    assert (home / "data" / "catalog.sqlite").exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["kettles.md"]


def test_a_missing_model_names_the_command_that_installs_it(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    out = run(["ingest", str(SAMPLES)], tmp_path, home)
    assert out.returncode != 0
    assert f"no model in {home / 'models' / 'all-minilm-l6-v2'}" in out.stderr
    assert "`ragstack models install`" in out.stderr


def test_models_list_says_what_is_installed_and_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = home_with_models(tmp_path)
    monkeypatch.setenv("RAGSTACK_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    listed = CliRunner().invoke(cli, ["models", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    found = {m["name"]: m for m in json.loads(listed.output)}
    embedder = found["embedder"]
    assert embedder["installed"] and embedder["path"] == str(home / "models" / "all-minilm-l6-v2")
    assert len(embedder["sha256"]) == 64 and embedder["size_mb"] > 1
    assert "retrieve" in embedder["needed_by"]
    assert not found["cross-encoder"]["installed"]
    assert found["cross-encoder"]["install"] == "ragstack models install cross-encoder --from DIR"
    assert found["spacy"]["installed"]
    text = CliRunner().invoke(cli, ["models", "list"]).output
    assert "cross-encoder: MISSING" in text and "install: ragstack models install cross-encoder" in text


def test_models_install_copies_an_export_and_keeps_the_old_one_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("RAGSTACK_HOME", str(home))
    monkeypatch.chdir(tmp_path)
    target = home / "models" / "all-minilm-l6-v2"
    installed = CliRunner().invoke(cli, ["models", "install", "--from", str(MODEL_DIR)])
    assert installed.exit_code == 0, installed.output
    assert (target / "model.onnx").read_bytes() == (MODEL_DIR / "model.onnx").read_bytes()
    assert (target / "model.int8.onnx").is_file()  # the int8 query weights come along
    again = CliRunner().invoke(cli, ["models", "install"])
    assert again.exit_code == 0 and "present at" in again.output

    # An install from before the int8 weights existed gets them from the next `models install`.
    (target / "model.int8.onnx").unlink()
    tools = ROOT / ".venv-export"
    upgraded = CliRunner().invoke(cli, ["models", "install", "--tool-env", str(tools)])
    assert upgraded.exit_code == 0, upgraded.output
    assert "writing model.int8.onnx" in upgraded.output and (target / "model.int8.onnx").is_file()

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    (broken / "tokenizer.json").write_text((MODEL_DIR / "tokenizer.json").read_text())
    refused = CliRunner().invoke(cli, ["models", "install", "--from", str(broken)])
    assert refused.exit_code != 0
    assert "does not load as a sentence embedder" in refused.output
    assert (target / "model.onnx").read_bytes() == (MODEL_DIR / "model.onnx").read_bytes()
    assert sorted(p.name for p in target.parent.iterdir()) == ["all-minilm-l6-v2"]  # nothing staged left

    neither = tmp_path / "neither"
    neither.mkdir()
    refused = CliRunner().invoke(cli, ["models", "install", "--from", str(neither)])
    assert refused.exit_code != 0 and "neither an ONNX export" in refused.output
    no_ce = CliRunner().invoke(cli, ["models", "install", "cross-encoder"])
    assert no_ce.exit_code != 0 and "no cross-encoder ships offline" in no_ce.output


def test_init_writes_a_config_that_is_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    written = CliRunner().invoke(cli, ["init"])
    assert written.exit_code == 0, written.output
    path = tmp_path / "ragstack.yaml"
    assert Config.model_validate(yaml.safe_load(path.read_text())).model_dump() == Config().model_dump()
    assert "# data_dir:" in path.read_text()  # said, with where the default lives
    path.write_text("library: mine\n")
    refused = CliRunner().invoke(cli, ["init"])
    assert refused.exit_code != 0 and "--force" in refused.output
    assert path.read_text() == "library: mine\n"
    assert CliRunner().invoke(cli, ["init", "--force"]).exit_code == 0
    assert "library: default" in path.read_text()
