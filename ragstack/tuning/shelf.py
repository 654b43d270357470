"""The embedders a process may need by name: the configured one ("") and the tuned ones under
`<models folder>/tuned/<name>/`, each loaded the first time a library's vectors name it."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from ragstack.errors import FailedPrecondition

M = TypeVar("M")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,95}")


def tuned_name_ok(name: str) -> bool:
    """A tuned embedder's name is one folder name of ours (no path, nothing hidden)."""
    return bool(_NAME.fullmatch(name)) and ".." not in name


class Shelf(Generic[M]):
    def __init__(self, base: M, folder: Path, load: Callable[[Path], M]) -> None:
        """`folder`: where tuned embedders live; `load` opens one of its subfolders."""
        self.base = base
        self.folder = folder
        self._load = load
        self._loaded: dict[str, M] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> M:
        if not name:
            return self.base
        with self._lock:
            found = self._loaded.get(name)
            if found is None:
                if not tuned_name_ok(name):
                    raise FailedPrecondition(
                        f"the library's vectors name an embedder {name!r} that is not valid"
                    )
                path = self.folder / name
                if not (path / "model.onnx").is_file():
                    raise FailedPrecondition(
                        f"the library's vectors come from the tuned embedder {name!r}, which is not "
                        f"installed at {path} (copy the folder from the ingest host's models folder, "
                        "or revert: ragstack tune embedder --revert)"
                    )
                found = self._loaded[name] = self._load(path)
            return found
