"""Hostile and freak files, made on the spot (none is stored): what `ragstack bench hostile` and the
tests feed the ingest service to show that each fails alone, within its budget."""

from __future__ import annotations

import io
import zipfile

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
    'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override '
    'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
    'wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
    '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
    '2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)


def _zip(members: dict[str, bytes | str], filler: tuple[str, bytes, int] | None = None) -> bytes:
    """A deflated zip of `members`, plus `filler` (name, block, times): the block written `times`
    times, so a member that unpacks to gigabytes is made without holding it."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
        if filler is not None:
            name, block, times = filler
            with archive.open(name, "w", force_zip64=True) as stream:
                for _ in range(times):
                    stream.write(block)
    return out.getvalue()


_MB_OF_ZEROS = bytes(1024 * 1024)


def docx(paragraphs: int, text: str = "") -> bytes:
    """A Word document of `paragraphs` paragraphs, each holding `text` (none: empty paragraphs)."""
    run = f"<w:r><w:t>{text}</w:t></w:r>" if text else ""
    body = f"<w:p>{run}</w:p>" * paragraphs
    document = f'<?xml version="1.0"?><w:document xmlns:w="{_W}"><w:body>{body}</w:body></w:document>'
    return _zip({"[Content_Types].xml": _TYPES, "_rels/.rels": _RELS, "word/document.xml": document})


def docx_bomb(unpacked_mb: int) -> bytes:
    """A small Word document with a member that unpacks to `unpacked_mb` megabytes of zeros."""
    document = f'<?xml version="1.0"?><w:document xmlns:w="{_W}"><w:body><w:p/></w:body></w:document>'
    members: dict[str, bytes | str] = {
        "[Content_Types].xml": _TYPES,
        "_rels/.rels": _RELS,
        "word/document.xml": document,
    }
    return _zip(members, ("word/media/image1.bin", _MB_OF_ZEROS, unpacked_mb))


def xlsx_bomb(unpacked_mb: int) -> bytes:
    """A workbook whose sheet's XML unpacks to about `unpacked_mb` megabytes of rows (such XML
    compresses a few hundredfold); it is not closed: a reader must give up before its end."""
    rows = ('<row><c t="n"><v>1</v></c></row>' * 32768).encode()  # 1 MB
    return _zip({"[Content_Types].xml": _TYPES}, ("xl/worksheets/sheet1.xml", rows, unpacked_mb))


def pptx_bomb(unpacked_mb: int) -> bytes:
    """A presentation with a slide image that unpacks to `unpacked_mb` megabytes."""
    return _zip({"[Content_Types].xml": _TYPES}, ("ppt/media/image1.bin", _MB_OF_ZEROS, unpacked_mb))


def nested_html(depth: int) -> bytes:
    return ("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>").encode()


def one_line_text(mb: int) -> bytes:
    """`mb` megabytes of words on one line: no sentence, paragraph or line break anywhere."""
    words = b"okapi ranking function term frequency saturation document length normalisation "
    return (words * (mb * 1024 * 1024 // len(words) + 1))[: mb * 1024 * 1024]


def tiff(frames: int, side: int = 64) -> bytes:
    from PIL import Image

    images = [Image.new("L", (side, side), color=i % 256) for i in range(frames)]
    out = io.BytesIO()
    images[0].save(out, format="TIFF", save_all=True, append_images=images[1:])
    return out.getvalue()


def blank_pdf(pages: int) -> bytes:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    for _ in range(pages):
        pdf.new_page(612, 792)
    out = io.BytesIO()
    pdf.save(out)
    pdf.close()
    return out.getvalue()
