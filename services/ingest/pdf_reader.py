"""PDF text through Docling's model-free native pipeline, with structure recovered here.

Docling's layout model is not available offline, so its native pipeline gives one text item per
line, with its page and bounding box; the DoclingDocument comes from Docling here or from a
docling-serve server running the same pipeline (services/ingest/remote_convert.py), and everything
after it is the same code. Pages without a text layer are rendered and read by OCR
(RapidOCR, whose ONNX models ship in its package). From the lines this module rebuilds what
chunking and citations need: page markers, headings (lines set clearly larger than the body text,
levels by size) and paragraphs (lines joined until a vertical gap).
"""

from __future__ import annotations

import functools
import io
import logging
import statistics
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragstack import extras, page_layout
from ragstack.errors import UnsupportedFormat
from ragstack.page_layout import PageLayout
from ragstack.pdfium import PDFIUM_LOCK
from services.ingest import ocr
from services.ingest.budgets import Budgets
from services.ingest.chunker import page_marker

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

HEADING_RATIO = 1.25  # a line this much taller than the body text is a heading
MAX_HEADING_WORDS = 16
MAX_LEVELS = 3


@dataclass(frozen=True)
class Line:
    page: int
    text: str
    height: float
    top: float
    bottom: float
    left: float = 0.0  # horizontal position, where known (not for OCR lines): tables need it
    right: float = 0.0


