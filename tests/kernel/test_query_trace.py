"""The trace file's schema: what the agent writes reads back the same, and files written before the
schema was versioned still read (as version 1)."""

from __future__ import annotations

import json
from pathlib import Path

from ragstack.query_trace import SCHEMA_VERSION, QueryTrace
from ragstack.traces import TraceStore

TRACE_ID = "0123456789abcdef0123456789abcdef"

# A trace as the agent wrote it before schema_version was recorded (abridged hits and manifest).
UNVERSIONED = {
    "trace_id": TRACE_ID,
    "principal": "alice",
    "question": "What is the default k1?",
    "library": "default",
    "session_id": "",
    "session_key": "",
    "request_id": "",
    "memory": True,
    "started_at": "2026-11-30T10:00:00+00:00",
    "top_k_requested": 0,
    "standalone_question": "What is the default k1?",
    "route": {
        "mode": "hybrid",
        "classifier": "heuristic",
        "reason": "default",
        "sub_questions": [],
        "standalone_question": "",
        "top_k": 5,
    },
    "tool_calls": [
        {
            "tool": "search",
            "arguments": {
                "query": "What is the default k1?",
                "library": "default",
                "top_k": 5,
                "mode": "hybrid",
            },
            "hint": "",
            "result_count": 1,
            "took_ms": 3.2,
            "hits": [{"chunk_id": "bm25:1", "score": 0.03, "signals": []}],
        }
    ],
    "grades": [{"query": "What is the default k1?", "grade": "correct", "score": 0.81, "grader": "score"}],
    "grade": {"grade": "correct", "score": 0.81, "hits": 1},
    "generator": "extractive",
    "draft": "Tantivy defaults to k1 = 1.2 [1].",
    "verification": {"manifest": {"claims": []}, "confidence": 0.9, "abstain": False},
    "answer": "Tantivy defaults to k1 = 1.2 [1].",
    "abstained": False,
    "confidence": 0.9,
    "citations": [
        {"ref": "1", "chunk_id": "bm25:1", "source": "bm25.md", "heading_path": ["BM25"], "pages": []}
    ],
    "took_ms": 41.5,
}


def test_an_unversioned_trace_file_reads_as_version_1(tmp_path: Path) -> None:
    (tmp_path / f"{TRACE_ID}.json").write_text(json.dumps(UNVERSIONED))
    trace = QueryTrace.from_json(TraceStore(tmp_path, retention=3).read(TRACE_ID))
    assert trace.schema_version == 1 and trace.principal == "alice"
    assert trace.route is not None and trace.route["mode"] == "hybrid"
    assert trace.to_json() == {"schema_version": 1, **UNVERSIONED}


def test_fields_an_older_writer_lacked_read_as_empty_and_stay_unwritten() -> None:
    oldest = {"trace_id": TRACE_ID, "question": "q", "library": "default", "answer": "a", "retired": 1}
    trace = QueryTrace.from_json(oldest)
    assert trace.principal == "" and not trace.memory and trace.route is None and trace.tool_calls is None
    assert trace.to_json() == {
        "schema_version": 1,
        "trace_id": TRACE_ID,
        "principal": "",
        "question": "q",
        "library": "default",
        "session_id": "",
        "session_key": "",
        "request_id": "",
        "memory": False,
        "started_at": "",
        "top_k_requested": 0,
        "answer": "a",
    }


def test_what_is_written_reads_back_the_same(tmp_path: Path) -> None:
    trace = QueryTrace(trace_id=TRACE_ID, question="q", library="default", principal="alice")
    trace.open_tools()
    trace.add_call({"tool": "recall_memory", "arguments": {"query": "q"}, "result_count": 1})
    store = TraceStore(tmp_path, retention=3)
    store.write(TRACE_ID, trace.to_json())
    written = store.read(TRACE_ID)
    assert written["schema_version"] == SCHEMA_VERSION and written["grades"] == []
    assert "answer" not in written  # not reached: not written
    assert QueryTrace.from_json(written) == trace
