"""The knowledge graph in LanceDB: entity, relation and community tables beside the chunks.

Ingest writes each document's entity and relation rows in one commit per table (readers see a
document's old rows or its new ones), and the library's communities in one commit. Tables are
versioned by LanceDB; readers rebuild their in-memory graph only when a version changes.

Document ACLs: an entity row carries its document's ACL groups. A caller who does not see every
document gets the graph of the documents it sees (built from their rows only, kept per group set),
so an entity that only hidden documents name is not in it, and no hop passes through one.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ragstack.domain import acl_allows
from ragstack.knowledge_graph import Community, EntityMention, KnowledgeGraph, Relation
from ragstack.stores.location import connect_lancedb, create_or_open, latest_version, table_names
from ragstack.stores.vectors import sql_str

ENTITIES, RELATIONS, COMMUNITIES = "graph_entities", "graph_relations", "graph_communities"
_strings = pa.list_(pa.string())

_ENTITY_SCHEMA = pa.schema(
    [
        pa.field("library", pa.string(), nullable=False),
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("type", pa.string()),
        pa.field("chunk_ids", _strings),
        pa.field("count", pa.int32()),
        pa.field("aliases", _strings),
        pa.field("groups", _strings),  # the document's ACL groups; empty or null: public
    ]
)
_VIEWS = 32  # graphs of restricted callers kept per library (one per distinct group set)
_RELATION_SCHEMA = pa.schema(
    [
        pa.field("library", pa.string(), nullable=False),
        pa.field("document_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("target", pa.string(), nullable=False),
        pa.field("label", pa.string()),
        pa.field("weight", pa.float32()),
        pa.field("chunk_ids", _strings),
        pa.field("evidence", pa.string()),
        pa.field("evidence_chunk", pa.string()),
    ]
)


@dataclass
class _Loaded:
    """A library's graph at one pair of table versions; with its rows while some are restricted,
    from which the graph a group set sees is built (and kept) when first asked."""

    versions: tuple[int, int]
    graph: KnowledgeGraph
    document_groups: dict[str, tuple[str, ...]]
    mentions: list[EntityMention] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    views: dict[tuple[str, ...], KnowledgeGraph] = field(default_factory=dict)

    def view(self, acl: tuple[str, ...]) -> KnowledgeGraph:
        if not any(self.document_groups.values()):  # every document public
            return self.graph
        key = tuple(sorted(set(acl)))
        found = self.views.get(key)
        if found is None:
            seen = {d for d, groups in self.document_groups.items() if acl_allows(key, groups)}
            found = KnowledgeGraph(
                [m for m in self.mentions if m.document_id in seen],
                [r for r in self.relations if r.document_id in seen],
            )
            if len(self.views) >= _VIEWS:
                self.views.clear()
            self.views[key] = found
        return found


def _community_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("library", pa.string(), nullable=False),
            pa.field("community_id", pa.string(), nullable=False),
            pa.field("members", _strings),
            pa.field("summary", pa.string()),
            pa.field("chunk_ids", _strings),
            pa.field("document_ids", _strings),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


class GraphStore:
    def __init__(
        self,
        path: Path | str,
        dimension: int = 0,
        writer: bool = False,
        storage_options: Mapping[str, str] | None = None,
        max_staleness_s: float = 0.0,
    ) -> None:
        """`dimension`: of the community vectors; a writer needs it to create the tables. `path`: a
        folder or an object store URL (storage.lancedb_uri), where a reader checks for new versions
        at most every `max_staleness_s` (connect_lancedb)."""
        self._db = connect_lancedb(path, writer, storage_options, max_staleness_s)
        self.dimension = dimension
        self._schemas = {
            ENTITIES: _ENTITY_SCHEMA,
            RELATIONS: _RELATION_SCHEMA,
            COMMUNITIES: _community_schema(dimension),
        }
        self._tables: dict[str, Any] = {}
        self._writer = writer
        self._lock = threading.Lock()
        self._graphs: dict[str, _Loaded] = {}
        self._communities: dict[str, tuple[int, list[Community], np.ndarray]] = {}
        if writer:
            existing = set(table_names(self._db))
            for name, schema in self._schemas.items():
                if name not in existing:
                    create_or_open(self._db, name, schema)

    def _table(self, name: str) -> Any:
        if name not in self._tables and name in self._db.list_tables().tables:
            table = self._db.open_table(name)
            if self._writer and name == ENTITIES and "groups" not in table.schema.names:
                # A table from before document ACLs (or restored to a version from then): the column
                # is added, null in every row, so its documents stay public.
                table.add_columns(_ENTITY_SCHEMA.field("groups"))
            self._tables[name] = table
        return self._tables.get(name)

    # writing (ingest)

    def replace_documents(
        self,
        library: str,
        document_ids: Sequence[str],
        mentions: Sequence[EntityMention],
        relations: Sequence[Relation],
        groups: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """Replaces the graph rows of `document_ids` with these, one commit per table. `groups`:
        each document's ACL groups (a document missing is public)."""
        if not document_ids:
            return
        scope = (
            f"library = {sql_str(library)} AND document_id IN ({', '.join(sql_str(d) for d in document_ids)})"
        )
        acl = groups or {}
        rows = [_entity_row(m, acl.get(m.document_id, ())) for m in mentions]
        self._replace(ENTITIES, ["library", "document_id", "key"], rows, scope)
        self._replace(
            RELATIONS,
            ["library", "document_id", "source", "target"],
            [_relation_row(r) for r in relations],
            scope,
        )

    def replace_communities(
        self, library: str, communities: Sequence[Community], vectors: np.ndarray
    ) -> None:
        """The library's communities become exactly these, in one commit."""
        rows = [
            {**_community_row(c), "vector": vectors[i].astype(np.float32)} for i, c in enumerate(communities)
        ]
        self._replace(COMMUNITIES, ["library", "community_id"], rows, f"library = {sql_str(library)}")

    def _replace(self, name: str, on: list[str], rows: list[dict[str, Any]], scope: str) -> None:
        table = self._table(name)
        if not rows:
            table.delete(scope)
            return
        (
            table.merge_insert(on)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(scope)
            .execute(pa.Table.from_pylist(rows, schema=self._schemas[name]))
        )

    # reading

    def keys_of(self, library: str, document_ids: Sequence[str]) -> set[str]:
        """The entity keys these documents mention now."""
        table = self._table(ENTITIES)
        if table is None or not document_ids:
            return set()
        where = (
            f"library = {sql_str(library)} AND document_id IN ({', '.join(sql_str(d) for d in document_ids)})"
        )
        return set(table.search().where(where).select(["key"]).limit(None).to_arrow()["key"].to_pylist())

    def weighted_edges(self, library: str) -> tuple[list[str], list[tuple[str, str, float]]]:
        """The library's entity keys and its edges with their summed weights, both sorted: what
        community detection needs, read as columns (a tenth of the time of the whole graph)."""
        entities, relations = self._table(ENTITIES), self._table(RELATIONS)
        if entities is None or relations is None:
            return [], []
        where = f"library = {sql_str(library)}"
        keys = pc.unique(entities.search().where(where).select(["key"]).limit(None).to_arrow()["key"])
        rows = relations.search().where(where).select(["source", "target", "weight"]).limit(None).to_arrow()
        # An edge between two entities, whichever way round a document stated it.
        low = pc.min_element_wise(rows["source"], rows["target"])
        high = pc.max_element_wise(rows["source"], rows["target"])
        pairs = pa.table({"a": low, "b": high, "w": pc.fill_null(rows["weight"], 0.0)})
        pairs = pairs.filter(pc.and_(pc.is_in(pairs["a"], keys), pc.is_in(pairs["b"], keys)))
        summed = (
            pairs.group_by(["a", "b"])
            .aggregate([("w", "sum")])
            .sort_by([("a", "ascending"), ("b", "ascending")])
        )
        edges = list(
            zip(summed["a"].to_pylist(), summed["b"].to_pylist(), summed["w_sum"].to_pylist(), strict=True)
        )
        return sorted(keys.to_pylist()), edges

    def subgraph(self, library: str, keys: set[str]) -> KnowledgeGraph:
        """The graph of these entities and the edges between them, exactly as in the whole graph
        (a node's or an edge's attributes come from its own rows only); not cached."""
        entities, relations = self._table(ENTITIES), self._table(RELATIONS)
        if entities is None or relations is None or not keys:
            return KnowledgeGraph([], [])
        where = f"library = {sql_str(library)}"
        wanted = pa.array(sorted(keys), pa.string())
        found = entities.search().where(where).limit(None).to_arrow()
        found = found.filter(pc.is_in(found["key"], wanted))
        pairs = relations.search().where(where).limit(None).to_arrow()
        pairs = pairs.filter(pc.and_(pc.is_in(pairs["source"], wanted), pc.is_in(pairs["target"], wanted)))
        return KnowledgeGraph(
            [_row_entity(r) for r in found.to_pylist()], [_row_relation(r) for r in pairs.to_pylist()]
        )

    def graph(self, library: str, acl: tuple[str, ...] | None = None) -> KnowledgeGraph:
        """The library's graph, rebuilt only when the entity or relation table changed; with `acl`,
        the graph of the documents a caller who sees `acl` may see (public ones and those sharing
        a group with it)."""
        loaded = self._load(library)
        if loaded is None:
            return KnowledgeGraph([], [])
        if acl is None:
            return loaded.graph
        with self._lock:
            return loaded.view(acl)

    def document_groups(self, library: str) -> dict[str, tuple[str, ...]]:
        """The ACL groups of every document with graph rows (empty: public)."""
        loaded = self._load(library)
        return loaded.document_groups if loaded is not None else {}

    def _load(self, library: str) -> _Loaded | None:
        entities, relations = self._table(ENTITIES), self._table(RELATIONS)
        if entities is None or relations is None:
            return None
        versions = (entities.version, relations.version)
        with self._lock:
            cached = self._graphs.get(library)
            if cached is not None and cached.versions == versions:
                return cached
            where = f"library = {sql_str(library)}"
            rows = entities.search().where(where).limit(None).to_arrow().to_pylist()
            mentions = [_row_entity(r) for r in rows]
            pairs = [
                _row_relation(r) for r in relations.search().where(where).limit(None).to_arrow().to_pylist()
            ]
            document_groups = {r["document_id"]: tuple(r.get("groups") or ()) for r in rows}
            loaded = _Loaded(versions, KnowledgeGraph(mentions, pairs), document_groups)
            if any(document_groups.values()):  # kept to build the graphs that restricted callers see
                loaded.mentions, loaded.relations = mentions, pairs
            self._graphs[library] = loaded
            return loaded

    def communities(self, library: str) -> tuple[list[Community], np.ndarray]:
        """The library's communities and their vectors (one row each)."""
        table = self._table(COMMUNITIES)
        if table is None:
            return [], np.zeros((0, self.dimension), dtype=np.float32)
        version = table.version
        with self._lock:
            cached = self._communities.get(library)
            if cached is not None and cached[0] == version:
                return cached[1], cached[2]
            data = table.search().where(f"library = {sql_str(library)}").limit(None).to_arrow()
            data = data.sort_by("community_id")
            dimension = data.schema.field("vector").type.list_size
            vectors = (
                data.column("vector")
                .combine_chunks()
                .flatten()
                .to_numpy(zero_copy_only=False)
                .reshape(-1, dimension)
                .astype(np.float32)
            )
            found = [_row_community(r) for r in data.drop_columns(["vector"]).to_pylist()]
            self._communities[library] = (version, found, vectors)
            return found, vectors

    def libraries(self) -> list[str]:
        table = self._table(ENTITIES)
        if table is None:
            return []
        return sorted(set(table.search().select(["library"]).limit(None).to_arrow()["library"].to_pylist()))

    def counts(self, library: str) -> tuple[int, int, int]:
        """(entities, relations, communities) of the library, counted as ingest reports them."""
        keys, edges = self.weighted_edges(library)
        table = self._table(COMMUNITIES)
        communities = int(table.count_rows(f"library = {sql_str(library)}")) if table is not None else 0
        return len(keys), len(edges), communities

    def refresh(self) -> dict[str, int]:
        """A reader's check for the writer's newest commits, now: the version of each table it
        serves (0 before the table exists)."""
        versions = {}
        for name in self._schemas:
            table = self._table(name)
            versions[name] = 0 if table is None else latest_version(table)
        return versions

    def reopen(self) -> None:
        """Forgets the open tables and the in-memory graphs: the next call opens the latest versions
        (after a restore or a compaction made through other handles of the tables)."""
        with self._lock:
            self._tables = {}
            self._graphs.clear()
            self._communities.clear()


