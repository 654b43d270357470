"""Dense vectors of chunks in LanceDB. Ingest writes; retrieve reads with strong consistency.

Document ACLs: each row has its document's groups (`groups`; empty or null: public). A caller's ACL
goes into LanceDB's `where` (prefiltered) or into the in-memory mask, and into every lookup by id or
position, so a hidden chunk is never a candidate. The writer adds the column to an older table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ragstack.domain import Candidate, Chunk, SearchFilter, chunk_key, document_key, heading_key, read_chunks
from ragstack.stores.commit_watch import CommitWatch
from ragstack.stores.location import connect_lancedb, create_or_open, latest_version, local_folder

TABLE = "chunks"
GROUPS = "groups"  # the document's ACL groups; empty or null (a table from before ACLs): public
_GROUPS_FIELD = pa.field(GROUPS, pa.list_(pa.string()))
# The model that made the row's vector: empty or null (a table from before tuning) is the configured
# embedder; else a tuned one's name (ragstack/tuning). A library's rows all share one, changed for
# all of them in one commit (replace_vectors), so a search reads its query model off its rows.
EMBEDDER = "embedder"
_EMBEDDER_FIELD = pa.field(EMBEDDER, pa.string())
# A chunk embedded as several windows (services/ingest/dense_windows.py) keeps each window's vector
# here, and its `vector` is their unit mean; null (one window, or a table from before windows): the
# chunk is its vector. Search ranks a chunk by its best window.
WINDOWS = "windows"


def _windows_field(dimension: int) -> pa.Field:
    return pa.field(WINDOWS, pa.list_(pa.list_(pa.float32(), dimension)))


def _windows_array(windows: Sequence[np.ndarray | None], dimension: int) -> pa.Array:
    """The WINDOWS column of rows whose window vectors are `windows` (None: null)."""
    lengths = [0 if w is None else len(w) for w in windows]
    offsets = pa.array(np.cumsum([0, *lengths]), pa.int32())
    flat = [w for w in windows if w is not None]
    values = np.concatenate(flat).astype(np.float32).reshape(-1) if flat else np.zeros(0, np.float32)
    mask = pa.array([w is None for w in windows], pa.bool_())
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(values), dimension)
    return pa.ListArray.from_arrays(offsets, vectors, _windows_field(dimension).type, mask=mask)


def chunk_vector(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """A chunk's vector and the window vectors kept beside it, from its vector (dim,) or its
    windows' (n, dim): one window is the vector itself; several are kept, their unit mean the vector."""
    windows = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    if len(windows) == 1:
        return windows[0], None
    mean = windows.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm if norm > 1e-6 else windows[0]).astype(np.float32), windows


class EmbedderChanged(Exception):
    """The library's vectors are another model's than the query's (a tuning swapped them)."""

    def __init__(self, embedder: str) -> None:
        super().__init__(f"the library's vectors are now {embedder or 'the configured embedder'}'s")
        self.embedder = embedder


def sql_str(value: str) -> str:
    """A SQL string literal for LanceDB filters."""
    return "'" + value.replace("'", "''") + "'"


def _schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("document_id", pa.string(), nullable=False),
            pa.field("library", pa.string(), nullable=False),
            pa.field("text", pa.string()),
            pa.field("title", pa.string()),
            pa.field("source", pa.string()),
            pa.field("heading_path", pa.list_(pa.string())),
            pa.field("pages", pa.list_(pa.int32())),
            pa.field("position", pa.int32()),
            pa.field("media_type", pa.string()),
            pa.field("heading_key", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
            _GROUPS_FIELD,
            _EMBEDDER_FIELD,
            _windows_field(dimension),
        ]
    )


def acl_sql(acl: tuple[str, ...] | None, column: str = GROUPS) -> str:
    """The SQL condition of rows a caller who sees `acl` may see ("" when it sees all): public ones
    (no groups) and those sharing a group with it."""
    if acl is None:
        return ""
    public = f"({column} IS NULL OR array_length({column}) = 0"
    if not acl:
        return public + ")"
    return f"{public} OR array_has_any({column}, [{', '.join(sql_str(g) for g in acl)}]))"


