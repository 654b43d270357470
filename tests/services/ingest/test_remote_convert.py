"""Remote conversion (`ingest.converter: docling-serve`) against a small server that speaks
docling-serve's HTTP API and converts with the Docling installed here (tests/tools/docling_serve.py):
the same chunks as local conversion, one request per file, failures per file, the concurrency cap."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragstack.config import IngestConfig, load_config
from ragstack.domain import FileProgress, FileStage, IngestSummary
from ragstack.errors import ConfigError, Unavailable
from ragstack.guard.paths import PathGuard
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest import readers
from services.ingest.budgets import Budgets
from services.ingest.chunker import chunk_markdown
from services.ingest.pipeline import IngestPipeline
from services.ingest.remote_convert import DoclingServe
from services.ingest.sources import collect_paths
from tests.conftest import SHARED
from tests.tools.docling_serve import DoclingServeServer

DOCS = SHARED / "data" / "documents"
FORMATS = ("pdf", "docx", "pptx", "xlsx", "html")
EVERYWHERE = PathGuard([Path("/")])


def documents() -> list[Path]:
    return sorted(p for f in FORMATS for p in (DOCS / f).iterdir() if p.is_file())


@pytest.fixture(scope="module")
def server() -> Iterator[DoclingServeServer]:
    with DoclingServeServer().serve() as running:
        yield running


@pytest.fixture
def docling(server: DoclingServeServer) -> Iterator[DoclingServeServer]:
    server.reset()
    yield server
    server.reset()


def chunks(parsed: readers.Parsed) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    pieces = chunk_markdown(parsed.markdown, parsed.title, 512, 1, lambda t: len(t.split()))
    return [(c.text, c.heading_path, c.pages) for c in pieces]


def test_remote_conversion_gives_the_same_chunks_and_layout_as_local(docling: DoclingServeServer) -> None:
    files = documents()
    assert len(files) == 12 + 14 + 8 + 11 + 14  # every PDF, DOCX, PPTX, XLSX and HTML file
    remote = DoclingServe(docling.url)
    try:
        for path in files:
            data = path.read_bytes()
            local = readers.parse(path.name, data)
            converted = remote.parse(path.name, data)  # no parser pool: OCR (of the scan) here
            assert converted.markdown == local.markdown, path.name
            assert (converted.title, converted.media_type) == (local.title, local.media_type), path.name
            assert converted.layout == local.layout, path.name  # PDFs: every line's box; others: None
            assert chunks(converted) == chunks(local), path.name
    finally:
        remote.close()
    assert sum(p.suffix == ".pdf" for p in files) == 12
    # One request per file, asking for the DoclingDocument and the model-free pipeline.
    assert [r["filename"] for r in docling.requests] == [p.name for p in files]
    for request in docling.requests:
        options = request["options"]
        assert options["to_formats"] == ["json"] and options["pipeline"] == "native"
        assert options["do_ocr"] == "false" and options["include_images"] == "false"
    assert {r["options"]["from_formats"][0] for r in docling.requests} == {
        "pdf",
        "docx",
        "pptx",
        "xlsx",
        "html",
    }


class _Pool:
    """Stands in for the parser processes: parses locally, and counts what it was given."""

    def __init__(self) -> None:
        self.parsed: list[str] = []

    def parse(self, name: str, data: bytes, kind: str = "", owner: object = None) -> readers.Parsed:
        self.parsed.append(name)
        return readers.parse(name, data, kind)


def test_pages_without_a_text_layer_are_read_in_a_parser_process(docling: DoclingServeServer) -> None:
    """OCR stays local, in a parser process: a scan is converted remotely, then read there whole."""
    pool = _Pool()
    remote = DoclingServe(docling.url)
    try:
        scan = DOCS / "pdf" / "scanned_ocr_test.pdf"
        parsed = remote.parse(scan.name, scan.read_bytes(), pool=pool)  # type: ignore[arg-type]
        assert "Docling bundles PDF document conversion" in parsed.markdown
        text = DOCS / "pdf" / "multi_page.pdf"
        remote.parse(text.name, text.read_bytes(), pool=pool)  # type: ignore[arg-type]
    finally:
        remote.close()
    assert pool.parsed == ["scanned_ocr_test.pdf"]
    assert [r["filename"] for r in docling.requests] == ["scanned_ocr_test.pdf", "multi_page.pdf"]


def _pipeline(
    root: Path, embedder, converter: DoclingServe, budgets: Budgets | None = None
) -> IngestPipeline:  # type: ignore[no-untyped-def]
    return IngestPipeline(
        Catalog(root / "catalog.sqlite"),
        VectorStore(root / "lance", embedder.dimension, writer=True),
        LexicalStore(root / "tantivy", writer=True),
        embedder,
        chunk_tokens=512,
        overlap_sentences=1,
        max_file_bytes=50_000_000,
        budgets=budgets,
        converter=converter,
    )


def _outcomes(events: list[FileProgress | IngestSummary]) -> dict[str, str]:
    """Each file's last stage, or its failure's reason."""
    out = {}
    for e in events:
        if isinstance(e, FileProgress):
            out[Path(e.source).name] = e.reason if e.stage is FileStage.FAILED else e.stage.name
    return out


def test_a_failing_server_fails_its_files_and_the_batch_goes_on(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for relative, name in [
        ("docx/word_sample.docx", "fine.docx"),
        ("pdf/code_and_formula.pdf", "fine.pdf"),
        ("docx/lorem_ipsum.docx", "broken.docx"),
        ("html/example_01.html", "slow.html"),
        ("pdf/multi_page.pdf", "long.pdf"),  # 5 pages, over the budget below: never sent
    ]:
        shutil.copy(DOCS / relative, folder / name)
    (folder / "notes.md").write_text("# Notes\n\nRead here, never sent.\n")
    (folder / "corrupt.docx").write_bytes(b"PK\x03\x04 not a zip after all" * 10)
    docling.fail["broken.docx"] = (500, "Conversion failed:\n  the worker died")
    docling.slow["slow.html"] = 60.0  # until the test is over
    remote = DoclingServe(docling.url, timeout_s=5.0)
    pipeline = _pipeline(tmp_path / "store", embedder, remote, Budgets(max_pages=4))
    try:
        events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
    finally:
        remote.close()
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    outcome = _outcomes(events)
    assert (
        outcome["broken.docx"]
        == f"docling-serve at {docling.url} answered 500: Conversion failed: the worker died"
    )
    assert outcome["slow.html"] == (
        f"docling-serve at {docling.url} did not answer within 5 s (ingest.docling_serve_timeout_s)"
    )
    assert outcome["corrupt.docx"].startswith(
        f"docling-serve at {docling.url} could not convert it (status failure): MsWordDocumentBackend"
    )
    assert outcome["long.pdf"] == "has 5 pages, over ingest.max_pages (4)"
    assert (summary.indexed, summary.failed) == (3, 4)
    assert {Path(d.source).name for d in pipeline.list_documents("docs")} == {
        "fine.docx",
        "fine.pdf",
        "notes.md",
    }
    # The budget was checked before sending, the text file read here: neither was sent.
    sent = sorted(r["filename"] for r in docling.requests)
    assert sent == ["broken.docx", "corrupt.docx", "fine.docx", "fine.pdf", "slow.html"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_is_down_fails_its_files_and_the_batch_goes_on(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(DOCS / "docx" / "word_sample.docx", folder / "word.docx")
    shutil.copy(DOCS / "pdf" / "multi_page.pdf", folder / "paper.pdf")
    (folder / "notes.md").write_text("# Notes\n\nRead here.\n")
    url = f"http://127.0.0.1:{_closed_port()}"
    remote = DoclingServe(url, connect_timeout_s=2.0)
    pipeline = _pipeline(tmp_path / "store", embedder, remote)
    try:
        events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
    finally:
        remote.close()
    outcome = _outcomes(events)
    for name in ("word.docx", "paper.pdf"):
        assert outcome[name].startswith(f"docling-serve at {url} could not be reached: "), outcome[name]
        assert "refused" in outcome[name].lower()
    assert outcome["notes.md"] == "INDEXED"
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and (summary.indexed, summary.failed) == (1, 2)
    remote = DoclingServe(url)
    with pytest.raises(Unavailable, match="could not be reached"):
        remote.document("page.html", b"<html><body><p>x</p></body></html>")
    remote.close()


def test_the_concurrency_cap_holds(docling: DoclingServeServer) -> None:
    page = b"<html><body><h1>Cap</h1><p>One paragraph of text.</p></body></html>"

    def burst(remote: DoclingServe, n: int) -> int:
        docling.max_in_flight = 0
        errors: list[BaseException] = []

        def one() -> None:
            try:
                remote.document("page.html", page)
            except BaseException as err:  # reported below
                errors.append(err)

        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        return docling.max_in_flight

    docling.delay_s = 0.3
    capped, wide = DoclingServe(docling.url, max_concurrent=2), DoclingServe(docling.url, max_concurrent=6)
    try:
        assert burst(capped, 8) == 2  # requests overlap, never more than the cap
        assert burst(wide, 6) > 2  # the server itself would take more at once
    finally:
        capped.close()
        wide.close()
    assert len(docling.requests) == 14


def test_the_config_names_the_server_and_refuses_other_schemes(tmp_path: Path) -> None:
    assert DoclingServe.from_config(IngestConfig()) is None  # local conversion by default
    cfg = load_config(
        None,
        {
            "RAGSTACK__INGEST__CONVERTER": "docling-serve",
            "RAGSTACK__INGEST__DOCLING_SERVE_URL": "https://docling.internal:5001/",
            "RAGSTACK__INGEST__DOCLING_SERVE_MAX_CONCURRENT": "8",
        },
    )
    remote = DoclingServe.from_config(cfg.ingest)
    assert remote is not None and remote.url == "https://docling.internal:5001"
    remote.close()
    with pytest.raises(ConfigError, match=r"ingest.*set ingest\.docling_serve_url"):
        load_config(None, {"RAGSTACK__INGEST__CONVERTER": "docling-serve"})
    for url in (
        "file:///etc/passwd",
        "ftp://docling:21",
        "docling:5001",
        "http://",
        "http://u:p@docling:5001",
    ):
        with pytest.raises(ConfigError, match=r"ingest\.docling_serve_url"):
            load_config(None, {"RAGSTACK__INGEST__DOCLING_SERVE_URL": url})
