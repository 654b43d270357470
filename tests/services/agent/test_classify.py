"""The LLM router through the real `ollama` client against a scripted Ollama-protocol server: a valid
classification routes (with its top_k and sub-questions); off-schema, slow or unreachable means the
heuristic."""

from __future__ import annotations

import json
import time
from typing import Any

from ragstack.config import LLMConfig
from ragstack.domain import SearchMode
from ragstack.llm import LLM
from services.agent.classify import classify
from tests.tools.ollama_server import OllamaServer

UNDERSTOOD = {
    "intent": "compare two artists",
    "complexity": "multi-hop",
    "ambiguous": False,
    "strategy": "agentic",
    "top_k": 8,
    "sub_questions": ["What nationality is Mara Quellen?", "What nationality was Tomas Brek?"],
}


def llm_for(server: OllamaServer) -> LLM:
    return LLM(LLMConfig(host=server.url, model="test", timeout_s=10))


async def test_a_valid_classification_routes() -> None:
    with OllamaServer("test", lambda request: json.dumps(UNDERSTOOD)).serve() as server:
        route = await classify(
            llm_for(server), "Were Mara Quellen and Tomas Brek of the same nationality?", 5
        )
    assert route is not None and route.classifier == "llm" and route.mode == SearchMode.HYBRID
    assert route.sub_questions == tuple(UNDERSTOOD["sub_questions"]) and route.top_k == 8
    assert {"agentic", "sql"} <= set(server.requests[0]["format"]["properties"]["strategy"]["enum"])
    lexical = {**UNDERSTOOD, "strategy": "lexical", "sub_questions": [], "top_k": 3}
    with OllamaServer("test", lambda request: json.dumps(lexical)).serve() as server:
        route = await classify(llm_for(server), "ERR-1234 in ingest", 5)
    assert route is not None and route.mode == SearchMode.LEXICAL and route.sub_questions == ()


async def test_off_schema_slow_or_unreachable_means_the_heuristic() -> None:
    wrong = {**UNDERSTOOD, "strategy": "sql", "top_k": 500}
    with OllamaServer("test", lambda request: json.dumps(wrong)).serve() as server:
        assert await classify(llm_for(server), "How many orders?", 5) is None

    def slow(request: dict[str, Any]) -> str:
        time.sleep(1.0)
        return json.dumps(UNDERSTOOD)

    with OllamaServer("test", slow).serve() as server:
        started = time.monotonic()
        assert await classify(llm_for(server), "anything", 0.2) is None
        assert time.monotonic() - started < 0.9
    with OllamaServer("test", lambda request: "{}").serve() as server:
        url = server.url
    assert await classify(LLM(LLMConfig(host=url, model="test")), "anything", 5) is None
