"""RAGStack inside your program: the four services run in this process, on loopback ports of their
own that you never see, with the stores in a data directory of your choosing.

    from ragstack import RAG

    with RAG("./rag-data") as rag:
        rag.ingest(["docs/"])
        done = rag.ask("How do I rotate the API key?")
        print(done.answer, [c.chunk.source for c in done.citations], done.manifest.supported_ratio)

`AsyncRAG` is the same for asyncio code. Results are the typed domain objects the gRPC client
returns (`ragstack.domain`). Your program is the only caller: it may ingest any path it can read.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragstack import domain as d
from ragstack.config import Config, default_config_path, load_config

T = TypeVar("T")
Progress = Callable[[d.FileProgress], None]


def _config(data_dir: str | Path | None, config: str | Path | None, environ: dict[str, str] | None) -> Config:
    path = Path(config) if config is not None else default_config_path()
    cfg = load_config(path, os.environ if environ is None else environ)
    if data_dir is not None:
        cfg.data_dir = Path(data_dir).expanduser().absolute()
    return cfg


class AsyncRAG:
    """The embedded stack for asyncio code: `async with AsyncRAG(data_dir) as rag: ...`. Without
    `data_dir` the config's (by default the user's data folder); `config`: a ragstack.yaml to read
    instead of ./ragstack.yaml or the user's; `environ`: RAGSTACK__* overrides (default: the
    process's environment)."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        config: str | Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.config = _config(data_dir, config, environ)
        self._stack: Any = None
        self._channels: list[Any] = []

    async def __aenter__(self) -> AsyncRAG:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        from ragstack.cli.session import embedded_config
        from ragstack.rpc.clients import AgentClient, IngestClient, RetrieveClient, open_channel
        from ragstack.serve import start_stack

        cfg = embedded_config(self.config, allow_paths=["/"])
        self._stack = await start_stack(cfg, gateway=False)
        peers, token, deadlines = self._stack.peers, cfg.services.token, cfg.deadlines
        self._channels = [open_channel(peers[n], token=token) for n in ("agent", "ingest", "retrieve")]
        self._agent = AgentClient(self._channels[0], deadlines.agent_s)
        self._ingest = IngestClient(self._channels[1], deadlines.ingest_s)
        self._retrieve = RetrieveClient(self._channels[2], deadlines.retrieve_s)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
        self._channels = []
        if self._stack is not None:
            await self._stack.stop()
            self._stack = None

    async def ingest(
        self,
        paths: Sequence[str | Path],
        library: str = "",
        prune: bool = False,
        groups: Sequence[str] = (),
        on_progress: Progress | None = None,
    ) -> d.IngestSummary:
        """Files and folders into `library`; unchanged files are skipped, a file that fails is
        listed in the summary. `on_progress` gets each file's progress as it happens."""
        summary = d.IngestSummary()
        async for event in self._ingest.ingest(
            paths=_absolute(paths), library=library, prune=prune, groups=groups
        ):
            if isinstance(event, d.IngestSummary):
                summary = event
            elif on_progress is not None:
                on_progress(event)
        return summary

    async def search(
        self, query: str, library: str = "", top_k: int = 0, mode: str = "hybrid"
    ) -> list[d.SearchHit]:
        """Ranked chunks, each with its document, heading path, pages and score."""
        hits, _ = await self._retrieve.search(query, library, top_k, d.SearchMode(mode))
        return hits

    async def ask(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> d.DoneEvent:
        """The answer: text, citations, confidence, the verification manifest, the trace id."""
        async for event in self.stream(question, library, mode, top_k, session_id):
            if isinstance(event, d.DoneEvent):
                return event
        raise RuntimeError("the agent ended the stream without an answer")

    async def stream(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> AsyncGenerator[d.AskEvent, None]:
        """Every event of the answer as it happens (route, tool calls, evidence, text, verification),
        the `DoneEvent` last."""
        async for event in self._agent.ask(question, library, d.SearchMode(mode), top_k, session_id):
            yield event

    async def documents(self, library: str = "") -> list[d.Document]:
        return await self._ingest.list_documents(library)

    async def delete_document(self, document_id: str, library: str = "") -> int:
        """Removes a document from every store; returns the chunks removed."""
        return await self._ingest.delete_document(document_id, library)


class RAG:
    """The embedded stack for ordinary code: `with RAG(data_dir) as rag: ...`. Its services run on
    an event loop of their own, in a thread, so it also works inside a program that has one."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        config: str | Path | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self._rag = AsyncRAG(data_dir, config, environ)
        self.config = self._rag.config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> RAG:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ragstack", daemon=True)
        self._thread.start()
        try:
            self._call(self._rag.open())
        except BaseException:
            self._stop_loop()
            raise

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._call(self._rag.close())
        finally:
            self._stop_loop()

    def ingest(
        self,
        paths: Sequence[str | Path],
        library: str = "",
        prune: bool = False,
        groups: Sequence[str] = (),
        on_progress: Progress | None = None,
    ) -> d.IngestSummary:
        return self._call(self._rag.ingest(paths, library, prune, groups, on_progress))

    def search(
        self, query: str, library: str = "", top_k: int = 0, mode: str = "hybrid"
    ) -> list[d.SearchHit]:
        return self._call(self._rag.search(query, library, top_k, mode))

    def ask(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> d.DoneEvent:
        return self._call(self._rag.ask(question, library, mode, top_k, session_id))

    def stream(
        self, question: str, library: str = "", mode: str = "auto", top_k: int = 0, session_id: str = ""
    ) -> Iterator[d.AskEvent]:
        events = self._rag.stream(question, library, mode, top_k, session_id)
        try:
            while True:
                try:
                    yield self._call(events.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(events.aclose())

    def documents(self, library: str = "") -> list[d.Document]:
        return self._call(self._rag.documents(library))

    def delete_document(self, document_id: str, library: str = "") -> int:
        return self._call(self._rag.delete_document(document_id, library))

    def _call(self, work: Awaitable[T]) -> T:
        if self._loop is None:
            if asyncio.iscoroutine(work):
                work.close()  # never to run
            raise RuntimeError("RAG is closed: use `with RAG(...) as rag:` or call open() first")
        return asyncio.run_coroutine_threadsafe(_awaited(work), self._loop).result()

    def _stop_loop(self) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = self._thread = None


def _absolute(paths: Sequence[str | Path]) -> list[str]:
    """Absolute: the ingest service resolves relative paths against its own folder."""
    return [os.path.abspath(os.path.expanduser(p)) for p in paths]


async def _awaited(work: Awaitable[T]) -> T:
    return await work
