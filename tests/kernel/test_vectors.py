"""The dense store on real LanceDB: in-memory exact search, refresh on writes, the ANN path."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragstack.domain import Chunk
from ragstack.stores.vectors import VectorStore

DIM = 32


def clustered(n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(40, DIM))
    points = centers[rng.integers(0, 40, n)] + 0.3 * rng.normal(size=(n, DIM))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def chunks(n: int, library: str = "lib", doc: str = "d") -> list[Chunk]:
    return [Chunk(f"{doc}:{i}", doc, library, f"text {i}", ("T",), (), i, "T", "s") for i in range(n)]


def test_memory_search_matches_lancedb_and_sees_new_writes(tmp_path: Path) -> None:
    writer = VectorStore(tmp_path, DIM, writer=True)
    reader = VectorStore(tmp_path, DIM)
    vecs = clustered(300)
    writer.replace_documents("lib", ["d"], chunks(300), vecs)
    writer.replace_documents("other", ["d"], chunks(5, "other"), vecs[:5])
    for q in vecs[:20]:
        memory = [(c.chunk_id, round(s, 4)) for c, s in reader.search(q, "lib", 10)]
        exact = [(c.chunk_id, round(s, 4)) for c, s in reader.exact_search(q, "lib", 10)]
        assert [m[0] for m in memory] == [e[0] for e in exact]
        assert np.allclose([m[1] for m in memory], [e[1] for e in exact], atol=1e-3)
    assert {c.library for c, _ in reader.search(vecs[0], "other", 10)} == {"other"}
    # A write is seen by the next search (the snapshot follows the table version).
    new = chunks(1, doc="fresh")
    writer.replace_documents("lib", ["fresh"], new, -vecs[:1])
    assert reader.search(-vecs[0], "lib", 1)[0][0].chunk_id == "fresh:0"
    writer.replace_documents("lib", ["fresh"], [], np.zeros((0, DIM), np.float32))  # removed
    assert reader.search(-vecs[0], "lib", 1)[0][0].chunk_id != "fresh:0"


def test_ann_index_recall_against_exact(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, DIM, writer=True, memory_rows=0, nprobes=20, refine_factor=20)
    vecs = clustered(3000)
    store.replace_documents("lib", ["d"], chunks(3000), vecs)
    assert not store.build_ann_index(min_rows=5000) and not store.has_ann_index()
    assert store.build_ann_index(min_rows=1000) and store.has_ann_index()
    queries = clustered(50, seed=11)
    recall = np.mean(
        [
            len(
                {c.chunk_id for c, _ in store.search(q, "lib", 10)}
                & {c.chunk_id for c, _ in store.exact_search(q, "lib", 10)}
            )
            / 10
            for q in queries
        ]
    )
    assert recall >= 0.95


def test_chunks_and_vectors_by_id_from_lancedb_match_memory(tmp_path: Path) -> None:
    writer = VectorStore(tmp_path, DIM, writer=True)
    vecs = clustered(2500)
    writer.replace_documents("lib", ["d"], chunks(2500), vecs)
    writer.replace_documents("other", ["d"], chunks(5, "other"), vecs[:5])
    memory, lance = VectorStore(tmp_path, DIM), VectorStore(tmp_path, DIM, memory_rows=0)
    wanted = [f"d:{i}" for i in range(2499, -1, -2)] + ["d:missing"]  # more than one query's worth of ids
    assert lance.chunks_by_id("lib", wanted) == memory.chunks_by_id("lib", wanted)
    assert [c.chunk_id for c in lance.chunks_by_id("lib", wanted)] == wanted[:-1]
    found = lance.vectors_by_id("lib", wanted)
    assert set(found) == set(wanted[:-1])
    assert all(np.allclose(found[f"d:{i}"], vecs[i]) for i in range(1, 2500, 2))
    assert set(lance.vectors_by_id("other", ["d:0", "d:9"])) == {"d:0"}


def test_reader_skips_lancedbs_check_only_while_the_folder_proves_no_commit(
    tmp_path: Path, monkeypatch
) -> None:
    """The commit watch (ragstack/stores/commit_watch.py): once a stamp is old enough to trust, an
    unchanged folder answers without LanceDB; any commit (add, delete, compaction) is seen by the
    very next search; a fresh stamp is never trusted."""
    from ragstack.stores import commit_watch

    writer = VectorStore(tmp_path, DIM, writer=True)
    vecs = clustered(50)
    writer.replace_documents("lib", ["d"], chunks(50), vecs)
    reader = VectorStore(tmp_path, DIM)
    reads: list[int] = []
    real = reader._watch.version

    def counted(read):  # type: ignore[no-untyped-def]
        return real(lambda: reads.append(1) or read())

    monkeypatch.setattr(reader._watch, "version", counted)
    reader.search(vecs[0], "lib", 3)
    reader.search(vecs[0], "lib", 3)
    assert len(reads) == 2  # the commit just happened: its stamp is too fresh to trust

    monkeypatch.setattr(commit_watch, "RACY_NS", 0)
    reader.search(vecs[0], "lib", 3)
    before = len(reads)
    for _ in range(5):
        assert reader.search(vecs[0], "lib", 1)[0][0].chunk_id == "d:0"
    assert len(reads) == before  # nothing committed: no LanceDB check

    writer.replace_documents("lib", ["fresh"], chunks(1, doc="fresh"), -vecs[:1])
    assert reader.search(-vecs[0], "lib", 1)[0][0].chunk_id == "fresh:0"
    writer.replace_documents("lib", ["fresh"], [], np.zeros((0, DIM), np.float32))
    assert reader.search(-vecs[0], "lib", 1)[0][0].chunk_id != "fresh:0"
    writer.connection().open_table("chunks").optimize()  # compaction: a new version, same rows
    version = int(writer.connection().open_table("chunks").version)
    reader.search(vecs[0], "lib", 1)
    assert reader._cache["lib"].version == version


def test_commit_watch_without_a_hint_or_folder_always_asks(tmp_path: Path) -> None:
    from ragstack.stores.commit_watch import CommitWatch

    reads: list[int] = []
    for watch in (CommitWatch(None), CommitWatch(tmp_path / "missing.lance")):
        for _ in range(3):
            assert watch.version(lambda: reads.append(1) or 7) == 7
    assert len(reads) == 6


def test_memory_candidates_read_their_chunks_together_later(tmp_path: Path) -> None:
    from ragstack.domain import chunk_key, document_key, read_chunks

    writer = VectorStore(tmp_path, DIM, writer=True)
    vecs = clustered(40)
    writer.replace_documents("lib", ["d"], chunks(40), vecs)
    reader = VectorStore(tmp_path, DIM)
    found = reader.search_candidates(vecs[3], "lib", 5)
    assert all(c.chunk is None for c, _ in found)
    assert len({id(c.at[0]) for c, _ in found}) == 1  # one read for all of them
    read = read_chunks([c for c, _ in found])
    assert [chunk_key(x.chunk_id) for x in read] == [c.key for c, _ in found]
    assert all(c.document_key == document_key("d") for c, _ in found)
    assert [(x, s) for x, (_, s) in zip(read, found, strict=True)] == reader.search(vecs[3], "lib", 5)
    assert read[0].chunk_id == "d:3"
