"""Lexical index snapshots on object storage (S3, GCS, Azure, or a local folder), so that any number
of retrieve replicas read one tantivy index that a single ingest writes.

After each committed batch, ingest publishes the index as generation N: the segment files it does not
hold yet go to `files/` (tantivy segment files are immutable: their names carry the segment id), the
commit's `meta.json` and `.managed.json` to `gen-N/`, with a manifest listing every file of the
generation; then `CURRENT` is overwritten with N. A generation is claimed with a conditional create,
so a second writer fails loudly instead of interleaving. Readers poll `CURRENT`, download the files
they lack into a local cache and open the generation there: what they see is always a whole commit.
Files no generation among the newest `keep` refers to are deleted by `prune`."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import obstore
from obstore.store import from_url

from ragstack.errors import Unavailable

_PER_GENERATION = ("meta.json", ".managed.json")  # rewritten by every commit
# Options that tune the HTTP client rather than name credentials or endpoints.
_CLIENT_OPTIONS = {"allow_http", "allow_invalid_certificates", "timeout", "connect_timeout", "proxy_url"}


def open_store(url: str, options: Mapping[str, Any] | None = None) -> Any:
    """An object store for `url` (s3://, gs://, az://, file:///), with LanceDB-style options
    (`aws_endpoint`, `aws_region`, `allow_http`, ...)."""
    options = dict(options or {})
    client: Any = {k: v for k, v in options.items() if k in _CLIENT_OPTIONS}
    config: Any = {k: v for k, v in options.items() if k not in _CLIENT_OPTIONS}
    if url.startswith("file://"):
        Path(url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
        return from_url(url)
    return from_url(url, config=config or None, client_options=client or None)


def _current(store: Any) -> int:
    try:
        return int(bytes(obstore.get(store, "CURRENT").bytes()).decode().strip() or 0)
    except FileNotFoundError:
        return 0


class SnapshotPublisher:
    """Ingest's side: publishes the index folder as the next generation."""

    def __init__(self, index_dir: Path, store: Any) -> None:
        self._dir = index_dir
        self._store = store
        self.generation = 0  # the last one this publisher published or caught up with

    def catch_up(self, cache: Path) -> Path | None:
        """For ingest workers that take turns: the newest generation's folder when another writer
        published a commit this one's folder lacks, to continue from; None when the folder holds
        the newest (this one published it, or the workers share the folder) or none was published."""
        current = _current(self._store)
        if current in (0, self.generation):
            return None
        local = self._dir / "meta.json"
        if (
            local.exists()
            and bytes(obstore.get(self._store, f"gen-{current}/meta.json").bytes()) == local.read_bytes()
        ):
            self.generation = current  # a shared folder: that commit is here already
            return None
        self.generation, folder = SnapshotReader(self._store, cache).latest(force=True)
        return folder

    def publish(self) -> int:
        """Publishes the last commit. Its `meta.json` is read first and names the segments, so a
        merge finishing meanwhile cannot slip in a file the commit does not use; a file a merge
        removed meanwhile makes it try again with the newer commit."""
        for attempt in range(3):
            try:
                return self._publish()
            except FileNotFoundError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _publish(self) -> int:
        meta = (self._dir / "meta.json").read_bytes()
        managed_file = self._dir / ".managed.json"
        managed = managed_file.read_bytes() if managed_file.exists() else b""
        segments = {s["segment_id"].replace("-", "") for s in json.loads(meta)["segments"]}
        names = sorted(
            p.name for p in self._dir.iterdir() if p.is_file() and p.name.split(".", 1)[0] in segments
        )
        present = {
            o["path"].removeprefix("files/") for o in obstore.list(self._store, prefix="files/").collect()
        }
        for name in names:
            if name not in present:
                obstore.put(self._store, f"files/{name}", (self._dir / name).read_bytes())
        generation = _current(self._store) + 1
        obstore.put(self._store, f"gen-{generation}/meta.json", meta)
        if managed:
            obstore.put(self._store, f"gen-{generation}/.managed.json", managed)
        manifest = {"generation": generation, "files": names, "published_at": time.time()}
        try:  # claim the generation: a second publisher gets AlreadyExists here, never a mix
            obstore.put(
                self._store, f"gen-{generation}/manifest.json", json.dumps(manifest).encode(), mode="create"
            )
        except Exception as err:
            raise Unavailable(
                f"lexical snapshot generation {generation} was claimed by another writer: {err}"
            ) from None
        obstore.put(self._store, "CURRENT", str(generation).encode())
        self.generation = generation
        return generation

    def prune(self, keep: int = 3) -> int:
        """Deletes generations older than the newest `keep` and the files none of the kept ones use."""
        current = _current(self._store)
        kept = range(max(1, current - keep + 1), current + 1)
        used: set[str] = set()
        for g in kept:
            used.update(
                json.loads(bytes(obstore.get(self._store, f"gen-{g}/manifest.json").bytes()))["files"]
            )
        removed = 0
        for o in obstore.list(self._store).collect():
            path = o["path"]
            if path.startswith("files/") and path.removeprefix("files/") not in used:
                obstore.delete(self._store, path)
                removed += 1
            elif path.startswith("gen-") and int(path.split("/")[0].removeprefix("gen-")) not in kept:
                obstore.delete(self._store, path)
                removed += 1
        return removed


class SnapshotReader:
    """A replica's side: the newest generation, materialised in a local cache folder."""

    def __init__(self, store: Any, cache_dir: Path, poll_s: float = 5.0) -> None:
        self._store = store
        self._cache = cache_dir
        self._poll_s = poll_s
        self._checked = 0.0
        self._lock = threading.Lock()
        self.generation = 0

    def latest(self, force: bool = False) -> tuple[int, Path | None]:
        """(generation, its folder): fetched when CURRENT moved on, at most every `poll_s`."""
        with self._lock:
            now = time.monotonic()
            if not force and self.generation and now - self._checked < self._poll_s:
                return self.generation, self._folder(self.generation)
            self._checked = now
            current = _current(self._store)
            if current and current != self.generation:
                self._fetch(current)
                self.generation = current
                self._tidy()
            return self.generation, self._folder(self.generation) if self.generation else None

    def _folder(self, generation: int) -> Path:
        return self._cache / f"gen-{generation}"

    def _fetch(self, generation: int) -> None:
        manifest = json.loads(bytes(obstore.get(self._store, f"gen-{generation}/manifest.json").bytes()))
        files = self._cache / "files"
        files.mkdir(parents=True, exist_ok=True)
        staging = self._cache / f".gen-{generation}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in manifest["files"]:
            local = files / name
            if not local.exists():
                part = files / f".{name}.part"
                part.write_bytes(bytes(obstore.get(self._store, f"files/{name}").bytes()))
                part.replace(local)
            os.link(local, staging / name)
        for name in _PER_GENERATION:
            try:
                (staging / name).write_bytes(
                    bytes(obstore.get(self._store, f"gen-{generation}/{name}").bytes())
                )
            except FileNotFoundError:
                pass
        target = self._folder(generation)
        shutil.rmtree(target, ignore_errors=True)
        staging.replace(target)  # the generation appears whole, or not at all

    def _tidy(self, keep: int = 2) -> None:
        gens = sorted((int(p.name.removeprefix("gen-")), p) for p in self._cache.glob("gen-*") if p.is_dir())
        for _, path in gens[:-keep]:
            shutil.rmtree(path, ignore_errors=True)
        used = {p.name for _, path in gens[-keep:] for p in path.iterdir()}
        for f in (self._cache / "files").iterdir():
            if f.name not in used and not f.name.startswith("."):
                f.unlink(missing_ok=True)
