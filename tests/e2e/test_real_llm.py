"""The LLM paths against a real small model (SmolLM2-135M-Instruct, GGUF, through llama-cpp-python)
behind our Ollama-protocol server, through the real `ollama` client: streamed generation in the agent,
JSON-mode graph extraction, and the LLM judge. A 135M model answers poorly; these tests check that
every path runs for real and that its guards hold, not the answers' quality."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragstack.config import LLMConfig
from ragstack.domain import Chunk, Evidence, Verdict
from ragstack.llm import LLM
from tests.tools.ollama_server import TEST_MODEL

MODEL = "smollm2"
pytestmark = pytest.mark.slow  # a model load and a few generations; `make test-fast` skips them


@dataclass
class RunningModel:
    url: str


@pytest.fixture(scope="module")
def server() -> Iterator[RunningModel]:
    """The model server in a process of its own, as Ollama runs; it must still be up at the end (a
    crash of it would otherwise pass as the offline fallback)."""
    if importlib.util.find_spec("llama_cpp") is None:  # not imported here: the server process loads it
        pytest.fail("llama-cpp-python is missing: run scripts/test_llm.sh (make test does it)")
    if not TEST_MODEL.is_file():
        pytest.fail(f"no test model at {TEST_MODEL}: run scripts/test_llm.sh (make test does it)")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.tools.ollama_server", "--port", "0", "--name", MODEL],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "serving ... at http://127.0.0.1:PORT"
    try:
        assert " at http://" in line, f"the test model server did not start: {line!r}"
        yield RunningModel(line.rsplit(" at ", 1)[1].strip())
        assert proc.poll() is None, "the test model server died during the tests"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


def llm_for(server: RunningModel) -> LLM:
    return LLM(LLMConfig(host=server.url, model=MODEL, timeout_s=120))


async def test_the_agent_streams_a_real_model_and_verifies_it(
    server: RunningModel, tmp_path: Path, resources, corpus
) -> None:  # type: ignore[no-untyped-def]
    from ragstack import domain as d
    from ragstack.resources import Resources
    from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
    from ragstack.serve import start_stack
    from tests.conftest import make_config

    cfg = make_config(
        tmp_path / "data",
        llm={"enabled": True, "host": server.url, "model": MODEL, "timeout_s": 120},
        ingest={"graph_llm": False},  # one LLM call per chunk would take minutes here
        # A 135M model seldom cites: kept as written, so this test sees the model's own answer.
        generation={"citation_policy": "keep"},
    )
    res = Resources(cfg)
    res.__dict__["embedder"] = resources.embedder
    stack = await start_stack(cfg, resources=res)
    try:
        channel = open_channel(stack.peers["ingest"])
        [e async for e in IngestClient(channel, 600).ingest(paths=[str(corpus / "bm25.md")])]
        await channel.close()
        channel = open_channel(stack.peers["agent"])
        events = [e async for e in AgentClient(channel, 300).ask("What does BM25 score?")]
        await channel.close()
    finally:
        await stack.stop()
    deltas = [e for e in events if isinstance(e, d.DeltaEvent)]
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.generator == f"llm:{MODEL}"
    assert len(deltas) >= 2  # streamed, piece by piece
    assert done.manifest.method in (f"llm:{MODEL}", "offline") and done.manifest.claims
    assert done.citations  # listed whether the draft was delivered or withheld


async def test_active_retrieval_runs_with_a_real_model(
    server: RunningModel, tmp_path: Path, resources, corpus
) -> None:  # type: ignore[no-untyped-def]
    """With generation.active_retrieval_rounds on, a real model's draft goes through the verifier
    before anything streams; what streams is the answer that stands, and the done event and the
    trace say what active retrieval did."""
    from ragstack import domain as d
    from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
    from tests.conftest import make_config, start_with

    cfg = make_config(
        tmp_path / "data",
        llm={"enabled": True, "host": server.url, "model": MODEL, "timeout_s": 120},
        ingest={"graph": False},
        verify={"llm_judge": False},
        generation={"active_retrieval_rounds": 1},
    )
    stack = await start_with(cfg, resources)
    try:
        channel = open_channel(stack.peers["ingest"])
        [
            e
            async for e in IngestClient(channel, 600).ingest(
                paths=[str(corpus / "bm25.md"), str(corpus / "chunking.md")]
            )
        ]
        await channel.close()
        channel = open_channel(stack.peers["agent"])
        events = [
            e async for e in AgentClient(channel, 300).ask("What does BM25 score, and how are chunks cut?")
        ]
        trace = await AgentClient(channel, 30).get_trace(events[-1].trace_id)  # type: ignore[union-attr]
        await channel.close()
    finally:
        await stack.stop()
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.active_retrieval is not None
    active = done.active_retrieval
    assert active.rounds <= 1 and len(active.queries) <= 3 and (active.rounds == 0) == (not active.queries)
    searches = [e for e in events if isinstance(e, d.ToolCallEvent) and e.tool == "active_search"]
    assert len(searches) == len(active.queries)
    if not done.abstained:
        assert "".join(e.text for e in events if isinstance(e, d.DeltaEvent)).strip() == done.answer
    assert trace["active_retrieval"]["rounds"] == active.rounds and trace["active_retrieval"]["first_draft"]


def test_graph_extraction_in_json_mode_stays_grounded(server: RunningModel) -> None:
    from services.ingest.graph_extract import EntityExtractor
    from services.ingest.llm_extract import LLMExtractor

    text = "Jeff Porcaro played drums for Toto. Toto was formed in Los Angeles in 1977."
    extractor = LLMExtractor(llm_for(server), EntityExtractor())
    mentions, relations = extractor.extract([Chunk("d:0", "d", "lib", text)])
    assert extractor.counts["llm"] + extractor.counts["offline"] == 1
    assert mentions and all(m.name.lower() in text.lower() for m in mentions)  # never a name the text lacks
    keys = {m.key for m in mentions}
    assert all(r.source in keys and r.target in keys for r in relations)


def test_the_llm_judge_cannot_pass_a_changed_number(server: RunningModel, embedder) -> None:  # type: ignore[no-untyped-def]
    from services.verify.checker import OfflineChecker, Verifier
    from services.verify.llm_judge import LLMJudge

    evidence = [Evidence("1", "bm25:0", "Lucene and tantivy default to k1 = 1.2 and b = 0.75.")]
    verifier = Verifier(OfflineChecker(embedder, 0.6, 0.4), 0.5, LLMJudge(llm_for(server)))
    v = verifier.verify("Tantivy defaults to k1 = 1.5 [1].", evidence, 0.9)
    assert v.manifest.method in (f"llm:{MODEL}", "offline")
    assert all(c.verdict == Verdict.UNSUPPORTED for c in v.manifest.claims) and v.abstain
