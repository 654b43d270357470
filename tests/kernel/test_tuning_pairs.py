"""Training pairs for a library's own embedder, made from its chunks alone."""

from __future__ import annotations

from ragstack.tuning.pairs import PairSource, training_pairs
from ragstack.tuning.shelf import tuned_name_ok

LONG = (
    "Tidal turbines convert the kinetic energy of moving seawater into electricity. "
    "They are anchored to the seabed where currents run fastest. "
    "Unlike wind, the tides can be predicted years ahead."
)


def test_heading_and_sentence_pairs_come_from_the_chunk() -> None:
    chunks = [PairSource(("Marine energy", "Tidal turbines"), LONG)]
    pairs = training_pairs(chunks, 10, seed=1, kinds=("heading", "sentence"))
    heading = [p for p in pairs if p[0] == "Marine energy > Tidal turbines"]
    assert heading == [("Marine energy > Tidal turbines", LONG)]
    (sentence,) = [p for p in pairs if p not in heading]
    anchor, passage = sentence
    assert anchor in LONG and anchor not in passage  # the cloze: the sentence is taken out
    assert passage.startswith("Marine energy > Tidal turbines\n")  # as the index embeds a chunk
    assert all(s.strip() in LONG for s in passage.split("\n", 1)[1].split(". "))


def test_a_heading_shared_by_chunks_is_one_pair_and_short_chunks_none() -> None:
    chunks = [PairSource(("Guide", "Setup"), LONG), PairSource(("Guide", "Setup"), LONG + " Again.")]
    chunks.append(PairSource(("Tiny",), "Too short to learn from."))
    pairs = training_pairs(chunks, 100, kinds=("heading",))
    assert [a for a, _ in pairs] == ["Guide > Setup"]


def test_pairs_are_capped_and_fixed_by_the_seed() -> None:
    chunks = [PairSource((f"Section {i}",), LONG.replace("Tidal", f"Tidal-{i}")) for i in range(50)]
    assert len(training_pairs(chunks, 100)) == 50  # headings only, by default
    assert len(training_pairs(chunks, 30, seed=3)) == 30
    assert training_pairs(chunks, 30, seed=3) == training_pairs(chunks, 30, seed=3)
    assert training_pairs(chunks, 30, seed=3) != training_pairs(chunks, 30, seed=4)


def test_tuned_names_are_one_folder() -> None:
    assert tuned_name_ok("scifact-0123456789ab")
    for bad in ["", "../models", "a/b", ".hidden", "UPPER", "x" * 97, "a..b"]:
        assert not tuned_name_ok(bad), bad


def test_one_tuning_at_a_time_per_service(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import contextlib

    import pytest

    from ragstack.errors import AlreadyExists, ResourceExhausted
    from services.ingest.tuning import Tuner

    tuner = Tuner(None, contextlib.nullcontext, lambda n: None, tmp_path, tmp_path, lambda p: None)  # type: ignore[arg-type]
    with tuner._one_at_a_time("a"):
        with pytest.raises(AlreadyExists, match="'a' is being tuned"):
            with tuner._one_at_a_time("a"):
                pass
        with pytest.raises(ResourceExhausted, match="one tuning at a time"):
            with tuner._one_at_a_time("b"):
                pass
    with tuner._one_at_a_time("b"):  # free again once the first has ended
        pass
