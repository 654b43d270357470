"""Heavy shared objects, built once per process by the composition root and handed to services."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ragstack.config import Config

if TYPE_CHECKING:
    from ragstack.embedding import Embedder
    from ragstack.llm import LLM


class Resources:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    @functools.cached_property
    def embedder(self) -> Embedder:
        from ragstack.embedding import Embedder

        m = self.cfg.models
        return Embedder(m.embedder_dir, m.provider, m.batch_size, m.max_length, m.threads)

    @functools.cached_property
    def llm(self) -> LLM:
        from ragstack.llm import LLM

        return LLM(self.cfg.llm)
