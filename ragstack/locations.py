"""Where RAGStack keeps its files when the config does not say: per-user folders, so `ragstack`
works from any folder. On Linux: models and data under ~/.local/share/ragstack, the user's config
at ~/.config/ragstack/ragstack.yaml (platformdirs picks the platform's places). RAGSTACK_HOME moves
all three into one folder: a second setup beside the first, a container, a test."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "RAGSTACK_HOME"
CONFIG_NAME = "ragstack.yaml"


def _home(environ: Mapping[str, str] | None) -> Path | None:
    value = (os.environ if environ is None else environ).get(HOME_ENV, "")
    return Path(value).expanduser().absolute() if value else None


def data_home(environ: Mapping[str, str] | None = None) -> Path:
    """Models and stores live under it."""
    import platformdirs

    return _home(environ) or platformdirs.user_data_path("ragstack", appauthor=False)


def models_dir(environ: Mapping[str, str] | None = None) -> Path:
    return data_home(environ) / "models"


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The stores, caches and traces of a config that names no `data_dir`."""
    return data_home(environ) / "data"


def user_config(environ: Mapping[str, str] | None = None) -> Path:
    """The config read when the working folder has no ragstack.yaml."""
    import platformdirs

    home = _home(environ)
    return (home or platformdirs.user_config_path("ragstack", appauthor=False)) / CONFIG_NAME
