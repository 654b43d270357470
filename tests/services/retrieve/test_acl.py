"""Document ACLs inside retrieval, on real LanceDB, tantivy and SQLite with the real embedder and
the real spaCy extractor: a library with public documents, documents for `hr` and documents for
`finance`, all naming the same phrase. A caller sees public documents and those of its groups in
every mode (and top_k is still filled from them), never another group's; admins see everything;
ingesting again with other groups moves a document's visibility; stores written before ACLs still
search, and their writers upgrade them."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest
import tantivy

from ragstack import auth
from ragstack.auth import Principal, Role
from ragstack.config import StateConfig
from ragstack.domain import (
    Chunk,
    IngestSummary,
    PageText,
    SearchFilter,
    SearchMode,
    acl_allows,
    acl_groups,
)
from ragstack.errors import DocumentNotFound, InvalidArgument, NotFound
from ragstack.knowledge_graph import Community, KnowledgeGraph
from ragstack.state import open_state
from ragstack.stores import catalog as catalog_store
from ragstack.stores import vectors as vectors_module
from ragstack.stores.catalog import Catalog
from ragstack.stores.graph import ENTITIES, GraphStore
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from ragstack.v1 import ingest_pb2
from services.ingest.graph_extract import EntityExtractor
from services.ingest.servicer import IngestServicer
from services.ingest.sources import SourceItem
from services.retrieve.graph_search import GraphSearch
from services.retrieve.searcher import Query, Searcher
from tests.tools.pipelines import graph_pipeline

LIB = "default"
PHRASE = "zephyr quartz ledger"
PEOPLE = "Grace Hopper met Alan Turing in London. Katherine Johnson worked with Dorothy Vaughan in Houston."
DOCS: dict[str, dict[str, str]] = {
    "public": {
        "public-1": f"# Shipping\n\nThe {PHRASE} records every shipment. {PEOPLE}\n",
        "public-2": f"# Archive\n\nThe {PHRASE} is archived each spring in the basement.\n",
        "public-3": f"# Audit trail\n\nEvery change to the {PHRASE} is signed by two clerks.\n",
    },
    "hr": {
        "hr-1": f"# Salaries\n\nThe {PHRASE} lists salaries. {PEOPLE}\n",
        "hr-2": f"# Leave\n\nHolidays are booked in the {PHRASE} by each team lead.\n",
    },
    # The phrase again and again: for an admin these rank first, so a filter applied to the results
    # (not inside the query) would leave the others short of top_k.
    "finance": {
        "finance-1": f"# Budgets\n\nThe {PHRASE}: {PHRASE}, {PHRASE}. "
        "Boris Karloff met Grace Hopper in Geneva.\n",
        "finance-2": f"# Forecast\n\nThe {PHRASE} forecast: {PHRASE}, {PHRASE}, {PHRASE}.\n",
        "finance-3": f"# Payments\n\nThe {PHRASE} payments: {PHRASE}, {PHRASE}, {PHRASE}.\n",
    },
}
GROUPS = {"public": (), "hr": ("hr",), "finance": ("finance",)}
PUBLIC = {"public-1", "public-2", "public-3"}
HR = {"hr-1", "hr-2"}
FINANCE = {"finance-1", "finance-2", "finance-3"}


@contextlib.contextmanager
def caller(*groups: str, role: Role = Role.READER) -> Iterator[None]:
    token = auth.PRINCIPAL.set(Principal("tester", role, groups=groups))
    try:
        yield
    finally:
        auth.PRINCIPAL.reset(token)


ADMIN = Role.ADMIN


class Library:
    """The stores of one library in `root`: ingest's writers, retrieve's readers and searcher."""

    def __init__(self, root: Path, embedder: Any, extractor: EntityExtractor) -> None:
        self.root = root
        lance = root / "lancedb"
        self.pipeline, _ = graph_pipeline(root, lance, embedder, extractor)
        self.dense = VectorStore(lance, embedder.dimension)
        self.lexical = LexicalStore(root / "tantivy")
        self.graph = GraphStore(lance, embedder.dimension)
        self.searcher = Searcher(
            embedder,
            self.dense,
            self.lexical,
            default_top_k=5,
            max_top_k=20,
            candidates=5,
            rrf_k=60,
            max_per_document=1,
            page_search=True,
            graph=GraphSearch(self.graph, VectorStore(lance, embedder.dimension), communities=3),
        )

    def write(self, kind: str, groups: tuple[str, ...]) -> IngestSummary:
        folder = self.root / "docs" / kind
        folder.mkdir(parents=True, exist_ok=True)
        items = []
        for name, text in DOCS[kind].items():
            path = folder / f"{name}.md"
            path.write_text(text)
            items.append(SourceItem(str(path), "r1", path.read_bytes, path.stat().st_size))
        events = list(self.pipeline.run(items, LIB, groups=groups))
        summary = events[-1]
        assert isinstance(summary, IngestSummary) and not summary.failures, summary
        return summary

    def names(self) -> dict[str, str]:
        """document id -> file stem."""
        return {d.document_id: Path(d.source).stem for d in self.pipeline.list_documents(LIB)}

    def id(self, name: str) -> str:
        return next(i for i, n in self.names().items() if n == name)

    async def found(self, mode: SearchMode, query: str = PHRASE, top_k: int = 5) -> list[str]:
        """The file stems of the hits, in order (the caller set by `caller`)."""
        names = self.names()
        result = await self.searcher.search(Query(query, LIB, top_k=top_k, mode=mode))
        return [names[h.chunk.document_id] for h in result.hits]


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory, embedder, extractor: EntityExtractor) -> Library:  # type: ignore[no-untyped-def]
    lib = Library(tmp_path_factory.mktemp("acl"), embedder, extractor)
    for kind, groups in GROUPS.items():
        assert lib.write(kind, groups).indexed == len(DOCS[kind])
    return lib


def test_groups_are_checked_and_normalised() -> None:
    assert acl_groups(["hr", "finance", "hr", "team.a@corp:eu"]) == ("finance", "hr", "team.a@corp:eu")
    for bad in (["has space"], [""], ["x" * 65], ["*"], ["a/b"]):
        with pytest.raises(InvalidArgument, match="ACL group"):
            acl_groups(bad)
    with pytest.raises(InvalidArgument, match="limit of 32"):
        acl_groups([f"g{i}" for i in range(33)])
    assert acl_allows(None, ("x",)) and acl_allows((), ()) and not acl_allows((), ("x",))
    assert acl_allows(("x", "y"), ("y",)) and not acl_allows(("x",), ("y",))
    # A request's own ACL can narrow the caller's, never widen it.
    assert SearchFilter(acl=("hr", "x")).narrowed_to(("hr",)).acl == ("hr",)
    assert SearchFilter().narrowed_to(()).acl == () and SearchFilter(acl=("x",)).narrowed_to(None).acl == (
        "x",
    )


@pytest.mark.parametrize("mode", [SearchMode.LEXICAL, SearchMode.DENSE, SearchMode.HYBRID])
async def test_a_caller_sees_public_and_its_groups_documents_and_top_k_stays_full(
    library: Library, mode: SearchMode
) -> None:
    with caller(role=ADMIN):
        everyone = await library.found(mode)
    assert len(everyone) == 5 and FINANCE & set(everyone)  # finance ranks among the first five
    with caller("hr"):
        hr = await library.found(mode)
    assert len(hr) == 5 and set(hr) == PUBLIC | HR  # five hits although finance ranks higher
    with caller():
        nobody = await library.found(mode)
    assert set(nobody) == PUBLIC
    with caller("finance", "other"):
        assert set(await library.found(mode, top_k=10)) == PUBLIC | FINANCE
    with caller("*"):  # `*` in its groups: sees everything
        assert set(await library.found(mode, top_k=10)) == PUBLIC | HR | FINANCE


def test_each_store_filters_inside_its_query(library: Library, embedder) -> None:  # type: ignore[no-untyped-def]
    hr = SearchFilter(acl=("hr",))
    names = library.names()
    lexical = [names[c.document_id] for c, _ in library.lexical.search(PHRASE, LIB, 5, hr)]
    assert set(lexical) == PUBLIC | HR
    assert {g for c, _ in library.lexical.search(PHRASE, LIB, 10) for g in c.groups} == {"hr", "finance"}
    vector = embedder.embed([PHRASE])[0]
    lancedb_path = VectorStore(library.root / "lancedb", embedder.dimension, memory_rows=0)
    for store in (library.dense, lancedb_path):  # the in-memory mask and LanceDB's `where`
        assert {names[c.document_id] for c, _ in store.search(vector, LIB, 5, hr)} == PUBLIC | HR
        finance = library.id("finance-1")
        assert store.chunks_by_id(LIB, [f"{finance}:0"], ("hr",)) == []
        assert [c.chunk_id for c in store.chunks_by_id(LIB, [f"{finance}:0"], ("finance",))] == [
            f"{finance}:0"
        ]
        assert store.around(LIB, finance, 0, 2, ()) == [] and store.chunks_of(LIB, finance, ("hr",)) == []
        assert store.around(LIB, finance, 0, 2)[0].groups == ("finance",)


async def test_graph_local_search_walks_only_the_visible_graph(library: Library) -> None:
    question = "What did Grace Hopper discuss with Alan Turing?"
    with caller(role=ADMIN):
        assert {"public-1", "hr-1", "finance-1"} <= set(await library.found(SearchMode.GRAPH_LOCAL, question))
        # One hop from Boris Karloff, through Grace Hopper, to the pages of the others.
        boris = await library.found(SearchMode.GRAPH_LOCAL, "Boris Karloff")
        assert boris[0] == "finance-1" and "public-1" in boris
    with caller("hr"):
        assert set(await library.found(SearchMode.GRAPH_LOCAL, question)) == {"public-1", "hr-1"}
        # Named only in a finance document: no seed, and no hop through it to Grace Hopper's pages.
        assert await library.found(SearchMode.GRAPH_LOCAL, "Boris Karloff") == []
    with caller():
        assert set(await library.found(SearchMode.GRAPH_LOCAL, question)) == {"public-1"}
    assert "boris karloff" in library.graph.graph(LIB).graph
    assert "boris karloff" not in library.graph.graph(LIB, ("hr",)).graph
    assert "grace hopper" in library.graph.graph(LIB, ("hr",)).graph


async def test_graph_global_search_shows_only_communities_the_caller_sees_whole(library: Library) -> None:
    names = library.names()
    groups = library.graph.document_groups(LIB)

    async def communities(query: str) -> tuple[set[str], list[set[str]]]:
        result = await library.searcher.search(Query(query, LIB, top_k=5, mode=SearchMode.GRAPH_GLOBAL))
        docs = [{names[d] for d in _documents(library, c.community_id)} for c in result.communities]
        return {names[h.chunk.document_id] for h in result.hits}, docs

    with caller(role=ADMIN):
        hits, shown = await communities("Boris Karloff in Geneva")
    assert "finance-1" in hits and any("finance-1" in docs for docs in shown)
    for who in (("hr",), ()):
        with caller(*who):
            for query in ("Katherine Johnson and Dorothy Vaughan in Houston", "Boris Karloff in Geneva"):
                hits, shown = await communities(query)
                assert not hits & FINANCE
                for docs in shown:  # every document behind a summary shown is one the caller sees
                    assert all(acl_allows(who, groups[library.id(n)]) for n in docs)
    with caller("hr"):
        hits, shown = await communities("Katherine Johnson and Dorothy Vaughan in Houston")
    assert hits == {"public-1", "hr-1"} and shown
    with caller():
        hits, shown = await communities("Katherine Johnson and Dorothy Vaughan in Houston")
    assert not hits  # its community is built from the hr page too: hidden from a caller without hr


def _documents(library: Library, community_id: str) -> list[str]:
    found, _ = library.graph.communities(LIB)
    return next(list(c.document_ids) for c in found if c.community_id == community_id)


class _Communities:
    """A graph reader with three communities: one public, one partly finance, one stale."""

    def __init__(self) -> None:
        self.found = [
            Community(LIB, "c1", ("a", "b"), "public", ("p:0",), ("p",)),
            Community(LIB, "c2", ("a", "c"), "mixed", ("p:0", "f:0"), ("f", "p")),
            Community(LIB, "c3", ("d", "e"), "stale", ("gone:0",), ("gone",)),
        ]

    def graph(self, library: str, acl: tuple[str, ...] | None = None) -> KnowledgeGraph:
        return KnowledgeGraph([], [])

    def document_groups(self, library: str) -> dict[str, tuple[str, ...]]:
        return {"p": (), "f": ("finance",)}

    def communities(self, library: str) -> tuple[list[Community], np.ndarray]:
        return self.found, np.ones((3, 2), dtype=np.float32)


class _Chunks:
    def chunks_by_id(self, library: str, chunk_ids: Any, acl: tuple[str, ...] | None = None) -> list[Chunk]:
        groups = {"p": (), "f": ("finance",), "gone": ()}
        found = [Chunk(c, c.split(":")[0], LIB, "t", groups=groups[c.split(":")[0]]) for c in chunk_ids]
        return [c for c in found if acl_allows(acl, c.groups)]


def test_a_community_with_one_hidden_document_is_never_shown() -> None:
    search = GraphSearch(_Communities(), _Chunks(), communities=3)
    vector = np.ones(2, dtype=np.float32)
    _, shown = search.global_(vector, LIB, 5, SearchFilter(acl=("hr",)))
    assert [c.community_id for c in shown] == ["c1"]
    _, shown = search.global_(vector, LIB, 5, SearchFilter(acl=("finance",)))
    assert [c.community_id for c in shown] == ["c1", "c2"]  # the stale one stays hidden
    _, shown = search.global_(vector, LIB, 5, SearchFilter())
    assert {c.community_id for c in shown} == {"c1", "c2", "c3"}


async def test_documents_a_caller_cannot_see_are_not_found(library: Library) -> None:
    servicer = IngestServicer(library.pipeline, LIB)
    finance = library.id("finance-1")
    ctx: Any = None
    with caller("hr", role=Role.WRITER):
        listed = await servicer.ListDocuments(ingest_pb2.ListDocumentsRequest(library=LIB), ctx)
        assert {library.names()[d.document_id] for d in listed.documents} == PUBLIC | HR
        assert {tuple(d.groups) for d in listed.documents} == {(), ("hr",)}
        with pytest.raises(DocumentNotFound) as hidden:
            await servicer.GetDocument(ingest_pb2.GetDocumentRequest(library=LIB, document_id=finance), ctx)
        with pytest.raises(DocumentNotFound) as unknown:
            await servicer.GetDocument(ingest_pb2.GetDocumentRequest(library=LIB, document_id="nope"), ctx)
        assert str(hidden.value) == str(unknown.value).replace("'nope'", repr(finance))
        with pytest.raises(DocumentNotFound):
            await servicer.DeleteDocument(
                ingest_pb2.DeleteDocumentRequest(library=LIB, document_id=finance), ctx
            )
        got = await servicer.GetDocument(
            ingest_pb2.GetDocumentRequest(library=LIB, document_id=library.id("hr-1")), ctx
        )
        assert list(got.document.groups) == ["hr"]
        with pytest.raises(InvalidArgument, match="ACL group"):
            async for _ in servicer.Ingest(
                ingest_pb2.IngestRequest(library=LIB, paths=["/x"], groups=["a b"]), ctx
            ):
                pass
    with caller(role=ADMIN):
        got = await servicer.GetDocument(ingest_pb2.GetDocumentRequest(library=LIB, document_id=finance), ctx)
        assert list(got.document.groups) == ["finance"]
    assert library.pipeline.get_document(LIB, finance).groups == ("finance",)  # not deleted
    # An upload through the Ingest RPC with groups (normalised) in a library of its own.
    upload = ingest_pb2.FileUpload(filename="memo.md", content=b"# Memo\n\nThe quarterly memo.\n")
    request = ingest_pb2.IngestRequest(library="uploads", files=[upload], groups=["hr", "audit", "hr"])
    with caller(role=ADMIN):
        events = [e async for e in servicer.Ingest(request, ctx)]
    assert events[-1].summary.indexed == 1
    (memo,) = library.pipeline.list_documents("uploads")
    assert memo.groups == ("audit", "hr")
    with caller("hr"):
        assert [
            c.document_id for c, _ in library.lexical.search("memo", "uploads", 3, SearchFilter(acl=("x",)))
        ] == []
        hits = await library.searcher.search(Query("quarterly memo", "uploads", mode=SearchMode.LEXICAL))
    assert [h.chunk.document_id for h in hits.hits] == [memo.document_id]


async def test_groups_reach_the_ingest_from_the_gateway_the_clients_and_the_cli() -> None:
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from gateway.app import create_app
    from gateway.deps import Upstreams
    from ragstack import convert
    from ragstack.cli.main import cli
    from ragstack.domain import Document, IngestJob
    from ragstack.rpc.clients import _ingest_request

    seen: dict[str, Any] = {}

    class Ingest:
        async def ingest_pb(
            self, files: Any, library: str = "", urls: Any = (), enrich: bool = False, groups: Any = ()
        ) -> Any:
            seen["stream"] = tuple(groups)
            for _ in ():
                yield None

        async def submit(
            self, files: Any = (), urls: Any = (), library: str = "", groups: Any = ()
        ) -> IngestJob:
            seen["job"] = tuple(groups)
            return IngestJob("j1", library, "queued", "t", "t")

    async def ready() -> dict[str, str]:
        return {}

    app = create_app(Upstreams(agent=None, ingest=Ingest(), retrieve=None, readiness=ready))  # type: ignore[arg-type]
    http = TestClient(app, base_url="http://127.0.0.1")
    files = [("files", ("a.md", b"# A\n\ntext\n"))]
    assert http.post("/v1/ingest", files=files, data={"groups": ["hr", "fin", "hr"]}).status_code == 200
    assert seen["stream"] == ("fin", "hr")
    assert http.post("/v1/ingest/jobs", files=files, data={"groups": ["hr"]}).status_code == 202
    assert seen["job"] == ("hr",)
    refused = http.post("/v1/ingest", files=files, data={"groups": ["a b"]})
    assert refused.status_code == 400 and "ACL group" in refused.json()["error"]["message"]
    assert list(_ingest_request((), (), LIB, False, (), False, ["hr"]).groups) == ["hr"]
    doc = Document("d", LIB, "s", "r", "f", "t", "text/markdown", groups=("fin", "hr"))
    assert convert.document_from_pb(convert.document_to_pb(doc)) == doc
    result = CliRunner().invoke(cli, ["ingest", "--group", "a b", "--url", "http://example.com"])
    assert result.exit_code == 2 and "ACL group" in result.output


async def test_ingesting_again_with_other_groups_moves_visibility(
    tmp_path: Path, embedder, extractor
) -> None:  # type: ignore[no-untyped-def]
    lib = Library(tmp_path, embedder, extractor)
    lib.write("public", ())
    assert lib.write("finance", ("finance",)).indexed == 3
    with caller("hr"):
        assert not FINANCE & set(await lib.found(SearchMode.LEXICAL, top_k=10))
        assert await lib.found(SearchMode.GRAPH_LOCAL, "Boris Karloff") == []
    moved = lib.write("finance", ("hr",))  # the same files: only their ACL changed
    assert moved.indexed == 3 and moved.unchanged == 0
    assert {d.groups for d in lib.pipeline.list_documents(LIB) if Path(d.source).stem in FINANCE} == {("hr",)}
    for who in (("hr",), ("finance",)):
        with caller(*who):
            seen = who == ("hr",)
            for mode in (SearchMode.LEXICAL, SearchMode.DENSE, SearchMode.HYBRID):
                assert bool(FINANCE & set(await lib.found(mode, top_k=10))) is seen, (who, mode)
            assert ("finance-1" in await lib.found(SearchMode.GRAPH_LOCAL, "Boris Karloff")) is seen
    assert lib.write("finance", ("hr",)).unchanged == 3  # same content, same groups: skipped
    assert lib.write("finance", ()).indexed == 3  # public again
    with caller():
        assert FINANCE <= set(await lib.found(SearchMode.LEXICAL, top_k=10))


DIM = 8


def test_stores_written_before_acls_still_search_and_their_writers_upgrade_them(tmp_path: Path) -> None:
    vector = np.eye(DIM, dtype=np.float32)[0]
    old = Chunk(
        "old:0", "old", LIB, "the okapi lives in the rainforest", ("Okapi",), (1,), 0, "Okapi", "s", "text/x"
    )
    # The LanceDB chunk table without the groups column.
    lance = tmp_path / "lancedb"
    schema = pa.schema([f for f in vectors_module._schema(DIM) if f.name != "groups"])
    row = {
        "chunk_id": old.chunk_id,
        "document_id": old.document_id,
        "library": LIB,
        "text": old.text,
        "title": old.title,
        "source": old.source,
        "heading_path": list(old.heading_path),
        "pages": list(old.pages),
        "position": 0,
        "media_type": old.media_type,
        "heading_key": "Okapi\x1f",
        "vector": vector,
    }
    lancedb.connect(str(lance)).create_table("chunks", data=pa.Table.from_pylist([row], schema=schema))
    readers = [VectorStore(lance, DIM), VectorStore(lance, DIM, memory_rows=0)]
    for reader in readers:
        assert [c.chunk_id for c, _ in reader.search(vector, LIB, 3, SearchFilter(acl=()))] == ["old:0"]
        assert [c.chunk_id for c in reader.chunks_by_id(LIB, ["old:0"], ())] == ["old:0"]
        assert [c.chunk_id for c in reader.around(LIB, "old", 0, 1, ("hr",))] == ["old:0"]
    writer = VectorStore(lance, DIM, writer=True)  # adds the column: the old rows stay public
    new = Chunk("new:0", "new", LIB, "salaries", ("Pay",), (), 0, "Pay", "s2", "text/x", ("hr",))
    writer.replace_documents(LIB, ["new"], [new], vector[None, :])
    for reader in readers:
        assert {c.chunk_id for c, _ in reader.search(vector, LIB, 3, SearchFilter(acl=()))} == {"old:0"}
        assert {c.chunk_id for c, _ in reader.search(vector, LIB, 3, SearchFilter(acl=("hr",)))} == {
            "old:0",
            "new:0",
        }

    # The tantivy index in its old schema (no `group` field), with a chunk and a page.
    folder = tmp_path / "tantivy"
    folder.mkdir()
    index = tantivy.Index(_old_lexical_schema(), path=str(folder))
    w = index.writer(heap_size=15_000_000, num_threads=1)
    meta = {"heading_path": ["Okapi"], "pages": [1], "position": 0, "source": "s", "media_type": "text/x"}
    common = {"document_id": "old", "doc_key": f"{LIB}\x1fold", "library": LIB, "title": "Okapi"}
    w.add_document(
        tantivy.Document(
            **common,
            chunk_id="old:0",
            kind="chunk",
            media_type="text/x",
            heading_key="Okapi\x1f",
            heading="Okapi",
            text=old.text,
            meta=json.dumps(meta),
        )
    )
    w.add_document(
        tantivy.Document(
            **common,
            chunk_id="old#page1",
            kind="page",
            media_type="text/x",
            heading="Okapi",
            text=old.text,
            meta=json.dumps({"page": 1}),
        )
    )
    w.commit()
    w.wait_merging_threads()
    del w, index
    reader = LexicalStore(folder)
    public = SearchFilter(acl=())
    assert [c.chunk_id for c, _ in reader.search("okapi", LIB, 3, public)] == ["old:0"]
    assert [d for d, _, _ in reader.search_pages("okapi", LIB, 3, public)] == ["old"]
    lexical = LexicalStore(folder, writer=True)  # rewrites the index with the field, all public
    lexical.replace_documents(
        LIB,
        ["new"],
        [replace_text(new, "okapi salaries")],
        [PageText("new", LIB, 1, "okapi pay", "Pay", "text/x", ("hr",))],
    )
    for store in (reader, lexical):  # the reader opened before the upgrade follows it
        assert [c.chunk_id for c, _ in store.search("okapi", LIB, 3, public)] == ["old:0"]
        assert {c.chunk_id for c, _ in store.search("okapi", LIB, 3, SearchFilter(acl=("hr",)))} == {
            "old:0",
            "new:0",
        }
        # The old page kept its media type (not stored before: recovered from its chunk).
        pages = store.search_pages("okapi", LIB, 3, SearchFilter(media_types=("text/x",), acl=()))
        assert [d for d, _, _ in pages] == ["old"]
        assert store.count(LIB) == 2 and store.count(LIB, "page") == 2
    lexical.close()

    # The catalog and the graph's entity table without their groups columns.
    with sqlite3.connect(tmp_path / "catalog.sqlite") as db:
        db.execute(
            "CREATE TABLE documents (document_id TEXT NOT NULL, library TEXT NOT NULL, source TEXT NOT NULL,"
            " revision TEXT, fingerprint TEXT NOT NULL, title TEXT, media_type TEXT, chunk_count INTEGER,"
            " indexed_at TEXT, PRIMARY KEY (library, document_id))"
        )
        db.execute("INSERT INTO documents VALUES ('old', ?, 's', '', 'f0', 'Okapi', 'text/x', 1, '')", (LIB,))
    # (a store from before schema versions is adopted at version 1; `ragstack migrate` brings it on)
    catalog = Catalog(
        open_state(StateConfig(), tmp_path, catalog_store.STORE, catalog_store.MIGRATIONS, migrate=True)
    )
    assert catalog.get(LIB, "old").groups == () and catalog.states(LIB) == {"old": ("f0", (), "")}  # type: ignore[union-attr]
    entities = pa.schema([f for f in GraphStore(lance, DIM)._schemas[ENTITIES] if f.name != "groups"])
    lancedb.connect(str(lance)).create_table(
        ENTITIES,
        data=pa.Table.from_pylist(
            [
                {
                    "library": LIB,
                    "document_id": "old",
                    "key": "okapi",
                    "name": "Okapi",
                    "type": "ORG",
                    "chunk_ids": ["old:0"],
                    "count": 1,
                    "aliases": [],
                }
            ],
            schema=entities,
        ),
    )
    lancedb.connect(str(lance)).create_table(
        "graph_relations", schema=GraphStore(lance, DIM)._schemas["graph_relations"]
    )
    assert "okapi" in GraphStore(lance, DIM).graph(LIB, ()).graph
    GraphStore(lance, DIM, writer=True)._table(ENTITIES)  # the writer adds the column
    assert "groups" in lancedb.connect(str(lance)).open_table(ENTITIES).schema.names
    assert "okapi" in GraphStore(lance, DIM).graph(LIB, ()).graph


def replace_text(chunk: Chunk, text: str) -> Chunk:
    from dataclasses import replace

    return replace(chunk, text=text)


def _old_lexical_schema() -> Any:
    """The lexical index's schema before document ACLs."""
    b = tantivy.SchemaBuilder()
    b.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    b.add_text_field("document_id", stored=True, tokenizer_name="raw")
    b.add_text_field("doc_key", stored=False, tokenizer_name="raw")
    b.add_text_field("library", stored=True, tokenizer_name="raw")
    b.add_text_field("title", stored=True, tokenizer_name="en_stem")
    b.add_text_field("heading", stored=False, tokenizer_name="en_stem")
    b.add_text_field("text", stored=True, tokenizer_name="en_stem")
    b.add_text_field("kind", stored=False, tokenizer_name="raw")
    b.add_text_field("media_type", stored=False, tokenizer_name="raw")
    b.add_text_field("heading_key", stored=False, tokenizer_name="raw")
    b.add_text_field("meta", stored=True, index_option="basic", tokenizer_name="raw")
    return b.build()


