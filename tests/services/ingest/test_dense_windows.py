"""Dense windows with the real embedder: what a long chunk is embedded as, and that a sentence past
the embedder's truncation is found by dense search once chunks are embedded in windows."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ragstack.guard.paths import PathGuard
from ragstack.stores.vectors import VectorStore
from services.ingest.dense_windows import SPECIAL_TOKENS, embed_chunks, window_texts
from services.ingest.sources import collect_paths
from tests.conftest import SAMPLES
from tests.tools.pipelines import plain_pipeline

EVERYWHERE = PathGuard([Path("/")])  # these tests read their own temp folders

# Thirty sentences about one thing, then the one sentence a question asks about: at 256 word
# pieces the embedder never reads it.
FILLER = " ".join(
    f"Survey {i} of the coastal heathland recorded banksia, grevillea and hakea shrubs along transect {i}."
    for i in range(30)
)
FACT = "The ferry to the island leaves the harbour at seven o'clock every Tuesday morning."


def test_a_short_chunk_is_one_window_and_a_long_one_is_cut_at_sentences(embedder) -> None:  # type: ignore[no-untyped-def]
    heading = ("Field notes", "Heathland")
    assert window_texts(heading, "A short note.", 128, embedder) == ["Field notes > Heathland\nA short note."]
    text = FILLER + " " + FACT
    assert window_texts(heading, text, 0, embedder) == ["Field notes > Heathland\n" + text]  # windows off
    windows = window_texts(heading, text, 128, embedder)
    assert len(windows) > 3
    for w in windows:
        assert w.startswith("Field notes > Heathland\n")
        assert embedder.count_tokens(w) + SPECIAL_TOKENS <= 128
    pieces = [w.split("\n", 1)[1] for w in windows]
    assert " ".join(pieces) == text  # every word once, in order, cut between sentences
    assert all(p.endswith(".") for p in pieces)
    # A heading path longer than half a window is cut to half of one; the text still fits.
    long_heading = tuple(f"Section {i} on heathland shrubs" for i in range(20))
    for w in window_texts(long_heading, text, 128, embedder):
        head, _ = w.split("\n", 1)
        assert embedder.count_tokens(head) <= (128 - SPECIAL_TOKENS) // 2
        assert embedder.count_tokens(w) + SPECIAL_TOKENS <= 128


def test_embed_chunks_gives_each_chunk_its_windows_vectors(embedder) -> None:  # type: ignore[no-untyped-def]
    items = [(("Notes",), "A short note."), (("Notes",), FILLER + " " + FACT), ((), "")]
    out = embed_chunks(embedder, items, 128)
    assert [len(v) for v in out] == [len(window_texts(h, t, 128, embedder)) for h, t in items]
    windows = window_texts(("Notes",), FILLER + " " + FACT, 128, embedder)
    assert np.allclose(out[1], embedder.embed(windows), atol=1e-5)
    assert np.allclose(out[0][0], embedder.embed(["Notes\nA short note."])[0], atol=1e-5)


@pytest.mark.parametrize("window_tokens", [128, 0])
def test_a_sentence_past_the_truncation_is_found_only_with_windows(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    window_tokens: int,
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLES, docs)
    (docs / "heathland.md").write_text(f"# Heathland survey\n\n{FILLER} {FACT}\n")
    (docs / "ferries.md").write_text(  # about ferries too, without the answer
        "# Ferry timetable\n\nFerries to the mainland run hourly from the north pier in summer; the "
        "winter timetable is posted at the ticket office.\n"
    )
    pipeline = plain_pipeline(tmp_path, embedder, 512, 200_000, window_tokens=window_tokens)
    list(pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default"))
    reader = VectorStore(tmp_path / "lance", embedder.dimension)
    query = embedder.embed(["When does the ferry to the island leave the harbour?"])[0]
    hits = reader.search(query, "default", 20)
    found = {c.document_id: s for c, s in hits}
    heathland = next(c.document_id for c, _ in hits if FACT in c.text)
    windows = window_texts(("Heathland survey",), f"{FILLER} {FACT}", 128, embedder)
    if window_tokens:  # ranked by its window with the ferry in it, above the timetable
        assert hits[0][0].document_id == heathland
        assert hits[0][1] == pytest.approx(float(np.max(embedder.embed(windows) @ query)), abs=1e-4)
    else:  # embedded whole, truncated: the ferry never reached the index
        assert hits[0][0].document_id != heathland
        assert found[heathland] < float(np.max(embedder.embed(windows) @ query)) - 0.3
