"""End to end over plain gRPC clients: health, reflection, Ask, traces, error codes, one trace id."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from ragstack.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    retrieve_pb2,
    retrieve_pb2_grpc,
)
from services.ingest.build import index_build
from tests.conftest import ROOT

SERVICES = {
    "ingest": "ragstack.v1.IngestService",
    "retrieve": "ragstack.v1.RetrieveService",
    "agent": "ragstack.v1.AgentService",
    "verify": "ragstack.v1.VerifyService",
}


async def test_every_service_reports_serving(stack) -> None:
    for name, full in SERVICES.items():
        async with grpc.aio.insecure_channel(stack.peers[name]) as channel:
            resp = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=full), timeout=5
            )
            assert resp.status == health_pb2.HealthCheckResponse.SERVING, name


async def test_reflection_lists_the_service(stack) -> None:
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = set()
        async for resp in call:
            names |= {s.name for s in resp.list_services_response.service}
            break
    assert {"ragstack.v1.RetrieveService", "grpc.health.v1.Health"} <= names


async def _ask(stack, question: str, **kw) -> list[agent_pb2.AskResponse]:
    async with grpc.aio.insecure_channel(stack.peers["agent"]) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        return [e async for e in stub.Ask(agent_pb2.AskRequest(question=question, **kw), timeout=60)]


async def test_ask_streams_a_cited_verified_answer(stack, spans) -> None:
    spans.clear()
    events = await _ask(stack, "What values of k1 and b does BM25 typically use?")
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    order = ["start", "route", "tool_call", "evidence", "delta", "verification", "done"]
    assert [k for k in order if k in kinds] == order
    assert kinds.index("verification") > max(i for i, k in enumerate(kinds) if k == "delta")
    done = events[-1].done
    assert not done.abstained
    assert "k1 = 1.2" in done.answer
    assert done.citations and all(c.chunk_id and c.heading_path for c in done.citations)
    assert any(c.heading_path[0] == "BM25" or "bm25" in c.source for c in done.citations)
    manifest = done.manifest
    assert manifest.verified and manifest.method == "offline"
    assert manifest.claims and manifest.supported_ratio >= 0.5
    refs = {c.ref for c in done.citations}
    for claim in manifest.claims:
        assert claim.verdict != common_pb2.VERDICT_UNSPECIFIED
        assert set(claim.refs) <= refs
    deltas = "".join(e.delta.text for e in events if e.WhichOneof("event") == "delta")
    assert deltas.strip() == done.answer.strip()
    assert events[0].start.trace_id == done.trace_id and len(done.trace_id) == 32

    # One OpenTelemetry trace across agent -> retrieve -> verify, with the JSON trace's id.
    ours = [s for s in spans.get_finished_spans() if format(s.context.trace_id, "032x") == done.trace_id]
    names = {s.name for s in ours}
    assert {"agent.ask", "agent.retrieve", "agent.verify"} <= names
    assert "/ragstack.v1.RetrieveService/Search" in names and "/ragstack.v1.VerifyService/Verify" in names

    trace_file = stack.cfg.traces_dir / f"{done.trace_id}.json"
    record = json.loads(trace_file.read_text())
    assert record["trace_id"] == done.trace_id
    assert record["route"]["mode"] == "hybrid"
    assert record["tool_calls"][0]["arguments"]["query"].startswith("What values")
    assert record["answer"] == done.answer and record["verification"]["manifest"]["claims"]


async def test_a_calls_server_span_is_its_callers_child_with_its_status(stack, spans) -> None:
    """ragstack.rpc: the client passes the current span on (traceparent); the server's span for the
    call is its child, named by the method, with the call's gRPC status."""
    from opentelemetry import trace

    from ragstack import domain as d
    from ragstack.errors import RpcError
    from ragstack.rpc.clients import RetrieveClient, open_channel

    spans.clear()
    channel = open_channel(stack.peers["retrieve"], token=stack.cfg.services.token)
    client = RetrieveClient(channel, 10)
    with trace.get_tracer("test").start_as_current_span("caller") as caller:
        await client.search("BM25 parameters", "default", 3, d.SearchMode.LEXICAL)
        with pytest.raises(RpcError) as refused:
            await client.search("x", "default", 1000, d.SearchMode.LEXICAL)
    await channel.close()
    assert refused.value.code == "INVALID_ARGUMENT"

    def ours_now() -> list:  # type: ignore[type-arg]
        return [
            s
            for s in spans.get_finished_spans()
            if s.name == "/ragstack.v1.RetrieveService/Search"
            and s.context.trace_id == caller.get_span_context().trace_id
        ]

    # The caller has the refusal as soon as the status is sent; the server's span ends just after.
    for _ in range(50):
        if len(ours_now()) == 2:
            break
        await asyncio.sleep(0.1)
    ours = ours_now()
    assert len(ours) == 2
    assert all(s.parent is not None and s.parent.span_id == caller.get_span_context().span_id for s in ours)
    assert all(s.kind == trace.SpanKind.SERVER and s.attributes["rpc.method"] == "Search" for s in ours)
    assert sorted(s.attributes["rpc.grpc.status_code"] for s in ours) == [0, 3]
    assert [s.status.status_code for s in ours if s.attributes["rpc.grpc.status_code"] == 3] == [
        trace.StatusCode.ERROR
    ]


