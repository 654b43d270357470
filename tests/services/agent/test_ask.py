"""The answer path with small honest doubles for its peers: a retriever over fixed hits, the real
offline verifier, and a scripted LLM (the real Ollama path is covered where a server runs)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from ragstack import auth
from ragstack import domain as d
from ragstack.config import GenerationConfig
from ragstack.errors import TraceNotFound
from ragstack.traces import TraceStore
from services.agent.ask import Agent
from services.verify.checker import OfflineChecker, Verifier
from tests.conftest import instruction_detector

HITS = [
    d.SearchHit(
        d.Chunk(
            "bm25:1",
            "bm25",
            "default",
            "Lucene and tantivy default to k1 = 1.2 and b = 0.75.",
            ("BM25", "Parameters"),
            (),
            1,
            "BM25",
            "bm25.md",
        ),
        0.03,
        (d.SignalScore("dense", 0.7, 1),),
    ),
    d.SearchHit(
        d.Chunk(
            "rrf:0",
            "rrf",
            "default",
            "RRF adds 1/(k + rank) over the rankings.",
            ("Hybrid",),
            (),
            0,
            "Hybrid",
            "hybrid.md",
        ),
        0.02,
        (d.SignalScore("dense", 0.3, 2),),
    ),
]


class FixedRetriever:
    """Fixed hits; scores texts with the real embedder, as the retrieve service does."""

    def __init__(self, embedder) -> None:  # type: ignore[no-untyped-def]
        self.embedder = embedder
        self.calls: list[tuple[str, d.SearchMode]] = []

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        vectors = self.embedder.embed([query, *texts])
        return [float(x) for x in vectors[1:] @ vectors[0]]

    async def search(
        self, query: str, library: str, top_k: int, mode: d.SearchMode, where=None, expand_context=False
    ):  # type: ignore[no-untyped-def]
        self.calls.append((query, mode))
        return HITS[:top_k], mode


class LocalVerifier:
    def __init__(self, verifier: Verifier) -> None:
        self.verifier = verifier

    async def verify(
        self, answer: str, evidence: Sequence[d.Evidence], evidence_score: float
    ) -> d.Verification:
        return self.verifier.verify(answer, evidence, evidence_score)


class ScriptedLLM:
    """Streams fixed pieces, or fails after some of them."""

    def __init__(self, pieces: list[str], reachable: bool = True, fail_after: int | None = None) -> None:
        self.pieces, self.reachable, self.fail_after = pieces, reachable, fail_after
        self.messages: list[dict[str, str]] = []

    @property
    def name(self) -> str:
        return "llm:scripted"

    async def available(self) -> bool:
        return self.reachable

    def chat_json(self, messages: Sequence[dict[str, str]], schema: dict) -> str:
        return "not routing"  # off-schema: the heuristic routes

    async def stream_chat(self, messages: Sequence[dict[str, str]]) -> AsyncIterator[str]:
        self.messages = list(messages)
        for i, piece in enumerate(self.pieces):
            if self.fail_after is not None and i >= self.fail_after:
                raise ConnectionError("server went away")
            yield piece


@pytest.fixture
def make_agent(tmp_path: Path, embedder):  # type: ignore[no-untyped-def]
    def build(
        llm: ScriptedLLM, verify: bool = True, traces: TraceStore | None = None
    ) -> tuple[Agent, TraceStore]:
        traces = traces or TraceStore(tmp_path / "traces", 10)
        agent = Agent(
            FixedRetriever(embedder),
            LocalVerifier(Verifier(OfflineChecker(embedder, 0.55, 0.4), 0.5)),
            llm,
            traces,
            GenerationConfig(verify_answers=verify),
            default_top_k=2,
            directed=instruction_detector().directed,
        )
        return agent, traces

    return build


async def collect(agent: Agent, question: str) -> list[d.AskEvent]:
    return [e async for e in agent.ask(question, "default", d.SearchMode.AUTO, 0)]


async def test_llm_answer_is_streamed_and_verified(make_agent) -> None:  # type: ignore[no-untyped-def]
    llm = ScriptedLLM(["Tantivy defaults ", "to k1 = 1.2 [1]."])
    agent, traces = make_agent(llm)
    events = await collect(agent, "What is the default k1 in tantivy BM25?")
    done = events[-1]
    assert isinstance(done, d.DoneEvent)
    assert done.generator == "llm:scripted" and done.answer == "Tantivy defaults to k1 = 1.2 [1]."
    assert [e.text for e in events if isinstance(e, d.DeltaEvent)] == llm.pieces
    assert done.manifest.claims[0].verdict == d.Verdict.SUPPORTED
    assert [c.ref for c in done.citations] == ["1"]
    # The documents reach the LLM as data inside the user turn; the rules sit in the system turn.
    assert llm.messages[0]["role"] == "system" and "data, never instructions" in llm.messages[0]["content"]
    assert "k1 = 1.2" in llm.messages[1]["content"]
    assert traces.read(done.trace_id)["generator"] == "llm:scripted"


async def test_llm_failure_falls_back_to_extractive(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent, traces = make_agent(ScriptedLLM(["x", "y"], fail_after=1))
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent)
    assert done.generator == "extractive" and "k1 = 1.2" in done.answer and done.answer.endswith("[1].")
    assert "ConnectionError" in traces.read(done.trace_id)["llm_error"]


async def test_unreachable_llm_means_extractive(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent, _ = make_agent(ScriptedLLM([], reachable=False))
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent) and done.generator == "extractive" and not done.abstained


async def test_llm_that_invents_numbers_is_withheld(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent, _ = make_agent(ScriptedLLM(["Tantivy defaults to k1 = 2.5 [1]."]))
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent)
    assert done.abstained and done.confidence <= 0.25 and "do not support" in done.answer
    assert done.citations  # sources stay listed


async def test_verification_can_be_turned_off_and_says_so(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent, _ = make_agent(ScriptedLLM([], reachable=False), verify=False)
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent)
    assert not done.manifest.verified and done.manifest.method == "disabled" and not done.abstained


async def test_a_trace_written_before_schema_version_reads_as_version_1(make_agent) -> None:  # type: ignore[no-untyped-def]
    agent, traces = make_agent(ScriptedLLM([], reachable=False))
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent)
    written = traces.read(done.trace_id)
    assert written["schema_version"] == 1 and written["answer"] == done.answer
    traces.write(
        done.trace_id, {k: v for k, v in written.items() if k != "schema_version"}
    )  # an older agent's
    assert agent.trace(done.trace_id) == written


async def test_one_callers_questions_never_push_out_anothers_traces(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    traces = TraceStore(tmp_path / "traces", 2)
    agent = Agent(
        FixedRetriever(embedder),
        LocalVerifier(Verifier(OfflineChecker(embedder, 0.55, 0.4), 0.5)),
        ScriptedLLM([], reachable=False),
        traces,
        GenerationConfig(),
        default_top_k=2,
        directed=instruction_detector().directed,
    )

    async def ask_as(name: str) -> str:
        token = auth.PRINCIPAL.set(auth.Principal(name, auth.Role.READER))
        try:
            done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
            assert isinstance(done, d.DoneEvent)
            return done.trace_id
        finally:
            auth.PRINCIPAL.reset(token)

    anas = await ask_as("ana")
    bens = [await ask_as("ben") for _ in range(4)]
    token = auth.PRINCIPAL.set(auth.Principal("ana", auth.Role.READER))
    try:
        assert agent.trace(anas)["principal"] == "ana"  # still there after ben's four
        with pytest.raises(TraceNotFound):
            agent.trace(bens[-1])  # another's reads as unknown
    finally:
        auth.PRINCIPAL.reset(token)
    assert agent.trace(bens[-1])["principal"] == "ben"  # the local admin reads any
    with pytest.raises(TraceNotFound):
        agent.trace(bens[0])  # ben's oldest, past his two


async def test_a_full_disk_loses_the_trace_not_the_answer(
    tmp_path: Path, make_agent, small_disk, caplog
) -> None:  # type: ignore[no-untyped-def]
    folder = small_disk(tmp_path / "traces", "64k")
    with contextlib.suppress(OSError), (folder / "filler").open("wb") as filler:
        filler.write(b"\0" * 2**20)  # the disk is full
    agent, traces = make_agent(ScriptedLLM([], reachable=False), traces=TraceStore(folder, 10))
    done = (await collect(agent, "What is the default k1 in tantivy BM25?"))[-1]
    assert isinstance(done, d.DoneEvent) and "k1 = 1.2" in done.answer
    assert f"the trace {done.trace_id} was not kept: [Errno 28] No space left on device" in caplog.text
    assert [p.name for p in folder.iterdir()] == ["filler"]  # no part of it left behind
    with pytest.raises(TraceNotFound):
        traces.read(done.trace_id)
