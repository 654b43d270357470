"""A library's own embedder (`TuneEmbedder`): the bundled MiniLM fine-tuned on the library's
passages (ragstack/tuning), then the library re-embedded with it. Searches keep the old vectors
until the new ones are complete: they are computed beside the index, and swapped in for the whole
library in one commit under the stores' lock, with any chunk written meanwhile embedded then too.
Revert re-embeds the library with the configured embedder the same way.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from ragstack.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted
from ragstack.models import InstallError
from ragstack.tuning.pairs import KINDS, PairSource, training_pairs
from ragstack.tuning.tune import TuneProgress, TuneSettings, TuneStep, train_and_export
from services.ingest.dense_windows import embedded_form

EMBED_BATCH = 256
DEFAULT_PAIRS = 10_000  # about half an hour an epoch on 2 cores
MAX_PAIRS = 100_000


class VectorTable(Protocol):
    def library_embedder(self, library: str) -> str: ...
    def library_texts(self, library: str) -> pa.Table: ...
    def replace_vectors(self, library: str, vectors: dict[str, np.ndarray], embedder: str) -> int: ...


@dataclass(frozen=True)
class Tuned:
    embedder: str  # the library's embedder now ("" the configured one)
    previous: str
    pairs: int
    chunks: int
    seconds: float


class Tuner:
    def __init__(
        self,
        vectors: VectorTable,
        exclusive: Callable[[], AbstractContextManager[None]],
        embed: Callable[[str, Sequence[tuple[Sequence[str], str]]], list[np.ndarray]],
        folder: Path,
        tool_env: Path,
        check: Callable[[Path], None],
        clock: Callable[[], float] = time.monotonic,
        recentre: Callable[[str], None] | None = None,
    ) -> None:
        """`embed`: (heading path, text) pairs' window vectors by a model named ("" the configured
        one; IngestPipeline.embed); `folder`: where tuned embedders
        are installed; `tool_env`: the export's tool environment (torch, optimum), where training
        runs; `check`: loads an installed embedder (refusing one that does not load); `recentre`:
        the graph's community vectors of a library made again from its new chunk vectors."""
        self._recentre = recentre
        self._vectors = vectors
        self._exclusive = exclusive
        self._embed_by = embed
        self._folder = folder
        self._tool_env = tool_env
        self._check = check
        self._clock = clock
        self._running: set[str] = set()
        self._lock = threading.Lock()

    def tune(
        self, library: str, settings: TuneSettings, max_pairs: int, kinds: str, progress: TuneProgress
    ) -> Tuned:
        with self._one_at_a_time(library):
            started = self._clock()
            previous = self._vectors.library_embedder(library)
            rows = self._rows(library)
            sources = (
                PairSource(tuple(h or ()), t or "")
                for h, t in zip(rows["heading_path"], rows["text"], strict=True)
            )
            pairs = training_pairs(sources, max_pairs, settings.seed, KINDS[kinds])
            progress(TuneStep("pairs", len(pairs), len(pairs)))
            name = _name(library, pairs, settings)
            target = self._folder / name
            try:
                train_and_export(pairs, target, self._tool_env, settings, progress, self._check)
            except InstallError as err:
                raise FailedPrecondition(f"tuning the embedder failed: {err}") from None
            count = self._reembed(library, name, progress)
            return Tuned(name, previous, len(pairs), count, self._clock() - started)

    def revert(self, library: str, progress: TuneProgress) -> Tuned:
        with self._one_at_a_time(library):
            started = self._clock()
            previous = self._vectors.library_embedder(library)
            if not previous:
                raise FailedPrecondition(f"library {library!r} already uses the configured embedder")
            count = self._reembed(library, "", progress)
            return Tuned("", previous, 0, count, self._clock() - started)

    def reembed(self, library: str, progress: TuneProgress) -> Tuned:
        """The library embedded again by the embedder it has, in today's windows."""
        with self._one_at_a_time(library):
            started = self._clock()
            current = self._vectors.library_embedder(library)
            count = self._reembed(library, current, progress)
            return Tuned(current, current, 0, count, self._clock() - started)

    def _rows(self, library: str) -> dict[str, list[Any]]:
        rows = self._vectors.library_texts(library).to_pydict()
        if not rows["chunk_id"]:
            raise NotFound(f"library {library!r} has no chunks to tune on")
        return rows

    def _reembed(self, library: str, name: str, progress: TuneProgress) -> int:
        """Every chunk embedded with `name` beside the index, then swapped in all at once."""
        done = self._embed(name, self._rows(library), {}, progress)
        with self._exclusive():  # no batch is written meanwhile; those written since are embedded now
            late = self._embed(name, self._vectors.library_texts(library).to_pydict(), done, progress)
            count = self._vectors.replace_vectors(library, {c: v for (c, _), v in late.items()}, name)
            if self._recentre is not None:  # communities are found by their chunks' mean vector
                self._recentre(library)
            return count

    def _embed(
        self,
        name: str,
        rows: dict[str, list[Any]],
        known: dict[tuple[str, str], np.ndarray],
        progress: TuneProgress,
    ) -> dict[tuple[str, str], np.ndarray]:
        """Window vectors keyed by (chunk id, text as embedded): those in `known` are kept, the
        rest made by the model `name`."""
        chunks = {
            (str(c), embedded_form(h or (), str(t or ""))): (tuple(h or ()), str(t or ""))
            for c, h, t in zip(rows["chunk_id"], rows["heading_path"], rows["text"], strict=True)
        }
        out = {k: known[k] for k in chunks if k in known}
        todo = [k for k in chunks if k not in out]
        for i in range(0, len(todo), EMBED_BATCH):
            part = todo[i : i + EMBED_BATCH]
            out.update(zip(part, self._embed_by(name, [chunks[k] for k in part]), strict=True))
            progress(TuneStep("embedding", min(i + EMBED_BATCH, len(todo)), len(todo)))
        return out

    @contextmanager
    def _one_at_a_time(self, library: str) -> Iterator[None]:
        with self._lock:
            if library in self._running:
                raise AlreadyExists(f"library {library!r} is being tuned already")
            if self._running:  # a trainer takes both cores and about 4 GB: one at a time
                raise ResourceExhausted(
                    f"library {sorted(self._running)[0]!r} is being tuned: one tuning at a time per "
                    "ingest service"
                )
            self._running.add(library)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(library)


