"""All-or-nothing writes to the stores: an ingest batch, a delete and a prune are each one unit.

LanceDB (chunks and vectors, the graph's tables), tantivy and the catalog commit one after another,
so a crash can stop a unit between two commits. The catalog's journal says, before anything is
written, what the unit changes and where every store stood; the next start finishes the unit (when
tantivy, written last, committed: only the catalog's rows were missing) or rolls every store back
to where it stood. A unit that fails without a crash is rolled back at once.

Ingest workers in several processes may share the stores (PostgreSQL state, services/ingest/jobs.py):
then units take turns under a lock of the shared state, and each turn starts from what the last
writer left: tantivy's writer opened afresh, the LanceDB tables reopened, and a unit that a dead
worker left half-written finished or undone first.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from opentelemetry import trace

from ragstack.domain import Chunk, Document, PageText
from ragstack.knowledge_graph import EntityMention, Relation
from ragstack.state.locks import SharedLock
from ragstack.stores.catalog import EVERY_COMMUNITY, Catalog
from ragstack.stores.location import table_names
from ragstack.stores.originals import Original, Originals
from ragstack.stores.vectors import EmbedderChanged
from services.ingest.graph_index import GraphIndex

tracer = trace.get_tracer("ragstack.ingest")
log = logging.getLogger(__name__)


class VectorWriter(Protocol):
    def replace_documents(
        self,
        library: str,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        vectors: Sequence[np.ndarray],
        embedder: str = "",
    ) -> None: ...
    def library_embedder(self, library: str) -> str: ...
    def build_ann_index(self, min_rows: int) -> bool: ...
    def has_ann_index(self) -> bool: ...
    def connection(self) -> Any: ...  # the LanceDB connection: the journal reads and restores its tables
    def reopen(self) -> None: ...


class LexicalWriter(Protocol):
    def writing(self) -> AbstractContextManager[None]: ...
    def replace_documents(
        self,
        library: str,
        document_ids: Sequence[str],
        chunks: Sequence[Chunk],
        pages: Sequence[PageText] = (),
    ) -> None: ...
    def opstamp(self) -> int: ...
    def rollback(self) -> None: ...


@dataclass
class Change:
    """What one unit does to one library: every chunk, page and graph row of `document_ids` is
    replaced by those given here (none: the documents are removed); `documents` are the new catalog
    rows, and a document of `document_ids` without one leaves the catalog."""

    library: str
    document_ids: list[str]
    documents: list[Document] = field(default_factory=list)
    chunks: Sequence[Chunk] = ()
    vectors: Sequence[np.ndarray] = ()  # each chunk's vector, or its windows' (one row a window)
    pages: Sequence[PageText] = ()
    mentions: Sequence[EntityMention] = ()
    relations: Sequence[Relation] = ()
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)  # document id -> ACL groups
    originals: Sequence[Original] = ()  # the PDFs among the documents, kept for their pictures
    embedder: str = ""  # the model of `vectors`: "" the configured one, else a tuned one's name

    @property
    def removed(self) -> list[str]:
        kept = {d.document_id for d in self.documents}
        return [d for d in self.document_ids if d not in kept]


class UnitOfWork:
    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorWriter,
        lexical: LexicalWriter,
        graph: GraphIndex | None,
        originals: Originals | None = None,
        shared: SharedLock | None = None,
    ) -> None:
        """`shared`: the lock of the ingest workers sharing these stores (None: this process is
        their only writer)."""
        self._catalog = catalog
        self._vectors = vectors
        self._originals = originals
        self._lexical = lexical
        self._graph = graph
        self._shared = shared
        self._local = threading.Lock()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """One unit at a time (the journal holds one), in this process and among the workers that
        share the stores. Held for any other write to them too (the ANN build, the graph's
        communities), so none runs inside a unit."""
        with self._local:
            if self._shared is None:
                yield
                return
            with self._shared.hold(), self._lexical.writing():
                self._vectors.reopen()
                if self._graph is not None:
                    self._graph.reopen()
                self._recover()  # a unit a dead worker left half-written
                yield

    def apply(self, change: Change) -> None:
        """Writes `change` to every store, or to none: a failure rolls back what was written and
        raises."""
        with self.exclusive():
            if (
                change.chunks
                and (current := self._vectors.library_embedder(change.library)) != change.embedder
            ):
                raise EmbedderChanged(current)  # a tuning swapped the library's vectors: embed again
            # A unit whose rollback failed (a full disk) is undone before another begins: the new
            # journal entry would replace its entry, and leave its rows in LanceDB for good.
            self._recover()
            # LanceDB tables first, tantivy last: a failure before tantivy's commit rolls LanceDB
            # back to where it was.
            self._catalog.begin_batch(self._journal_entry(change))
            try:
                with tracer.start_as_current_span(
                    "ingest.index", attributes={"documents": len(change.document_ids)}
                ):
                    self._write(change)
            except Exception:
                try:
                    self._recover()
                except Exception:  # the journal stays: the next start tries again
                    log.exception("rolling back the writes to %s failed", change.library)
                raise

    def recover(self) -> str:
        """Finishes a unit that stopped between the stores' commits (a crash): forward when tantivy,
        written last, committed (only the catalog rows were missing), else back: every LanceDB
        table to its version before the unit. Returns what it did."""
        with self.exclusive():
            return self._recover()

    def _write(self, change: Change) -> None:
        library, ids = change.library, change.document_ids
        self._vectors.replace_documents(library, ids, change.chunks, change.vectors, change.embedder)
        if self._originals is not None:
            self._originals.replace_documents(library, ids, change.originals)
        touched = None
        if self._graph is not None:
            keys = self._graph.write(library, ids, change.mentions, change.relations, groups=change.groups)
            touched = (library, keys)
        self._lexical.replace_documents(library, ids, change.chunks, change.pages)
        self._catalog.end_batch(change.documents, [(library, d) for d in change.removed], touched)

    def _journal_entry(self, change: Change) -> str:
        db = self._vectors.connection()
        tables = {name: int(db.open_table(name).version) for name in table_names(db)}
        return json.dumps(
            {
                "documents": [d.__dict__ for d in change.documents],
                "removed": [[change.library, d] for d in change.removed],
                "lancedb": tables,
                "tantivy": self._lexical.opstamp(),
            }
        )

    def _recover(self) -> str:
        record = self._catalog.pending_batch()
        if record is None:
            return "nothing"
        entry = json.loads(record)
        docs, removed = entry["documents"], entry.get("removed", [])  # journals before deletes had none
        what = f"{len(docs)} documents written and {len(removed)} removed"
        if self._lexical.opstamp() != entry["tantivy"]:
            # Which entities it touched is not in the journal: all the library's communities are due
            # (marked in a process without the graph too: the unit may have written graph rows).
            library = next(iter([d["library"] for d in docs] + [lib for lib, _ in removed]), None)
            every = (library, [EVERY_COMMUNITY]) if library else None
            self._catalog.end_batch(
                [Document(**{**d, "groups": tuple(d.get("groups", ()))}) for d in docs],
                [(lib, doc) for lib, doc in removed],
                every,
            )
            log.warning("a unit of %s was finished after an interruption", what)
            return "forward"
        self._lexical.rollback()
        db = self._vectors.connection()
        for name in table_names(db):
            table = db.open_table(name)
            version = entry["lancedb"].get(name)
            if version is None:  # made by the unit: it held no rows before
                table.delete("true")
            elif int(table.version) != version:
                table.restore(version)
        self._vectors.reopen()
        if self._graph is not None:
            self._graph.reopen()
        self._catalog.end_batch()
        log.warning("a unit of %s was rolled back after an interruption", what)
        return "back"
