"""Contextual enrichment through the real `ollama` client against a scripted Ollama-protocol server:
each new chunk gets the LLM's sentence first, in both stores; a re-ingest asks only for changed
chunks (the cache, on both state backends); without a reachable LLM the chunks are indexed as they
are and the run says so."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import LLMConfig, StateConfig
from ragstack.domain import Chunk, IngestSummary
from ragstack.errors import Cancelled
from ragstack.llm import LLM
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest import enrich
from services.ingest.enrich import Enricher
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import upload_items
from tests.tools import state as state_tools
from tests.tools.ollama_server import OllamaServer

DOC = (
    "# Okapi\n\n## Habitat\n\nIt lives in the rainforests of the Congo.\n\n"
    "## Diet\n\nIt eats leaves and fruit.\n"
)


def pipeline(tmp_path: Path, embedder: Any, llm: LLM | None) -> IngestPipeline:
    return IngestPipeline(
        Catalog(state_tools.store(StateConfig(), tmp_path, catalog_store)),
        VectorStore(tmp_path / "lance", embedder.dimension, writer=True),
        LexicalStore(tmp_path / "tantivy", writer=True),
        embedder,
        chunk_tokens=12,
        overlap_sentences=0,
        max_file_bytes=200_000,
        enricher=Enricher(llm, state_tools.store(StateConfig(), tmp_path, enrich)),
    )


def run(p: IngestPipeline, text: str, enrich: bool = True) -> IngestSummary:
    events = list(p.run(upload_items("default", [("okapi.md", text.encode())]), "default", enrich=enrich))
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    return summary


def test_each_new_chunk_is_situated_once(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    def reply(request: dict[str, Any]) -> str:
        passage = request["messages"][1]["content"].split("<passage", 1)[1]
        return (
            "This passage of the okapi article is about its diet."
            if "eats" in passage
            else ("This passage of the okapi article is about where the okapi lives.")
        )

    with OllamaServer("test", reply).serve() as server:
        p = pipeline(tmp_path, embedder, LLM(LLMConfig(host=server.url, model="test", timeout_s=10)))
        assert run(p, DOC).indexed == 1
        asked = len(server.requests)
        assert asked >= 2  # one per chunk
        hits = LexicalStore(tmp_path / "tantivy").search("where okapi lives rainforests", "default", 5)
        assert hits[0][0].text.startswith(
            "This passage of the okapi article is about where the okapi lives.\n\n"
        )
        dense = VectorStore(tmp_path / "lance", embedder.dimension)._open().to_arrow().to_pylist()
        assert all(r["text"].startswith("This passage of the okapi article") for r in dense)
        assert "document" in server.requests[0]["messages"][1]["content"]  # the document as data

        changed = DOC.replace("leaves and fruit", "leaves, fruit and fungi")
        assert run(p, changed).indexed == 1
        assert len(server.requests) == asked + 1  # only the changed chunk was asked about again


def test_without_an_llm_the_chunks_stay_and_the_run_says_so(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    down = LLM(LLMConfig(host="http://127.0.0.1:9", model="test", timeout_s=2, probe_timeout_s=0.5))
    summary = run(pipeline(tmp_path, embedder, down), DOC)
    assert summary.indexed == 1 and summary.notes == [
        "enrichment skipped: no LLM reachable (llm.host), chunks indexed as they are"
    ]
    hits = LexicalStore(tmp_path / "tantivy").search("rainforests Congo", "default", 5)
    assert hits[0][0].text.startswith("It lives")


def test_the_sentence_cache_answers_a_chunk_asked_about_before(
    state_config: StateConfig, tmp_path: Path
) -> None:
    chunk = Chunk("c1", "d1", "default", "It eats leaves and fruit.", ("Diet",), title="Okapi")
    with OllamaServer("test", lambda request: "The okapi's diet.").serve() as server:
        llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
        first = Enricher(llm, state_tools.store(state_config, tmp_path, enrich))
        assert first.enrich([chunk], {})[0].text == "The okapi's diet.\n\nIt eats leaves and fruit."
        first.close()
        again = Enricher(llm, state_tools.store(state_config, tmp_path, enrich))  # a later run
        assert again.enrich([chunk], {})[0].text.startswith("The okapi's diet.")
        assert again.asked == 0 and len(server.requests) == 1
        again.close()


def test_a_cache_from_before_versions_is_adopted_with_its_sentences(tmp_path: Path) -> None:
    with OllamaServer("test", lambda request: "asked").serve() as server:
        llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
        chunk = Chunk("c1", "d1", "default", "It eats leaves.", title="Okapi")
        probe = Enricher(llm, state_tools.store(StateConfig(), tmp_path / "probe", enrich))
        probe.enrich([chunk], {})
        ((key, _),) = probe._db.all("SELECT key, sentence FROM sentences")  # the key the chunk has
        probe.close()
        with sqlite3.connect(tmp_path / "enrich.sqlite") as old:
            old.execute("CREATE TABLE sentences (key TEXT PRIMARY KEY, sentence TEXT NOT NULL)")
            old.execute("INSERT INTO sentences VALUES (?, 'Cached before.')", (key,))
        old.close()
        cached = Enricher(llm, state_tools.store(StateConfig(), tmp_path, enrich))
        assert cached.enrich([chunk], {})[0].text == "Cached before.\n\nIt eats leaves."
        assert cached.asked == 0
        cached.close()


def test_a_checkpoint_that_raises_stops_the_enrichment_before_the_next_chunk(tmp_path: Path) -> None:
    chunks = [Chunk(f"c{i}", "d1", "default", f"Fact {i} about okapis.", title="Okapi") for i in range(4)]
    checks: list[int] = []

    def checkpoint() -> None:  # an interrupted run's, raising on its second look
        checks.append(1)
        if len(checks) == 2:
            raise Cancelled("stop")

    with OllamaServer("test", lambda request: "An okapi fact.").serve() as server:
        llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
        enricher = Enricher(llm, state_tools.store(StateConfig(), tmp_path, enrich))
        with pytest.raises(Cancelled):
            enricher.enrich(chunks, {}, checkpoint)
        assert enricher.asked == 1 and len(server.requests) == 1
        enricher.close()
