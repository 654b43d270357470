"""The LLM's budgets, through the real `ollama` client against the Ollama-protocol test server
(which stops a reply at `num_predict` pieces with done_reason "length", as Ollama stops at tokens):
every call carries `llm.max_output_tokens`, a stream stops at `llm.timeout_s` in all, a draft cut at
either keeps its finished sentences and says which limit cut it, and a cut structured answer fails
without a second try."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from ragstack import domain as d
from ragstack.config import LLMConfig
from ragstack.llm import LLM, MAX_ANSWER_CHARS, MAX_OUTPUT_TOKENS, TIMEOUT, GenerationCut, ask_validated
from tests.services.agent.test_llm_steps import QUESTION, agent
from tests.services.agent.test_loop import PAGES, ScriptedRetriever
from tests.tools.ollama_server import OllamaServer

# An answer that runs on: its first sentence cites, then it never stops.
RUNS_ON = ["Tomas Brek is known", " for night scenes [1].", " He also"] + [" and also"] * 100


def llm_at(server: OllamaServer, **cfg: Any) -> LLM:
    return LLM(LLMConfig(host=server.url, model="test", **{"timeout_s": 10.0, **cfg}))


async def pieces_and_cut(llm: LLM) -> tuple[list[str], str]:
    pieces: list[str] = []
    try:
        async for piece in llm.stream_chat([{"role": "user", "content": "go"}]):
            pieces.append(piece)
    except GenerationCut as cut:
        return pieces, cut.limit
    return pieces, ""


async def test_a_stream_stops_at_the_token_limit_and_says_so() -> None:
    with OllamaServer("test", lambda request: iter(RUNS_ON)).serve() as server:
        pieces, cut = await pieces_and_cut(llm_at(server, max_output_tokens=16))
        short, whole = await pieces_and_cut(llm_at(server, max_output_tokens=1000))
    assert server.requests[0]["options"]["num_predict"] == 16
    assert len(pieces) == 16 and cut == MAX_OUTPUT_TOKENS == "llm.max_output_tokens"
    assert len(short) == len(RUNS_ON) and whole == ""  # within the limit: not cut


async def test_a_stream_stops_at_the_timeout_in_all_though_each_piece_comes_in_time() -> None:
    def slow(request: dict[str, Any]) -> Iterator[str]:
        for piece in RUNS_ON:
            time.sleep(0.2)  # each read is well within the client's timeout
            yield piece

    with OllamaServer("test", slow).serve() as server:
        start = time.monotonic()
        pieces, cut = await pieces_and_cut(llm_at(server, timeout_s=1.0))
        took = time.monotonic() - start
    assert cut == TIMEOUT == "llm.timeout_s"
    assert 2 <= len(pieces) <= 6 and took < 3.0, (len(pieces), took)


async def test_a_cut_draft_keeps_its_finished_sentences_and_the_done_event_names_the_limit(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    with OllamaServer("test", lambda request: iter(RUNS_ON)).serve() as server:
        a = agent(tmp_path, embedder, retriever, llm_at(server, max_output_tokens=16), llm_router=False)
        events = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)]
    streamed = "".join(e.text for e in events if isinstance(e, d.DeltaEvent))
    done = events[-1]
    assert isinstance(done, d.DoneEvent)
    assert streamed.endswith(" and also")  # the client saw the unfinished text as it came
    assert done.answer == "Tomas Brek is known for night scenes [1]."
    assert done.cut_by == "llm.max_output_tokens" and done.generator == "llm:test"
    trace = a.trace(done.trace_id)
    assert trace["draft_cut_by"] == "llm.max_output_tokens" and trace["draft"] == done.answer
    assert not done.abstained and [c.chunk.document_id for c in done.citations] == ["brek"]


async def test_a_draft_cut_before_any_finished_sentence_is_written_without_the_llm(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    unfinished = ["Tomas Brek"] + [" and"] * 40
    with OllamaServer("test", lambda request: iter(unfinished)).serve() as server:
        a = agent(tmp_path, embedder, retriever, llm_at(server, max_output_tokens=16), llm_router=False)
        done = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)][-1]
    assert isinstance(done, d.DoneEvent)
    assert done.generator == "extractive" and "night scenes" in done.answer and " and and" not in done.answer
    assert done.cut_by == "llm.max_output_tokens"  # why the LLM's draft was not delivered


async def test_a_draft_stops_at_what_an_answer_may_hold(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """An LLM allowed more tokens than an answer may hold (what Verify takes) is stopped there, its
    stream closed: the answer keeps its finished sentences, is verified, and says why it ends."""
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    sentence = " Tomas Brek painted" + " night scenes," * 110 + " and harbours [1]."
    with OllamaServer("test", lambda request: itertools.repeat(sentence)).serve() as server:
        a = agent(tmp_path, embedder, retriever, llm_at(server, max_output_tokens=131072), llm_router=False)
        events = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)]
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and done.cut_by == MAX_ANSWER_CHARS == "max_answer_chars"
    streamed = "".join(e.text for e in events if isinstance(e, d.DeltaEvent))
    assert d.MAX_ANSWER_CHARS - len(sentence) < len(streamed) <= d.MAX_ANSWER_CHARS
    draft = a.trace(done.trace_id)["draft"]
    assert draft.strip() == streamed.strip() and draft.endswith("harbours [1].")
    assert done.manifest.claims  # verified, not refused for its size


async def test_a_finished_draft_is_not_cut(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    with OllamaServer("test", lambda request: iter(RUNS_ON[:2])).serve() as server:
        a = agent(tmp_path, embedder, retriever, llm_at(server), llm_router=False)
        done = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)][-1]
    assert isinstance(done, d.DoneEvent) and done.cut_by == ""
    assert done.answer == "Tomas Brek is known for night scenes [1]."
    assert a.trace(done.trace_id).get("draft_cut_by") is None
    assert server.requests[-1]["options"]["num_predict"] == 1024  # the default limit is always sent


class Grade(BaseModel):
    grade: str


async def test_a_cut_structured_answer_fails_at_once_and_a_caller_can_lower_the_limit() -> None:
    def reply(request: dict[str, Any]) -> Iterator[str]:
        yield '{"grade": "'
        yield from ["very "] * 40  # past 32

    with OllamaServer("test", reply).serve() as server:
        llm = llm_at(server, max_output_tokens=16)
        got = await asyncio.to_thread(ask_validated, llm, Grade, "grade it", "the evidence")
        assert got is None and len(server.requests) == 1  # not asked again: it would be cut again
        for lower in (0, 10, 500):  # a caller's own limit only ever lowers the configured one
            with pytest.raises(GenerationCut):
                await asyncio.to_thread(llm.chat, [{"role": "user", "content": "go"}], lower)
    # a structured answer may write twice the limit (the verifier's claims restate a draft)
    assert [r["options"]["num_predict"] for r in server.requests] == [32, 16, 10, 16]


async def test_the_timeout_counts_the_models_time_not_a_slow_readers() -> None:
    with OllamaServer("test", lambda request: iter(RUNS_ON[:20])).serve() as server:
        got: list[str] = []
        async for piece in llm_at(server, timeout_s=1.0).stream_chat([{"role": "user", "content": "go"}]):
            got.append(piece)
            await asyncio.sleep(0.1)  # 2 s of reading, the reply written at once: not cut
    assert got == RUNS_ON[:20]


async def test_a_cancel_that_arrives_with_a_piece_is_not_lost() -> None:
    """A client that goes away cancels the reader: it must stop, not read on (3.11's `wait_for`
    around each piece lost about one cancel in five here)."""

    def fast(request: dict[str, Any]) -> Iterator[str]:
        for n in range(100_000):
            time.sleep(0.005)
            yield f" w{n}"

    read_on = 0
    with OllamaServer("test", fast).serve() as server:
        llm = llm_at(server, max_output_tokens=131072)
        for attempt in range(30):
            reading = asyncio.Event()

            async def read(reading: asyncio.Event = reading) -> None:
                count = 0
                async for _ in llm.stream_chat([{"role": "user", "content": "go"}]):
                    count += 1
                    if count == 10:
                        reading.set()
                    if count >= 200:
                        return

            task = asyncio.create_task(read())
            await reading.wait()
            await asyncio.sleep(attempt % 7 * 0.003)  # land the cancel at different moments
            task.cancel()
            try:
                await task
                read_on += 1
            except asyncio.CancelledError:
                pass
    assert read_on == 0, f"{read_on} of 30 readers read on after their cancel"


@pytest.mark.parametrize(
    ("written", "mode"),
    [
        ("## Tomas Brek, cinematographer\n", d.QueryMode.GENERAL),  # a heading with nothing under it
        ("| Person | Known for |\n|---|---|\n", d.QueryMode.COMPARE),  # a table header without rows
    ],
)
async def test_a_cut_draft_with_only_labels_finished_is_written_without_the_llm(
    tmp_path: Path, embedder, written: str, mode: d.QueryMode
) -> None:  # type: ignore[no-untyped-def]
    pieces = list(written) + list("| Tomas Brek | night scenes [1] |\n") * 3
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"], PAGES["quellen"]])
    with OllamaServer("test", lambda request: iter(pieces)).serve() as server:
        llm = llm_at(server, max_output_tokens=len(written) + 3)
        a = agent(tmp_path, embedder, retriever, llm, llm_router=False)
        asked = a.ask("Compare Tomas Brek and Mara Quellen", "default", d.SearchMode.AUTO, 0, query_mode=mode)
        done = [e async for e in asked][-1]
    assert isinstance(done, d.DoneEvent) and done.cut_by == "llm.max_output_tokens"
    assert done.generator == "extractive" and not done.abstained and "night scenes" in done.answer