def _entity_row(m: EntityMention, groups: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "library": m.library,
        "document_id": m.document_id,
        "key": m.key,
        "name": m.name,
        "type": m.type,
        "chunk_ids": list(m.chunk_ids),
        "count": m.count,
        "aliases": list(m.aliases),
        "groups": list(groups),
    }


def _row_entity(r: dict[str, Any]) -> EntityMention:
    return EntityMention(
        r["library"],
        r["document_id"],
        r["key"],
        r["name"] or r["key"],
        r["type"] or "",
        tuple(r["chunk_ids"] or ()),
        int(r["count"] or 1),
        tuple(r["aliases"] or ()),
    )


def _relation_row(r: Relation) -> dict[str, Any]:
    return {**r.__dict__, "chunk_ids": list(r.chunk_ids)}


def _row_relation(r: dict[str, Any]) -> Relation:
    return Relation(
        r["library"],
        r["document_id"],
        r["source"],
        r["target"],
        r["label"] or "co-occurs",
        float(r["weight"] or 0.0),
        tuple(r["chunk_ids"] or ()),
        r["evidence"] or "",
        r["evidence_chunk"] or "",
    )


def _community_row(c: Community) -> dict[str, Any]:
    return {
        "library": c.library,
        "community_id": c.community_id,
        "members": list(c.members),
        "summary": c.summary,
        "chunk_ids": list(c.chunk_ids),
        "document_ids": list(c.document_ids),
    }


def _row_community(r: dict[str, Any]) -> Community:
    return Community(
        r["library"],
        r["community_id"],
        tuple(r["members"] or ()),
        r["summary"] or "",
        tuple(r["chunk_ids"] or ()),
        tuple(r["document_ids"] or ()),
    )
