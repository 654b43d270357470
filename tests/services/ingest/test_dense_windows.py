"""Dense windows with the real embedder: what a long chunk is embedded as, and that a sentence past
the embedder's truncation is found by dense search once chunks are embedded in windows."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from ragstack.errors import Cancelled
from ragstack.guard.paths import PathGuard
from ragstack.stores.vectors import VectorStore
from services.ingest.dense_windows import EMBED_SLICE, SPECIAL_TOKENS, embed_chunks, window_texts
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


class _Counting:
    """The real embedder, with each call's number of texts noted and `on_call` run first."""

    def __init__(self, embedder, on_call=lambda n: None) -> None:  # type: ignore[no-untyped-def]
        self._embedder = embedder
        self.dimension = embedder.dimension
        self.calls: list[int] = []
        self._on_call = on_call

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls.append(len(texts))
        self._on_call(len(self.calls))
        return self._embedder.embed(texts)

    def count_tokens(self, text: str) -> int:
        return int(self._embedder.count_tokens(text))


def test_windows_go_to_the_embedder_a_slice_at_a_time_and_a_checkpoint_stops_between_slices(embedder) -> None:  # type: ignore[no-untyped-def]
    items = [((f"Plot {i}",), f"{FILLER} {FACT}") for i in range(30)]
    windows = sum(len(window_texts(h, t, 128, embedder)) for h, t in items)
    assert windows > 2 * EMBED_SLICE
    counting = _Counting(embedder)
    out = embed_chunks(counting, items, 128)
    full, rest = divmod(windows, EMBED_SLICE)
    assert counting.calls == [EMBED_SLICE] * full + ([rest] if rest else [])
    for i in (0, 17, 29):  # each chunk's windows, in order, whichever slices they fell into
        assert np.allclose(out[i], embedder.embed(window_texts(*items[i], 128, embedder)), atol=1e-5)

    checks: list[int] = []

    def checkpoint() -> None:
        checks.append(1)
        if len(checks) == 2:
            raise Cancelled("stop")

    stopped = _Counting(embedder)
    with pytest.raises(Cancelled):
        embed_chunks(stopped, items, 128, checkpoint)
    assert stopped.calls == [EMBED_SLICE]  # the slice in hand was finished, no other started


def test_an_embedder_with_a_larger_batch_gets_slices_of_its_batch(embedder) -> None:  # type: ignore[no-untyped-def]
    """A GPU's `models.batch_size` (up to 1024) is not cut down to EMBED_SLICE."""
    items = [((f"Plot {i}",), f"{FILLER} {FACT}") for i in range(30)]
    windows = sum(len(window_texts(h, t, 128, embedder)) for h, t in items)
    large = _Counting(embedder)
    large.batch_size = 100  # type: ignore[attr-defined]
    embed_chunks(large, items, 128)
    assert large.calls[0] == 100 and sum(large.calls) == windows and len(large.calls) == -(-windows // 100)


def test_a_cancelled_run_drops_its_batch_within_a_slice_and_keeps_the_batch_before(  # type: ignore[no-untyped-def]
    tmp_path: Path, embedder, spans
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpine meadows\n\nA short note on alpine meadows in June.\n")
    (docs / "b.md").write_text("# Heathland\n\n" + "\n\n".join(f"## Plot {i}\n\n{FILLER}" for i in range(12)))
    cancelled = threading.Event()

    def cancel_in_the_second_call(n: int) -> None:  # the first of b.md's slices (a.md had one)
        if n == 2:
            cancelled.set()

    counting = _Counting(embedder, cancel_in_the_second_call)
    pipeline = plain_pipeline(tmp_path, counting, 512, 200_000, batch_chunks=1)
    spans.clear()
    events = []
    with pytest.raises(Cancelled):
        for event in pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default", cancelled=cancelled):
            events.append(event)
    assert counting.calls[0] == 1 and counting.calls[1] == EMBED_SLICE and len(counting.calls) == 2
    assert [d.source for d in pipeline.list_documents("default", None)] == [str(docs / "a.md")]
    assert not any(e.source.endswith("b.md") and e.stage.name == "FAILED" for e in events)
    assert [e.source for e in events if e.stage.name == "INDEXED"] == [str(docs / "a.md")]  # reported too
    embeds = [s for s in spans.get_finished_spans() if s.name == "ingest.embed"]
    assert [s.status.status_code.name for s in embeds] == ["UNSET", "UNSET"]  # a cancel is no failure
    assert [e.name for e in embeds[-1].events] == ["cancelled"]
    again = list(pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default"))
    assert again[-1].indexed == 1 and again[-1].unchanged == 1


def test_the_ann_index_a_stopped_run_left_out_is_built_by_the_next_run(  # type: ignore[no-untyped-def]
    tmp_path: Path, embedder
) -> None:
    """A run cancelled after writing a batch skips the ANN build (ingest.ann_min_rows reached); the
    next run builds it though it finds every document unchanged."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpine meadows\n\nA short note on alpine meadows in June.\n")
    (docs / "b.md").write_text("# Heathland\n\nHeather flowers in late summer on the heath.\n")
    cancelled = threading.Event()
    counting = _Counting(embedder, lambda n: cancelled.set())  # as a.md is embedded: b.md is dropped
    pipeline = plain_pipeline(tmp_path, counting, 512, 200_000, batch_chunks=1, ann_min_rows=1)
    with pytest.raises(Cancelled):
        list(pipeline.run(collect_paths([str(docs)], EVERYWHERE), "default", cancelled=cancelled))
    assert not VectorStore(tmp_path / "lance", embedder.dimension).has_ann_index()
    summary = list(pipeline.run(collect_paths([str(docs / "a.md")], EVERYWHERE), "default"))[-1]
    assert summary.unchanged == 1 and summary.indexed == 0  # type: ignore[union-attr]
    assert VectorStore(tmp_path / "lance", embedder.dimension).has_ann_index()
