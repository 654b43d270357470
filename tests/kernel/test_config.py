from __future__ import annotations

from pathlib import Path

import pytest

from ragstack.config import load_config
from ragstack.errors import ConfigError


def test_defaults_need_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, {})
    assert cfg.services.retrieve.address == "127.0.0.1:50052"
    assert cfg.services.gateway.port == 8080
    assert cfg.generation.abstain_threshold == 0.5
    assert cfg.data_dir == tmp_path / ".ragstack"


def test_file_values_and_relative_paths(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "ragstack.yaml"
    path.parent.mkdir()
    path.write_text("data_dir: store\nretrieve:\n  top_k: 9\nservices:\n  verify:\n    port: 6000\n")
    cfg = load_config(path, {})
    assert cfg.retrieve.top_k == 9
    assert cfg.services.verify.address == "127.0.0.1:6000"
    assert cfg.data_dir == path.parent / "store"


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ragstack.yaml"
    path.write_text("retrieve:\n  topk: 3\n")
    with pytest.raises(ConfigError, match=r"retrieve\.topk: unknown key"):
        load_config(path, {})


def test_bad_value_is_named(tmp_path: Path) -> None:
    path = tmp_path / "ragstack.yaml"
    path.write_text("generation:\n  abstain_threshold: 2\n")
    with pytest.raises(ConfigError, match=r"generation\.abstain_threshold"):
        load_config(path, {})


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ragstack.yaml"
    path.write_text("retrieve:\n  top_k: 3\n")
    cfg = load_config(
        path, {"RAGSTACK__RETRIEVE__TOP_K": "8", "RAGSTACK__LLM__ENABLED": "false", "OTHER": "x"}
    )
    assert cfg.retrieve.top_k == 8 and cfg.llm.enabled is False


def test_unknown_environment_key_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"retrieve\.nope: unknown key"):
        load_config(None, {"RAGSTACK__RETRIEVE__NOPE": "1"})


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.yaml", {})


def test_example_config_matches_the_schema() -> None:
    example = Path(__file__).resolve().parents[2] / "ragstack.example.yaml"
    cfg = load_config(example, {})
    assert cfg.library == "default"


def test_the_example_config_lists_every_key() -> None:
    """ragstack.example.yaml is the reference of every setting: none may be left out of it."""
    import yaml
    from pydantic import BaseModel

    from ragstack.config import Config

    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "ragstack.example.yaml").read_text())

    def missing(model: type[BaseModel], given: dict, path: str) -> list[str]:
        out = []
        for name, info in model.model_fields.items():
            if name not in given:
                out.append(f"{path}{name}")
            elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                out += missing(info.annotation, given[name] or {}, f"{path}{name}.")
        return out

    assert missing(Config, example, "") == []
