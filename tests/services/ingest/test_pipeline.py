"""The pipeline on real LanceDB, tantivy and SQLite in a temp dir, with the real embedder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ragstack.config import StateConfig
from ragstack.domain import FileProgress, FileStage, IngestSummary
from ragstack.errors import DocumentNotFound, InvalidArgument
from ragstack.guard.paths import PathGuard
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import collect_paths, upload_items
from tests.conftest import SAMPLES
from tests.tools import state as state_tools

EVERYWHERE = PathGuard([Path("/")])  # these tests read their own temp folders


class Counting:
    """Wraps the real embedder to count what gets embedded."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.texts = 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.texts += len(texts)
        return self.inner.embed(texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


@pytest.fixture
def setup(tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    counting = Counting(embedder)
    vectors = VectorStore(tmp_path / "lance", embedder.dimension, writer=True)
    lexical = LexicalStore(tmp_path / "tantivy", writer=True)
    pipeline = IngestPipeline(
        Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)),
        vectors,
        lexical,
        counting,
        chunk_tokens=256,
        overlap_sentences=1,
        max_file_bytes=200_000,
    )
    readers = (VectorStore(tmp_path / "lance", embedder.dimension), LexicalStore(tmp_path / "tantivy"))
    return pipeline, docs, counting, readers


def run(pipeline: IngestPipeline, paths: list[Path]) -> tuple[list[FileProgress], IngestSummary]:
    events = list(pipeline.run(collect_paths([str(p) for p in paths], EVERYWHERE), "default"))
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    return [e for e in events if isinstance(e, FileProgress)], summary


def test_ingest_then_only_changes_are_redone(setup) -> None:  # type: ignore[no-untyped-def]
    pipeline, docs, counting, (dense, lexical) = setup
    events, summary = run(pipeline, [docs])
    assert summary.files == summary.indexed == 12 and summary.failed == 0
    for source in {e.source for e in events}:
        assert [e.stage for e in events if e.source == source] == [
            FileStage.PARSED,
            FileStage.CHUNKED,
            FileStage.EMBEDDED,
            FileStage.INDEXED,
        ]
    # Every chunk once: itself, or its windows when it is longer than one (dense_windows.py).
    assert summary.chunks == dense.count("default") <= counting.texts
    hits = lexical.search("Okapi City University", "default", 3)
    assert hits and hits[0][0].title == "BM25 Lexical Ranking" == hits[0][0].heading_path[0]

    counting.texts = 0
    _, again = run(pipeline, [docs])
    assert again.unchanged == 12 and again.indexed == 0 and counting.texts == 0

    target = docs / "bm25.md"
    target.write_text(target.read_text() + "\n\n## Zanzibar note\n\nThe quokka index is a made-up term.\n")
    _, changed = run(pipeline, [docs])
    assert changed.indexed == 1 and changed.unchanged == 11
    assert 0 < changed.chunks <= counting.texts
    assert lexical.search("quokka", "default", 3)[0][0].heading_path == (
        "BM25 Lexical Ranking",
        "Zanzibar note",
    )


