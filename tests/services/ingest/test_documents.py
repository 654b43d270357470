"""Real files from ../shared/data/documents through the readers and the pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstack.domain import FileStage, IngestSummary
from ragstack.guard.paths import PathGuard
from ragstack.stores.lexical import LexicalStore
from services.ingest.chunker import chunk_markdown
from services.ingest.readers import parse
from services.ingest.sources import collect_paths
from tests.conftest import SHARED
from tests.tools.pipelines import plain_pipeline

DOCS = SHARED / "data" / "documents"
FORMATS = ("pdf", "docx", "pptx", "xlsx", "html", "csv")

EVERYWHERE = PathGuard([Path("/")])  # these tests read their own temp folders


def chunks_of(relative: str) -> list:  # type: ignore[type-arg]
    path = DOCS / relative
    parsed = parse(path.name, path.read_bytes())
    return chunk_markdown(parsed.markdown, parsed.title, 512, 1, lambda t: len(t.split()))


@pytest.mark.slow
def test_every_document_ingests(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    pipeline = plain_pipeline(tmp_path, embedder, chunk_tokens=512, max_file_bytes=50_000_000)
    items = collect_paths([str(DOCS / f) for f in FORMATS], EVERYWHERE)
    items = [i for i in items if "/groundtruth/" not in i.source]
    assert len(items) == 12 + 14 + 8 + 11 + 14 + 9
    events = list(pipeline.run(items, "docs"))
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    failed = [e for e in events if getattr(e, "stage", None) == FileStage.FAILED]
    assert summary.failed == 0, failed
    assert summary.indexed == len(items)
    media = {d.media_type for d in pipeline.list_documents("docs")}
    assert {"application/pdf", "text/csv", "text/html"} <= media
    # Whole pages are in the lexical index beside the chunks, with their page numbers.
    lexical = LexicalStore(tmp_path / "tantivy")
    pages = lexical.search_pages("Row and Column Access Control", "docs", 10)
    assert pages and all(page >= 1 for _, page, _ in pages)


def test_scanned_pdf_is_read_by_ocr() -> None:
    chunks = chunks_of("pdf/scanned_ocr_test.pdf")
    assert "Docling bundles PDF document conversion" in chunks[0].text
    assert chunks[0].pages == (1,)


def test_pdf_pages_and_headings() -> None:
    chunks = chunks_of("pdf/multi_page.pdf")
    assert sorted({p for c in chunks for p in c.pages}) == [1, 2, 3, 4, 5]
    code = chunks_of("pdf/code_and_formula.pdf")
    assert ("JavaScript Code Example",) in {c.heading_path[:1] for c in code}
    assert any(c.heading_path[-1] == "Formula" for c in code)


def test_pdf_tables_are_recovered_from_positions() -> None:
    """The native parser gives a table as loose lines; their positions make it a table again, its
    rows whole in one chunk, while prose pages get none."""
    chunks = chunks_of("pdf/2305.03393v1-pg9.pdf")
    table = next(c for c in chunks if "| --- |" in c.text)
    rows = [line for line in table.text.splitlines() if line.startswith("|")]
    assert any("enc-layers" in r and "Inference time (secs)" in r for r in rows)
    assert "| 6 | 6 | OTSL 0.965 0.934 0.955 0.88 |" in table.text and "| 5.39 |" in table.text
    assert table.pages == (1,)
    korean = " ".join(c.text for c in chunks_of("pdf/normal_4pages.pdf"))
    assert "| 구분 | 개정전 |" in korean
    for prose in ("pdf/multi_page.pdf", "pdf/code_and_formula.pdf", "pdf/amt_handbook_sample.pdf"):
        assert not any("| --- |" in c.text for c in chunks_of(prose)), prose


def test_docx_headings_become_paths() -> None:
    paths = {c.heading_path for c in chunks_of("docx/unit_test_headers.docx")}
    assert any(p[:2] == ("Test Document", "Section 1") for p in paths)
    assert any(len(p) >= 3 for p in paths)


def test_slides_and_sheets_are_pages() -> None:
    slides = chunks_of("pptx/powerpoint_sample.pptx")
    assert sorted({p for c in slides for p in c.pages}) == [1, 2, 3]
    sheets = chunks_of("xlsx/xlsx_01.xlsx")
    assert {p for c in sheets for p in c.pages} >= {1, 2, 3}
    assert any("| first" in c.text for c in sheets)


def test_html_keeps_main_content_only() -> None:
    text = " ".join(c.text for c in chunks_of("html/wiki_duck.html"))
    assert "Etymology" in text or "duck" in text.lower()
    assert "move to sidebar" not in text and "Jump to content" not in text


def test_csv_is_header_sample_and_count() -> None:
    chunks = chunks_of("csv/csv-comma.csv")
    assert "data rows" in chunks[0].text and chunks[0].text.count("\n|") >= 2


def test_code_is_fenced_with_its_language(tmp_path: Path) -> None:
    parsed = parse("tool.py", b"def main():\n    # not a heading\n    return 1\n")
    assert parsed.media_type == "text/x-python"
    assert "```python\ndef main():" in parsed.markdown
    chunk = chunk_markdown(parsed.markdown, parsed.title, 512, 0, lambda t: len(t.split()))[0]
    assert "# not a heading" in chunk.text and chunk.heading_path == ("tool.py",)


def test_image_is_read_by_ocr(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(DOCS / "pdf" / "scanned_ocr_test.pdf"))
    image = tmp_path / "scan.png"
    pdf[0].render(scale=1.5).to_pil().save(image)
    pdf.close()
    parsed = parse(image.name, image.read_bytes())
    assert parsed.media_type == "image/png" and "Docling bundles" in parsed.markdown


def test_corrupt_files_fail_with_a_reason() -> None:
    from ragstack.errors import UnsupportedFormat

    with pytest.raises(UnsupportedFormat, match="PDF"):
        parse("broken.pdf", b"%PDF-1.4 this is not really a pdf")
    with pytest.raises(UnsupportedFormat):
        parse("broken.docx", b"PK\x03\x04 not a zip really")
    with pytest.raises(UnsupportedFormat, match="image"):
        parse("broken.png", b"\x89PNG\r\n\x1a\n garbage")
