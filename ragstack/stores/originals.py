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
    def __init__(self, db: Any) -> None:
        """`db`: the chunks' LanceDB connection. The table is made by the first write that keeps a
        PDF (a unit of work rolls back a table it made by emptying it), so a library without PDFs
        has none."""
        self._db = db

    def _open(self) -> Any:
        """The table as it is now, opened for each call: a unit of work's rollback and a snapshot's
        restore move it back to an older version, which a handle kept open would not see (and its
        next write would conflict with). Reads and writes of whole PDFs are rare enough."""
        return self._db.open_table(TABLE) if TABLE in table_names(self._db) else None

    def replace_documents(
        self, library: str, document_ids: Sequence[str], originals: Sequence[Original]
    ) -> None:
        """Every original of `document_ids` in `library` replaced by `originals` (none: removed), in
        one commit."""
        table = self._open()
        if not document_ids or (table is None and not originals):
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
        if table is None:
            self._db.create_table(TABLE, pa.Table.from_pylist(rows, schema=_SCHEMA))
            return
        ids = ", ".join(sql_str(d) for d in document_ids)
        held = f"library = {sql_str(library)} AND document_id IN ({ids})"
        if not rows and not table.count_rows(held):
            return  # no PDF among them, before or now: no new version for nothing
        (
            table.merge_insert(["library", "document_id"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(held)
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