async def test_a_chunk_of_a_hidden_document_is_not_found_like_an_unknown_one(library: Library) -> None:
    finance, hr = library.id("finance-1"), library.id("hr-1")
    with caller("hr"):
        assert (await library.searcher.chunk(LIB, f"{hr}:0")).document_id == hr
        with pytest.raises(NotFound) as hidden:
            await library.searcher.chunk(LIB, f"{finance}:0")
        with pytest.raises(NotFound) as unknown:
            await library.searcher.chunk(LIB, "nope:0")
    assert str(hidden.value) == str(unknown.value).replace("'nope:0'", repr(f"{finance}:0"))
    with caller(role=ADMIN):
        chunk = await library.searcher.chunk(LIB, f"{finance}:0")
    assert chunk.document_id == finance and chunk.heading_path


async def test_the_graph_a_caller_reads_holds_only_what_it_may_see(library: Library) -> None:
    """GetGraph (`ragstack graph`): entities of the documents the caller sees, and only the
    communities whose every document it sees, as search walks them."""
    groups = library.graph.document_groups(LIB)
    with caller(role=ADMIN):
        everything = await library.searcher.graph(LIB)
    assert "boris karloff" in {e.key for e in everything.entities}
    for who in (("hr",), ()):
        with caller(*who):
            view = await library.searcher.graph(LIB)
        keys = {e.key for e in view.entities}
        assert "boris karloff" not in keys and keys < {e.key for e in everything.entities}
        assert all(r.source in keys and r.target in keys for r in view.relations)
        assert len(view.communities) < len(everything.communities)
        for c in view.communities:
            assert all(acl_allows(who, groups[d]) for d in c.document_ids)
    with caller("hr"):
        assert "grace hopper" in {e.key for e in (await library.searcher.graph(LIB)).entities}


async def test_a_chunk_id_past_its_limit_is_refused_with_the_limit_named(library: Library) -> None:
    with caller(role=ADMIN), pytest.raises(InvalidArgument, match="513 characters, over the limit of 512"):
        await library.searcher.chunk(LIB, "x" * 513)
