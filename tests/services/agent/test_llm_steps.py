"""The agent's LLM steps through the real `ollama` client against a scripted Ollama-protocol server:
evidence graded by the LLM's structured answer (an `incorrect` grade sends the loop to another tool),
follow-ups rewritten by it (a rewrite that answers instead is refused); and, offline, evidence graded
ambiguous makes the agent read the hits' neighbouring chunks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.config import GenerationConfig, LLMConfig, StateConfig
from ragstack.llm import LLM
from ragstack.traces import TraceStore
from services.agent import sessions as session_store
from services.agent.ask import Agent
from services.agent.llm_steps import GRADE_SYSTEM, REWRITE_SYSTEM
from services.agent.sessions import SessionStore
from services.verify.checker import OfflineChecker, Verifier
from tests.conftest import instruction_detector
from tests.services.agent.test_ask import LocalVerifier, ScriptedLLM
from tests.services.agent.test_loop import PAGES, ScriptedRetriever, hit
from tests.tools import state as state_tools
from tests.tools.ollama_server import OllamaServer

QUESTION = "Which scenes is Tomas Brek known for?"


def agent(tmp_path: Path, embedder, retriever, llm, sessions=None, **gen: Any) -> Agent:  # type: ignore[no-untyped-def]
    return Agent(
        retriever,
        LocalVerifier(Verifier(OfflineChecker(embedder, 0.55, 0.4), 0.5)),
        llm,
        TraceStore(tmp_path / "traces", 10),
        GenerationConfig(**gen),
        default_top_k=2,
        sessions=sessions,
        directed=instruction_detector().directed,
    )


def scripted(grades: list[dict[str, Any]], standalone: str = "") -> Any:
    def reply(request: dict[str, Any]) -> str:
        system = request["messages"][0]["content"]
        if system == GRADE_SYSTEM:
            return json.dumps(grades.pop(0))
        if system == REWRITE_SYSTEM:
            return json.dumps({"standalone": standalone})
        if request.get("format"):
            return "{}"  # the router: off-schema, so the heuristic routes
        return "Tomas Brek is known for night scenes [1]."

    return reply


async def test_the_llm_grades_the_evidence_and_its_incorrect_means_another_tool(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    grades = [
        {"grade": "incorrect", "score": 0.1, "reason": "about a village"},  # though the scores say correct
        {"grade": "correct", "score": 0.9, "reason": "names the scenes"},
        {"grade": "correct", "score": 0.9, "reason": "the whole evidence"},
    ]
    with OllamaServer("test", scripted(grades)).serve() as server:
        llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
        a = agent(tmp_path, embedder, retriever, llm, evidence_grader="llm")
        events = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)]
    assert [m for _, m in retriever.calls] == [d.SearchMode.HYBRID, d.SearchMode.LEXICAL]
    assert [e.grade for e in events if isinstance(e, d.EvidenceEvent)][:2] == ["incorrect", "correct"]
    done = events[-1]
    assert isinstance(done, d.DoneEvent)
    trace = a.trace(done.trace_id)
    assert [g["grader"] for g in trace["grades"]] == ["llm", "llm"] and trace["grades"][0]["score"] == 0.1


async def test_an_off_schema_grade_falls_back_to_the_scores(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
    wrong = [{"grade": "great", "score": 7}] * 4  # not a grade, out of range: refused twice per call
    with OllamaServer("test", scripted(wrong)).serve() as server:
        llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
        a = agent(tmp_path, embedder, retriever, llm, evidence_grader="llm")
        done = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)][-1]
    assert isinstance(done, d.DoneEvent)
    assert [g["grader"] for g in a.trace(done.trace_id)["grades"]] == ["score"]


async def test_the_llm_rewrites_a_follow_up_and_a_rewrite_that_answers_is_refused(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    def asked_about_brek(at: str) -> SessionStore:
        """The session's latest turn is the question about Tomas Brek."""
        store = SessionStore(state_tools.store(StateConfig(), tmp_path, session_store))
        store.add(
            "s1", "Who was Tomas Brek?", "Who was Tomas Brek?", "A Czech cinematographer [1].", False, at
        )
        return store

    store = asked_about_brek("2026-11-30T00:00:00")
    for standalone, expected, how in (
        ("Which films did Tomas Brek shoot?", "Which films did Tomas Brek shoot?", "llm"),
        ("Harbour Lights at Dusk.", "Which films did Tomas Brek shoot?", "heuristic"),  # an answer, refused
    ):
        retriever = ScriptedRetriever(embedder, lambda q, m: [PAGES["brek"]])
        with OllamaServer("test", scripted([], standalone)).serve() as server:
            llm = LLM(LLMConfig(host=server.url, model="test", timeout_s=10))
            a = agent(tmp_path, embedder, retriever, llm, sessions=store)
            events = [
                e async for e in a.ask("Which films did he shoot?", "default", d.SearchMode.AUTO, 0, "s1")
            ]
        route = next(e for e in events if isinstance(e, d.RouteEvent))
        assert route.standalone_question == expected and retriever.calls[0][0] == expected
        done = events[-1]
        assert isinstance(done, d.DoneEvent) and a.trace(done.trace_id)["rewrite"] == how
        store.close()
        store = asked_about_brek("2026-11-30T00:00:01")


async def test_ambiguous_evidence_reads_the_neighbouring_chunks(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    related = hit("brek", "Brek is a small village in the Moravian hills.")  # graded ambiguous
    around = "Tomas Brek shot Harbour Lights at Dusk and The Ninth Lantern, known for their night scenes."

    class Neighbours(ScriptedRetriever):
        async def search(self, query, library, top_k, mode, where=None, expand_context=False):  # type: ignore[no-untyped-def]
            self.calls.append((query, mode))
            found = d.SearchHit(related.chunk, 1.0, context=f"{related.chunk.text} {around}")
            return ([found] if expand_context else [related]), mode

    retriever = Neighbours(embedder, None)
    a = agent(tmp_path, embedder, retriever, ScriptedLLM([], reachable=False))
    events = [e async for e in a.ask(QUESTION, "default", d.SearchMode.AUTO, 0)]
    tools = [e.tool for e in events if isinstance(e, d.ToolCallEvent)]
    grades = [e.grade for e in events if isinstance(e, d.EvidenceEvent)]
    assert tools[:2] == ["search", "read_neighbours"] and grades[:2] == ["ambiguous", "correct"]
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and not done.abstained and "Harbour Lights" in done.answer
    assert [c.chunk.chunk_id for c in done.citations] == ["brek:0"]  # the chunk, with its neighbours quoted
