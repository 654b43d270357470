"""What to ingest: files found under paths, uploaded bytes, and the documents inside them.

A file is one document, except a BEIR-style `*.jsonl` corpus, which is one document per line
(`_id` kept as the document id).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath

from ragstack.errors import InvalidArgument
from ragstack.guard.paths import SETTING, PathGuard

BEIR = "beir"


@dataclass(frozen=True)
class SourceItem:
    """One file: where it came from, its backend revision, its size and how to read it."""

    source: str
    revision: str
    read: Callable[[], bytes]
    size: int
    kind: str = ""  # "html" for a crawled page; "" lets the reader go by extension


@dataclass(frozen=True)
class DocItem:
    """One document to ingest."""

    source: str
    document_id: str
    revision: str
    size: int
    read: Callable[[], bytes]
    kind: str = ""  # BEIR for a corpus line; "" lets the reader go by file extension


@dataclass(frozen=True)
class Rejected:
    """An item that failed before it became a document (unreadable corpus line, ...)."""

    source: str
    reason: str


def document_id_for(library: str, source: str) -> str:
    return hashlib.sha256(f"{library}\0{source}".encode()).hexdigest()[:20]


def collect_paths(paths: Iterable[str], guard: PathGuard) -> list[SourceItem | Rejected]:
    """Files named or found under the folders named (hidden files and folders skipped), each under
    the guard's roots: every path is refused before its existence is looked at, and a file reached
    through a symlink that leaves the roots is reported as rejected."""
    items: list[SourceItem | Rejected] = []
    checked = [(raw, guard.check(raw)) for raw in paths]
    for raw, path in checked:
        if not path.exists():
            raise InvalidArgument(f"path does not exist: {raw}")
        files = (
            sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if path.is_dir()
            else [path]
        )
        for f in files:
            if not guard.allows(f):
                items.append(Rejected(str(f), f"a link to outside {SETTING}; skipped"))
                continue
            st = f.stat()
            mtime = datetime.fromtimestamp(st.st_mtime, UTC).isoformat()
            items.append(SourceItem(str(f.resolve()), mtime, f.read_bytes, st.st_size))
    return items


def resolved(paths: Iterable[str]) -> list[str]:
    """Paths as the sources of their documents are written: absolute, resolved."""
    return [str(Path(p).expanduser().resolve()) for p in paths]


UPLOAD = "upload://"


def upload_source(library: str, filename: str) -> str:
    """An uploaded file's source, in a namespace of its own (`upload://<library>/<name>`): an upload
    never takes the source, and so the id, of a document read from a path or a URL. Only the file
    name's last component is kept, with control characters removed."""
    name = PurePath(filename.replace("\\", "/")).name
    name = "".join(ch for ch in name if ch.isprintable()).strip()[:200]
    if name in ("", ".", ".."):
        name = "upload"
    return f"{UPLOAD}{library}/{name}"


def upload_items(library: str, files: Iterable[tuple[str, bytes]]) -> list[SourceItem]:
    return [
        SourceItem(upload_source(library, name), "", functools.partial(bytes, content), len(content))
        for name, content in files
    ]


def expand(items: Iterable[SourceItem | Rejected], library: str) -> list[DocItem | Rejected]:
    """The documents of the items, in order (rejected items pass through, to be reported)."""
    out: list[DocItem | Rejected] = []
    ids: dict[str, str] = {}  # a corpus line's `_id` -> the line that had it first
    for item in items:
        if isinstance(item, Rejected):
            out.append(item)
        elif PurePath(item.source).suffix.lower() == ".jsonl":
            out.extend(_corpus_lines(item, ids))
        else:
            out.append(
                DocItem(
                    item.source,
                    document_id_for(library, item.source),
                    item.revision,
                    item.size,
                    item.read,
                    item.kind,
                )
            )
    return out


def _corpus_lines(item: SourceItem, ids: dict[str, str]) -> list[DocItem | Rejected]:
    """The corpus's lines as documents; `ids`: the `_id`s the run's lines had so far. A line whose
    `_id` came before fails alone: the two would write one document twice in a batch."""
    out: list[DocItem | Rejected] = []
    for number, line in enumerate(item.read().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{item.source}:{number}"
        try:
            doc_id = str(json.loads(line)["_id"])
        except (ValueError, KeyError, TypeError):
            out.append(Rejected(where, "not a corpus line: expected a JSON object with `_id`"))
            continue
        first = ids.setdefault(doc_id, where)
        if first != where:
            said = f"line {first.rsplit(':', 1)[1]}" if first.startswith(f"{item.source}:") else first
            out.append(Rejected(where, f"`_id` {doc_id[:80]!r} again: {said} has it, and is the one indexed"))
            continue
        out.append(
            DocItem(
                f"{item.source}#{doc_id}",
                doc_id,
                item.revision,
                len(line),
                functools.partial(bytes, line),
                BEIR,
            )
        )
    return out