def _sql_filter(library: str, where: SearchFilter, acl: bool = True) -> str:
    """`acl`: whether the table has the groups column (a table from before ACLs is all public)."""
    parts = [f"library = {sql_str(library)}"]
    if acl and (condition := acl_sql(where.acl)):
        parts.append(condition)
    if where.document_ids:
        parts.append(f"document_id IN ({', '.join(sql_str(x) for x in where.document_ids)})")
    if where.media_types:
        parts.append(f"media_type IN ({', '.join(sql_str(x) for x in where.media_types)})")
    if where.heading_prefix:
        parts.append(f"starts_with(heading_key, {sql_str(heading_key(where.heading_prefix))})")
    return " AND ".join(parts)


def row_to_chunk(row: dict[str, Any]) -> Chunk:
    return Chunk(
        chunk_id=row["chunk_id"],
        document_id=row["document_id"],
        library=row["library"],
        text=row["text"] or "",
        heading_path=tuple(row["heading_path"] or ()),
        pages=tuple(row["pages"] or ()),
        position=int(row["position"] or 0),
        title=row["title"] or "",
        source=row["source"] or "",
        media_type=row.get("media_type") or "",
        groups=tuple(row.get(GROUPS) or ()),
    )


@dataclass(frozen=True)
class _Snapshot:
    """One library's vectors and rows at one table version, for exact search in memory."""

    version: int
    matrix: np.ndarray
    rows: pa.Table
    keys: np.ndarray  # each row's chunk key and document key (ragstack.domain.chunk_key)
    document_keys: np.ndarray
    embedder: str = ""  # the model of its vectors (EMBEDDER)
    # Every row's window vectors (WINDOWS), row i's from window_starts[i] to window_starts[i + 1]
    # (none for a row that is one window); None when no row has windows.
    windows: np.ndarray | None = None
    window_starts: np.ndarray | None = None
    _positions: dict[tuple[str, int], int] | None = None
    _by_document: dict[str, list[int]] | None = None
    _by_id: dict[str, int] | None = None
    _visible: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_arrow(cls, version: int, data: pa.Table, dimension: int) -> _Snapshot:
        vectors = data.column("vector").combine_chunks()
        matrix = vectors.flatten().to_numpy(zero_copy_only=False).reshape(-1, dimension).astype(np.float32)
        windows, starts = _window_matrix(data, dimension)
        # One chunk per column: taking the top rows from a many-chunk table costs ten times more.
        rows = data.drop_columns([c for c in ("vector", WINDOWS) if c in data.column_names]).combine_chunks()
        keys = np.fromiter(map(chunk_key, rows.column("chunk_id").to_pylist()), np.int64, rows.num_rows)
        documents = rows.column("document_id").to_pylist()
        document_keys = np.fromiter(map(document_key, documents), np.int64, rows.num_rows)
        return cls(version, matrix, rows, keys, document_keys, _embedder_of(data), windows, starts)

    def search(self, vector: np.ndarray, k: int, where: SearchFilter) -> list[tuple[Candidate, float]]:
        """The `k` nearest rows as candidates: their chunks read later, the kept ones together."""
        if not len(self.matrix):
            return []
        scores = self.matrix @ vector
        if where:
            allowed = self._mask(where)
            scores = np.where(allowed, scores, -np.inf)
            k = min(k, int(allowed.sum()))
            if k == 0:
                return []
        k = min(k, len(scores))
        if self.windows is not None:  # the first stage's rows, ranked again by their best window
            top = _top(scores, min(first_stage(k), len(scores)))
            top = top[np.isfinite(scores[top])]
            scores = scores.copy()
            scores[top] = self._best_windows(top, scores[top], vector)
            k = min(k, len(top))
            top = top[_top(scores[top], k)]
        else:
            top = _top(scores, k)
        top = top[np.lexsort((top, -scores[top]))]
        keys, documents = self.keys[top].tolist(), self.document_keys[top].tolist()
        read = self.chunks_at  # one bound method for all: read_chunks reads them in one call
        return [
            (Candidate(key, document, at=(read, int(i))), float(scores[i]))
            for key, document, i in zip(keys, documents, top, strict=True)
        ]

    def _best_windows(self, rows: np.ndarray, scores: np.ndarray, vector: np.ndarray) -> np.ndarray:
        """`scores` of `rows`, each row with windows scored by its best window instead."""
        assert self.windows is not None and self.window_starts is not None
        starts, ends = self.window_starts[rows], self.window_starts[rows + 1]
        windowed = ends > starts
        if not windowed.any():
            return scores
        starts, lengths = starts[windowed], (ends - starts)[windowed]
        # The windows of the windowed rows, row after row: each row's run starts at its offset.
        offsets = np.cumsum(lengths) - lengths
        picked = np.arange(int(lengths.sum())) - np.repeat(offsets - starts, lengths)
        best = np.maximum.reduceat(self.windows[picked] @ vector, offsets)
        out = scores.copy()
        out[windowed] = best
        return out

    def chunks_at(self, rows: list[int]) -> list[Chunk]:
        return [row_to_chunk(r) for r in self.rows.take(pa.array(rows, pa.int64())).to_pylist()]

    def _mask(self, where: SearchFilter) -> np.ndarray:
        import pyarrow.compute as pc

        mask = np.ones(self.rows.num_rows, dtype=bool)
        if where.document_ids:
            hit = pc.is_in(self.rows["document_id"], value_set=pa.array(list(where.document_ids)))
            mask &= hit.to_numpy(zero_copy_only=False)
        if where.media_types:
            hit = pc.is_in(self.rows["media_type"], value_set=pa.array(list(where.media_types)))
            mask &= hit.to_numpy(zero_copy_only=False)
        if where.heading_prefix:
            hit = pc.starts_with(self.rows["heading_key"], pattern=heading_key(where.heading_prefix))
            mask &= hit.to_numpy(zero_copy_only=False)
        if where.acl is not None:
            mask &= self.visible(where.acl)
        return mask

    def visible(self, acl: tuple[str, ...]) -> np.ndarray:
        """The rows a caller who sees `acl` may see (public rows and those sharing a group), kept
        per ACL for this version (a few group sets call again and again)."""
        key = tuple(sorted(set(acl)))
        found = self._visible.get(key)
        if found is not None:
            return found
        import pyarrow.compute as pc

        if GROUPS not in self.rows.column_names:  # a table from before ACLs: every row is public
            found = np.ones(self.rows.num_rows, dtype=bool)
        else:
            groups = self.rows[GROUPS].combine_chunks()
            found = pc.fill_null(pc.list_value_length(groups), 0).to_numpy(zero_copy_only=False) == 0
            if key:
                flat = pc.list_flatten(groups)
                parents = pc.list_parent_indices(groups).to_numpy(zero_copy_only=False)
                hit = pc.is_in(flat, value_set=pa.array(key, pa.string())).to_numpy(zero_copy_only=False)
                found[parents[hit]] = True
        if len(self._visible) >= 64:
            self._visible.clear()
        self._visible[key] = found
        return found

    def _take(self, picked: list[int], acl: tuple[str, ...] | None) -> list[Chunk]:
        if acl is not None:
            allowed = self.visible(acl)
            picked = [i for i in picked if allowed[i]]
        return [row_to_chunk(r) for r in self.rows.take(pa.array(picked, type=pa.int64())).to_pylist()]

    def of_document(self, document_id: str, acl: tuple[str, ...] | None = None) -> list[Chunk]:
        if self._by_document is None:
            index: dict[str, list[int]] = {}
            for i, doc in enumerate(self.rows["document_id"].to_pylist()):
                index.setdefault(doc, []).append(i)
            object.__setattr__(self, "_by_document", index)
        assert self._by_document is not None
        return self._take(self._by_document.get(document_id, []), acl)

    def by_id(self, chunk_ids: Sequence[str], acl: tuple[str, ...] | None = None) -> list[Chunk]:
        if self._by_id is None:
            object.__setattr__(
                self, "_by_id", {c: i for i, c in enumerate(self.rows["chunk_id"].to_pylist())}
            )
        assert self._by_id is not None
        picked = [i for i in (self._by_id.get(c) for c in chunk_ids) if i is not None]
        return self._take(picked, acl)

    def around(
        self, document_id: str, position: int, radius: int, acl: tuple[str, ...] | None = None
    ) -> list[Chunk]:
        if self._positions is None:
            ids = self.rows["document_id"].to_pylist()
            positions = self.rows["position"].to_pylist()
            object.__setattr__(
                self, "_positions", {(d, p): i for i, (d, p) in enumerate(zip(ids, positions, strict=True))}
            )
        assert self._positions is not None
        found = [
            self._positions.get((document_id, p)) for p in range(position - radius, position + radius + 1)
        ]
        return self._take([i for i in found if i is not None], acl)


