"""Budgets of one document, on real files made here: each refusal names its budget, and a file
within every budget parses as before."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ragstack.bench import hostile_files as files
from services.ingest.budgets import Budgets, OverBudget
from services.ingest.chunker import chunk_markdown
from services.ingest.readers import parse

DOCS = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "documents"
SMALL = Budgets(max_unpacked_mb=8, max_depth=64, max_chars=50_000, max_pages=3, max_frames=2)


def _refused(name: str, data: bytes, budgets: Budgets = SMALL) -> str:
    with pytest.raises(OverBudget) as err:
        parse(name, data, budgets=budgets)
    return str(err.value)


def test_a_zip_bomb_is_refused_by_what_it_declares() -> None:
    assert _refused("a.docx", files.docx_bomb(16)) == "unpacks to 16 MB, over ingest.max_unpacked_mb (8)"


def test_members_are_summed() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(3):
            archive.writestr(f"ppt/media/m{i}.bin", bytes(4 * 1024 * 1024))
    assert _refused("three.pptx", out.getvalue()) == "unpacks to 12 MB, over ingest.max_unpacked_mb (8)"


def test_text_in_a_container_is_counted_while_read() -> None:
    message = _refused("p.docx", files.docx(10_000, "Lorem ipsum dolor"))
    assert message == "holds more than 50,000 characters of text, over ingest.max_chars (50,000)"


def test_deep_html_is_refused_before_any_parser_recurses() -> None:
    message = _refused("deep.html", files.nested_html(10_000))
    assert message == "nests elements more than 64 deep, over ingest.max_depth (64)"


def test_text_files_are_refused_by_their_characters() -> None:
    assert "ingest.max_chars (50,000)" in _refused("line.txt", files.one_line_text(1))


def test_pages_frames_and_pixels() -> None:
    assert _refused("blank.pdf", files.blank_pdf(5)) == "has 5 pages, over ingest.max_pages (3)"
    assert _refused("many.tiff", files.tiff(3)) == "has 3 frames, over ingest.max_frames (2)"
    wide = Budgets(max_frame_megapixels=0.001)
    assert "ingest.max_frame_megapixels (0.001)" in _refused("one.tiff", files.tiff(1), wide)


def test_chunks_per_document() -> None:
    with pytest.raises(OverBudget, match=r"makes 12 chunks, over ingest.max_chunks \(10\)"):
        Budgets(max_chunks=10).check_chunks(12)


def test_real_documents_within_the_budgets_parse_as_before() -> None:
    for path in [DOCS / "docx" / "word_sample.docx", DOCS / "html" / "example_01.html"]:
        parsed = parse(path.name, path.read_bytes(), budgets=Budgets())
        assert parsed.markdown.strip(), path


def test_a_run_on_line_is_cut_into_chunks_that_fit() -> None:
    text = files.one_line_text(1).decode()  # a megabyte of words, no sentence end anywhere

    def count(s: str) -> int:
        return len(s.split())

    chunks = chunk_markdown(text, "t", 100, 1, count)
    assert chunks and all(count(c.text) <= 100 for c in chunks)
    assert sum(count(c.text) for c in chunks) >= count(text)  # every word is in a chunk (overlap aside)
