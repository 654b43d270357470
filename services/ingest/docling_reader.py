"""Office documents and HTML through Docling (offline: these formats need no model).

Paged formats (slides, sheets) are exported page by page with page markers, so chunks know their
pages. HTML is reduced to its main content first: navigation, sidebars, headers, footers, scripts
and forms are dropped before conversion. The conversion itself runs here or on a docling-serve
server (services/ingest/remote_convert.py); what is done before and after it is the same.
"""

from __future__ import annotations

import functools
import io
import logging
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragstack.errors import UnsupportedFormat
from services.ingest.chunker import page_marker

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

_BOILERPLATE_TAGS = (
    "nav",
    "aside",
    "footer",
    "header",
    "script",
    "style",
    "noscript",
    "form",
    "svg",
    "iframe",
)
_BOILERPLATE_NAMES = re.compile(
    r"(^|[-_ ])(nav|navbar|menu|sidebar|footer|toc|breadcrumbs?|cookie|banner|masthead|mw-navigation|"
    r"vector-header|catlinks|printfooter|jump|skip)([-_ ]|$)",
    re.IGNORECASE,
)
_MAIN = ("main", "article", '[role="main"]', "#content", "#main", ".content")


@functools.cache
def _converter() -> Any:
    from docling.document_converter import DocumentConverter

    # Docling logs each skipped drawing or equation at INFO/WARNING; failures still raise.
    for name in ("docling", "docling_core"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return DocumentConverter()


def main_content(html: bytes) -> tuple[bytes, str]:
    """The page's main content (the first `main`/`article`-like element when there is one, without
    navigation and boilerplate elements) and its `<title>`. A page that is nothing but boilerplate
    is kept whole: something must be indexed."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "lxml")
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup(list(_BOILERPLATE_TAGS)):
        tag.decompose()
    for tag in soup.find_all(True):
        if tag.attrs is None:
            continue
        names = " ".join(
            [str(tag.get("id") or ""), *map(str, tag.get("class") or []), str(tag.get("role") or "")]
        )
        if names.strip() and _BOILERPLATE_NAMES.search(names) and tag.name not in ("html", "body"):
            tag.decompose()
    main = next((found for sel in _MAIN if (found := soup.select_one(sel)) is not None), None)
    body = main if main is not None else (soup.body or soup)
    if not body.get_text().strip():
        return html, title
    return f"<html><body>{body}</body></html>".encode(), title


def local_document(name: str, data: bytes) -> DoclingDocument:
    """The file converted here, by Docling."""
    from docling.datamodel.base_models import DocumentStream

    try:
        with warnings.catch_warnings():
            # Docling warns about shapes and images it skips; the text is what is indexed.
            warnings.simplefilter("ignore")
            result = _converter().convert(
                DocumentStream(name=name, stream=io.BytesIO(data)), raises_on_error=True
            )
    except Exception as err:  # Docling raises many types for corrupt or encrypted files
        raise UnsupportedFormat(f"cannot convert: {type(err).__name__}: {err}") from None
    return result.document


def convert(
    name: str, data: bytes, document: Callable[[str, bytes], DoclingDocument] = local_document
) -> tuple[str, str]:
    """(markdown with page markers where the format has pages, title). `document`: converts what
    is to be converted (an HTML page's main content) into a DoclingDocument, here or by
    docling-serve; everything before and after it is the same."""
    page_title = ""
    if name.lower().endswith((".html", ".htm")):
        data, page_title = main_content(data)
    return markdown_of(document(name, data), page_title)


def markdown_of(doc: DoclingDocument, page_title: str = "") -> tuple[str, str]:
    """A converted document's (markdown with page markers where it has pages, title: `page_title`
    when given, else its first title or heading)."""
    pages = sorted(doc.pages)
    if pages:
        markdown = "\n\n".join(f"{page_marker(p)}\n{doc.export_to_markdown(page_no=p)}" for p in pages)
    else:
        markdown = doc.export_to_markdown()
    markdown = markdown.replace("<!-- image -->", "")
    return markdown, page_title or _title(doc)


def _title(doc: Any) -> str:
    for item, _ in doc.iterate_items():
        label = str(getattr(item, "label", ""))
        if label.endswith(("title", "section_header")) and getattr(item, "text", "").strip():
            return " ".join(item.text.split())[:200]
    return ""
