"""The mechanical protobuf <-> domain conversions: every field survives the round trip, and every
field of the messages has its domain counterpart (a field added to one side only fails here)."""

from __future__ import annotations

import dataclasses

import pytest

from ragstack import convert
from ragstack import domain as d
from ragstack.v1 import agent_pb2, common_pb2, ingest_pb2, retrieve_pb2

SUMMARY = d.IngestSummary(3, 1, 1, 1, 1, 9, 2.5, ["x.pdf: cannot read PDF"], 4, 5, 2, 1, ["no LLM"], 1)
CASES = [
    (
        d.Document(
            "doc", "lib", "a.md", "r1", "f", "A", "text/markdown", 3, "2026-12-02", ("staff",), "p2-c512-o1"
        ),
        convert.document_to_pb,
        convert.document_from_pb,
    ),
    (
        d.Chunk("doc:0", "doc", "lib", "text", ("A", "B"), (1, 2), 4, "A", "a.md", "text/markdown"),
        convert.chunk_to_pb,
        convert.chunk_from_pb,
    ),
    (
        d.FileProgress("a.md", d.FileStage.INDEXED, 2, 5, "doc", 7, "why"),
        convert.progress_to_pb,
        convert.ingest_event_from_pb,
    ),
    (SUMMARY, convert.summary_to_pb, convert.ingest_event_from_pb),
    (
        d.SnapshotInfo("before", "2026-12-01", {"chunks": 4}, 2, 9, 1024),
        convert.snapshot_to_pb,
        convert.snapshot_from_pb,
    ),
    (
        d.StoreStats(
            [
                d.LibraryStats("a", 1, 2, 3, 4, 5, {"text/markdown": 1}, 6, 7, 8, "2026-12-02"),
                d.LibraryStats("b", 9),
            ],
            {"chunks": 3},
            10,
            11,
            12,
            13,
            14,
        ),
        convert.store_stats_to_pb,
        convert.store_stats_from_pb,
    ),
    (
        d.RetrieveStats([d.StoreFreshness("chunks", 3, "2026-12-02T10:00:00+00:00", 1.5)], 10.0),
        convert.retrieve_stats_to_pb,
        convert.retrieve_stats_from_pb,
    ),
    (
        d.VacuumReport(7, 3, {"chunks": 2}, 4, 5, 6, 8),
        convert.vacuum_to_pb,
        convert.vacuum_from_pb,
    ),
    (
        d.Feedback("t" * 32, "down", "wrong page", "ana", "Where?", "team", "2026-12-02"),
        convert.feedback_to_pb,
        convert.feedback_from_pb,
    ),
    (d.ChunkRegion(2, 0.125, 0.25, 0.5, 0.75), convert.region_to_pb, convert.region_from_pb),
    (
        d.DoneEvent(
            "t",
            "Night scenes [1].",
            (d.Citation("1", d.Chunk("doc:0", "doc", "", "text"), "text"),),  # a citation names no library
            0.75,
            False,
            "llm:x",
            d.Manifest(
                (d.Claim("c1", "Night scenes", ("1",), d.Verdict.SUPPORTED, 0.5, "ok"),), 1.0, "offline"
            ),
            ("doc:0",),
            d.ActiveRetrieval(1, ("scenes",), ("doc:1",), True),
            "llm.max_output_tokens",
        ),
        convert.ask_event_to_pb,
        convert.ask_event_from_pb,
    ),
    (
        d.ChunkVisual(
            b"\x89PNG", 2, (d.ChunkRegion(2, 0, 0.5, 1, 0.625), d.ChunkRegion(2, 0.25, 0, 0.5, 0.125)), 8, 9
        ),
        convert.visual_to_pb,
        convert.visual_from_pb,
    ),
]


@pytest.mark.parametrize("value, to_pb, from_pb", CASES, ids=lambda c: type(c).__name__)
def test_every_field_survives_the_round_trip(value, to_pb, from_pb) -> None:  # type: ignore[no-untyped-def]
    assert from_pb(to_pb(value)) == value


def test_a_job_with_and_without_its_summary() -> None:
    pb = ingest_pb2.IngestJob(
        job_id="j",
        library="lib",
        state=ingest_pb2.INGEST_JOB_STATE_DONE,
        files_done=3,
        summary=convert.summary_to_pb(SUMMARY).summary,
        attempts=2,
        principal="alice",
    )
    job = convert.ingest_job_from_pb(pb)
    assert (job.state, job.summary, job.files_done, job.principal) == ("done", SUMMARY, 3, "alice")
    pb.ClearField("summary")
    assert convert.ingest_job_from_pb(pb).summary is None


def test_a_chunk_leaves_without_its_acl_groups() -> None:
    pb = convert.chunk_to_pb(d.Chunk("c", "doc", "lib", "t", groups=("secret-team",)))
    assert "secret-team" not in str(pb)


# Message -> its domain type, for every message converted field by field; the domain fields a
# message deliberately lacks are named.
PAIRS = [
    (common_pb2.Document, d.Document, set()),
    (common_pb2.Chunk, d.Chunk, {"groups"}),
    (ingest_pb2.FileProgress, d.FileProgress, set()),
    (ingest_pb2.IngestSummary, d.IngestSummary, set()),
    (ingest_pb2.IngestJob, d.IngestJob, set()),
    (ingest_pb2.Snapshot, d.SnapshotInfo, set()),
    (ingest_pb2.LibraryStats, d.LibraryStats, set()),
    (ingest_pb2.StatsResponse, d.StoreStats, set()),
    (ingest_pb2.VacuumResponse, d.VacuumReport, set()),
    (retrieve_pb2.CommunityHit, d.CommunityHit, set()),
    (agent_pb2.Feedback, d.Feedback, set()),
    (retrieve_pb2.GraphEntity, d.GraphEntity, set()),
    (retrieve_pb2.GraphRelation, d.GraphRelation, set()),
    (retrieve_pb2.GraphCommunity, d.GraphCommunity, set()),
    (retrieve_pb2.ChunkRegion, d.ChunkRegion, set()),
    (agent_pb2.ActiveRetrieval, d.ActiveRetrieval, set()),
    (agent_pb2.DoneEvent, d.DoneEvent, set()),
    (retrieve_pb2.GetChunkVisualResponse, d.ChunkVisual, set()),
]


@pytest.mark.parametrize("message, domain, not_sent", PAIRS, ids=lambda p: getattr(p, "__name__", ""))
def test_the_message_and_its_domain_type_have_the_same_fields(message, domain, not_sent) -> None:  # type: ignore[no-untyped-def]
    fields = {f.name for f in dataclasses.fields(domain)}
    assert set(message.DESCRIPTOR.fields_by_name) == fields - not_sent


@pytest.mark.parametrize("entities", [0, 3, 2_500])
def test_a_graph_of_any_size_arrives_whole_over_its_pages(entities: int) -> None:
    view = d.GraphView(
        [d.GraphEntity(f"e{i}", f"E{i}", "ORG", (f"doc:{i}",)) for i in range(entities)],
        [d.GraphRelation(f"e{i}", f"e{i + 1}", 1.5, "co-occurs", "E0 and E1.") for i in range(entities - 1)],
        [d.GraphCommunity("c1", ("e0", "e1"), "E0 and E1", ("doc:0",), ("doc",))],
        chunks_with_entities=entities,
    )
    pages = convert.graph_to_pages(view)
    assert all(len(p.entities) + len(p.relations) + len(p.communities) <= convert.GRAPH_PAGE for p in pages)
    back = d.GraphView()
    for page in pages:
        convert.graph_from_page(back, page)
    assert back == view
