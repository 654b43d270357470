"""What the agent needs of its peers: the factory plugs in gRPC clients, the tests doubles."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any, Protocol

from ragstack import domain as d


class RetrieverPort(Protocol):
    async def search(
        self,
        query: str,
        library: str,
        top_k: int,
        mode: d.SearchMode,
        where: d.SearchFilter | None = None,
        *,
        expand_context: bool = False,
    ) -> tuple[list[d.SearchHit], d.SearchMode]: ...
    async def score(self, query: str, texts: Sequence[str]) -> list[float]: ...
    async def get_chunk(self, chunk_id: str, library: str = "") -> d.Chunk: ...
    async def databases(self, library: str, question: str = "") -> list[d.Database]: ...
    async def sql(self, library: str, database: str, sql: str, max_rows: int = 0) -> d.SqlResult: ...


class VerifierPort(Protocol):
    async def verify(
        self, answer: str, evidence: Sequence[d.Evidence], evidence_score: float
    ) -> d.Verification: ...


class LLMPort(Protocol):
    @property
    def name(self) -> str: ...
    async def available(self) -> bool: ...
    def chat_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any]) -> str: ...
    def stream_chat(self, messages: Sequence[dict[str, str]]) -> AsyncGenerator[str, None]: ...