def test_bad_files_fail_alone(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pipeline, docs, _, _ = setup
    (docs / "empty.md").write_text("")
    (docs / "archive.7z").write_bytes(b"7z\xbc\xaf")
    (docs / "huge.txt").write_text("x " * 150_000)
    events, summary = run(pipeline, [docs])
    assert summary.indexed == 12 and summary.failed == 3
    reasons = {Path(e.source).name: e.reason for e in events if e.stage == FileStage.FAILED}
    assert "empty" in reasons["empty.md"]
    assert "unsupported format .7z" in reasons["archive.7z"]
    assert "over the limit" in reasons["huge.txt"] and "max_file_mb" in reasons["huge.txt"]
    assert len(summary.failures) == 3


def test_uploads_and_delete_everywhere(setup) -> None:  # type: ignore[no-untyped-def]
    pipeline, _, _, (dense, lexical) = setup
    events = list(
        pipeline.run(
            upload_items("team", [("notes.md", b"# Notes\n\nThe zeppelin flies at dawn.\n")]), "team"
        )
    )
    doc_id = events[-2].document_id
    assert pipeline.get_document("team", doc_id).source == "upload://team/notes.md"
    assert [d.document_id for d in pipeline.list_documents("team")] == [doc_id]
    assert lexical.search("zeppelin", "team", 5) and not lexical.search("zeppelin", "default", 5)
    assert pipeline.delete_document("team", doc_id) == 1
    assert not lexical.search("zeppelin", "team", 5) and dense.count("team") == 0
    with pytest.raises(DocumentNotFound):
        pipeline.get_document("team", doc_id)
    with pytest.raises(DocumentNotFound):
        pipeline.delete_document("team", doc_id)


def test_empty_request_is_refused(setup) -> None:  # type: ignore[no-untyped-def]
    pipeline, _, _, _ = setup
    with pytest.raises(InvalidArgument):
        list(pipeline.run([], "default"))
    with pytest.raises(InvalidArgument, match="does not exist"):
        collect_paths(["/nope/nothing"], EVERYWHERE)


def beir_corpus(path: Path, docs: dict[str, str], extra: str = "") -> Path:
    lines = [json.dumps({"_id": k, "title": f"Doc {k}", "text": v}) for k, v in docs.items()]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def test_beir_corpus_is_one_document_per_line(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pipeline, _, counting, (dense, lexical) = setup
    texts = {"101": "Aspirin lowers fever.", "202": "Statins reduce cholesterol.", "303": "Zinc helps colds."}
    corpus = beir_corpus(tmp_path / "corpus.jsonl", texts, extra="not json\n")
    _, summary = run(pipeline, [corpus])
    assert summary.indexed == 3 and summary.failed == 1 and "corpus.jsonl:4" in summary.failures[0]
    assert {d.document_id for d in pipeline.list_documents("default")} == {"101", "202", "303"}
    hit = lexical.search("statins cholesterol", "default", 1)[0][0]
    assert (hit.document_id, hit.title, hit.heading_path) == ("202", "Doc 202", ("Doc 202",))

    counting.texts = 0
    texts["202"] = "Statins reduce LDL cholesterol substantially."
    _, again = run(pipeline, [beir_corpus(corpus, texts)])
    assert (again.indexed, again.unchanged, counting.texts) == (1, 2, 1)
    assert dense.count("default") == 3


def test_libraries_are_isolated(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pipeline, _, _, (dense, lexical) = setup
    corpus = beir_corpus(tmp_path / "corpus.jsonl", {"1": "Quasars emit radio waves."})
    for library in ("a", "b"):
        list(pipeline.run(collect_paths([str(corpus)], EVERYWHERE), library))
    assert pipeline.delete_document("a", "1") == 1
    assert not lexical.search("quasars", "a", 5) and lexical.search("quasars", "b", 5)
    assert dense.count("a") == 0 and dense.count("b") == 1
    assert pipeline.get_document("b", "1").library == "b"


def test_prune_removes_what_disappeared(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pipeline, docs, _, (dense, lexical) = setup
    run(pipeline, [docs])
    gone = docs / "bm25.md"
    gone.unlink()
    events = list(pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default", [str(docs)]))
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and summary.removed == 1 and summary.unchanged == 11
    removed = [e for e in events if isinstance(e, FileProgress) and e.stage == FileStage.REMOVED]
    assert [Path(e.source).name for e in removed] == ["bm25.md"]
    assert all(Path(c.source).name != "bm25.md" for c, _ in lexical.search("Okapi BM25", "default", 50))
    assert len(pipeline.list_documents("default")) == 11
    # Without prune nothing is removed; a corpus line that disappears is pruned by its file.
    corpus = beir_corpus(tmp_path / "corpus.jsonl", {"1": "Quasars emit radio waves.", "2": "Pulsars spin."})
    list(pipeline.run(collect_paths([str(corpus)], EVERYWHERE), "c"))
    beir_corpus(corpus, {"1": "Quasars emit radio waves."})
    list(pipeline.run(collect_paths([str(corpus)], EVERYWHERE), "c"))
    assert {d.document_id for d in pipeline.list_documents("c")} == {"1", "2"}
    list(pipeline.run(collect_paths([str(corpus)], EVERYWHERE), "c", [str(corpus)]))
    assert {d.document_id for d in pipeline.list_documents("c")} == {"1"}
    assert dense.count("c") == 1
