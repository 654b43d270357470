"""The stores' lifecycle: per-library stats, named snapshots consistent across stores, restore, and
vacuum of old LanceDB versions on a retention window.

A snapshot is taken between two ingest runs (the ingest service holds its write lock): it records the
current version of every LanceDB table and pins it with a LanceDB branch `snapshot-<name>` forked at
that version, and copies the tantivy index (its writer paused, so the copy is one whole commit) and the
catalog (SQLite's backup API) into `<data_dir>/snapshots/<name>/`, beside a `manifest.json`.

Branches, not tags, pin the versions: LanceDB (0.40) refuses to clean up at all while a tagged
version is older than the cutoff, and the lancedb binding cannot turn that check off; a version a
branch was forked from is kept by cleanup, which removes the others. So a snapshot costs the LanceDB
data its version holds that later versions no longer do, plus its copies.

Restore puts each LanceDB table back to its pinned version (a new version with the old contents, so
readers that follow versions reload), swaps the tantivy copy in by rename, and restores the catalog
in one SQLite transaction; a marker file makes the ingest service finish an interrupted restore when
it starts again. Vacuum compacts small LanceDB fragments and removes the versions older than the
window (the latest and the pinned ones stay), then lets tantivy delete files no commit uses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragstack.disk import require_free
from ragstack.domain import LibraryStats, SnapshotInfo, StoreStats, VacuumReport
from ragstack.errors import AlreadyExists, InvalidArgument, NotFound, RagstackError, ResourceExhausted
from ragstack.stores.layout import LAYOUT_VERSION
from ragstack.stores.location import table_names

if TYPE_CHECKING:
    from ragstack.stores.catalog import Catalog
    from ragstack.stores.graph import GraphStore
    from ragstack.stores.lexical import LexicalStore
    from ragstack.stores.vectors import VectorStore

MANIFEST = "manifest.json"
_RESTORING = ".restoring.json"  # in the snapshots folder while a restore runs
_BRANCH = "snapshot-"
# Git-style ref rules (LanceDB branch names follow them); no dot first also keeps names off `.`/`..`.
_NAME = re.compile(r"^[A-Za-z0-9_-](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_-])?\Z")
MAX_RETENTION_DAYS = 36_500


class SnapshotUnusable(RagstackError):
    code = "FAILED_PRECONDITION"


def check_name(name: str) -> str:
    if not _NAME.match(name) or ".." in name or name.endswith(".lock"):
        raise InvalidArgument(
            f"invalid snapshot name {name[:80]!r}: use 1-64 of A-Z a-z 0-9 _ - . , neither starting nor "
            "ending with a dot, without `..`, not ending in `.lock`"
        )
    return name


def folder_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:  # removed meanwhile
                pass
    return total


class StoreLifecycle:
    """Stats, snapshots, restore and vacuum over the ingest service's own store handles. The caller
    serialises these with ingest runs (the servicer's write lock); this class also serialises them
    with each other."""

    def __init__(
        self,
        data_dir: Path,
        catalog: Catalog,
        vectors: VectorStore,
        lexical: LexicalStore,
        graph: GraphStore | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        build: str = "",
        max_snapshots: int = 20,
        min_free_bytes: int = 256 * 2**20,
    ) -> None:
        """`build`: the index build the ingest service writes (services/ingest/build.py), for stats.
        `max_snapshots`: how many may exist at once (each pins LanceDB versions Vacuum must keep);
        `min_free_bytes`: what a snapshot's copies must leave free on their disk."""
        self._build = build
        self._max_snapshots = max_snapshots
        self._min_free = min_free_bytes
        self._data_dir = data_dir
        self._folder = data_dir / "snapshots"
        self._catalog = catalog
        self._vectors = vectors
        self._lexical = lexical
        self._graph = graph
        self._now = now
        self._lock = threading.RLock()

    # stats

    def stats(self, library: str = "") -> StoreStats:
        """Every library with documents (or just `library`), as each store counts it."""
        known = {name: (docs, chunks, at) for name, docs, chunks, at in self._catalog.libraries()}
        names = [library] if library else sorted(known)
        out = []
        for name in names:
            docs, chunks, at = known.get(name, (0, 0, ""))
            entities, relations, communities = self._graph.counts(name) if self._graph else (0, 0, 0)
            out.append(
                LibraryStats(
                    name=name,
                    documents=docs,
                    chunks=chunks,
                    vector_chunks=self._vectors.count(name),
                    lexical_chunks=self._lexical.count(name, "chunk"),
                    lexical_pages=self._lexical.count(name, "page"),
                    media_types=self._catalog.media_types(name),
                    entities=entities,
                    relations=relations,
                    communities=communities,
                    last_indexed_at=at,
                    embedder=self._vectors.library_embedder(name),
                    vector_windows=self._vectors.count_windows(name),
                    builds=self._catalog.builds(name),
                )
            )
        lance = self._lance_folder()
        return StoreStats(
            libraries=out,
            table_versions={name: int(table.version) for name, table in self._tables()},
            lancedb_bytes=folder_bytes(lance) if lance is not None else 0,
            tantivy_bytes=folder_bytes(self._data_dir / "tantivy"),
            catalog_bytes=self._catalog_bytes(),
            snapshots_bytes=folder_bytes(self._folder),
            snapshots=len(self._snapshot_folders()),
            build=self._build,
        )

    # snapshots

    def create(self, name: str) -> SnapshotInfo:
        check_name(name)
        with self._lock:
            self._tidy()
            final = self._folder / name
            if final.exists():
                raise AlreadyExists(f"snapshot {name!r} exists: delete it first, or choose another name")
            self._check_room()
            staging = self._folder / f".new-{name}-{uuid.uuid4().hex[:8]}"
            staging.mkdir(parents=True)
            pinned: list[Any] = []
            try:
                versions: dict[str, int] = {}
                for table_name, table in self._tables():
                    versions[table_name] = int(table.version)
                    _drop_branch(table, _BRANCH + name)  # left by a create that was interrupted
                    table.branches.create(_BRANCH + name, from_version=versions[table_name])
                    pinned.append(table)
                self._lexical.copy_to(staging / "tantivy")
                self._catalog.backup_to(staging / "catalog.sqlite")
                libraries = self._catalog.libraries()
                manifest = {
                    "name": name,
                    "created_at": self._now().isoformat(),
                    "layout": LAYOUT_VERSION,
                    "tables": versions,
                    "documents": sum(x[1] for x in libraries),
                    "chunks": sum(x[2] for x in libraries),
                    "libraries": {x[0]: {"documents": x[1], "chunks": x[2]} for x in libraries},
                }
                (staging / MANIFEST).write_text(json.dumps(manifest, indent=2))
                os.rename(staging, final)
            except BaseException:
                for table in pinned:
                    _drop_branch(table, _BRANCH + name)
                shutil.rmtree(staging, ignore_errors=True)
                raise
            return self._info(final)

    def _check_room(self) -> None:
        """Refuses a snapshot past the count limit, or one whose copies would leave the disk under
        its floor: a full disk fails the next ingest, not just the snapshot."""
        count = len(self._snapshot_folders())
        if count >= self._max_snapshots:
            raise ResourceExhausted(
                f"{count} snapshots exist, the limit is {self._max_snapshots} (ingest.max_snapshots):"
                " delete one first"
            )
        copied = folder_bytes(self._data_dir / "tantivy") + self._catalog_bytes()
        require_free(self._folder, self._min_free, "the snapshot", copied)

    def _catalog_bytes(self) -> int:
        catalog = self._data_dir / "catalog.sqlite"
        return sum(folder_bytes(Path(f"{catalog}{s}")) for s in ("", "-wal", "-shm"))

    def snapshots(self) -> list[SnapshotInfo]:
        """Oldest first."""
        found = [self._info(f) for f in self._snapshot_folders()]
        return sorted(found, key=lambda s: (s.created_at, s.name))

    def get(self, name: str) -> SnapshotInfo:
        return self._info(self._existing(check_name(name)))

    def delete(self, name: str) -> None:
        """Drops the snapshot's branches and files; the stores are unchanged."""
        check_name(name)
        with self._lock:
            folder = self._existing(name)
            # Gone for `list` at once; branches and files follow (or `_tidy` finishes the job).
            doomed = self._folder / f".deleting-{name}-{uuid.uuid4().hex[:8]}"
            os.rename(folder, doomed)
            for _, table in self._tables():
                _drop_branch(table, _BRANCH + name)
            shutil.rmtree(doomed, ignore_errors=True)

    def restore(self, name: str) -> tuple[SnapshotInfo, dict[str, int]]:
        """Puts every store back as the snapshot recorded it; returns the snapshot and the new
        version of each LanceDB table. Nothing is changed when a check fails."""
        check_name(name)
        with self._lock:
            folder = self._existing(name)
            manifest = json.loads((folder / MANIFEST).read_text())
            if manifest.get("layout") != LAYOUT_VERSION:
                raise SnapshotUnusable(
                    f"snapshot {name!r} was taken with store layout {manifest.get('layout')}, these "
                    f"stores use layout {LAYOUT_VERSION}"
                )
            tables = dict(self._tables())
            for table_name, version in manifest["tables"].items():
                if table_name not in tables:
                    raise SnapshotUnusable(f"snapshot {name!r}: LanceDB table {table_name} no longer exists")
                if version not in {int(v["version"]) for v in tables[table_name].list_versions()}:
                    raise SnapshotUnusable(
                        f"snapshot {name!r}: version {version} of LanceDB table {table_name} is gone "
                        f"(its branch {_BRANCH}{name} was removed)"
                    )
            for part in ("tantivy", "catalog.sqlite"):
                if not (folder / part).exists():
                    raise SnapshotUnusable(f"snapshot {name!r} lacks its {part} copy")
            marker = self._folder / _RESTORING
            marker.write_text(json.dumps({"name": name}))
            versions = self._restore(folder, manifest, tables)
            marker.unlink()
            return self._info(folder), versions

    def resume(self) -> str:
        """At start: finishes a restore that was interrupted (returns its snapshot's name, or "")
        and clears what interrupted creates and deletes left."""
        with self._lock:
            marker = self._folder / _RESTORING
            name = ""
            if marker.exists():
                name = json.loads(marker.read_text())["name"]
                folder = self._folder / name
                if not (folder / MANIFEST).exists():
                    raise SnapshotUnusable(
                        f"a restore of snapshot {name!r} was interrupted and the snapshot is gone, so the "
                        f"stores may disagree: delete {marker} to start anyway, then restore another "
                        "snapshot or ingest again"
                    )
                self._restore(folder, json.loads((folder / MANIFEST).read_text()), dict(self._tables()))
                marker.unlink()
            self._tidy()
            return name

    def _restore(self, folder: Path, manifest: dict[str, Any], tables: dict[str, Any]) -> dict[str, int]:
        pinned: dict[str, int] = manifest["tables"]
        versions = {}
        for table_name, table in tables.items():
            if table_name in pinned:
                table.restore(pinned[table_name])
            else:  # created after the snapshot: it held no rows then
                table.delete("true")
            versions[table_name] = int(table.version)
        self._lexical.replace_with(folder / "tantivy")
        self._catalog.restore_from(folder / "catalog.sqlite")
        self._reopen()
        return versions

    # vacuum

    def vacuum(self, older_than_days: int) -> VacuumReport:
        """Compacts small LanceDB fragments and removes the versions older than `older_than_days`
        (the latest version of each table and the versions snapshots pin are kept); then tantivy's
        unused files. With 0, a search still reading an older version when it goes may fail once."""
        if not 0 <= older_than_days <= MAX_RETENTION_DAYS:  # past it the date arithmetic overflows
            raise InvalidArgument(
                f"older_than_days must be 0 to {MAX_RETENTION_DAYS} (a century), not {older_than_days}"
            )
        with self._lock:
            lance = self._lance_folder()
            lance_before = folder_bytes(lance) if lance is not None else 0
            tantivy_before = folder_bytes(self._data_dir / "tantivy")
            removed: dict[str, int] = {}
            compacted = 0
            for name, table in self._tables():
                versions, latest = len(table.list_versions()), int(table.version)
                fragments = table.stats()["fragment_stats"]["num_fragments"]
                with warnings.catch_warnings():  # the warning about 0: we hold the only writer
                    warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
                    table.optimize(cleanup_older_than=timedelta(days=older_than_days), delete_unverified=True)
                removed[name] = versions + (int(table.version) - latest) - len(table.list_versions())
                compacted += fragments - table.stats()["fragment_stats"]["num_fragments"]
            self._reopen()
            self._lexical.garbage_collect()
            return VacuumReport(
                older_than_days=older_than_days,
                versions_removed=sum(removed.values()),
                table_versions_removed=removed,
                fragments_compacted=max(compacted, 0),
                lancedb_bytes_freed=lance_before - (folder_bytes(lance) if lance is not None else 0),
                tantivy_bytes_freed=tantivy_before - folder_bytes(self._data_dir / "tantivy"),
            )

    # helpers

    def _tables(self) -> Iterator[tuple[str, Any]]:
        """Every LanceDB table, freshly opened at its latest version, by name."""
        db = self._vectors.connection()
        for name in sorted(table_names(db)):
            yield name, db.open_table(name)

    def _reopen(self) -> None:
        """The ingest service's own handles follow what was done through other handles."""
        self._vectors.reopen()
        if self._graph is not None:
            self._graph.reopen()

    def _lance_folder(self) -> Path | None:
        uri = str(self._vectors.connection().uri)
        if uri.startswith("file://"):
            return Path(uri.removeprefix("file://"))
        return None if "://" in uri else Path(uri)

    def _snapshot_folders(self) -> list[Path]:
        if not self._folder.exists():
            return []
        return [f for f in self._folder.iterdir() if not f.name.startswith(".") and (f / MANIFEST).exists()]

    def _existing(self, name: str) -> Path:
        folder = self._folder / name
        if not (folder / MANIFEST).exists():
            raise NotFound(f"snapshot {name!r} not found")
        return folder

    def _info(self, folder: Path) -> SnapshotInfo:
        m = json.loads((folder / MANIFEST).read_text())
        return SnapshotInfo(
            name=m["name"],
            created_at=m["created_at"],
            table_versions={k: int(v) for k, v in m["tables"].items()},
            documents=int(m["documents"]),
            chunks=int(m["chunks"]),
            bytes=folder_bytes(folder),
        )

    def _tidy(self) -> None:
        """Removes what interrupted creates and deletes left: staging folders, and branches of
        snapshots that have no folder."""
        if not self._folder.exists():
            return
        for f in self._folder.iterdir():
            if f.is_dir() and f.name.startswith((".new-", ".deleting-")):
                shutil.rmtree(f, ignore_errors=True)
        kept = {f.name for f in self._snapshot_folders()}
        for _, table in self._tables():
            for branch in list(table.branches.list()):
                if branch.startswith(_BRANCH) and branch.removeprefix(_BRANCH) not in kept:
                    _drop_branch(table, branch)


def _drop_branch(table: Any, branch: str) -> None:
    if branch in table.branches.list():
        table.branches.delete(branch)
