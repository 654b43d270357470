"""Dense vectors of chunks in LanceDB. Ingest writes; retrieve reads with strong consistency."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ragstack.domain import Chunk

TABLE = "chunks"


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
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


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
    )


class VectorStore:
    def __init__(self, path: Path, dimension: int, writer: bool = False) -> None:
        import lancedb

        path.mkdir(parents=True, exist_ok=True)
        # Readers must see the writer's commits (another connection, maybe another process).
        self._db = lancedb.connect(
            str(path), read_consistency_interval=None if writer else timedelta(seconds=0)
        )
        self.dimension = dimension
        self._table: Any = None
        if TABLE in self._db.list_tables().tables:
            self._table = self._db.open_table(TABLE)
        elif writer:
            self._table = self._db.create_table(TABLE, schema=_schema(dimension))

    def _open(self) -> Any:
        if self._table is None:
            if TABLE in self._db.list_tables().tables:
                self._table = self._db.open_table(TABLE)
        return self._table

    def replace_documents(
        self, library: str, document_ids: Sequence[str], chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> None:
        """Replaces every chunk of `document_ids` in `library` with `chunks` (one delete, one append)."""
        table = self._open()
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
                "vector": vectors[i].astype(np.float32),
            }
            for i, c in enumerate(chunks)
        ]
        if document_ids:
            ids = ", ".join(sql_str(d) for d in document_ids)
            table.delete(f"library = {sql_str(library)} AND document_id IN ({ids})")
        if rows:
            table.add(pa.Table.from_pylist(rows, schema=_schema(self.dimension)))

    def delete_document(self, library: str, document_id: str) -> int:
        table = self._open()
        if table is None:
            return 0
        where = f"library = {sql_str(library)} AND document_id = {sql_str(document_id)}"
        n = int(table.count_rows(where))
        table.delete(where)
        return n

    def search(self, vector: np.ndarray, library: str, k: int) -> list[tuple[Chunk, float]]:
        """Nearest chunks by cosine similarity, best first (exact search)."""
        table = self._open()
        if table is None:
            return []
        result = (
            table.search(vector.astype(np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .where(f"library = {sql_str(library)}", prefilter=True)
            .limit(k)
            .to_list()
        )
        return [(row_to_chunk(r), 1.0 - float(r["_distance"])) for r in result]

    def count(self, library: str | None = None) -> int:
        table = self._open()
        if table is None:
            return 0
        return int(table.count_rows(f"library = {sql_str(library)}" if library else None))
