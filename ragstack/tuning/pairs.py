"""Training pairs for a corpus-adapted embedder, made from a library's own chunks (no labels, no
queries): each pair is an anchor and the passage it came from, and the other passages of a batch
are its negatives.

Two kinds, both general; headings are the default (chosen on SciFact train: README, Results):
- heading: a chunk's heading path (title > section) as the anchor, its text as the passage, once
  per distinct heading path (a heading shared by many chunks would make true pairs negatives);
- sentence (the inverse cloze task): one sentence of a chunk as the anchor, the chunk without it
  as the passage, as the index embeds it (heading path first).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragstack.text import split_sentences, words

MIN_ANCHOR_WORDS = 4  # a sentence anchor shorter than this says too little to find its passage
MIN_PASSAGE_WORDS = 12
KINDS = {"heading": ("heading",), "sentence": ("sentence",), "both": ("heading", "sentence")}


@dataclass(frozen=True)
class PairSource:
    """What a pair is made from: one chunk's heading path and text."""

    heading_path: tuple[str, ...]
    text: str


def training_pairs(
    chunks: Iterable[PairSource],
    max_pairs: int,
    seed: int = 0,
    kinds: Sequence[str] = ("heading",),
) -> list[tuple[str, str]]:
    """At most `max_pairs` (anchor, passage) pairs, in a shuffled order fixed by `seed`."""
    rng = random.Random(seed)
    pairs: list[tuple[str, str]] = []
    seen_headings: set[str] = set()
    for chunk in chunks:
        text = chunk.text.strip()
        if len(words(text)) < MIN_PASSAGE_WORDS:
            continue
        heading = " > ".join(h for h in chunk.heading_path if h.strip())
        if "heading" in kinds and heading and heading.casefold() not in seen_headings:
            seen_headings.add(heading.casefold())
            pairs.append((heading, text))
        if "sentence" in kinds:
            pair = _cloze(heading, text, rng)
            if pair is not None:
                pairs.append(pair)
    rng.shuffle(pairs)
    return pairs[:max_pairs]


def _cloze(heading: str, text: str, rng: random.Random) -> tuple[str, str] | None:
    sentences = split_sentences(text)
    usable = [i for i, s in enumerate(sentences) if len(words(s)) >= MIN_ANCHOR_WORDS]
    if len(sentences) < 2 or not usable:
        return None
    pick = rng.choice(usable)
    rest = " ".join(s for i, s in enumerate(sentences) if i != pick)
    if len(words(rest)) < MIN_PASSAGE_WORDS:
        return None
    return sentences[pick], (f"{heading}\n{rest}" if heading else rest)
