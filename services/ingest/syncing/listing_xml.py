"""The XML that remote sources list their items in (sitemaps, WebDAV multistatus, S3 listings), read
as hostile: parsed by defusedxml (no entity expansion, no external references), names compared
without namespaces, listed paths kept only when they are plain."""

from __future__ import annotations

import io
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as safe_xml
from defusedxml import DefusedXmlException, EntitiesForbidden

from services.ingest.syncing.backends import ScanError

# The most elements one listing may hold: the sitemap protocol's 50,000 URLs a file, at 32 elements
# each (loc, lastmod, image and news extensions). Past it the listing is refused while it is parsed,
# so a body of tiny elements (`<a/>` is 4 bytes) costs neither gigabytes of tree nor minutes of CPU.
MAX_ELEMENTS = 50_000 * 32


def parse_xml(data: bytes, what: str, max_elements: int | None = None) -> Element:
    max_elements = max_elements or MAX_ELEMENTS
    try:
        parsing = safe_xml.iterparse(io.BytesIO(data), events=("start",))
        for count, _ in enumerate(parsing, 1):
            if count > max_elements:
                raise ScanError(f"{what} has more than {max_elements} XML elements: refused")
        root: Element = parsing.root
    except EntitiesForbidden:
        raise ScanError(f"{what} declares XML entities: refused (no entity expansion)") from None
    except DefusedXmlException:
        raise ScanError(f"{what} refers to an external DTD or entity: refused") from None
    except ParseError as err:
        raise ScanError(f"{what} is not well-formed XML ({err})") from None
    return root


def local_name(tag: str) -> str:
    """An element's name without its namespace: servers differ in prefixes and namespaces."""
    return tag.rsplit("}", 1)[-1]


def children(element: Element, name: str) -> list[Element]:
    return [child for child in element if local_name(child.tag) == name]


def text_of(element: Element | None, name: str) -> str:
    """The text of `element`'s first child called `name`, stripped ("" when there is none)."""
    found = None if element is None else next(iter(children(element, name)), None)
    return (found.text or "").strip() if found is not None else ""


def clean_name(rel: str) -> bool:
    """A relative path with no empty, dot or hidden segment (those of a hostile or odd listing, and the
    hidden files a folder source skips too)."""
    return all(part and not part.startswith(".") for part in rel.rstrip("/").split("/"))
