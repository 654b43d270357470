"""The analysis tool in the answer path, offline, through the real stack: a total asked over a
document's table is computed by a program in the sandbox, cited with the document it read, and
verified against the computation; the trace keeps the program and its output. Needs the sandbox
(root, Linux namespaces): skipped with the reason elsewhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from ragstack import domain as d
from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
from services.agent import sandbox
from tests.conftest import make_config, start_with

SALES = """# Harbour shop sales, spring

The harbour shop sold three kinds of goods this spring, by region:

| Region | Product | Revenue |
| --- | --- | --- |
| North | Lanterns | 1200.50 |
| South | Ropes | 800.25 |
| North | Nets | 310.00 |
| East | Lanterns | 95.75 |

Revenue is in euros, before tax.
"""
NOTES = "# Harbour notes\n\nThe harbour master opens the gates at dawn and closes them at dusk.\n"

pytestmark = pytest.mark.skipif(
    sandbox.unavailable_reason() is not None, reason=f"no sandbox here: {sandbox.unavailable_reason()}"
)


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, resources: Any) -> AsyncIterator[Any]:
    folder = tmp_path_factory.mktemp("shop")
    (folder / "sales.md").write_text(SALES)
    (folder / "notes.md").write_text(NOTES)
    running = await start_with(make_config(folder / "data", ingest={"graph": False}), resources)
    channel = open_channel(running.peers["ingest"])
    [
        e
        async for e in IngestClient(channel, 120).ingest(
            paths=[str(folder / "sales.md"), str(folder / "notes.md")]
        )
    ]
    await channel.close()
    yield running
    await running.stop()


async def _ask(stack: Any, question: str) -> tuple[list[d.AskEvent], dict[str, Any]]:
    channel = open_channel(stack.peers["agent"])
    try:
        agent = AgentClient(channel, 120)
        events = [e async for e in agent.ask(question, skip_memory=True)]
        trace = await agent.get_trace(events[-1].trace_id)  # type: ignore[union-attr]
    finally:
        await channel.close()
    return events, trace


async def test_a_total_over_a_table_is_computed_in_the_sandbox_and_cited(stack: Any) -> None:
    events, trace = await _ask(stack, "What is the total revenue of the harbour shop?")
    done = events[-1]
    assert isinstance(done, d.DoneEvent)
    assert any(isinstance(e, d.ToolCallEvent) and e.tool == "analyse" for e in events)
    assert done.generator == "analysis" and "2406.5" in done.answer and not done.abstained
    cited = {c.chunk.chunk_id.split(":")[0] for c in done.citations}
    assert "analysis" in cited and any(c.chunk.source.endswith("sales.md") for c in done.citations)
    assert [c.verdict for c in done.manifest.claims] == [d.Verdict.SUPPORTED]
    analysis = trace["analysis"]
    assert analysis["ran"] and "Revenue" in analysis["code"] and "2406.5" in analysis["stdout"]
    assert analysis["killed_by"] is None


async def test_a_question_without_a_computation_or_a_table_runs_nothing(stack: Any) -> None:
    for question in (
        "When does the harbour master open the gates?",
        "How many gates does the harbour master open?",
    ):
        events, _ = await _ask(stack, question)
        assert not any(isinstance(e, d.ToolCallEvent) and e.tool == "analyse" for e in events)
        assert events[-1].generator != "analysis"  # type: ignore[union-attr]