def _name(library: str, pairs: list[tuple[str, str]], settings: TuneSettings) -> str:
    """`<library>-<hash of the pairs and settings>`: the same corpus and settings name the same model."""
    digest = hashlib.sha256(repr((pairs, settings)).encode()).hexdigest()[:12]
    stem = "".join(ch if ch.isalnum() else "-" for ch in library.lower()).strip("-")[:48] or "library"
    return f"{stem}-{digest}"


def same_dimension(check: Callable[[Path], None], dimension: int) -> Callable[[Path], None]:
    """`check`, and the model's vectors as long as the index's (its table holds one size)."""

    def checked(folder: Path) -> None:
        check(folder)
        from ragstack.embedding import Embedder

        found = Embedder(folder).dimension
        if found != dimension:
            raise InstallError(
                f"the tuned model gives {found}-dimensional vectors, the index holds {dimension}"
            )

    return checked


def check_settings(epochs: float, max_pairs: int, kinds: str) -> None:
    if kinds not in KINDS:
        raise InvalidArgument(f"pairs {kinds!r} is none of {', '.join(KINDS)}")
    if not 0 < epochs <= 10:
        raise InvalidArgument(f"epochs {epochs} is out of range (0, 10]")
    if not 2 <= max_pairs <= MAX_PAIRS:
        raise InvalidArgument(f"max_pairs {max_pairs} is out of range 2..{MAX_PAIRS}")
