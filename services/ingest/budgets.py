"""Budgets of one document, checked before and while it is parsed, so a hostile or freak file fails
alone, with the budget it broke named, instead of taking the ingest service's memory and time.

Containers (DOCX, PPTX, XLSX, ODF, EPUB: zip files) are read member by member before a parser sees
them: the bytes they unpack to are summed while they are inflated (the sizes a zip declares may lie),
and their XML goes through a streaming parser that counts nesting depth and characters of text. HTML
gets the same depth and text count. The readers check pages, frames and pixels before decoding;
the pipeline checks the parsed text and the chunk count.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass, fields
from pathlib import PurePath
from typing import Any

from ragstack.config import IngestConfig
from ragstack.errors import ResourceExhausted

CONTAINERS = {".docx", ".pptx", ".xlsx", ".xlsm", ".odt", ".ods", ".odp", ".epub"}
_MB = 1024 * 1024
_BLOCK = 1 << 20  # inflated and parsed a block at a time


class OverBudget(ResourceExhausted):
    """A document over one of its budgets; the message names the budget and its setting."""


_DEFAULT = IngestConfig.model_fields  # the budgets' defaults are the config's, kept in one place


@dataclass(frozen=True)
class Budgets:
    """The `ingest.*` settings of the same names."""

    max_unpacked_mb: float = _DEFAULT["max_unpacked_mb"].default
    max_depth: int = _DEFAULT["max_depth"].default
    max_chars: int = _DEFAULT["max_chars"].default
    max_chunks: int = _DEFAULT["max_chunks"].default
    max_pages: int = _DEFAULT["max_pages"].default
    max_frames: int = _DEFAULT["max_frames"].default
    max_frame_megapixels: float = _DEFAULT["max_frame_megapixels"].default
    parse_timeout_s: float = _DEFAULT["parse_timeout_s"].default
    parse_memory_mb: int = _DEFAULT["parse_memory_mb"].default

    @classmethod
    def from_config(cls, ingest: IngestConfig) -> Budgets:
        return cls(**{f.name: getattr(ingest, f.name) for f in fields(cls)})

    def check_chars(self, n: int, exact: bool = True) -> None:
        if n > self.max_chars:
            said = f"{n:,}" if exact else f"more than {self.max_chars:,}"
            raise OverBudget(f"holds {said} characters of text, over ingest.max_chars ({self.max_chars:,})")

    def check_chunks(self, n: int) -> None:
        if n > self.max_chunks:
            raise OverBudget(f"makes {n:,} chunks, over ingest.max_chunks ({self.max_chunks:,})")

    def check_pages(self, n: int) -> None:
        if n > self.max_pages:
            raise OverBudget(f"has {n:,} pages, over ingest.max_pages ({self.max_pages:,})")

    def check_frames(self, n: int) -> None:
        if n > self.max_frames:
            raise OverBudget(f"has {n:,} frames, over ingest.max_frames ({self.max_frames:,})")

    def check_frame(self, width: int, height: int) -> None:
        megapixels = width * height / 1e6
        if megapixels > self.max_frame_megapixels:
            raise OverBudget(
                f"has a frame of {width}x{height} ({megapixels:,.0f} megapixels), over "
                f"ingest.max_frame_megapixels ({self.max_frame_megapixels:g})"
            )

    def check_unpacked(self, n: int, exact: bool) -> None:
        if n > self.max_unpacked_mb * _MB:
            said = _size(n) if exact else f"more than {_size(n)}"
            raise OverBudget(f"unpacks to {said}, over ingest.max_unpacked_mb ({self.max_unpacked_mb:g})")

    def check_before_parsing(self, name: str, data: bytes, kind: str = "") -> None:
        """The checks that need no parser: a container's members, HTML's depth and text."""
        suffix = ".html" if kind == "html" else PurePath(name).suffix.lower()
        if suffix in CONTAINERS:
            self._container(data)
        elif suffix in (".html", ".htm"):
            _Markup(self, html=True).feed_all(data)

    def _container(self, data: bytes) -> None:
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
            members = archive.infolist()
        except (zipfile.BadZipFile, ValueError, OSError):
            return  # not a readable zip: the parser says so
        self.check_unpacked(sum(m.file_size for m in members), exact=True)
        unpacked = chars = 0
        for member in members:
            markup = _Markup(self, html=False) if member.filename.endswith((".xml", ".rels")) else None
            try:
                with archive.open(member) as stream:
                    while block := stream.read(_BLOCK):
                        unpacked += len(block)
                        self.check_unpacked(unpacked, exact=False)  # a zip may declare less than it holds
                        if markup is not None:
                            markup.feed(block)
            except (zipfile.BadZipFile, RuntimeError, NotImplementedError, zlib.error, OSError, EOFError):
                return  # encrypted, corrupt or of an unknown compression: the parser says so
            if markup is not None:
                chars += markup.close()
                self.check_chars(chars, exact=False)


class _Markup:
    """A streaming XML or HTML parser that counts nesting depth and characters of text, refusing as
    soon as either is over its budget; elements are dropped once read, so memory stays small."""

    def __init__(self, budgets: Budgets, html: bool) -> None:
        from lxml import etree

        self._budgets = budgets
        self._depth = 0
        self._chars = 0
        events = ("start", "end")
        self._parser: Any = (
            etree.HTMLPullParser(events=events, huge_tree=True, no_network=True)
            if html
            else etree.XMLPullParser(
                events=events, huge_tree=True, no_network=True, resolve_entities=False, load_dtd=False
            )
        )
        self._broken = False

    def feed(self, block: bytes) -> None:
        from lxml import etree

        if self._broken:
            return
        try:
            self._parser.feed(block)
            self._read()
        except etree.LxmlError:
            self._broken = True  # not well-formed: the parser proper decides what it makes of it

    def close(self) -> int:
        from lxml import etree

        if not self._broken:
            try:
                self._parser.close()
                self._read()
            except etree.LxmlError:
                pass
        return self._chars

    def feed_all(self, data: bytes) -> None:
        for i in range(0, len(data), _BLOCK):
            self.feed(data[i : i + _BLOCK])
        self._budgets.check_chars(self.close(), exact=False)

    def _read(self) -> None:
        for event, element in self._parser.read_events():
            if event == "start":
                self._depth += 1
                if self._depth > self._budgets.max_depth:
                    raise OverBudget(
                        f"nests elements more than {self._budgets.max_depth} deep, over ingest.max_depth "
                        f"({self._budgets.max_depth})"
                    )
                continue
            self._depth -= 1
            # Its text and its children's tails are complete now; its own tail comes later, and is
            # counted when it is dropped as the previous sibling of the next element, or by its parent.
            self._chars += len(element.text or "") + sum(len(c.tail or "") for c in element)
            if self._chars > self._budgets.max_chars:
                self._budgets.check_chars(self._chars, exact=False)
            element.clear()
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                self._chars += len(parent[0].tail or "")
                del parent[0]


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GB" if n >= 1024**3 else f"{n / _MB:.0f} MB"
