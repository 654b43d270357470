"""Indexes written in an older schema (before document ACLs, or before candidate keys): their
documents copied into the current one, public when the old schema had no ACL groups.

The lexical writer calls this once when it opens such an index (or a snapshot of one is restored):
the fields that were not stored are made again from the stored ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ragstack.domain import chunk_key, document_key, heading_key
from ragstack.stores.lexical import PUBLIC, doc_key


def copy_into_current(searcher: Any, writer: Any, groups: bool) -> None:
    """Adds every live document `searcher` sees to `writer` (of an index in the current schema),
    with its `group` terms (`groups`: the old schema had them; else the public term) and its keys;
    the caller commits."""
    media: dict[str, str] = {}  # a document's media type, from its chunks (pages did not store it)
    for d in _every_document(searcher):
        meta = json.loads(d["meta"][0])
        if "page" not in meta:
            media[doc_key(d["library"][0], d["document_id"][0])] = meta.get("media_type", "")
    for d in _every_document(searcher):
        writer.add_document(_upgraded(d, media, groups))


def _every_document(searcher: Any, page: int = 10_000) -> Iterator[Any]:
    """The stored fields of every live document, a page of hits at a time."""
    import tantivy

    offset = 0
    while hits := searcher.search(tantivy.Query.all_query(), page, count=False, offset=offset).hits:
        for _, address in hits:
            yield searcher.doc(address)
        offset += len(hits)


def _upgraded(old: Any, media: dict[str, str], groups: bool) -> Any:
    """A document of an older index in the current schema; the fields that were not stored are made
    again from the stored ones (a page's media type from its document's chunks)."""
    import tantivy

    library, document_id, chunk_id = old["library"][0], old["document_id"][0], old["chunk_id"][0]
    meta = json.loads(old["meta"][0])
    common = {
        "chunk_id": chunk_id,
        "document_id": document_id,
        "doc_key": doc_key(library, document_id),
        "library": library,
        "title": old["title"][0],
        "text": old["text"][0],
        "meta": old["meta"][0],
        "group": (old.get_all("group") or [PUBLIC]) if groups else [PUBLIC],
        "key": chunk_key(chunk_id),
        "document_key": document_key(document_id),
    }
    if "page" in meta:
        return tantivy.Document(
            **common,
            kind="page",
            media_type=media.get(doc_key(library, document_id), ""),
            heading=old["title"][0],
        )
    return tantivy.Document(
        **common,
        kind="chunk",
        media_type=meta.get("media_type", ""),
        heading=" ".join(meta["heading_path"]),
        heading_key=heading_key(meta["heading_path"]),
    )
