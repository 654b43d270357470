"""Turns file bytes into Markdown-shaped text with a title, by format.

Markdown, text and logs as they are; code wrapped in a language-tagged fence; CSV as a table sample;
DOCX, PPTX, XLSX and HTML through Docling (services/ingest/docling_reader.py), PDF through Docling's
native pipeline (services/ingest/pdf_reader.py), converted here or by a docling-serve server
(services/ingest/remote_convert.py); BEIR corpus lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from ragstack import extras
from ragstack.errors import UnsupportedFormat
from ragstack.page_layout import PageLayout
from services.ingest.budgets import Budgets

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

# (file name, bytes) -> the converted DoclingDocument: a docling-serve client's `document`
Convert = Callable[[str, bytes], "DoclingDocument"]

MARKDOWN = {".md", ".markdown", ".mdx"}
PLAIN = {".txt", ".text", ".log", ".rst"}
DELIMITED = {".csv": "text/csv", ".tsv": "text/tab-separated-values"}
CODE = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".tsx": "tsx",
    ".jsx": "jsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".scala": "scala",
    ".sh": "bash",
    ".bash": "bash",
    ".sql": "sql",
    ".proto": "protobuf",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".css": "css",
    ".r": "r",
    ".lua": "lua",
    ".dart": "dart",
}
DOCLING = {
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.12",
    ".html": "text/html",
    ".htm": "text/html",
}
IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
SUPPORTED = MARKDOWN | PLAIN | set(DELIMITED) | set(CODE) | set(DOCLING) | set(IMAGES) | {".pdf"}
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Parsed:
    title: str
    media_type: str
    markdown: str
    layout: PageLayout | None = None  # a PDF's lines on its pages: where its chunks lie


def _decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:4096]:
        raise UnsupportedFormat(f"{name}: binary content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _title_from_name(name: str) -> str:
    return PurePath(name).stem.replace("-", " ").replace("_", " ").strip() or name


def parse(
    name: str,
    data: bytes,
    kind: str = "",
    budgets: Budgets | None = None,
    remote: Convert | None = None,
    ocr: bool = True,
) -> Parsed:
    """Parses by `kind` when given, else by extension, within `budgets` (the defaults when None).
    Raises UnsupportedFormat for anything else, or for empty content; OverBudget naming the budget.
    `remote`: converts the formats read through Docling instead of Docling here (a docling-serve
    client, services/ingest/remote_convert.py); what is done before and after is the same. Without
    `ocr`, a PDF with pages without a text layer raises pdf_reader.PagesNeedOcr."""
    budgets = budgets or Budgets()
    parsed = _parse(name, data, kind, budgets, remote, ocr)
    budgets.check_chars(len(parsed.markdown))
    return parsed


def _parse(name: str, data: bytes, kind: str, budgets: Budgets, remote: Convert | None, ocr: bool) -> Parsed:
    if kind == "beir":
        return _corpus_line(data)
    suffix = ".html" if kind == "html" else PurePath(name).suffix.lower()
    if suffix not in SUPPORTED:
        raise UnsupportedFormat(
            f"unsupported format {suffix or '(no extension)'}; supported: {', '.join(sorted(SUPPORTED))}"
        )
    if not data.strip():
        raise UnsupportedFormat("empty file")
    budgets.check_before_parsing(name, data, kind)  # before any conversion, here or remote
    if suffix == ".pdf" or suffix in DOCLING:
        return _through_docling(name, data, kind, suffix, budgets, remote, ocr)
    if suffix in IMAGES:
        extras.require("ocr", f"reading {suffix} images (OCR)")
        from services.ingest.pdf_reader import image_markdown

        return Parsed(_title_from_name(name), IMAGES[suffix], image_markdown(data, budgets))
    text = _decode(data, name)
    budgets.check_chars(len(text))  # before any work on it
    if not text.strip():
        raise UnsupportedFormat("empty file")
    if suffix in DELIMITED:
        from services.ingest.tabular import csv_markdown

        return Parsed(_title_from_name(name), DELIMITED[suffix], csv_markdown(text, _title_from_name(name)))
    if suffix in CODE:
        fence = "````" if "```" in text else "```"
        title = PurePath(name).name
        return Parsed(
            title, f"text/x-{CODE[suffix]}", f"# {title}\n\n{fence}{CODE[suffix]}\n{text.rstrip()}\n{fence}\n"
        )
    if suffix in MARKDOWN:
        m = _H1.search(text)
        return Parsed(m.group(1) if m else _title_from_name(name), "text/markdown", text)
    return Parsed(_title_from_name(name), "text/plain", _as_text(text))


def _through_docling(
    name: str, data: bytes, kind: str, suffix: str, budgets: Budgets, remote: Convert | None, ocr: bool
) -> Parsed:
    """PDF, Office documents and HTML: converted into a DoclingDocument (by Docling here, or by
    `remote`), then read by the same code either way."""
    if suffix == ".pdf":
        from services.ingest import pdf_reader

        if remote is None:
            extras.require("docling", "reading PDF")
        markdown, title, layout = pdf_reader.convert(
            PurePath(name).name, data, budgets, remote or pdf_reader.local_document, ocr
        )
        return Parsed(title or _title_from_name(name), "application/pdf", markdown, layout)
    from services.ingest import docling_reader

    if remote is None:
        extras.require("docling", f"reading {suffix} files")
    markdown, title = docling_reader.convert(
        PurePath(name).name if kind != "html" else "page.html", data, remote or docling_reader.local_document
    )
    if not markdown.replace("<!-- page", "").strip():
        raise UnsupportedFormat("no text found")
    return Parsed(title or _title_from_name(name), DOCLING[suffix], markdown)


def _as_text(text: str) -> str:
    """Plain text as it is: no line may turn into a heading or a fence by accident."""
    return re.sub(r"^(\s*)(#|```|~~~|<!--)", r"\1\\\2", text, flags=re.MULTILINE)


def _corpus_line(data: bytes) -> Parsed:
    """A BEIR corpus line: `{"_id", "title", "text"}`; the title becomes the heading."""
    obj = json.loads(data)
    text = str(obj.get("text") or "")
    title = " ".join(str(obj.get("title") or "").split()) or str(obj["_id"])
    if not text.strip() and not obj.get("title"):
        raise UnsupportedFormat("empty corpus line")
    return Parsed(title, "application/x-beir+json", f"# {title}\n\n{_as_text(text)}")