async def test_the_query_limit_refuses_callers_but_cuts_the_agents_own_searches(stack) -> None:
    """A search query past ragstack.domain.MAX_QUERY_CHARS is refused, naming the limit; the agent's
    own searches (derived from a question within its limit) are cut at it instead, never failing."""
    from ragstack import domain as d
    from ragstack.errors import RpcError
    from ragstack.rpc.clients import RetrieveClient, open_channel
    from services.agent.factory import AgentRetriever

    channel = open_channel(stack.peers["retrieve"], token=stack.cfg.services.token)
    long = "BM25 parameters " * 600  # 9,600 characters
    with pytest.raises(RpcError, match="query is 9599 characters, over the limit of 8000") as refused:
        await RetrieveClient(channel, 10).search(long, "default", 3, d.SearchMode.LEXICAL)
    assert refused.value.code == "INVALID_ARGUMENT"
    hits, _ = await AgentRetriever(channel, 10).search(long, "default", 3, d.SearchMode.LEXICAL)
    assert hits
    await channel.close()


async def test_get_trace_and_unknown_trace(stack) -> None:
    events = await _ask(stack, "Who proposed reciprocal rank fusion?")
    trace_id = events[-1].done.trace_id
    async with grpc.aio.insecure_channel(stack.peers["agent"]) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        got = await stub.GetTrace(agent_pb2.GetTraceRequest(trace_id=trace_id), timeout=5)
        assert json.loads(got.trace_json)["trace_id"] == trace_id
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetTrace(agent_pb2.GetTraceRequest(trace_id="0" * 32), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetTrace(agent_pb2.GetTraceRequest(trace_id="../../etc/passwd"), timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_unanswerable_question_is_withheld_with_sources(stack) -> None:
    done = (await _ask(stack, "How long should sourdough bread proof in the fridge?"))[-1].done
    assert done.abstained
    assert done.confidence <= 0.25
    assert done.citations  # the sources stay listed


async def test_explicit_mode_wins_and_signals_are_reported(stack) -> None:
    events = await _ask(stack, "tantivy writer lock", mode=common_pb2.SEARCH_MODE_LEXICAL)
    route = next(e.route for e in events if e.WhichOneof("event") == "route")
    assert route.mode == common_pb2.SEARCH_MODE_LEXICAL and route.classifier == "explicit"
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        stub = retrieve_pb2_grpc.RetrieveServiceStub(channel)
        resp = await stub.Search(
            retrieve_pb2.SearchRequest(query="cosine similarity of embeddings", top_k=4), timeout=10
        )
    assert resp.mode == common_pb2.SEARCH_MODE_HYBRID and len(resp.hits) == 4
    signals = {s.signal for s in resp.hits[0].signals}
    assert {"lexical", "dense", "fusion"} <= signals <= {"lexical", "dense", "page", "fusion"}
    assert [h.score for h in resp.hits] == sorted((h.score for h in resp.hits), reverse=True)


async def test_errors_map_to_status_codes(stack) -> None:
    async with grpc.aio.insecure_channel(stack.peers["agent"]) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in agent_pb2_grpc.AgentServiceStub(channel).Ask(
                agent_pb2.AskRequest(question="  "), timeout=5
            ):
                pass
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await retrieve_pb2_grpc.RetrieveServiceStub(channel).Search(
                retrieve_pb2.SearchRequest(query="x", top_k=5000), timeout=5
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "max_top_k" in (err.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await retrieve_pb2_grpc.RetrieveServiceStub(channel).Search(
                retrieve_pb2.SearchRequest(query="x", library="../etc"), timeout=5
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    async with grpc.aio.insecure_channel(stack.peers["ingest"]) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id="nope"), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:  # outside ingest.allowed_roots
            async for _ in stub.Ingest(ingest_pb2.IngestRequest(paths=["/does/not/exist"]), timeout=5):
                pass
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "ingest.allowed_roots" in (err.value.details() or "")
        inside = str(ROOT / "does-not-exist")  # under a root: the caller may learn that it is missing
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in stub.Ingest(ingest_pb2.IngestRequest(paths=[inside]), timeout=5):
                pass
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_documents_listed_with_fingerprints(stack) -> None:
    async with grpc.aio.insecure_channel(stack.peers["ingest"]) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        docs = (await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(), timeout=5)).documents
    assert len(docs) == 12
    assert all(len(d.fingerprint) == 64 and d.chunk_count > 0 and d.title and d.revision for d in docs)
    assert {d.build for d in docs} == {
        index_build(stack.cfg.ingest.chunk_tokens, stack.cfg.ingest.overlap_sentences)
    }
    assert {d.media_type for d in docs} == {"text/markdown"}


async def test_score_texts_against_a_query(stack) -> None:
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        stub = retrieve_pb2_grpc.RetrieveServiceStub(channel)
        resp = await stub.Score(
            retrieve_pb2.ScoreRequest(
                query="How is the BM25 length normalisation controlled?",
                texts=["The parameter b controls document length normalisation.", "Cats sleep a lot."],
            ),
            timeout=10,
        )
        assert len(resp.scores) == 2 and resp.scores[0] > resp.scores[1] + 0.2
        assert resp.scorer.startswith("cosine:")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Score(retrieve_pb2.ScoreRequest(query="q", texts=["t"] * 600), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "max_score_texts" in (err.value.details() or "")


async def test_filters_cap_and_context(stack) -> None:
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        stub = retrieve_pb2_grpc.RetrieveServiceStub(channel)

        async def search(**kw) -> list:  # type: ignore[no-untyped-def]
            resp = await stub.Search(
                retrieve_pb2.SearchRequest(query="ranking documents by score", **kw), timeout=10
            )
            return list(resp.hits)

        everything = await search(top_k=10, max_per_document=100)
        bm25_doc = next(h.chunk.document_id for h in everything if h.chunk.title.startswith("BM25"))
        only = await search(top_k=10, document_ids=[bm25_doc], max_per_document=100)
        assert only and {h.chunk.document_id for h in only} == {bm25_doc}

        prefix = ["BM25 Lexical Ranking", "The Scoring Function"]
        under = await search(top_k=10, heading_prefix=prefix, max_per_document=100)
        assert under and all(list(h.chunk.heading_path[:2]) == prefix for h in under)

        assert await search(top_k=5, media_types=["application/pdf"]) == []
        assert {h.chunk.media_type for h in await search(top_k=5, media_types=["text/markdown"])} == {
            "text/markdown"
        }

        capped = await search(top_k=8, max_per_document=1)
        assert len({h.chunk.document_id for h in capped}) == len(capped) == 8

        # A long section makes several chunks; context expansion brings the neighbours back.
        sentences = " ".join(f"Fact number {i} about the zebrafish lab is recorded here." for i in range(300))
        async with grpc.aio.insecure_channel(stack.peers["ingest"]) as ingest_channel:
            ingest = ingest_pb2_grpc.IngestServiceStub(ingest_channel)
            upload = ingest_pb2.FileUpload(
                filename="long.md", content=f"# Lab\n\n## Log\n\n{sentences}\n".encode()
            )
            async for _ in ingest.Ingest(ingest_pb2.IngestRequest(library="ctx", files=[upload]), timeout=60):
                pass
        resp = await stub.Search(
            retrieve_pb2.SearchRequest(
                query="fact number 150 zebrafish", library="ctx", top_k=1, expand_context=True
            ),
            timeout=10,
        )
        hit = resp.hits[0]
        assert hit.chunk.text in hit.context and len(hit.context) > len(hit.chunk.text)
        assert len(hit.context) <= 6000 and hit.context.count("Fact number") > hit.chunk.text.count(
            "Fact number"
        )
        assert all(not h.context for h in await search(top_k=3))


async def test_whole_pages_find_terms_that_chunks_split(stack) -> None:
    filler = " ".join(f"Filler sentence {i} about nothing in particular." for i in range(120))
    text = (
        f"# Field notes\n\n## North\n\nThe zephyr marker appears here. {filler}\n\n"
        f"## South\n\nA quokka was seen. {filler}\n"
    )
    async with grpc.aio.insecure_channel(stack.peers["ingest"]) as channel:
        upload = ingest_pb2.FileUpload(filename="notes.md", content=text.encode())
        async for _ in ingest_pb2_grpc.IngestServiceStub(channel).Ingest(
            ingest_pb2.IngestRequest(library="pages", files=[upload]), timeout=60
        ):
            pass
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        resp = await retrieve_pb2_grpc.RetrieveServiceStub(channel).Search(
            retrieve_pb2.SearchRequest(
                query="zephyr quokka", library="pages", top_k=3, mode=common_pb2.SEARCH_MODE_LEXICAL
            ),
            timeout=10,
        )
    north = [h for h in resp.hits if h.chunk.heading_path[-1] == "North"]
    south = [h for h in resp.hits if h.chunk.heading_path[-1] == "South"]
    assert north and south
    # The whole document matches both words; its page hit lifts the chunk holding the first of them.
    assert resp.hits[0].chunk.heading_path[-1] == "North" and resp.hits[0].score == 1.0


async def _search(stack, query: str, mode: int, **kw) -> retrieve_pb2.SearchResponse:
    async with grpc.aio.insecure_channel(stack.peers["retrieve"]) as channel:
        stub = retrieve_pb2_grpc.RetrieveServiceStub(channel)
        return await stub.Search(retrieve_pb2.SearchRequest(query=query, mode=mode, **kw), timeout=30)


async def test_graph_local_search_finds_the_chunks_naming_the_entity(stack) -> None:
    resp = await _search(stack, "What did Gordon Cormack propose?", common_pb2.SEARCH_MODE_GRAPH_LOCAL)
    assert resp.mode == common_pb2.SEARCH_MODE_GRAPH_LOCAL
    assert resp.hits[0].chunk.source.endswith("hybrid-search.md")
    assert [s.signal for s in resp.hits[0].signals] == ["graph"] and not resp.communities


async def test_graph_global_search_returns_communities_and_their_chunks(stack) -> None:
    query = "vector databases and approximate nearest neighbour indexes"
    resp = await _search(stack, query, common_pb2.SEARCH_MODE_GRAPH_GLOBAL, top_k=4)
    assert resp.mode == common_pb2.SEARCH_MODE_GRAPH_GLOBAL and resp.communities and resp.hits
    best = resp.communities[0]
    assert best.summary.startswith("Entities: ") and best.entities and best.chunk_ids
    assert resp.hits[0].chunk.chunk_id in best.chunk_ids


async def test_a_session_rewrites_follow_ups_and_is_listed(stack) -> None:
    first = await _ask(stack, "How does BM25 rank documents?", session_id="e2e-session")
    follow = await _ask(stack, "What are its parameters?", session_id="e2e-session")
    assert first[1].route.standalone_question == ""  # the first question stands alone
    assert follow[1].route.standalone_question == "What are BM25's parameters?"
    assert "BM25" in follow[-1].done.answer or follow[-1].done.abstained
    async with grpc.aio.insecure_channel(stack.peers["agent"]) as channel:
        listed = await agent_pb2_grpc.AgentServiceStub(channel).ListSessions(
            agent_pb2.ListSessionsRequest(), timeout=5
        )
    session = next(s for s in listed.sessions if s.session_id == "e2e-session")
    assert session.turns == 2 and session.last_question == "What are its parameters?"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _ask(stack, "anything", session_id="bad id")
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
