"""Query modes end to end, offline (no LLM), through the real stack: a paper from
../shared/data/documents and the sample corpus ingested, each mode asked for by the request or
chosen by the router from the question's wording, its answer shaped (a compare table, method
sections, the datasets named, a reproduction checklist) from quoted, cited cells, and every cell
verified like a sentence."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from ragstack import domain as d
from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
from tests.conftest import SAMPLES, SHARED, make_config, start_with

PDFS = SHARED / "data" / "documents" / "pdf"
PAPERS = [PDFS / n for n in ("2305.03393v1-pg9.pdf", "multi_page.pdf", "normal_4pages.pdf")]


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, resources: Any) -> AsyncIterator[Any]:
    cfg = make_config(tmp_path_factory.mktemp("modes") / "data", ingest={"graph": False})
    running = await start_with(cfg, resources)
    channel = open_channel(running.peers["ingest"])
    for paths, library in (([str(p) for p in PAPERS], "papers"), ([str(SAMPLES)], "default")):
        events = [e async for e in IngestClient(channel, 600).ingest(paths=paths, library=library)]
        assert events[-1].failed == 0  # type: ignore[union-attr]
    await channel.close()
    yield running
    await running.stop()


async def ask(
    stack: Any, question: str, library: str, mode: d.QueryMode = d.QueryMode.AUTO
) -> tuple[d.RouteEvent, d.DoneEvent]:
    channel = open_channel(stack.peers["agent"])
    try:
        events = [
            e
            async for e in AgentClient(channel, 120).ask(question, library, skip_memory=True, query_mode=mode)
        ]
    finally:
        await channel.close()
    route, done = events[1], events[-1]
    assert isinstance(route, d.RouteEvent) and isinstance(done, d.DoneEvent)
    return route, done


def cited_units(answer: str) -> list[str]:
    """The table cells and list items that carry citation markers."""
    units = [
        c for line in answer.splitlines() if line.startswith("|") for c in line.strip("|").split("|")[1:]
    ]
    units += [line for line in answer.splitlines() if line.lstrip().startswith("- ")]
    return [u for u in units if re.search(r"\[\d+(?:, ?\d+)*\]", u)]


async def test_the_router_picks_the_datasets_mode_and_names_the_papers_datasets(stack: Any) -> None:
    route, done = await ask(
        stack, "Which datasets were the table structure models trained and evaluated on?", "papers"
    )
    assert route.query_mode == d.QueryMode.DATASETS and route.classifier == "heuristic"
    assert done.generator == "extractive" and not done.abstained
    for name in ("PubTabNet", "FinTabNet", "PubTables-1M"):
        assert f"**{name}**" in done.answer
    # Every dataset line is a claim of its own, checked against what it cites.
    lines = cited_units(done.answer)
    assert len(done.manifest.claims) == len(lines) >= 3
    assert all(c.refs for c in done.manifest.claims)


async def test_a_compare_table_has_a_row_per_thing_named_and_cited_cells(stack: Any) -> None:
    route, done = await ask(stack, "Compare OTSL and HTML on TED score and inference time", "papers")
    assert route.query_mode == d.QueryMode.COMPARE
    rows = [line for line in done.answer.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    assert "TED score" in header and "inference time" in header
    assert [r.split("|")[1].strip() for r in body] == ["OTSL", "HTML"]
    cells = [c.strip() for r in body for c in r.strip("|").split("|")[1:]]
    assert all(c == "not stated" or re.search(r"\[\d+", c) for c in cells)
    # Each cited cell is verified like a sentence.
    assert len(done.manifest.claims) == len(cited_units(done.answer)) >= 2
    assert not done.abstained and done.citations


async def test_compare_on_the_sample_corpus_by_request(stack: Any) -> None:
    question = "How do BM25 and dense retrieval differ in speed and accuracy?"
    route, done = await ask(stack, question, "default", d.QueryMode.COMPARE)
    assert route.query_mode == d.QueryMode.COMPARE and route.classifier != "llm"
    body = [line for line in done.answer.splitlines() if line.startswith("|")][2:]
    assert [r.split("|")[1].strip() for r in body] == ["BM25", "dense retrieval"]


async def test_methodology_and_reproduce_have_their_shapes(stack: Any) -> None:
    route, done = await ask(stack, "How were the models trained and evaluated?", "papers")
    assert route.query_mode == d.QueryMode.METHODOLOGY
    assert [h for h in done.answer.splitlines() if h.startswith("### ")] == [
        "### Steps",
        "### Settings",
        "### Data",
    ]

    route, done = await ask(stack, "What would I need to reproduce the OTSL results?", "papers")
    assert route.query_mode == d.QueryMode.REPRODUCE
    items = [line.split(":", 1)[0] for line in done.answer.splitlines() if line.startswith("- ")]
    assert items == ["- Code", "- Data", "- Hyper-parameters", "- Hardware", "- Evaluation"]
    # What the page does not state is said to be missing, and is no claim.
    missing = [line for line in done.answer.splitlines() if "not stated" in line]
    assert missing and len(done.manifest.claims) == 5 - len(missing)


async def test_general_questions_keep_their_shape_and_http_takes_the_mode(stack: Any) -> None:
    route, done = await ask(stack, "How does reciprocal rank fusion combine rankings?", "default")
    assert route.query_mode == d.QueryMode.GENERAL and "|" not in done.answer
    async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=120) as http:
        body = {
            "question": "What does the OTSL page say?",
            "library": "papers",
            "query_mode": "datasets",
            "stream": False,
        }
        done_json = (await http.post("/v1/query", json=body)).json()
        assert "PubTabNet" in done_json["answer"]
        bad = await http.post("/v1/query", json={**body, "query_mode": "poetry"})
        assert bad.status_code == 422 and "query_mode" in bad.text
