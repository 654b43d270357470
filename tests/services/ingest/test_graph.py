"""The knowledge graph on real text with the real spaCy model, real LanceDB and the real embedder:
known entities and relations, alias merging, seeded communities, incremental summaries, deletes,
and graph local and global search over what ingest wrote."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragstack.config import StateConfig
from ragstack.domain import Chunk, FileProgress, FileStage, IngestSummary, SearchFilter
from ragstack.errors import Cancelled
from ragstack.guard.paths import PathGuard
from ragstack.state.locks import SharedLock
from ragstack.stores.catalog import EVERY_COMMUNITY
from ragstack.stores.graph import GraphStore
from ragstack.stores.vectors import VectorStore
from services.ingest.graph_extract import EntityExtractor, may_name, prose
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import collect_paths
from services.retrieve.graph_search import GraphSearch
from tests.tools.pipelines import graph_pipeline, plain_pipeline

DOCS = Path(__file__).resolve().parents[2] / "data" / "graph"

EVERYWHERE = PathGuard([Path("/")])  # these tests read their own temp folders


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


def ingest(pipeline: IngestPipeline, folder: Path) -> IngestSummary:
    events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "default"))
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and not summary.failures, summary
    return summary


def summary_naming(graph: GraphStore, entity: str) -> str:
    """The summary of the community that `entity` (a key) belongs to."""
    found, _ = graph.communities("default")
    return next(c.summary for c in found if entity in c.members)


HOPPER = "# Hopper\n\nGrace Hopper taught mathematics at Vassar College in Poughkeepsie.\n"


class Stores:
    def __init__(self, root: Path, embedder, extractor: EntityExtractor) -> None:  # type: ignore[no-untyped-def]
        self.docs = root / "docs"
        shutil.copytree(DOCS, self.docs, ignore=shutil.ignore_patterns("README.md"))
        lance = root / "data" / "lancedb"  # where a config with data_dir root/data looks
        self.pipeline, vectors = graph_pipeline(root, lance, embedder, extractor)
        self.graph = GraphStore(lance, embedder.dimension)  # a reader, as the retrieve service has
        self.search = GraphSearch(
            self.graph, VectorStore(lance, embedder.dimension), neighbours=20, communities=2
        )
        self.embedder = embedder
        self.vectors = vectors

    def ingest(self) -> IngestSummary:
        return ingest(self.pipeline, self.docs)

    def chunk(self, name: str) -> str:
        """The first chunk id of a document, by file stem."""
        return self.doc(name) + ":0"

    def doc(self, name: str) -> str:
        return next(
            d.document_id for d in self.pipeline.list_documents("default") if d.source.endswith(f"/{name}.md")
        )

    def communities(self) -> dict[str, tuple[tuple[str, ...], str]]:
        found, _ = self.graph.communities("default")
        return {c.community_id: (c.members, c.summary) for c in found}


@pytest.fixture
def stores(tmp_path: Path, embedder, extractor: EntityExtractor) -> Stores:  # type: ignore[no-untyped-def]
    return Stores(tmp_path, embedder, extractor)


def test_known_entities_relations_and_aliases(extractor: EntityExtractor) -> None:
    chunks = [Chunk(f"{p.stem}:0", p.stem, "lib", p.read_text()) for p in sorted(DOCS.glob("*.md"))]
    mentions, relations = extractor.extract(chunks)
    found = {(m.document_id, m.key): m for m in mentions}
    assert found["toto", "toto"].type == "ORG"
    assert found["toto", "jeff porcaro"].type == "PERSON"
    assert found["toto", "los angeles"].type == "GPE"
    assert found["curie", "vienna"].chunk_ids == ("curie:0",)
    # An acronym merges into the name it spells; a surname into the full name.
    assert found["curie", "international atomic energy agency"].aliases == ("iaea",)
    assert found["lovelace", "ada lovelace"].aliases == ("lovelace",)
    assert ("curie", "iaea") not in found and ("lovelace", "lovelace") not in found
    pairs = {(r.source, r.target): r for r in relations}
    drums = pairs["jeff porcaro", "toto"]
    assert drums.label == "played drums for" and drums.evidence.startswith("Jeff Porcaro played drums")
    assert drums.chunk_ids == ("toto:0",) and drums.weight == 1.0
    # Numbers and dates are not entities.
    assert not any(m.key in ("1977", "1992") for m in mentions)


def test_ner_reads_only_the_sentences_that_may_name_someone(extractor: EntityExtractor) -> None:
    assert (
        may_name("The prize went to Marie Curie.")
        and may_name("Curie won.")
        and may_name("In 1903 Curie won.")
    )
    assert not may_name("The results were good.") and not may_name("IL-6 rose in mice (CI 0.4-0.7).")
    assert not may_name("Results: none.") and not may_name("we saw nothing")
    text = "IL-6 and TNF rose in treated mice. The drummer Jeff Porcaro was born in Hartford."
    mentions, relations = extractor.extract([Chunk("d:0", "d", "lib", text)])
    found = {m.key: m.type for m in mentions}
    # Terms come from their shape in a sentence NER skipped; names from NER in the other.
    assert found == {"il 6": "TERM", "tnf": "TERM", "jeff porcaro": "PERSON", "hartford": "GPE"}
    assert {(r.source, r.target) for r in relations} == {("il 6", "tnf"), ("hartford", "jeff porcaro")}


def test_prose_ends_headings_and_rows_like_sentences() -> None:
    text = "# Toto\n\nToto is a\nband.\n\n| a | b |\n|---|---|\n<!-- page 2 -->\n- item"
    assert prose(text) == "Toto.\nToto is a band.\na | b.\nitem."


def test_ingest_builds_the_graph_and_seeded_communities(
    stores: Stores, tmp_path: Path, embedder, extractor
) -> None:  # type: ignore[no-untyped-def]
    summary = stores.ingest()
    kg = stores.graph.graph("default")
    assert summary.entities == len(kg) and summary.relations == kg.graph.number_of_edges() > 0
    # "Jeff Porcaro" is one entity mentioned by two documents.
    assert kg.chunks_of("jeff porcaro") == {stores.chunk("toto"), stores.chunk("porcaro")}
    # What the refresh reads instead of the whole graph says the same: keys and summed weights,
    # and the rows of a few entities.
    keys, edges = stores.graph.weighted_edges("default")
    assert keys == sorted(kg.graph.nodes)
    assert edges == sorted((*sorted((a, b)), pytest.approx(w)) for a, b, w in kg.graph.edges(data="weight"))
    some = {"jeff porcaro", "toto", "hartford", "marie curie"}
    part = stores.graph.subgraph("default", some)
    assert dict(part.graph.nodes(data=True)) == {k: kg.graph.nodes[k] for k in some}

    def edges_of(g):  # type: ignore[no-untyped-def]
        return sorted((*sorted((a, b)), attrs) for a, b, attrs in g.edges(data=True))

    assert edges_of(part.graph) == edges_of(kg.graph.subgraph(some))
    communities = stores.communities()
    assert summary.communities == len(communities) >= 3
    assert summary.communities_summarized == len(communities)
    members = [set(m) for m, _ in communities.values()]
    assert any({"marie curie", "university of paris"} <= m for m in members)
    assert any({"jeff porcaro", "hartford"} <= m for m in members)
    assert not any({"marie curie", "toto"} <= m for m in members)  # unconnected groups stay apart
    summary_text = next(s for m, s in communities.values() if "marie curie" in m)
    assert "Marie Curie (PERSON)" in summary_text
    # The same rows and seed in another data dir give the same communities.
    again = Stores(tmp_path / "again", embedder, extractor)
    again.ingest()
    assert again.communities() == communities


def test_a_changed_document_resummarises_only_its_communities(stores: Stores) -> None:
    stores.ingest()
    before = stores.communities()
    curie = stores.docs / "curie.md"
    curie.write_text(curie.read_text() + "\nMarie Curie later directed the Radium Institute in Paris.\n")
    summary = stores.ingest()
    after = stores.communities()
    touched = stores.graph.keys_of("default", [stores.doc("curie")]) | {
        m for ms, _ in before.values() for m in ms if "curie" in m
    }
    expected = [cid for cid, (m, _) in after.items() if touched & set(m)]
    assert summary.indexed == 1 and summary.communities_summarized == len(expected) >= 1
    untouched = {cid: v for cid, v in before.items() if not touched & set(v[0])}
    assert untouched and all(after[cid] == v for cid, v in untouched.items())
    # Nothing changed: nothing is summarised again.
    assert stores.ingest().communities_summarized == 0


def test_deleting_a_document_removes_only_entities_nothing_else_mentions(stores: Stores) -> None:
    stores.ingest()
    toto = stores.chunk("toto")
    stores.pipeline.delete_document("default", stores.doc("porcaro"))
    kg = stores.graph.graph("default")
    assert "hartford" not in kg.graph and "boz scaggs" not in kg.graph
    assert kg.chunks_of("jeff porcaro") == {toto}  # still mentioned by the band's page
    assert all("hartford" not in m for m, _ in stores.communities().values())


def test_graph_local_search_follows_one_hop(stores: Stores) -> None:
    stores.ingest()
    hits = stores.search.local("Which drummer was born in Hartford?", "default", 5, SearchFilter())
    ids = [c.chunk_id for c, _ in hits]
    toto, porcaro = stores.chunk("toto"), stores.chunk("porcaro")
    # The drummer's page names Hartford; the band's page is one hop away, through Jeff Porcaro.
    assert ids[0] == porcaro and toto in ids and stores.chunk("curie") not in ids
    assert hits[0][1] > hits[ids.index(toto)][1]
    only = stores.search.local("Hartford", "default", 5, SearchFilter(document_ids=(stores.doc("toto"),)))
    assert [c.chunk_id for c, _ in only] == [toto]
    assert stores.search.local("a question naming nothing known", "default", 5, SearchFilter()) == []


def test_graph_global_search_cites_the_chunks_of_the_nearest_community(stores: Stores) -> None:
    stores.ingest()
    # A community's vector is the unit mean of its chunks' vectors (nothing embedded for it).
    communities, matrix = stores.graph.communities("default")
    for community, row in zip(communities, matrix, strict=True):
        chunks = stores.vectors.vectors_by_id("default", community.chunk_ids)
        assert set(chunks) == set(community.chunk_ids)
        mean = np.mean([chunks[c] for c in community.chunk_ids], axis=0)
        np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-6)
    vector = stores.embedder.embed(["physics research and the Nobel Prize"])[0]
    hits, communities = stores.search.global_(vector, "default", 5, SearchFilter())
    assert stores.chunk("curie") in communities[0].chunk_ids and communities[0].score >= communities[1].score
    assert hits[0][0].chunk_id in communities[0].chunk_ids and hits[0][0].document_id == stores.doc("curie")
    # The curie page's other communities have the same chunk, so the same vector: the second
    # community picked is one that brings chunks the first does not.
    assert not set(communities[1].chunk_ids) <= set(communities[0].chunk_ids)


def test_inspection_stats_communities_and_graphml(stores: Stores, tmp_path: Path) -> None:
    import networkx as nx

    from ragstack.cli.graph import communities_listing, export_graphml, graph_stats

    stores.ingest()
    view = stores.search.view("default", None)  # what GetGraph sends an admin
    stats = graph_stats(view, "default")
    assert stats["entities"] > 10 and stats["entity_types"]["PERSON"] >= 5
    assert stats["most_connected"][0]["degree"] >= stats["most_connected"][-1]["degree"]
    listing = communities_listing(view)
    assert len(listing) == stats["communities"] and len(listing[0]["members"]) >= len(listing[-1]["members"])
    nodes, edges = export_graphml(view, tmp_path / "out" / "g.graphml")
    back = nx.read_graphml(tmp_path / "out" / "g.graphml")
    assert (
        (back.number_of_nodes(), back.number_of_edges())
        == (nodes, edges)
        == (stats["entities"], stats["relations"])
    )
    assert back.nodes["jeff porcaro"]["type"] == "PERSON" and back.nodes["jeff porcaro"]["community"]
    assert back.edges["jeff porcaro", "toto"]["label"] == "played drums for"

    # The same through the CLI and the contract: documents ingested by `ragstack ingest`, the
    # graph read back from an embedded retrieve service (GetGraph).
    from click.testing import CliRunner

    from ragstack.cli.main import cli
    from tests.conftest import make_config

    make_config(tmp_path / "cli")
    config = ["--config", str(tmp_path / "cli.yaml")]
    assert CliRunner().invoke(cli, [*config, "ingest", str(stores.docs)]).exit_code == 0
    shown = CliRunner().invoke(cli, [*config, "graph", "stats"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["relations"] == stats["relations"]
    listed = CliRunner().invoke(cli, [*config, "graph", "communities", "-n", "2"])
    assert listed.exit_code == 0 and len(listed.output.splitlines()) == 2
    exported = CliRunner().invoke(cli, [*config, "graph", "export", str(tmp_path / "cli.graphml")])
    assert exported.exit_code == 0 and f"wrote {nodes} entities and {edges} relations" in exported.output


def test_a_checkpoint_that_raises_stops_the_extraction(extractor: EntityExtractor) -> None:
    chunks = [
        Chunk(f"d:{i}", "d", "lib", f"Marie Curie met Niels Bohr in Brussels in {1900 + i}.")
        for i in range(6)
    ]
    looks: list[int] = []

    def checkpoint() -> None:
        looks.append(1)
        if len(looks) == 3:
            raise Cancelled("stop")

    with pytest.raises(Cancelled):
        extractor.extract(chunks, checkpoint)
    assert len(looks) == 3  # stopped at the third chunk it was to read, not after all six


class _Slow:
    """The real extractor, slowed the way an LLM's is (a pause before each chunk it reads), noting
    when it starts on `source`'s chunks and whether a checkpoint stopped it there."""

    def __init__(self, inner: EntityExtractor, source: str) -> None:
        self._inner = inner
        self._source = source
        self.name = inner.name
        self.started = threading.Event()
        self.stopped = threading.Event()

    def extract(self, chunks, checkpoint=lambda: None):  # type: ignore[no-untyped-def]
        if not any(c.source == self._source for c in chunks):
            return self._inner.extract(chunks, checkpoint)
        self.started.set()

        def slowly() -> None:
            time.sleep(0.05)
            checkpoint()

        try:
            return self._inner.extract(chunks, slowly)
        except Cancelled:
            self.stopped.set()
            raise


