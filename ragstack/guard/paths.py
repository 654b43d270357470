"""Server files a request may name: only under the allowed roots (`ingest.allowed_roots`).

A path is resolved (symlinks followed, `..` collapsed) before it is compared, and refused without
looking at whether it exists, so a refusal says nothing about the file system outside the roots.
Files found while walking an allowed folder are checked again: a symlink inside a root that points
outside it is skipped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from ragstack.errors import PermissionDenied

SETTING = "ingest.allowed_roots"


def default_roots(data_dir: Path) -> list[Path]:
    """Where a service reads files by default: the data directory's inbox."""
    return [data_dir / "inbox"]


class PathGuard:
    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = [Path(r).expanduser().resolve() for r in roots]

    def allows(self, path: Path) -> bool:
        resolved = path.expanduser().resolve()
        return any(resolved == root or resolved.is_relative_to(root) for root in self.roots)

    def check(self, raw: str) -> Path:
        """The path, resolved, when it lies under a root; PermissionDenied otherwise."""
        path = Path(raw).expanduser()
        if "\0" in raw or not self.allows(path):
            raise PermissionDenied(f"path {raw[:300]!r} is not under {SETTING}; refused")
        return path.resolve()

    def check_all(self, paths: Sequence[str]) -> list[Path]:
        return [self.check(p) for p in paths]