@functools.cache
def _converter() -> Any:
    from docling.datamodel.base_models import InputFormat
    from docling.datamodel.pipeline_options import NativePdfPipelineOptions
    from docling.document_converter import DocumentConverter, NativePdfFormatOption

    for name in ("docling", "docling_core", "docling_parse"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return DocumentConverter(
        format_options={InputFormat.PDF: NativePdfFormatOption(pipeline_options=NativePdfPipelineOptions())}
    )


def local_document(name: str, data: bytes) -> DoclingDocument:
    """The PDF converted here, by Docling's native pipeline."""
    from docling.datamodel.base_models import DocumentStream

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = _converter().convert(
                DocumentStream(name=name, stream=io.BytesIO(data)), raises_on_error=True
            )
    except Exception as err:  # corrupt, encrypted, truncated...
        raise UnsupportedFormat(f"cannot read PDF: {type(err).__name__}: {err}") from None
    return result.document


def lines_of(doc: DoclingDocument) -> tuple[list[Line], dict[int, tuple[float, float]]]:
    """The text lines of every page of a PDF's DoclingDocument (converted here or by docling-serve),
    in the parser's order, and each page's (width, height) in points (their count is the page
    count)."""
    out = []
    for item, _ in doc.iterate_items():
        text = " ".join(str(getattr(item, "text", "")).split())
        provenance = getattr(item, "prov", None)
        if not text or not provenance:
            continue
        prov = provenance[0]
        box = prov.bbox
        top, bottom = max(box.t, box.b), min(box.t, box.b)
        out.append(Line(prov.page_no, text, top - bottom, top, bottom, box.l, box.r))
    return out, {int(no): (float(p.size.width), float(p.size.height)) for no, p in doc.pages.items()}


OCR_SCALE = 2.0  # render at 144 dpi for OCR


def ocr_lines(data: bytes, pages: Sequence[int]) -> list[Line]:
    """Text lines of the given pages (1-based) read by OCR, in PDF coordinates (y up)."""
    extras.require("ocr", "reading PDF pages without a text layer (OCR)")
    import pypdfium2 as pdfium

    out: list[Line] = []
    for page_no in pages:
        with PDFIUM_LOCK:  # the page rendered in the lock, read by OCR outside it
            pdf = pdfium.PdfDocument(data)
            try:
                page = pdf[page_no - 1]
                height = page.get_height()
                pixels = page.render(scale=OCR_SCALE).to_numpy().copy()
            finally:
                pdf.close()
        for text, y_top, y_bottom in ocr.read(pixels):
            top, bottom = height - y_top / OCR_SCALE, height - y_bottom / OCR_SCALE
            out.append(Line(page_no, text, top - bottom, top, bottom))
    return out


def to_markdown(all_lines: list[Line], pages: int) -> str:
    """Markdown with page markers, headings by relative size, and paragraphs."""
    if not all_lines:
        return ""
    body = statistics.median(line.height for line in all_lines for _ in range(min(len(line.text), 200)))
    heading_sizes = sorted(
        {round(line.height) for line in all_lines if _is_heading(line, body)}, reverse=True
    )[:MAX_LEVELS]
    level = {size: i + 1 for i, size in enumerate(heading_sizes)}
    out: list[str] = []
    by_page: dict[int, list[Line]] = {}
    for line in all_lines:
        by_page.setdefault(line.page, []).append(line)
    for page in range(1, pages + 1):
        out.append(page_marker(page))
        paragraph: list[str] = []
        previous: Line | None = None
        pending_heading: tuple[int, list[str]] | None = None

        def flush_paragraph(paragraph: list[str] = paragraph) -> None:
            if paragraph:
                out.append(_join_lines(paragraph))
                out.append("")
                paragraph.clear()

        def flush_heading() -> None:
            nonlocal pending_heading
            if pending_heading:
                out.append("#" * pending_heading[0] + " " + " ".join(pending_heading[1]))
                out.append("")
                pending_heading = None

        for item in _with_tables(by_page.get(page, [])):
            if isinstance(item, str):  # a table, already Markdown
                flush_heading()
                flush_paragraph()
                out.extend([item, ""])
                previous = None
                continue
            line = item
            size = round(line.height)
            if _is_heading(line, body) and size in level:
                flush_paragraph()
                if (
                    pending_heading
                    and pending_heading[0] == level[size]
                    and previous
                    and _close(previous, line)
                ):
                    pending_heading[1].append(line.text)  # a heading set over two lines
                else:
                    flush_heading()
                    pending_heading = (level[size], [line.text])
            else:
                flush_heading()
                if paragraph and previous is not None and not _close(previous, line):
                    flush_paragraph()
                paragraph.append(line.text)
            previous = line
        flush_heading()
        flush_paragraph()
    return "\n".join(out).strip() + "\n"


MAX_CELL_CHARS = 40  # table cells are short; two columns of prose side by side are not a table
MIN_TABLE_ROWS = 3  # rows of two cells or more that make a table
COLUMN_GAP = 6.0  # points between the left edges of two different columns


def _with_tables(page: list[Line]) -> list[Line | str]:
    """The page's lines, with each run of rows that look like a table replaced by a Markdown table.
    A row is a band of lines side by side (their vertical extents overlap); a table is a run of rows
    of short cells, at least MIN_TABLE_ROWS of them with two cells or more (a row the parser merged
    into one cell of figures stays inside it). Columns come from the cells' left edges."""
    bands: list[list[Line]] = []
    for line in page:
        band = next((b for b in reversed(bands[-3:]) if any(_same_row(x, line) for x in b)), None)
        if band is not None and line.right > 0:
            band.append(line)
        else:
            bands.append([line])
    out: list[Line | str] = []
    run: list[list[Line]] = []

    def flush() -> None:
        while run and len(run[-1]) < 2:  # a trailing line of figures belongs to the text after it
            tail = run.pop()
            flush()
            out.extend(tail)
            return
        if sum(len(r) >= 2 for r in run) >= MIN_TABLE_ROWS:
            out.append(_markdown_table(run))
        else:
            out.extend(line for band in run for line in band)
        run.clear()

    for band in bands:
        cells = sorted(band, key=lambda ln: ln.left)
        short = all(len(c.text) <= MAX_CELL_CHARS for c in cells) and cells[0].right > 0
        figures = len(cells) == 1 and sum(ch.isdigit() for ch in cells[0].text) >= 0.3 * len(cells[0].text)
        if short and (len(cells) >= 2 or (figures and run)):
            run.append(cells)
            continue
        flush()
        out.extend(band)
    flush()
    return out


def _same_row(a: Line, b: Line) -> bool:
    overlap = min(a.top, b.top) - max(a.bottom, b.bottom)
    return overlap >= 0.3 * min(a.height, b.height) > 0


def _markdown_table(rows: list[list[Line]]) -> str:
    lefts = sorted(c.left for row in rows for c in row)
    anchors = [lefts[0]]
    for x in lefts[1:]:
        if x - anchors[-1] > COLUMN_GAP:
            anchors.append(x)
    grid = []
    for row in rows:
        cells = [""] * len(anchors)
        for c in sorted(row, key=lambda ln: (-ln.top, ln.left)):
            col = max(i for i, x in enumerate(anchors) if x <= c.left + COLUMN_GAP / 2)
            cells[col] = f"{cells[col]} {c.text}".strip()
        grid.append(cells)
    # Centred headers start left of their figures: neighbouring columns that no row fills both of
    # are one column.
    columns = [[r[i] for r in grid] for i in range(len(anchors)) if any(r[i] for r in grid)]
    merged = [columns[0]]
    for column in columns[1:]:
        if any(a and b for a, b in zip(merged[-1], column, strict=True)):
            merged.append(column)
        else:
            merged[-1] = [a or b for a, b in zip(merged[-1], column, strict=True)]
    rows_out = list(zip(*merged, strict=True))
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows_out]
    lines.insert(1, "|" + " --- |" * len(merged))
    return "\n".join(lines)


