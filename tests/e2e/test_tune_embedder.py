"""A library's own embedder over real gRPC servers: TuneEmbedder trains the bundled MiniLM on the
library's passages in the export's tool environment (torch), exports it to ONNX, re-embeds the
library while searches go on against the old vectors, and from then on documents and queries of
that library go through it; another library keeps the configured embedder; revert goes back; a
cancelled tuning changes nothing; the refusals have their codes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from ragstack import domain as d
from ragstack.auth import Principal, Role
from ragstack.embedding import Embedder
from ragstack.errors import PermissionDenied, RpcError
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.serve import Stack
from ragstack.stores.graph import GraphStore
from ragstack.stores.vectors import EMBEDDER, VectorStore, chunk_vector
from services.ingest.dense_windows import embed_chunks, embedded_form
from tests.conftest import ROOT, SAMPLES, make_config, start_with

pytestmark = pytest.mark.slow

LIB, OTHER = "tuned", "plain"
TOOL_ENV = ROOT / ".venv-export"  # make install creates it (the embedder's export ran there)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    if not (TOOL_ENV / "bin" / "optimum-cli").exists():
        pytest.fail(f"no export tool environment at {TOOL_ENV}: run make install")
    folder = tmp_path_factory.mktemp("tune")
    cfg = make_config(
        folder / "data",
        models={"tuned_dir": str(folder / "tuned"), "tool_env": str(TOOL_ENV)},
    )
    stack = await start_with(cfg, resources, gateway=False)
    yield stack
    await stack.stop()


def _rows(stack: Stack, library: str) -> dict[str, tuple[str, np.ndarray, str]]:
    """chunk id -> (embedder, vector, text as embedded), read from LanceDB itself."""
    return {c: (e, v, embedded_form(h, t)) for c, (e, v, h, t) in _chunks(stack, library).items()}


def _chunks(stack: Stack, library: str) -> dict[str, tuple[str, np.ndarray, tuple[str, ...], str]]:
    """chunk id -> (embedder, vector, heading path, text), read from LanceDB itself."""
    store = VectorStore(stack.cfg.storage.lancedb(stack.cfg.data_dir), 384)
    table = store.connection().open_table("chunks")
    data = table.search().where(f"library = '{library}'").limit(None).to_arrow().to_pylist()
    return {
        r["chunk_id"]: (r[EMBEDDER] or "", np.asarray(r["vector"]), tuple(r["heading_path"]), r["text"])
        for r in data
    }


def _expected(model: Embedder, stack: Stack, chunks: list[tuple[tuple[str, ...], str]]) -> np.ndarray:
    """The vectors `model` gives these (heading path, text) chunks: their windows' unit mean."""
    windows = embed_chunks(model, chunks, stack.cfg.models.window_tokens)
    return np.stack([chunk_vector(w)[0] for w in windows])


def _models(stack: Stack) -> set[str]:
    folder = Path(stack.cfg.models.tuned_folder)
    return {p.name for p in folder.iterdir()} if folder.exists() else set()


async def _ingest(client: IngestClient, names: list[str], library: str) -> None:
    events = [
        e
        async for e in client.ingest(files=[(n, (SAMPLES / n).read_bytes()) for n in names], library=library)
    ]
    assert isinstance(events[-1], d.IngestSummary) and events[-1].indexed == len(names)


async def _fails(code: str, call: object) -> str:
    with pytest.raises(RpcError) as err:
        async for _ in call:  # type: ignore[attr-defined]
            pass
    assert err.value.code == code, err.value
    return err.value.message