def test_a_cancel_stops_the_dropped_batchs_extraction_and_keeps_the_written_batchs_entities(  # type: ignore[no-untyped-def]
    tmp_path: Path, embedder, extractor: EntityExtractor
) -> None:
    """A batch dropped by a cancel while it is embedded stops its entity extraction too (beside
    the embedding, on the writer thread); the batch written before it keeps all its entities."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Radium\n\nMarie Curie and Pierre Curie isolated radium in Paris.\n")
    (docs / "b.md").write_text(
        "# Survey\n\n"
        + "\n\n".join(
            f"## Plot {i}\n\n"
            + " ".join(f"Ada Lovelace met Charles Babbage in London, visit {i}.{j}." for j in range(12))
            for i in range(60)
        )
    )
    watched = _Slow(extractor, str(docs / "b.md"))
    cancelled = threading.Event()

    class Cancelling:  # the real embedder; the run is cancelled in b.md's first slice
        dimension = embedder.dimension
        calls = 0

        def embed(self, texts):  # type: ignore[no-untyped-def]
            Cancelling.calls += 1
            if Cancelling.calls == 2:
                assert watched.started.wait(10)  # b.md's extraction has begun beside its embedding
                cancelled.set()
            return embedder.embed(texts)

        def count_tokens(self, text: str) -> int:
            return int(embedder.count_tokens(text))

    pipeline, _ = graph_pipeline(tmp_path, tmp_path / "lance", Cancelling(), watched, batch_chunks=1)  # type: ignore[arg-type]
    with pytest.raises(Cancelled):
        for _ in pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default", cancelled=cancelled):
            pass
    assert watched.stopped.is_set()  # b.md's extraction was stopped, not run to its end
    assert [d.source for d in pipeline.list_documents("default", None)] == [str(docs / "a.md")]
    graph = GraphStore(tmp_path / "lance", embedder.dimension)
    a = pipeline.list_documents("default", None)[0].document_id
    assert {"marie curie", "pierre curie", "paris"} <= graph.keys_of("default", [a])


@pytest.mark.parametrize("restarted", [False, True], ids=["same process", "after a restart"])
def test_communities_a_stopped_run_left_out_are_made_by_the_next_run(
    stores: Stores, tmp_path: Path, embedder, extractor: EntityExtractor, restarted: bool
) -> None:
    """A run stopped once its last batch is written (a cancel then) skips the communities; the next
    run, finding every document unchanged, makes them, also in a process that did not write them
    (the entities the batch touched are in the catalog)."""
    _stopped_once_written(stores.pipeline, stores.docs)
    written = stores.pipeline.list_documents("default")
    assert written and stores.communities() == {}
    if restarted:
        stores.pipeline._lexical.close()  # the stopped process lets go of the lexical writer
        stores.pipeline, stores.vectors = graph_pipeline(
            tmp_path, tmp_path / "data" / "lancedb", embedder, extractor
        )
    summary = stores.ingest()
    assert summary.indexed == len(list(stores.docs.glob("*.md"))) - len(written)
    assert summary.communities == summary.communities_summarized == len(stores.communities()) >= 3
    assert stores.ingest().communities_summarized == 0  # made: the mark is gone


class Crash(BaseException):
    """Stands for kill -9: nothing after it runs, no `except Exception` catches it."""


@pytest.mark.parametrize("recovered_by", ["graph", "no graph"], ids=["its process", "a graph-off process"])
def test_a_unit_a_crash_stopped_is_finished_with_its_communities_due(
    stores: Stores, tmp_path: Path, embedder, extractor: EntityExtractor, recovered_by: str
) -> None:
    """A crash after the stores' commits but before the catalog's: the next start finishes the unit
    (services/ingest/unit_of_work.py) and marks the library's communities due, also when the start
    is a process configured without the graph, so the next run with it makes them though it finds
    every document unchanged."""

    def crash(*args: object, **kwargs: object) -> None:
        raise Crash

    stores.pipeline._catalog.end_batch = crash  # type: ignore[method-assign]
    with pytest.raises(Crash):
        stores.ingest()
    stores.pipeline._lexical.close()
    if recovered_by == "no graph":
        plain = plain_pipeline(tmp_path, embedder, 256, 200_000, lance=tmp_path / "data" / "lancedb")
        assert plain._catalog.graph_touched("default") == {EVERY_COMMUNITY}
        plain._lexical.close()
    stores.pipeline, stores.vectors = graph_pipeline(
        tmp_path, tmp_path / "data" / "lancedb", embedder, extractor
    )
    written = stores.pipeline.list_documents("default")
    assert written and stores.communities() == {}  # finished forward, no communities yet
    summary = stores.ingest()
    assert summary.unchanged == len(written) and summary.communities == len(stores.communities()) >= 3


def test_the_communities_of_a_library_emptied_by_a_failed_refresh_go_at_the_next_refresh(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its last documents deleted and the refresh after failing, a library's communities (summaries
    of the deleted text) would wait for a run into it that may never come: the next refresh, of any
    library, removes them."""
    list(stores.pipeline.run(collect_paths([str(stores.docs)], EVERYWHERE), "gone"))
    assert stores.graph.communities("gone")[0]
    _disk_full_once(stores, monkeypatch)
    gone = [d.document_id for d in stores.pipeline.list_documents("gone")]
    assert stores.pipeline.remove_documents("gone", gone) == len(gone)
    assert stores.graph.communities("gone")[0]  # left by the failed refresh
    (stores.docs / "hopper.md").write_text(HOPPER)
    stores.ingest()  # another library
    assert stores.graph.communities("gone")[0] == [] and stores.communities()


