"""Bridge searches: a question that chains facts is searched again from the sentences of its first
search's top hits that name what the question only describes."""

from __future__ import annotations

from pathlib import Path

from ragstack import domain as d
from services.agent.bridge import bridges
from tests.services.agent.test_loop import ScriptedRetriever, agent_with, ask, hit

QUESTION = "In what year was the bridge in the town where Tomas Brek grew up opened?"
BIOGRAPHY = hit(
    "brek",
    "Tomas Brek was a Czech cinematographer. Tomas Brek grew up in Velka Lhota, a town on the Sazava. "
    "He shot night scenes.",
)
TOWN = hit("lhota", "Velka Lhota is known for its stone bridge over the Sazava, opened in 1872.")
NOISE = hit("noise", "The weather in the mountains changes quickly in spring.")


def test_each_top_hit_gives_the_question_and_its_best_matching_sentence() -> None:
    found = bridges(QUESTION, [BIOGRAPHY, NOISE, TOWN], 2)
    assert [b.from_chunk for b in found] == ["brek:0", "noise:0"]
    assert found[0].query == f"{QUESTION} Tomas Brek grew up in Velka Lhota, a town on the Sazava."
    assert bridges(QUESTION, [BIOGRAPHY], 0) == []
    # A sentence adding no word of its own to the question would only repeat the first search.
    echo = hit("echo", "Tomas Brek grew up in a town.")
    assert bridges("Tomas Brek grew up in which town?", [echo], 3) == []


async def test_the_agent_bridges_to_the_passage_the_question_only_describes(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    def answer(query: str, mode: d.SearchMode) -> list[d.SearchHit]:
        return [TOWN, BIOGRAPHY] if "Velka Lhota" in query else [BIOGRAPHY, NOISE]

    retriever = ScriptedRetriever(embedder, answer)
    events = await ask(agent_with(tmp_path, embedder, retriever), QUESTION)
    route = next(e for e in events if isinstance(e, d.RouteEvent))
    assert route.chains_facts
    tools = [e.tool for e in events if isinstance(e, d.ToolCallEvent)]
    assert tools[0] == "search" and tools[1:] == ["bridge_search"] * (len(tools) - 1) and len(tools) >= 2
    assert "Velka Lhota" in retriever.calls[1][0]
    done = events[-1]
    assert isinstance(done, d.DoneEvent) and "lhota:0" in done.evidence_chunk_ids
    trace = (await _trace(tmp_path, done))["tool_calls"]
    assert trace[1]["hint"] == "bridge from brek:0"
    # An explicit mode searches once, as asked.
    fixed = ScriptedRetriever(embedder, answer)
    await ask(agent_with(tmp_path, embedder, fixed), QUESTION, d.SearchMode.HYBRID)
    assert len(fixed.calls) == 1


async def _trace(tmp_path: Path, done: d.DoneEvent) -> dict:  # type: ignore[type-arg]
    from ragstack.traces import TraceStore

    return TraceStore(tmp_path / "traces", 10).read(done.trace_id)
