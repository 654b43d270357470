"""Heavy shared objects, built once per process by the composition root and handed to services."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragstack.config import Config

if TYPE_CHECKING:
    from pathlib import Path

    from ragstack.embedding import Embedder
    from ragstack.guard.databases import DatabaseGuard
    from ragstack.llm import LLM
    from ragstack.tuning.shelf import Shelf


class Resources:
    def __init__(self, cfg: Config, environ: Mapping[str, str] | None = None) -> None:
        """`environ`: where `${NAME}` in database URLs is read (the process environment by default)."""
        self.cfg = cfg
        self.environ: Mapping[str, str] = os.environ if environ is None else environ

    @functools.cached_property
    def embedder(self) -> Embedder:
        from ragstack.embedding import Embedder

        m = self.cfg.models
        return Embedder(m.embedder_dir, m.provider, m.batch_size, m.max_length, m.threads)

    @functools.cached_property
    def query_embedder(self) -> Embedder:
        """The embedder search queries go through (`retrieve.query_precision`): the same model with
        int8 weights when installed (on CPU, for auto), else the embedder itself (with a warning
        naming the fix when int8 was wanted)."""
        from ragstack.embedding import Embedder
        from ragstack.models import QUANTIZED, int8_installed

        m = self.cfg.models
        precision = self.cfg.retrieve.query_precision
        on_gpu = "CUDAExecutionProvider" in self.embedder.providers
        if precision == "fp32" or (precision == "auto" and on_gpu):
            return self.embedder
        if not int8_installed(m.embedder_dir, "retrieve.query_precision", "ragstack models install"):
            return self.embedder
        return Embedder(m.embedder_dir, m.provider, m.batch_size, m.max_length, m.query_threads, QUANTIZED)

    @functools.cached_property
    def tuned_embedders(self) -> Shelf[Embedder]:
        """Libraries' tuned embedders by name (`models.tuned_dir`), loaded when first named, fp32."""
        from ragstack.embedding import Embedder
        from ragstack.tuning.shelf import Shelf

        m = self.cfg.models
        return Shelf(
            self.embedder,
            m.tuned_folder,
            lambda p: Embedder(p, m.provider, m.batch_size, m.max_length, m.threads),
        )

    @functools.cached_property
    def tuned_query_embedders(self) -> Shelf[Embedder]:
        """The same for search queries, in the precision `query_embedder` has."""
        from ragstack.embedding import Embedder
        from ragstack.models import QUANTIZED
        from ragstack.tuning.shelf import Shelf

        m = self.cfg.models
        base = self.query_embedder
        if base is self.embedder:
            return self.tuned_embedders

        def load(path: Path) -> Embedder:
            if not (path / QUANTIZED).is_file():
                return self.tuned_embedders.get(path.name)
            return Embedder(path, m.provider, m.batch_size, m.max_length, m.query_threads, QUANTIZED)

        return Shelf(base, m.tuned_folder, load)

    @functools.cached_property
    def parser(self) -> Any:
        """spaCy's tagger and parser (`ragstack.nlp`)."""
        from ragstack.nlp import load_parser

        return load_parser()

    @functools.cached_property
    def llm(self) -> LLM:
        from ragstack.llm import LLM

        return LLM(self.cfg.llm)

    @functools.cached_property
    def database_guard(self) -> DatabaseGuard:
        """What databases may be opened, and the environment their `${NAME}` is read from."""
        from ragstack.guard.databases import DatabaseGuard

        return DatabaseGuard.from_config(self.cfg.sql, self.cfg.data_dir, self.environ)