def test_a_delete_is_done_though_listing_the_emptied_libraries_fails(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """That cleaning comes after what the call did: a state database that fails it (locked, restarting)
    fails neither the delete nor the library's own refresh."""
    stores.ingest()

    def locked() -> list[str]:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(stores.pipeline._catalog, "graph_emptied", locked)
    doc = stores.doc("toto")
    assert stores.pipeline.delete_document("default", doc) > 0
    assert all(doc not in c.document_ids for c in stores.graph.communities("default")[0])
    assert not stores.pipeline._catalog.graph_touched("default")  # its own refresh ran


def _disk_full_once(stores: Stores, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next write of communities fails as on a full disk; the one after it works."""
    store = stores.pipeline._graph._store  # type: ignore[union-attr]
    real = store.replace_communities

    def disk_full_once(*args: Any, **kwargs: Any) -> None:
        monkeypatch.setattr(store, "replace_communities", real)
        raise OSError("disk full")

    monkeypatch.setattr(store, "replace_communities", disk_full_once)


def _stopped_once_written(pipeline: IngestPipeline, folder: Path) -> None:
    """A run stopped once its batch is written, before its refresh (a cancel then)."""
    events = pipeline.run(collect_paths([str(folder)], EVERYWHERE), "default")
    for event in events:
        if isinstance(event, FileProgress) and event.stage is FileStage.INDEXED:
            break
    events.close()  # what the events' reader does when the call is cancelled


def test_a_change_one_worker_wrote_is_summarised_by_another_workers_refresh(
    tmp_path: Path, embedder, extractor: EntityExtractor
) -> None:
    """Two ingest workers on the same stores, each with its own objects as a process has: B rewrites
    a document and is stopped before its refresh; A's next run, on other files, summarises B's
    change too, since what a write touched is kept in the shared catalog."""
    docs, other = tmp_path / "docs", tmp_path / "other"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("README.md"))
    other.mkdir()
    (other / "hopper.md").write_text(HOPPER)
    lance = tmp_path / "data" / "lancedb"
    a, b = (
        graph_pipeline(
            tmp_path, lance, embedder, extractor, shared=SharedLock(StateConfig(), tmp_path, "ingest")
        )[0]
        for _ in range(2)
    )
    reader = GraphStore(lance, embedder.dimension)
    ingest(a, docs)
    assert "1977" in summary_naming(reader, "los angeles")
    toto = docs / "toto.md"
    toto.write_text(toto.read_text().replace("in 1977", "in 1976"))
    _stopped_once_written(b, docs)
    ingest(a, other)
    assert "1976" in summary_naming(reader, "los angeles")


def test_the_changes_a_failed_refresh_left_are_summarised_by_the_next_one(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    stores.ingest()
    toto = stores.docs / "toto.md"
    toto.write_text(toto.read_text().replace("in 1977", "in 1976"))
    _disk_full_once(stores, monkeypatch)
    assert stores.ingest().indexed == 1  # the chunks are in; the communities were not made
    assert "1977" in summary_naming(stores.graph, "los angeles")
    (stores.docs / "hopper.md").write_text(HOPPER)  # the next run writes something else
    assert stores.ingest().indexed == 1
    assert "1976" in summary_naming(stores.graph, "los angeles")
