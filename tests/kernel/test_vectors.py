"""The dense store on real LanceDB: in-memory exact search, refresh on writes, the ANN path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragstack.domain import Chunk, SearchFilter
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


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def test_a_chunk_of_windows_is_ranked_by_its_best_window_in_memory_and_in_lancedb(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    query = unit(rng.normal(size=DIM))
    # 400 one-window chunks, each a little like the query; one chunk of four windows, three of
    # them about something else and one almost the query: its best window is by far the nearest.
    singles = unit(0.35 * query + rng.normal(size=(400, DIM)) / np.sqrt(DIM))
    other = unit(rng.normal(size=(3, DIM)))
    windows = np.vstack([other, unit(query + 0.05 * rng.normal(size=DIM))])
    writer = VectorStore(tmp_path, DIM, writer=True)
    docs = chunks(400) + chunks(1, doc="long")
    writer.replace_documents("lib", ["d", "long"], docs, [*singles, windows])
    stored = writer.vectors_by_id("lib", ["long:0"])["long:0"]
    assert np.allclose(stored, unit(windows.mean(axis=0)), atol=1e-6)  # the chunk's vector: their unit mean
    for reader in (VectorStore(tmp_path, DIM), VectorStore(tmp_path, DIM, memory_rows=0)):
        hits = reader.search(query, "lib", 5)
        assert hits[0][0].chunk_id == "long:0"
        assert hits[0][1] == pytest.approx(float(windows[-1] @ query), abs=1e-5)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        # One-window chunks keep their own scores.
        assert all(
            s == pytest.approx(float(singles[int(c.chunk_id[2:])] @ query), abs=1e-5) for c, s in hits[1:]
        )
        # A filter still applies to windowed rows (the long chunk's document left out).
        kept = reader.search(query, "lib", 5, SearchFilter(document_ids=("d",)))
        assert len(kept) == 5 and "long:0" not in {c.chunk_id for c, _ in kept}


def test_swapped_vectors_replace_the_windows_too(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, DIM, writer=True)
    vecs = clustered(3)
    store.replace_documents("lib", ["d"], chunks(3), [vecs[0], np.vstack([vecs[1], -vecs[1]]), vecs[2]])
    q = unit(-vecs[1])
    assert store.search(q, "lib", 1)[0][0].chunk_id == "d:1"  # by its window -vecs[1]
    # A tuning's swap (replace_vectors): d:1 is now one window, d:2 two.
    store.replace_vectors("lib", {"d:0": vecs[0], "d:1": vecs[1], "d:2": np.vstack([vecs[2], q])}, "tuned")
    hits = VectorStore(tmp_path, DIM).search(q, "lib", 3)
    assert hits[0][0].chunk_id == "d:2" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert dict((c.chunk_id, s) for c, s in hits)["d:1"] == pytest.approx(float(vecs[1] @ q), abs=1e-5)
    assert store.library_embedder("lib") == "tuned"


def test_a_table_from_before_windows_is_searched_and_its_writer_adds_them(tmp_path: Path) -> None:
    import lancedb
    import pyarrow as pa

    from ragstack.stores import vectors as module

    vecs = clustered(2)
    schema = pa.schema([f for f in module._schema(DIM) if f.name != module.WINDOWS])
    old = chunks(1, doc="old")[0]
    row = {
        "chunk_id": old.chunk_id,
        "document_id": old.document_id,
        "library": "lib",
        "text": old.text,
        "heading_path": ["T"],
        "position": 0,
        "vector": vecs[0],
    }
    lancedb.connect(str(tmp_path)).create_table("chunks", data=pa.Table.from_pylist([row], schema=schema))
    for reader in (VectorStore(tmp_path, DIM), VectorStore(tmp_path, DIM, memory_rows=0)):
        assert [c.chunk_id for c, _ in reader.search(vecs[0], "lib", 3)] == ["old:0"]
    writer = VectorStore(tmp_path, DIM, writer=True)  # adds the column, null for the old rows
    writer.replace_documents("lib", ["new"], chunks(1, doc="new"), [np.vstack([vecs[1], unit(vecs[1] + 1)])])
    for reader in (VectorStore(tmp_path, DIM), VectorStore(tmp_path, DIM, memory_rows=0)):
        assert [c.chunk_id for c, _ in reader.search(vecs[0], "lib", 1)] == ["old:0"]
        new = reader.search(vecs[1], "lib", 1)
        assert [c.chunk_id for c, _ in new] == ["new:0"] and new[0][1] == pytest.approx(1.0, abs=1e-5)
