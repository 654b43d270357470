"""Turns file bytes into Markdown-shaped text with a title. This skeleton reads Markdown and text."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePath

from ragstack.errors import UnsupportedFormat

MARKDOWN = {".md", ".markdown", ".mdx"}
PLAIN = {".txt", ".text", ".log", ".rst"}
SUPPORTED = MARKDOWN | PLAIN
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Parsed:
    title: str
    media_type: str
    markdown: str


def _decode(data: bytes, name: str) -> str:
    if b"\x00" in data[:4096]:
        raise UnsupportedFormat(f"{name}: binary content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _title_from_name(name: str) -> str:
    return PurePath(name).stem.replace("-", " ").replace("_", " ").strip() or name


def parse(name: str, data: bytes, kind: str = "") -> Parsed:
    """Parses by `kind` when given, else by extension. Raises UnsupportedFormat for anything else,
    or for empty content."""
    if kind == "beir":
        return _corpus_line(data)
    suffix = PurePath(name).suffix.lower()
    if suffix not in SUPPORTED:
        raise UnsupportedFormat(
            f"unsupported format {suffix or '(no extension)'}; supported: {', '.join(sorted(SUPPORTED))}"
        )
    text = _decode(data, name)
    if not text.strip():
        raise UnsupportedFormat("empty file")
    if suffix in MARKDOWN:
        m = _H1.search(text)
        return Parsed(m.group(1) if m else _title_from_name(name), "text/markdown", text)
    return Parsed(_title_from_name(name), "text/plain", _as_text(text))


def _as_text(text: str) -> str:
    """Plain text as it is: no line may turn into a heading or a fence by accident."""
    return re.sub(r"^(\s*)(#|```|~~~)", r"\1\\\2", text, flags=re.MULTILINE)


def _corpus_line(data: bytes) -> Parsed:
    """A BEIR corpus line: `{"_id", "title", "text"}`; the title becomes the heading."""
    obj = json.loads(data)
    text = str(obj.get("text") or "")
    title = " ".join(str(obj.get("title") or "").split()) or str(obj["_id"])
    if not text.strip() and not obj.get("title"):
        raise UnsupportedFormat("empty corpus line")
    return Parsed(title, "application/x-beir+json", f"# {title}\n\n{_as_text(text)}")
