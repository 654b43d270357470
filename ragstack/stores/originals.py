"""PDFs as ingested, with where their lines lie, in LanceDB beside the chunks: what a chunk's page
is drawn from (GetChunkVisual). In the same database as the chunks, so a unit of work journals and
restores it with them, and replicas on object storage read it as they read the chunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ragstack.page_layout import PageLayout
from ragstack.stores.location import table_names
from ragstack.stores.vectors import sql_str

TABLE = "originals"
_SCHEMA = pa.schema(
    [
        pa.field("library", pa.string(), nullable=False),
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("media_type", pa.string()),
        pa.field("data", pa.large_binary()),
        pa.field("layout", pa.large_string()),
    ]
)


@dataclass(frozen=True)
class Original:
    document_id: str
    media_type: str
    data: bytes
    layout: PageLayout


class Originals:
    def __init__(self, db: Any, writer: bool = False) -> None:
        """`db`: the chunks' LanceDB connection. The writer makes the table at once, so the first
        unit of work that writes to it has a version to roll back to."""
        self._db = db
        self._table: Any = None
        if writer and TABLE not in table_names(db):
            self._table = db.create_table(TABLE, schema=_SCHEMA)

    def _open(self) -> Any:
        if self._table is None and TABLE in table_names(self._db):
            self._table = self._db.open_table(TABLE)
        return self._table

    def reopen(self) -> None:
        """Sees the table as it is now (after a unit of work restored it to an older version)."""
        self._table = None

    def replace_documents(
        self, library: str, document_ids: Sequence[str], originals: Sequence[Original]
    ) -> None:
        """Every original of `document_ids` in `library` replaced by `originals` (none: removed), in
        one commit."""
        table = self._open()
        if table is None or not document_ids:
            return
        rows = [
            {
                "library": library,
                "document_id": o.document_id,
                "media_type": o.media_type,
                "data": o.data,
                "layout": o.layout.to_json(),
            }
            for o in originals
        ]
        ids = ", ".join(sql_str(d) for d in document_ids)
        (
            table.merge_insert(["library", "document_id"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(f"library = {sql_str(library)} AND document_id IN ({ids})")
            .execute(pa.Table.from_pylist(rows, schema=_SCHEMA))
        )

    def layout(self, library: str, document_id: str) -> PageLayout | None:
        row = self._row(library, document_id, ["layout"])
        return PageLayout.from_json(row["layout"]) if row else None

    def data(self, library: str, document_id: str) -> bytes | None:
        row = self._row(library, document_id, ["data"])
        return bytes(row["data"]) if row else None

    def _row(self, library: str, document_id: str, columns: list[str]) -> dict[str, Any] | None:
        table = self._open()
        if table is None:
            return None
        where = f"library = {sql_str(library)} AND document_id = {sql_str(document_id)}"
        rows = table.search().where(where).select(columns).limit(1).to_list()
        return rows[0] if rows else None
