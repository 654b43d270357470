"""Heavy shared objects, built once per process by the composition root and handed to services."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ragstack.config import Config

if TYPE_CHECKING:
    from ragstack.embedding import Embedder
    from ragstack.guard.databases import DatabaseGuard
    from ragstack.llm import LLM


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
