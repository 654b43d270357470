"""A library's documents as the sandbox sees them: each document's Markdown, and each Markdown pipe
table in it as a CSV file with a header, `tables/<doc>-<n>.csv`, plus `index.json` naming the
document (id and name) each file came from."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

_SEPARATOR = re.compile(r"^\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$")
# The project's CSV reader says how much of a big table it shows: "120 data rows, 5 columns; the
# first 20 are shown." A table shown in part cannot be summed.
_SAMPLE_NOTE = re.compile(r"(\d+) data rows?, \d+ columns?; the first (\d+) (?:are|is) shown")
_SLUG = re.compile(r"[^a-z0-9]+")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Doc:
    """A document of the library: its id, its name (file name or title) and its Markdown."""

    document_id: str
    name: str
    markdown: str


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    partial: bool = False  # only a sample of the source's rows is in the document


@dataclass(frozen=True)
class TableFile:
    path: str  # relative to the sandbox's /docs: tables/<doc>-<n>.csv
    document_id: str
    table: Table


@dataclass(frozen=True)
class Library:
    """The files given to the sandbox, and where each came from."""

    files: dict[str, bytes]
    sources: dict[str, str]  # path -> document id
    tables: tuple[TableFile, ...]


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    cells = re.split(r"(?<!\\)\|", body)
    return [c.replace("\\|", "|").strip() for c in cells]


def _is_row(line: str) -> bool:
    return "|" in line and bool(line.strip())


def _outside_code(lines: list[str]) -> list[str]:
    """The lines, with those of fenced code blocks (and the fences) blanked: pipes there are code."""
    fence = ""
    kept = []
    for line in lines:
        marker = _FENCE.match(line)
        if marker and (not fence or marker.group(1).startswith(fence)):
            fence = "" if fence else marker.group(1)
            kept.append("")
        else:
            kept.append("" if fence else line)
    return kept


def markdown_tables(markdown: str) -> list[Table]:
    """The pipe tables of `markdown` (a header row, a separator row, then rows), in order. Rows are
    padded or cut to the header's width."""
    lines = _outside_code(markdown.splitlines())
    tables: list[Table] = []
    i = 0
    while i + 1 < len(lines):
        if not (_is_row(lines[i]) and "|" in lines[i + 1] and _SEPARATOR.match(lines[i + 1])):
            i += 1
            continue
        header = _cells(lines[i])
        if len(_cells(lines[i + 1])) != len(header):
            i += 1
            continue
        j = i + 2
        rows = []
        while j < len(lines) and _is_row(lines[j]):
            cells = _cells(lines[j])
            rows.append(tuple((cells + [""] * len(header))[: len(header)]))
            j += 1
        before = "\n".join(lines[max(0, i - 3) : i])
        note = _SAMPLE_NOTE.search(before)
        partial = bool(note and int(note.group(1)) > int(note.group(2)))
        tables.append(Table(tuple(header), tuple(rows), partial))
        i = j
    return tables


def table_csv(table: Table) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows(table.rows)
    return out.getvalue().encode("utf-8")


def _slug(name: str, taken: set[str]) -> str:
    stem = name.rsplit("/", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem[1:] else stem
    slug = _SLUG.sub("-", stem.lower()).strip("-")[:60] or "document"
    unique, n = slug, 2
    while unique in taken:
        unique, n = f"{slug}-{n}", n + 1
    taken.add(unique)
    return unique


def library(documents: Sequence[Doc]) -> Library:
    """The sandbox's view of `documents`: <doc>.md, tables/<doc>-<n>.csv and index.json."""
    files: dict[str, bytes] = {}
    sources: dict[str, str] = {}
    tables: list[TableFile] = []
    index: dict[str, dict[str, str]] = {}
    taken: set[str] = {"index", "tables"}
    for doc in documents:
        slug = _slug(doc.name or doc.document_id, taken)
        paths = [f"{slug}.md"]
        files[paths[0]] = doc.markdown.encode("utf-8")
        for n, table in enumerate(markdown_tables(doc.markdown), 1):
            path = f"tables/{slug}-{n}.csv"
            files[path] = table_csv(table)
            tables.append(TableFile(path, doc.document_id, table))
            paths.append(path)
        for path in paths:
            sources[path] = doc.document_id
            index[path] = {"document_id": doc.document_id, "name": doc.name}
    files["index.json"] = json.dumps(index, indent=1, ensure_ascii=False).encode("utf-8")
    return Library(files, sources, tuple(tables))