def _is_heading(line: Line, body: float) -> bool:
    words = line.text.split()
    return (
        line.height >= body * HEADING_RATIO
        and len(words) <= MAX_HEADING_WORDS
        and any(ch.isalpha() for ch in line.text)
        and not line.text.endswith((".", ","))
    )


def _close(previous: Line, line: Line) -> bool:
    """Whether `line` continues the block of `previous`: next line down, no more than a line's gap."""
    gap = previous.bottom - line.top
    return -0.5 * line.height <= gap <= 0.9 * max(previous.height, line.height)


def _join_lines(parts: list[str]) -> str:
    text = parts[0]
    for part in parts[1:]:
        if text.endswith("-") and part[:1].islower():
            text = text[:-1] + part  # a word hyphenated at the line end
        else:
            text += " " + part
    return text


def page_count(data: bytes) -> int:
    import pypdfium2 as pdfium

    with PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as err:
            raise UnsupportedFormat(f"cannot read PDF: {err}") from None
        try:
            return len(pdf)
        finally:
            pdf.close()


class PagesNeedOcr(Exception):
    """A PDF with pages without a text layer, converted where OCR is not to run (`convert` with
    `ocr=False`): its caller has it read where OCR may run."""


def convert(
    name: str,
    data: bytes,
    budgets: Budgets,
    document: Callable[[str, bytes], DoclingDocument] = local_document,
    ocr: bool = True,
) -> tuple[str, str, PageLayout]:
    """(markdown with page markers, title: the first heading, where its lines lie) of a PDF.
    `document`: converts it into a DoclingDocument (here, or by docling-serve: everything after it
    is the same). Pages without a text layer are read by OCR here, or raise PagesNeedOcr without
    `ocr`."""
    budgets.check_pages(page_count(data))  # before the parser reads every page
    found, sizes = lines_of(document(name, data))
    pages = len(sizes)
    with_text = {line.page for line in found}
    missing = [p for p in range(1, pages + 1) if p not in with_text]
    if missing and not ocr:
        raise PagesNeedOcr(f"{len(missing)} of its {pages} pages have no text layer")
    if missing:
        found = sorted([*found, *ocr_lines(data, missing)], key=lambda ln: ln.page)
    if not found:
        raise UnsupportedFormat(f"no text found on any of its {pages} pages, even by OCR")
    markdown = to_markdown(found, pages)
    title = next((ln.lstrip("# ").strip() for ln in markdown.splitlines() if ln.startswith("#")), "")
    return markdown, title, _layout(found, sizes)


def _layout(found: list[Line], sizes: dict[int, tuple[float, float]]) -> PageLayout:
    return PageLayout(
        tuple(
            page_layout.box(ln.page, sizes[ln.page], ln.left, ln.top, ln.right, ln.bottom, ln.text)
            for ln in found
            if ln.page in sizes
        )
    )


def image_markdown(data: bytes, budgets: Budgets) -> str:
    """An image file's text by OCR, one page per frame."""
    found: list[Line] = []
    frames = 0
    for frames, image in enumerate(ocr.image_frames(data, budgets), start=1):
        height = float(image.shape[0])
        found.extend(
            Line(frames, text, bottom - top, height - top, height - bottom)
            for text, top, bottom in ocr.read(image)
        )
    if not found:
        raise UnsupportedFormat("no text found in the image")
    return to_markdown(found, frames)