async def test_tune_reembed_search_and_revert(stack: Stack, embedder: Embedder) -> None:
    ingest = IngestClient(open_channel(stack.peers["ingest"]), 600)
    retrieve = RetrieveClient(open_channel(stack.peers["retrieve"]), 30)
    names = sorted(p.name for p in SAMPLES.glob("*.md"))
    await _ingest(ingest, names[:-1], LIB)
    await _ingest(ingest, names[:2], OTHER)
    before = _rows(stack, LIB)
    assert before and {e for e, _, _ in before.values()} == {""}

    searched: list[int] = []

    async def search_meanwhile() -> None:  # the old vectors serve until the new ones are complete
        while True:
            hits, _ = await retrieve.search("reciprocal rank fusion", LIB, 3, d.SearchMode.DENSE)
            assert hits
            searched.append(len(hits))
            await asyncio.sleep(0.2)

    searching = asyncio.create_task(search_meanwhile())
    try:
        events = [e async for e in ingest.tune_embedder(LIB, epochs=1, max_pairs=48)]
    finally:
        searching.cancel()
    stages = [e.stage for e in events]
    assert stages[0] == "pairs" and stages[-1] == "done"
    assert {"training", "export", "embedding"} <= set(stages)
    training = [e for e in events if e.stage == "training"]
    assert training[-1].done == training[-1].total >= 1 and training[-1].loss > 0
    done = events[-1]
    assert done.embedder.startswith(f"{LIB}-") and done.previous_embedder == ""
    assert done.chunks == len(before) and 2 <= done.pairs <= 48 and searched

    folder = Path(stack.cfg.models.tuned_folder) / done.embedder
    assert {"model.onnx", "model.int8.onnx", "tokenizer.json", "tuned.json"} <= {
        p.name for p in folder.iterdir()
    }
    tuned = Embedder(folder)
    after = _rows(stack, LIB)
    assert set(after) == set(before) and {e for e, _, _ in after.values()} == {done.embedder}
    ids = sorted(after)
    chunks = _chunks(stack, LIB)
    texts = [chunks[c][2:] for c in ids]
    stored = np.stack([after[c][1] for c in ids])
    assert np.allclose(stored, _expected(tuned, stack, texts), atol=1e-4)  # every vector is the tuned model's
    assert not np.allclose(stored, _expected(embedder, stack, texts), atol=1e-2)  # and no longer the base's
    assert {e for e, _, _ in _rows(stack, OTHER).values()} == {""}  # another library is untouched
    communities, centres = GraphStore(stack.cfg.storage.lancedb(stack.cfg.data_dir), 384).communities(LIB)
    assert communities  # each one's vector is the mean of its chunks' new vectors
    for community, centre in zip(communities, centres, strict=True):
        mean = np.mean([after[c][1] for c in community.chunk_ids if c in after], axis=0)
        assert np.allclose(centre, mean / np.linalg.norm(mean), atol=1e-4)
    hits, _ = await retrieve.search("how are rankings fused", LIB, 3, d.SearchMode.GRAPH_GLOBAL)
    assert hits
    shown = {lib.name: lib.embedder for lib in (await ingest.stats()).libraries}
    assert shown[LIB] == done.embedder and shown[OTHER] == ""

    # Queries of the tuned library go through the tuned model: a chunk's own text finds it first.
    probe = next(c for c in ids if embedder.count_tokens(after[c][2]) + 2 <= stack.cfg.models.window_tokens)
    hits, _ = await retrieve.search(after[probe][2], LIB, 1, d.SearchMode.DENSE)
    assert hits[0].chunk.chunk_id == probe and hits[0].score == pytest.approx(1.0, abs=0.03)
    hits, _ = await retrieve.search("reciprocal rank fusion", OTHER, 3, d.SearchMode.HYBRID)
    assert hits  # the plain library still searches with the configured embedder

    # A document ingested into the tuned library afterwards is embedded by the tuned model.
    await _ingest(ingest, names[-1:], LIB)
    added = {c: v for c, v in _rows(stack, LIB).items() if c not in after}
    assert added and {e for e, _, _ in added.values()} == {done.embedder}
    (cid, (_, vector, _)), *_ = added.items()
    assert np.allclose(vector, _expected(tuned, stack, [_chunks(stack, LIB)[cid][2:]])[0], atol=1e-4)

    reverted = [e async for e in ingest.tune_embedder(LIB, revert=True)][-1]
    assert (reverted.embedder, reverted.previous_embedder) == ("", done.embedder)
    back = _rows(stack, LIB)
    assert {e for e, _, _ in back.values()} == {""}
    ids = sorted(back)
    chunks = _chunks(stack, LIB)
    assert np.allclose(
        np.stack([back[c][1] for c in ids]),
        _expected(embedder, stack, [chunks[c][2:] for c in ids]),
        atol=1e-4,
    )
    hits, _ = await retrieve.search(back[cid][2], LIB, 1, d.SearchMode.DENSE)
    assert hits[0].chunk.chunk_id == cid


