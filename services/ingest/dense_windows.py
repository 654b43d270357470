"""What the embedder sees of a chunk: its heading path and text, in windows of the length the
embedder learned on.

all-MiniLM-L6-v2 was trained on 128 word pieces and truncates at `models.max_length` (256), while
chunks hold up to `ingest.chunk_tokens` (512): embedded whole, a long chunk's end never reached
the dense index, and what did was averaged into one vector. So a chunk longer than
`models.window_tokens` is embedded as windows of whole sentences, each after the chunk's heading
path. The vector store keeps every window's vector and search ranks the chunk by its best window;
the chunk's own vector (the first search stage, communities, feedback) is the windows' mean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from services.ingest.chunker import pack_sentences

SPECIAL_TOKENS = 2  # [CLS] and [SEP] around every text the embedder reads
# Texts given to the embedder at once (more when its batch is larger: a GPU's is): `checkpoint`
# runs between such slices, so a cancelled ingest waits for one slice (a second or two on two
# cores), not for its whole batch.
EMBED_SLICE = 64


class Embeds(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...
    def count_tokens(self, text: str) -> int: ...


def embedded_form(heading_path: Sequence[str], text: str) -> str:
    """A chunk (or a window of it) as the embedder reads it: the heading path situates it."""
    return " > ".join(heading_path) + "\n" + text


def window_texts(heading_path: Sequence[str], text: str, window_tokens: int, embedder: Embeds) -> list[str]:
    """The texts a chunk is embedded as: itself when it fits `window_tokens` (or windows are off,
    0), else windows of its sentences, each after the heading path (cut to half a window at most)."""
    whole = embedded_form(heading_path, text)
    count = embedder.count_tokens
    if window_tokens <= 0 or count(whole) + SPECIAL_TOKENS <= window_tokens:
        return [whole]
    room = window_tokens - SPECIAL_TOKENS
    head = " > ".join(heading_path)
    if head and count(head) > room // 2:
        head = pack_sentences(head, room // 2, count)[0]
    budget = max(1, room - (count(head) if head else 0))
    return [head + "\n" + piece for piece in pack_sentences(text, budget, count)] or [whole]


def embed_chunks(
    embedder: Embeds,
    chunks: Sequence[tuple[Sequence[str], str]],
    window_tokens: int,
    checkpoint: Callable[[], None] = lambda: None,
) -> list[np.ndarray]:
    """Each (heading path, text)'s window vectors, one row a window, in input order. The windows
    go to the embedder shortest first, a slice at a time (EMBED_SLICE, or the embedder's
    `batch_size` when larger), so its batches are filled by length; `checkpoint` runs before
    each slice (it raises to stop the embedding)."""
    texts: list[str] = []
    counts: list[int] = []
    for heading_path, text in chunks:
        windows = window_texts(heading_path, text, window_tokens, embedder)
        texts.extend(windows)
        counts.append(len(windows))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    rows: list[np.ndarray] = [np.empty(0)] * len(texts)
    size = max(EMBED_SLICE, getattr(embedder, "batch_size", 0))
    for start in range(0, len(order), size):
        checkpoint()
        picked = order[start : start + size]
        for i, row in zip(picked, embedder.embed([texts[i] for i in picked]), strict=True):
            rows[i] = row
    bounds = np.cumsum([0, *counts])
    return [np.stack(rows[bounds[i] : bounds[i + 1]]) for i in range(len(counts))]