def first_stage(k: int) -> int:
    """How many rows a search ranks by their chunk vectors before it ranks them by their best
    window: a row's best window beats its mean vector by a margin that varies, so well past `k`
    (on SciFact, 300 such rows lost no nDCG@10 against ranking every row by its windows)."""
    return max(4 * k, 256)


def _best_window(windows: list[list[float]] | None, vector: np.ndarray, score: float) -> float:
    """A row's score by its best window (`score`, its vector's, when it has none)."""
    return float(np.max(np.asarray(windows, np.float32) @ vector)) if windows else score


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` highest scores (unordered)."""
    return np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))


def _window_matrix(data: pa.Table, dimension: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The rows' window vectors as one matrix and each row's start in it (WINDOWS); (None, None)
    when no row has windows."""
    import pyarrow.compute as pc

    if WINDOWS not in data.column_names:
        return None, None
    column = data.column(WINDOWS).combine_chunks()
    if column.null_count == len(column):
        return None, None
    lengths = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    flat = pc.list_flatten(column).flatten().to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return flat.reshape(-1, dimension).astype(np.float32), starts


def _embedder_of(rows: pa.Table) -> str:
    """The embedder of a library's rows ("" for the configured one)."""
    if EMBEDDER not in rows.column_names or not rows.num_rows:
        return ""
    return str(rows.column(EMBEDDER)[0].as_py() or "")


def _rows_by_id(
    table: Any, library: str, chunk_ids: Sequence[str], columns: list[str] | None = None, visible: str = ""
) -> Iterator[pa.Table]:
    """The rows of these chunks, a thousand ids a query (all columns, or `columns`), of those
    meeting the condition `visible` when one is given."""
    scope = f"library = {sql_str(library)}" + (f" AND {visible}" if visible else "")
    for i in range(0, len(chunk_ids), 1000):
        ids = ", ".join(sql_str(c) for c in chunk_ids[i : i + 1000])
        query = table.search().where(f"{scope} AND chunk_id IN ({ids})")
        yield (query.select(columns) if columns else query).limit(None).to_arrow()


class VectorStore:
    def __init__(
        self,
        path: Path | str,
        dimension: int,
        writer: bool = False,
        memory_rows: int = 200_000,
        nprobes: int = 20,
        refine_factor: int = 10,
        storage_options: Mapping[str, str] | None = None,
        max_staleness_s: float = 0.0,
    ) -> None:
        """`memory_rows`: a library up to this many chunks is searched exactly from memory (loaded
        again whenever the table's version changes); larger ones are searched by LanceDB, through
        its ANN index with `nprobes` and `refine_factor` when one was built. `max_staleness_s`: a
        reader on object storage checks for new versions at most this often (connect_lancedb)."""
        self._db = connect_lancedb(path, writer, storage_options, max_staleness_s)
        folder = local_folder(path)
        # A writer's handle never checks for commits; on object storage LanceDB spaces its checks.
        self._watch = CommitWatch(None if writer or folder is None else folder / f"{TABLE}.lance")
        self.dimension = dimension
        self._memory_rows = memory_rows
        self._nprobes = nprobes
        self._refine = refine_factor
        self._cache: dict[str, _Snapshot] = {}
        self._lock = threading.Lock()
        self._writer = writer
        self._table: Any = None
        if TABLE in self._db.list_tables().tables:
            self._open()
        elif writer:
            self._table = create_or_open(self._db, TABLE, _schema(dimension))

    def _open(self) -> Any:
        if self._table is None:
            if TABLE in self._db.list_tables().tables:
                table = self._db.open_table(TABLE)
                if self._writer and GROUPS not in table.schema.names:
                    # A table from before document ACLs (or restored to a version from then): the
                    # column is added, null in every row, so its documents stay public.
                    table.add_columns(_GROUPS_FIELD)
                if self._writer and EMBEDDER not in table.schema.names:  # from before tuning
                    table.add_columns(_EMBEDDER_FIELD)
                if self._writer and WINDOWS not in table.schema.names:  # from before windows
                    table.add_columns(_windows_field(self.dimension))
                self._table = table
        return self._table

    def _has_groups(self, table: Any) -> bool:
        return self._writer or GROUPS in table.schema.names

    def replace_documents(
        self,
        library: str,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: Sequence[np.ndarray],
        embedder: str = "",
    ) -> None:
        """Replaces every chunk of `document_ids` in `library` with `chunks`, in one commit: readers
        see the old chunks or the new ones, never a document half replaced. `vectors`: each chunk's
        vector, or its windows' vectors (chunk_vector); `embedder`: their model (EMBEDDER)."""
        table = self._open()
        dense = [chunk_vector(v) for v in vectors]
        rows = [
            {
                "chunk_id": c.chunk_id,
                "document_id": c.document_id,
                "library": c.library,
                "text": c.text,
                "title": c.title,
                "source": c.source,
                "heading_path": list(c.heading_path),
                "pages": list(c.pages),
                "position": c.position,
                "media_type": c.media_type,
                "heading_key": heading_key(c.heading_path),
                "vector": dense[i][0],
                GROUPS: list(c.groups),
                EMBEDDER: embedder,
            }
            for i, c in enumerate(chunks)
        ]
        if not document_ids:
            return
        schema = _schema(self.dimension)
        data = pa.Table.from_pylist(rows, schema=schema)
        windows = _windows_array([w for _, w in dense], self.dimension)
        data = data.set_column(schema.get_field_index(WINDOWS), schema.field(WINDOWS), windows)
        ids = ", ".join(sql_str(d) for d in document_ids)
        (
            table.merge_insert(["library", "chunk_id"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(f"library = {sql_str(library)} AND document_id IN ({ids})")
            .execute(data)
        )

    def library_embedder(self, library: str) -> str:
        """The model the library's vectors come from: "" for the configured embedder (also for an
        empty library), else a tuned one's name."""
        table = self._open()
        if table is None:
            return ""
        with self._lock:
            cached = self._cache.get(library)
        if cached is not None and cached.version == self._version(table):
            return cached.embedder
        if EMBEDDER not in table.schema.names:
            return ""
        found = table.search().where(f"library = {sql_str(library)}").select([EMBEDDER]).limit(1).to_arrow()
        return _embedder_of(found)

    def library_texts(self, library: str) -> pa.Table:
        """Every chunk of the library (chunk_id, heading_path, text), without vectors."""
        table = self._open()
        if table is None:
            return pa.table({"chunk_id": [], "heading_path": [], "text": []})
        query = table.search().where(f"library = {sql_str(library)}")
        return query.select(["chunk_id", "heading_path", "text"]).limit(None).to_arrow()

    def replace_vectors(self, library: str, vectors: Mapping[str, np.ndarray], embedder: str) -> int:
        """Gives every chunk of the library the vector (or window vectors: chunk_vector) that
        `vectors` holds for it, made by `embedder`, in one commit: a search sees the library's old
        vectors or its new ones, never a mix. A chunk without one in `vectors` is refused (the call
        changes nothing). Returns the rows."""
        table = self._open()
        if table is None:
            return 0
        rows = table.search().where(f"library = {sql_str(library)}").limit(None).to_arrow()
        ids = rows.column("chunk_id").to_pylist()
        missing = [c for c in ids if c not in vectors]
        if missing:
            raise ValueError(f"{len(missing)} chunks of {library!r} have no new vector, e.g. {missing[0]!r}")
        if not ids:
            return 0
        dense = [chunk_vector(vectors[c]) for c in ids]
        matrix = np.stack([vector for vector, _ in dense])
        column = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), self.dimension)
        rows = rows.set_column(rows.schema.get_field_index("vector"), "vector", column)
        windows = _windows_array([w for _, w in dense], self.dimension)
        for name, values in ((EMBEDDER, pa.array([embedder] * len(ids), pa.string())), (WINDOWS, windows)):
            if name in rows.column_names:
                rows = rows.set_column(rows.schema.get_field_index(name), name, values)
            else:
                rows = rows.append_column(name, values)
        rows = rows.select(_schema(self.dimension).names).cast(_schema(self.dimension))
        table.merge_insert(["library", "chunk_id"]).when_matched_update_all().execute(rows)
        return len(ids)

    def search(
        self,
        vector: np.ndarray,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        embedder: str | None = None,
    ) -> list[tuple[Chunk, float]]:
        """Nearest chunks by cosine similarity, best first. `embedder`: the model `vector` comes
        from; EmbedderChanged when the library's vectors are another's (they changed since the
        caller asked library_embedder)."""
        found = self.search_candidates(vector, library, k, where, embedder)
        return list(zip(read_chunks([c for c, _ in found]), [s for _, s in found], strict=True))

    def search_candidates(
        self,
        vector: np.ndarray,
        library: str,
        k: int,
        where: SearchFilter | None = None,
        embedder: str | None = None,
    ) -> list[tuple[Candidate, float]]:
        """`search`'s hits as candidates: from memory, their chunks left for `read_chunks` (a
        search fuses fifty to return ten); from LanceDB, with them."""
        where = where or SearchFilter()
        table = self._open()
        if table is None:
            return []
        snapshot = self._snapshot(table, library)
        if snapshot is not None:
            if embedder is not None and snapshot.embedder != embedder:
                raise EmbedderChanged(snapshot.embedder)
            return snapshot.search(vector.astype(np.float32), k, where)
        vector = vector.astype(np.float32)
        windowed = WINDOWS in table.schema.names
        query = (
            table.search(vector, vector_column_name="vector")
            .distance_type("cosine")
            .where(_sql_filter(library, where, self._has_groups(table)), prefilter=True)
            .limit(first_stage(k) if windowed else k)
        )
        if self.has_ann_index():
            query = query.nprobes(self._nprobes).refine_factor(self._refine)
        found = query.to_list()
        if embedder is not None and found and (found[0].get(EMBEDDER) or "") != embedder:
            raise EmbedderChanged(found[0].get(EMBEDDER) or "")
        scored = [(r, _best_window(r.get(WINDOWS), vector, 1.0 - float(r["_distance"]))) for r in found]
        if windowed:  # the first stage's rows ranked again by their best window, as in memory
            scored = sorted(scored, key=lambda hit: -hit[1])[:k]
        return [(Candidate.of(row_to_chunk(r)), score) for r, score in scored]

    def exact_search(self, vector: np.ndarray, library: str, k: int) -> list[tuple[Chunk, float]]:
        """Brute-force search in LanceDB, bypassing any index (the reference ANN recall is measured on)."""
        table = self._open()
        if table is None:
            return []
        result = (
            table.search(vector.astype(np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .where(f"library = {sql_str(library)}", prefilter=True)
            .bypass_vector_index()
            .limit(k)
            .to_list()
        )
        return [(row_to_chunk(r), 1.0 - float(r["_distance"])) for r in result]

    def chunks_of(self, library: str, document_id: str, acl: tuple[str, ...] | None = None) -> list[Chunk]:
        """Every chunk of a document, in order (none when a caller who sees `acl` may not see it)."""
        table = self._open()
        if table is None:
            return []
        snapshot = self._snapshot(table, library)
        if snapshot is not None:
            found = snapshot.of_document(document_id, acl)
        else:
            scope = SearchFilter(document_ids=(document_id,), acl=acl)
            where = _sql_filter(library, scope, self._has_groups(table))
            found = [row_to_chunk(r) for r in table.search().where(where).limit(None).to_list()]
        return sorted(found, key=lambda c: c.position)

    def chunks_by_id(
        self, library: str, chunk_ids: Sequence[str], acl: tuple[str, ...] | None = None
    ) -> list[Chunk]:
        """The chunks with these ids (those that exist and that a caller who sees `acl` may see),
        in the order asked."""
        table = self._open()
        if table is None or not chunk_ids:
            return []
        snapshot = self._snapshot(table, library)
        if snapshot is not None:
            return snapshot.by_id(chunk_ids, acl)
        visible = acl_sql(acl) if self._has_groups(table) else ""
        found: dict[str, Chunk] = {}
        for data in _rows_by_id(table, library, chunk_ids, visible=visible):
            found.update((c.chunk_id, c) for c in map(row_to_chunk, data.to_pylist()))
        return [found[c] for c in chunk_ids if c in found]

    def vectors_by_id(self, library: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of the chunks with these ids (those that exist), read without their text."""
        table = self._open()
        found: dict[str, np.ndarray] = {}
        if table is None:
            return found
        for data in _rows_by_id(table, library, chunk_ids, ["chunk_id", "vector"]):
            flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            found.update(
                zip(data.column("chunk_id").to_pylist(), flat.reshape(-1, self.dimension), strict=True)
            )
        return found

    def around(
        self,
        library: str,
        document_id: str,
        position: int,
        radius: int,
        acl: tuple[str, ...] | None = None,
    ) -> list[Chunk]:
        """The chunks of a document within `radius` positions of `position`, in order (of those a
        caller who sees `acl` may see)."""
        table = self._open()
        if table is None:
            return []
        snapshot = self._snapshot(table, library)
        if snapshot is not None:
            return snapshot.around(document_id, position, radius, acl)
        scope = SearchFilter(document_ids=(document_id,), acl=acl)
        rows = (
            table.search()
            .where(
                f"{_sql_filter(library, scope, self._has_groups(table))} "
                f"AND position BETWEEN {position - radius} AND {position + radius}"
            )
            .limit(None)
            .to_list()
        )
        return sorted((row_to_chunk(r) for r in rows), key=lambda c: c.position)

    def has_ann_index(self) -> bool:
        table = self._open()
        return table is not None and any(i.columns == ["vector"] for i in table.list_indices())

    def build_ann_index(self, min_rows: int) -> bool:
        """IVF_PQ over the vectors once the table has `min_rows` rows (ingest calls it after a run).
        Returns whether an index exists afterwards."""
        table = self._open()
        if table is None or self.has_ann_index():
            return self.has_ann_index()
        rows = int(table.count_rows())
        if rows < min_rows:
            return False
        from lancedb.index import IvfPq

        table.create_index(
            "vector",
            config=IvfPq(
                distance_type="cosine",
                num_partitions=max(1, min(int(rows**0.5), rows // 256)),
                num_sub_vectors=max(1, self.dimension // 8),
            ),
        )
        return True

    def _version(self, table: Any) -> int:
        return self._watch.version(lambda: int(table.version))

    def _snapshot(self, table: Any, library: str) -> _Snapshot | None:
        version = self._version(table)
        with self._lock:
            cached = self._cache.get(library)
            if cached is not None and cached.version == version:
                return cached
            if int(table.count_rows(f"library = {sql_str(library)}")) > self._memory_rows:
                self._cache.pop(library, None)
                return None
            data = table.search().where(f"library = {sql_str(library)}").limit(None).to_arrow()
            snapshot = _Snapshot.from_arrow(version, data, self.dimension)
            self._cache[library] = snapshot
            return snapshot

    def count(self, library: str | None = None) -> int:
        table = self._open()
        if table is None:
            return 0
        return int(table.count_rows(f"library = {sql_str(library)}" if library else None))

    def count_windows(self, library: str) -> int:
        """Window vectors kept for the library's chunks embedded as several windows."""
        import pyarrow.compute as pc

        table = self._open()
        if table is None or WINDOWS not in table.schema.names:
            return 0
        rows = table.search().where(f"library = {sql_str(library)}").select([WINDOWS]).limit(None).to_arrow()
        return int(pc.sum(pc.list_value_length(rows.column(WINDOWS))).as_py() or 0)

    def refresh(self) -> dict[str, int]:
        """A reader's check for the writer's newest commit, now: the version it serves (0 before
        the table exists)."""
        table = self._open()
        return {TABLE: 0 if table is None else latest_version(table)}

    def connection(self) -> Any:
        """The LanceDB connection: the store lifecycle reaches every table through it."""
        return self._db

    def reopen(self) -> None:
        """Forgets the open table and the in-memory copies, so that the next call opens the latest
        version (after a restore or a compaction made through another handle of the table)."""
        with self._lock:
            self._table = None
            self._cache.clear()
            self._watch.forget()
