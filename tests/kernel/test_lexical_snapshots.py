"""Lexical snapshots on a real S3-compatible server (moto): ingest publishes generations of a real
tantivy index, a replica fetches the newest into its cache and searches it; a second writer cannot
claim the same generation; pruning keeps what the newest generations use."""

from __future__ import annotations

from pathlib import Path

import obstore
import pytest

from ragstack.domain import Chunk
from ragstack.errors import Unavailable
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.lexical_snapshots import SnapshotPublisher, SnapshotReader, open_store
from tests.tools.s3 import s3_bucket


def chunk(doc: str, text: str) -> Chunk:
    return Chunk(f"{doc}:0", doc, "default", text, (doc,), (), 0, doc, f"{doc}.md", "text/markdown")


def ids(store: LexicalStore, query: str) -> set[str]:
    return {c.document_id for c, _ in store.search(query, "default", 10)}


def test_a_replica_follows_the_published_generations(tmp_path: Path) -> None:
    with s3_bucket() as (url, options):
        store = open_store(f"{url}/lexical", options)
        writer = LexicalStore(tmp_path / "index", writer=True)
        publisher = SnapshotPublisher(tmp_path / "index", store)
        reader = SnapshotReader(open_store(f"{url}/lexical", options), tmp_path / "cache", poll_s=0)
        assert reader.latest() == (0, None)  # nothing published yet

        writer.replace_documents(
            "default", ["okapi"], [chunk("okapi", "The okapi lives in the Congo rainforest.")]
        )
        assert publisher.publish() == 1
        generation, folder = reader.latest()
        assert generation == 1 and folder is not None
        assert ids(LexicalStore(folder), "okapi rainforest") == {"okapi"}

        writer.replace_documents(
            "default", ["tapir"], [chunk("tapir", "The tapir browses in the rainforest.")]
        )
        writer.replace_documents("default", ["okapi"], [])  # removed
        assert publisher.publish() == 2
        generation, folder = reader.latest()
        assert generation == 2 and folder is not None
        replica = LexicalStore(folder)
        assert ids(replica, "rainforest") == {"tapir"}  # the whole commit: the delete included

        obstore.put(store, "gen-3/manifest.json", b"{}")  # another writer got there first
        with pytest.raises(Unavailable, match="claimed by another writer"):
            publisher.publish()
        obstore.delete(store, "gen-3/manifest.json")
        obstore.delete(store, "gen-3/meta.json")

        writer.replace_documents("default", ["sloth"], [chunk("sloth", "The sloth hangs in the canopy.")])
        assert publisher.publish() == 3
        removed = publisher.prune(keep=1)
        assert removed > 0
        kept = {o["path"].split("/")[0] for o in obstore.list(store).collect()}
        assert kept == {"CURRENT", "files", "gen-3"}
        generation, folder = reader.latest()
        assert generation == 3 and folder is not None
        assert ids(LexicalStore(folder), "canopy rainforest") == {"tapir", "sloth"}
        writer.close()
