"""haiku.rag's citation policy and evidence compaction, through the real stack and the real `ollama`
client against a scripted LLM server: a sentence that neither cites nor says it is not from the
documents is removed (lenient) or withholds the answer (strict); in a session the earlier turns'
evidence is carried, compacted to what their answers cited, so the prompt of a long conversation
stays bounded (printed per turn with -s: the prompt sizes the README quotes)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ragstack import domain as d
from ragstack.rpc.clients import AgentClient, IngestClient, open_channel
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools.ollama_server import OllamaServer

GROUNDED = "BM25 scores a document by the query terms it contains, weighted by their rarity [1]."
UNGROUNDED = "It was first used by a famous search engine in 1994."
DECLARED = "Ranking functions are a broad family (not from the documents)."
QUESTIONS = [
    "How does BM25 rank documents?",
    "What are its parameters?",
    "How does chunking split documents?",
    "What is dense retrieval?",
    "How does hybrid search combine rankings?",
    "What does reranking add?",
    "How are answers verified?",
    "What is a knowledge graph used for?",
    "How is prompt injection handled?",
    "How is retrieval evaluated?",
]


def _is_answer_call(request: dict[str, Any]) -> bool:
    return "numbered documents" in request["messages"][0]["content"]


def scripted(answer: str) -> Any:
    def reply(request: dict[str, Any]) -> str:
        return answer if _is_answer_call(request) else "{}"  # "{}": the structured calls fall back

    return reply


async def _run(
    tmp: Path,
    resources: Any,
    server: OllamaServer,
    questions: list[str],
    session: str = "",
    shape: d.QueryMode = d.QueryMode.AUTO,
    **gen: Any,
) -> tuple[list[list[d.AskEvent]], list[dict[str, Any]]]:
    await asyncio.to_thread(tmp.mkdir, parents=True, exist_ok=True)
    cfg = make_config(
        tmp / "data",
        llm={"enabled": True, "host": server.url, "model": "scripted"},
        verify={"llm_judge": False},
        ingest={"graph": False},
        generation={"recall_memory": False, "llm_rewrite": False, "llm_router": False, **gen},
    )
    stack = await start_with(cfg, resources)
    try:
        channel = open_channel(stack.peers["ingest"])
        [e async for e in IngestClient(channel, 300).ingest(paths=[str(SAMPLES)])]
        await channel.close()
        channel = open_channel(stack.peers["agent"])
        agent = AgentClient(channel, 120)
        runs = [[e async for e in agent.ask(q, session_id=session, query_mode=shape)] for q in questions]
        traces = [await agent.get_trace(run[-1].trace_id) for run in runs]  # type: ignore[union-attr]
        await channel.close()
        return runs, traces
    finally:
        await stack.stop()


@pytest.mark.parametrize("policy", ["lenient", "strict", "keep"])
async def test_a_sentence_that_neither_cites_nor_declares_is_removed_or_withholds(
    tmp_path: Path, resources: Any, policy: str
) -> None:
    with OllamaServer("scripted", scripted(f"{GROUNDED} {UNGROUNDED} {DECLARED}")).serve() as server:
        runs, traces = await _run(tmp_path, resources, server, QUESTIONS[:1], citation_policy=policy)
    done, trace = runs[0][-1], traces[0]
    assert isinstance(done, d.DoneEvent)
    if policy == "keep":  # kept as written: the verifier judges the uncited sentence unsupported
        assert "ungrounded" not in trace and UNGROUNDED in trace["draft"]
        judged = {c.claim: c.verdict for c in done.manifest.claims}
        assert judged[UNGROUNDED] == d.Verdict.UNSUPPORTED and DECLARED not in judged
        return
    assert trace["ungrounded"] == [UNGROUNDED]
    streamed = "".join(e.text for e in runs[0] if isinstance(e, d.DeltaEvent))
    assert UNGROUNDED in streamed  # the deltas are the draft as written; done.answer is what is delivered
    if policy == "lenient":
        assert done.answer == f"{GROUNDED} {DECLARED}" and not done.abstained
        # The declared sentence is no claim about the documents: only the cited one is judged.
        assert [c.claim for c in done.manifest.claims] == [GROUNDED.replace(" [1]", "")]
    else:
        assert done.abstained and UNGROUNDED not in done.answer
        assert "citation_policy: strict" in trace["no_draft_reason"]
        assert done.citations  # the sources are still listed


async def test_a_lenient_draft_with_nothing_cited_is_written_extractively_instead(
    tmp_path: Path, resources: Any
) -> None:
    with OllamaServer("scripted", scripted(f"{UNGROUNDED} Another claim with no source.")).serve() as server:
        runs, traces = await _run(tmp_path, resources, server, QUESTIONS[:1])
    done, trace = runs[0][-1], traces[0]
    assert isinstance(done, d.DoneEvent)
    assert trace["ungrounded"] == [UNGROUNDED, "Another claim with no source."]
    assert done.generator == "extractive" and re.search(r"\[\d+\]", done.answer)
    assert UNGROUNDED not in done.answer and done.evidence_chunk_ids


def _first_sentences(request: dict[str, Any]) -> list[tuple[str, str]]:
    documents = re.findall(
        r'<document ref="(\d+)"[^>]*>\n(.*?)\n</document>', request["messages"][-1]["content"], re.S
    )
    out = []
    for ref, text in documents:
        prose = [
            ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "|", "-", "`"))
        ]
        sentence = re.split(r"(?<=[.!?])\s", " ".join(prose).strip(), maxsplit=1)[0] if prose else ""
        if sentence.endswith("."):
            out.append((ref, sentence[:-1].strip() + "."))
    return out


def _prompt_chars(request: dict[str, Any]) -> int:
    return sum(len(m["content"]) for m in request["messages"])


@pytest.mark.slow
async def test_a_ten_turn_session_carries_what_was_cited_and_its_prompt_stays_bounded(
    tmp_path: Path, resources: Any
) -> None:
    sizes: dict[str, list[int]] = {}
    carried: dict[str, list[list[str]]] = {}
    for policy in ("none", "cited", "all"):
        prompts: list[dict[str, Any]] = []

        def reply(request: dict[str, Any], prompts: list[dict[str, Any]] = prompts) -> str:
            if not _is_answer_call(request):
                return "{}"
            prompts.append(request)
            # Quotes the first sentence of its first two documents, each cited: supported claims,
            # and what the compacted session carries on.
            return " ".join(f"{quote} [{ref}]" for ref, quote in _first_sentences(request)[:2])

        with OllamaServer("scripted", reply).serve() as server:
            runs, traces = await _run(
                tmp_path / policy, resources, server, QUESTIONS, "s10", session_evidence=policy
            )
        assert len(prompts) == len(QUESTIONS)
        sizes[policy] = [_prompt_chars(p) for p in prompts]
        carried[policy] = [t.get("session_evidence", {}).get("carried", []) for t in traces]
        if policy == "cited":
            # Turn 2 drafts from what turn 1's answer cited, read again by id.
            first = runs[0][-1]
            assert isinstance(first, d.DoneEvent)
            cited_first = [c.chunk.chunk_id for c in first.citations]
            second = runs[1][-1]
            assert isinstance(second, d.DoneEvent)
            assert not first.abstained and cited_first
            # Carried: what turn 1 cited, read again, beside turn 2's own evidence.
            assert carried["cited"][1] and set(carried["cited"][1]) <= set(cited_first)
            assert set(cited_first) <= set(second.evidence_chunk_ids)
    print("\nprompt characters per turn (turns 1-10):")
    for policy, row in sizes.items():
        print(f"  session_evidence={policy:5s} {json.dumps(row)}")
    assert carried["none"] == [[]] * len(QUESTIONS)
    assert max(len(c) for c in carried["cited"]) <= 6
    # Compacted: bounded by the new evidence plus six cited chunks; carrying everything grows.
    assert max(sizes["cited"]) < max(sizes["all"]) and sizes["all"][-1] > 2 * sizes["all"][0]
    assert max(len(c) for c in carried["all"]) > 6


async def test_an_llm_compare_answer_follows_the_shape_and_each_cell_is_a_claim(
    tmp_path: Path, resources: Any
) -> None:
    """With an LLM, a shaped mode adds its instruction to the rules; the table's cited cells are
    verified one by one, a "not stated" cell is no claim, and the citation policy leaves the table
    whole (an uncited cell would be an unsupported claim, not a removed sentence)."""
    prompts: list[dict[str, Any]] = []

    def reply(request: dict[str, Any]) -> str:
        if not _is_answer_call(request):
            return "{}"
        prompts.append(request)
        (ref, quote), *_ = _first_sentences(request)
        rows = [f"| BM25 | {quote} [{ref}] |", "| Dense retrieval | not stated |"]
        return "\n".join(["| Compared | ranking |", "| --- | --- |", *rows])

    with OllamaServer("scripted", reply).serve() as server:
        runs, _ = await _run(
            tmp_path, resources, server, ["How do BM25 and dense retrieval differ in ranking?"]
        )
    route, done = runs[0][1], runs[0][-1]
    assert isinstance(route, d.RouteEvent) and isinstance(done, d.DoneEvent)
    assert route.query_mode == d.QueryMode.COMPARE
    assert "Markdown table" in prompts[0]["messages"][0]["content"]
    assert done.answer.count("\n") == 3 and not done.abstained  # the table as written
    assert len(done.manifest.claims) == 1 and done.manifest.claims[0].verdict == d.Verdict.SUPPORTED


async def test_a_row_name_too_long_to_be_a_name_is_judged_in_a_shaped_answer(
    tmp_path: Path, resources: Any
) -> None:
    """The shaped modes run no citation policy and the verifier judges no name; a row name longer
    than a name (policy.LABEL_WORDS) states something, so the verifier judges it."""
    statement = "Dense retrieval was invented by a famous search company in 1994"

    def reply(request: dict[str, Any]) -> str:
        if not _is_answer_call(request):
            return "{}"
        (ref, quote), *_ = _first_sentences(request)
        rows = [f"| BM25 | {quote} [{ref}] |", f"| {statement} | not stated |"]
        return "\n".join(["| Compared | ranking |", "| --- | --- |", *rows])

    with OllamaServer("scripted", reply).serve() as server:
        runs, _ = await _run(
            tmp_path, resources, server, ["How do BM25 and dense retrieval differ in ranking?"]
        )
    done = runs[0][-1]
    assert isinstance(done, d.DoneEvent)
    verdicts = {c.claim: c.verdict for c in done.manifest.claims}
    assert verdicts[statement] == d.Verdict.UNSUPPORTED and len(verdicts) == 2