async def test_cancelled_tuning_changes_nothing(stack: Stack) -> None:
    ingest = IngestClient(open_channel(stack.peers["ingest"]), 600)
    await _ingest(ingest, ["bm25.md", "chunking.md"], "cancelled")
    before = _rows(stack, "cancelled")
    existing = _models(stack)
    async for event in ingest.tune_embedder("cancelled", max_pairs=2000, epochs=10, pairs="both"):
        if event.stage == "training":
            break  # the client goes away mid-training: the call ends, the work with it
    for _ in range(100):  # the service stops the trainer and frees the library
        try:
            async for _ in ingest.tune_embedder("cancelled", revert=True):
                pass
        except RpcError as err:
            if err.code == "ALREADY_EXISTS":
                await asyncio.sleep(0.2)
                continue
            assert err.code == "FAILED_PRECONDITION" and "already uses the configured" in err.message
            break
    after = _rows(stack, "cancelled")
    assert {e for e, _, _ in after.values()} == {""}
    assert all(np.array_equal(after[c][1], before[c][1]) for c in before)
    assert _models(stack) == existing  # no model, and no staging folder, was left behind


async def test_refusals(stack: Stack) -> None:
    ingest = IngestClient(open_channel(stack.peers["ingest"]), 60)
    assert "no chunks" in await _fails("NOT_FOUND", ingest.tune_embedder("nothing-here"))
    assert "epochs" in await _fails("INVALID_ARGUMENT", ingest.tune_embedder(LIB, epochs=50))
    assert "max_pairs" in await _fails("INVALID_ARGUMENT", ingest.tune_embedder(LIB, max_pairs=1))
    assert "pairs 'titles'" in await _fails("INVALID_ARGUMENT", ingest.tune_embedder(LIB, pairs="titles"))
    await _ingest(ingest, ["bm25.md"], "never-tuned")
    assert "configured embedder" in await _fails(
        "FAILED_PRECONDITION", ingest.tune_embedder("never-tuned", revert=True)
    )


async def test_reembed_gives_a_library_from_before_windows_its_windows(
    stack: Stack, embedder: Embedder
) -> None:
    ingest = IngestClient(open_channel(stack.peers["ingest"]), 600)
    await _ingest(ingest, ["bm25.md", "chunking.md"], "before-windows")
    # The library as an ingest from before windows left it: each chunk embedded whole, truncated.
    chunks = _chunks(stack, "before-windows")
    ids = sorted(chunks)
    whole = embedder.embed([embedded_form(*chunks[c][2:]) for c in ids])
    writer = VectorStore(stack.cfg.storage.lancedb(stack.cfg.data_dir), 384, writer=True)
    writer.replace_vectors("before-windows", dict(zip(ids, whole, strict=True)), "")
    assert writer.count_windows("before-windows") == 0

    events = [e async for e in ingest.tune_embedder("before-windows", reembed=True)]
    assert [e.stage for e in events][-1] == "done" and "training" not in {e.stage for e in events}
    done = events[-1]
    assert (done.embedder, done.previous_embedder, done.chunks, done.pairs) == ("", "", len(ids), 0)
    stored = np.stack([_chunks(stack, "before-windows")[c][1] for c in ids])
    assert np.allclose(stored, _expected(embedder, stack, [chunks[c][2:] for c in ids]), atol=1e-4)
    windows = VectorStore(stack.cfg.storage.lancedb(stack.cfg.data_dir), 384).count_windows("before-windows")
    (lib,) = (await ingest.stats("before-windows")).libraries
    assert lib.vector_windows == windows > 0
    retrieve = RetrieveClient(open_channel(stack.peers["retrieve"]), 30)
    hits, _ = await retrieve.search("saturation of term frequency", "before-windows", 3, d.SearchMode.DENSE)
    assert hits  # the retrieve service follows the new vectors
    message = await _fails(
        "INVALID_ARGUMENT", ingest.tune_embedder("before-windows", revert=True, reembed=True)
    )
    assert "not both" in message


def test_only_admins_may_tune() -> None:
    from ragstack.rpc.access import authorize
    from ragstack.v1 import ingest_pb2

    request = ingest_pb2.TuneEmbedderRequest(library=LIB)
    writer = Principal(name="w", role=Role.WRITER)
    with pytest.raises(PermissionDenied, match="admin"):
        authorize("/ragstack.v1.IngestService/TuneEmbedder", request, writer, "default")
    authorize(
        "/ragstack.v1.IngestService/TuneEmbedder", request, Principal(name="a", role=Role.ADMIN), "default"
    )
