from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ragstack import locations
from ragstack.config import EXAMPLE_CONFIG, Config, default_config_path, load_config
from ragstack.errors import ConfigError


def test_defaults_need_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, {})
    assert cfg.services.retrieve.address == "127.0.0.1:50052"
    assert cfg.services.gateway.port == 8080
    assert cfg.generation.abstain_threshold == 0.5
    home = Path(os.environ[locations.HOME_ENV])  # the tests' own (conftest)
    assert cfg.data_dir == home / "data"
    assert cfg.models.embedder_dir == home / "models" / "all-minilm-l6-v2"
    assert cfg.retrieve.reranker_dir == home / "models" / "cross-encoder"


def test_without_ragstack_home_the_platforms_user_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(locations.HOME_ENV)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    cfg = Config()
    assert cfg.data_dir == Path("/home/someone/.local/share/ragstack/data")
    assert cfg.models.embedder_dir == Path("/home/someone/.local/share/ragstack/models/all-minilm-l6-v2")
    assert locations.user_config() == Path("/home/someone/.config/ragstack/ragstack.yaml")


def test_config_is_searched_here_then_in_the_users_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, here = tmp_path / "home", tmp_path / "project"
    here.mkdir()
    monkeypatch.setenv(locations.HOME_ENV, str(home))
    assert default_config_path(here) is None
    home.mkdir()
    (home / "ragstack.yaml").write_text("library: mine\n")
    assert default_config_path(here) == home / "ragstack.yaml"
    assert load_config(default_config_path(here), {}).library == "mine"
    (here / "ragstack.yaml").write_text("library: this-folder\n")
    assert default_config_path(here) == here / "ragstack.yaml"


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


def test_an_admin_key_with_a_library_scope_is_refused(tmp_path: Path) -> None:
    """Admins span every library (snapshots, vacuum, everyone's jobs): a scope would be ignored."""
    path = tmp_path / "ragstack.yaml"
    key = "  - {name: team-admin, key: k-0123456789abcdef, role: admin, libraries: [team]}\n"
    path.write_text("gateway:\n  api_keys:\n" + key)
    with pytest.raises(ConfigError, match=r"an admin uses every library.*writer role"):
        load_config(path, {})
    path.write_text("gateway:\n  api_keys:\n" + key.replace("role: admin", "role: writer"))
    assert load_config(path, {}).gateway.api_keys[0].libraries == ["team"]


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
    cfg = load_config(EXAMPLE_CONFIG, {})
    assert cfg.library == "default"
    # Every value it sets is the default; the per-user folders are there as comments.
    assert cfg.model_dump() == Config().model_dump()


def test_the_example_config_lists_every_key() -> None:
    """The example config (what `ragstack init` writes) is the reference of every setting: none may
    be left out of it; the per-user folders are there commented out, with their defaults said."""
    import yaml
    from pydantic import BaseModel

    from ragstack.config import Config

    text = EXAMPLE_CONFIG.read_text()
    example = yaml.safe_load(text)

    def missing(model: type[BaseModel], given: dict, path: str) -> list[str]:
        out = []
        for name, info in model.model_fields.items():
            if name not in given:
                if not re.search(rf"^\s*# {name}: ", text, re.M):
                    out.append(f"{path}{name}")
            elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
                out += missing(info.annotation, given[name] or {}, f"{path}{name}.")
        return out

    assert missing(Config, example, "") == []


def test_gateway_mcp_takes_on_and_off_bare_as_yaml_reads_them() -> None:
    assert load_config(None, {"RAGSTACK__GATEWAY__MCP": "off"}).gateway.mcp == "off"
    assert load_config(None, {"RAGSTACK__GATEWAY__MCP": "on"}).gateway.mcp == "on"
    assert load_config(None, {"RAGSTACK__GATEWAY__MCP": "read-only"}).gateway.mcp == "read-only"
    with pytest.raises(ConfigError, match=r"gateway\.mcp"):
        load_config(None, {"RAGSTACK__GATEWAY__MCP": "sometimes"})
