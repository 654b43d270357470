"""FLARE-style active retrieval through the real stack, the real `ollama` client and a scripted LLM
server: a claim of the first draft the verifier does not support is searched for, the chunk found is
merged into the evidence, and the redraft cites it. The first draft never reaches the stream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragstack import domain as d
from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
from services.agent.stages.active import low_confidence_spans, merge
from tests.conftest import make_config, start_with
from tests.tools.ollama_server import OllamaServer

BRIDGE = "# Lumen bridge\n\nThe Lumen bridge over the Ostra river was designed by the engineer Ada Varga.\n"
BIRTH = "# Ada Varga\n\nAda Varga was born in 1890 in the harbour town of Sellin, on the northern coast.\n"
FILLER = "# Tides\n\nTides at the northern coast rise twice a day and are strongest in spring.\n"
FIRST = "The Lumen bridge was designed by Ada Varga [1]. Ada Varga was born in Sellin in 1890 [1]."
SECOND = "The Lumen bridge was designed by Ada Varga [1]. Ada Varga was born in Sellin in 1890 [2]."
QUESTION = "Who designed the Lumen bridge?"


def reply(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    if "numbered documents" not in system:
        return "{}"  # the router's structured call: off-schema, so the heuristic routes
    prompt = "\n".join(m["content"] for m in request["messages"])
    return SECOND if "Sellin" in prompt else FIRST


@pytest.fixture(scope="module")
async def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("active")
    for name, text in (("bridge.md", BRIDGE), ("varga.md", BIRTH), ("tides.md", FILLER)):
        (folder / name).write_text(text)
    return folder


async def _ask(
    tmp: Path, resources: Any, library: Path, server: OllamaServer, **generation: Any
) -> list[d.AskEvent]:
    cfg = make_config(
        tmp / "data",
        llm={"enabled": True, "host": server.url, "model": "scripted"},
        verify={"llm_judge": False},
        ingest={"graph": False},
        generation={"recall_memory": False, **generation},
    )
    stack = await start_with(cfg, resources)
    try:
        channel = open_channel(stack.peers["ingest"])
        [e async for e in IngestClient(channel, 120).ingest(paths=[str(library)])]
        await channel.close()
        channel = open_channel(stack.peers["agent"])
        events = [e async for e in AgentClient(channel, 120).ask(QUESTION, top_k=1)]
        await channel.close()
        return events
    finally:
        await stack.stop()


async def test_an_unsupported_claim_is_searched_for_and_the_redraft_cites_what_it_found(
    tmp_path: Path, resources: Any, library: Path
) -> None:
    with OllamaServer("scripted", reply).serve() as server:
        events = await _ask(tmp_path, resources, library, server, active_retrieval_rounds=2)
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.active_retrieval is not None
    active = done.active_retrieval
    assert active.rounds == 1 and active.redrafted
    assert active.queries == ("Ada Varga was born in Sellin in 1890.",) or "Sellin" in active.queries[0]
    searched = [e for e in events if isinstance(e, d.ToolCallEvent) and e.tool == "active_search"]
    assert len(searched) == 1 and searched[0].result_count == 1
    # The chunk it found joined the evidence, and the answer that stands cites it.
    assert len(active.added_chunk_ids) == 1 and active.added_chunk_ids[0] in done.evidence_chunk_ids
    assert done.answer == SECOND and not done.abstained
    cited = {c.chunk.source.rsplit("/", 1)[-1] for c in done.citations}
    assert cited == {"bridge.md", "varga.md"}
    assert all(c.verdict == d.Verdict.SUPPORTED for c in done.manifest.claims)
    # Only the answer that stands was streamed: the first draft was held back.
    streamed = "".join(e.text for e in events if isinstance(e, d.DeltaEvent))
    assert streamed == SECOND


async def test_without_active_retrieval_the_first_draft_stands(
    tmp_path: Path, resources: Any, library: Path
) -> None:
    with OllamaServer("scripted", reply).serve() as server:
        events = await _ask(tmp_path, resources, library, server)
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.active_retrieval is None
    assert done.answer == FIRST or done.abstained
    assert not any(isinstance(e, d.ToolCallEvent) and e.tool == "active_search" for e in events)
    unsupported = [c for c in done.manifest.claims if c.verdict != d.Verdict.SUPPORTED]
    assert unsupported and "Sellin" in unsupported[0].claim


def _hit(chunk_id: str, score: float) -> d.SearchHit:
    return d.SearchHit(d.Chunk(chunk_id, chunk_id.split(":")[0], "default", chunk_id), score)


def test_merge_keeps_each_chunk_once_with_its_better_score() -> None:
    held = [_hit("a:0", 0.9), _hit("b:0", 0.2)]
    found = [_hit("b:0", 0.5), _hit("c:0", 0.4), _hit("d:0", 0.7), _hit("c:0", 0.6), _hit("a:0", 0.1)]
    merged, added = merge(held, found, limit=1)
    assert [(h.chunk.chunk_id, h.score) for h in merged] == [("a:0", 0.9), ("b:0", 0.5), ("d:0", 0.7)]
    assert added == ["d:0"]
    assert merge(held, [_hit("a:0", 0.3)], 3) == (held, [])


def test_the_spans_are_the_claims_not_supported_the_weakest_first() -> None:
    def claim(text: str, verdict: d.Verdict, confidence: float) -> d.Claim:
        return d.Claim("c", text, ("1",), verdict, confidence, "")

    manifest = d.Manifest(
        (
            claim("Kept.", d.Verdict.SUPPORTED, 0.9),
            claim("Partly  so.", d.Verdict.PARTIAL, 0.6),
            claim("Not so.", d.Verdict.UNSUPPORTED, 0.7),
            claim("Not so.", d.Verdict.UNSUPPORTED, 0.2),
        )
    )
    assert low_confidence_spans(d.Verification(manifest, 0.5, False)) == ["Not so.", "Partly so."]
