"""`kill -9` during an ingest: what was committed stays readable and whole, and the next run finishes
the job without duplicates."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore, sql_str
from tests.conftest import MODEL_DIR
from tests.e2e.test_processes import RAGSTACK, env

DOCS = 400


def catalog(data: Path) -> dict[str, int]:
    path = data / "catalog.sqlite"
    if not path.exists():
        return {}
    with sqlite3.connect(path) as db:
        try:
            return dict(db.execute("SELECT document_id, chunk_count FROM documents WHERE library = 'crash'"))
        except sqlite3.OperationalError:
            return {}


def check_whole(data: Path) -> dict[str, int]:
    """Every document the catalog lists is complete in both stores."""
    docs = catalog(data)
    vectors = VectorStore(data / "lancedb", 384)
    lexical = LexicalStore(data / "tantivy" / "chunks")
    table = vectors._open()
    for doc_id, chunks in docs.items():
        assert table.count_rows(f"library = 'crash' AND document_id = {sql_str(doc_id)}") == chunks, doc_id
    if docs:
        sample = next(iter(docs))
        assert lexical.search(f"marker{sample}", "crash", 5)[0][0].document_id == sample
    return docs


@pytest.mark.slow
@pytest.mark.timeout(900)  # two ingests of 400 documents: about 300 s on a loaded machine
def test_kill_during_ingest_then_resume(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps(
                {"_id": str(i), "title": f"Doc {i}", "text": f"marker{i} " + "Sentence about topic. " * 30}
            )
            + "\n"
            for i in range(DOCS)
        )
    )
    data = tmp_path / "data"
    config = tmp_path / "ragstack.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data_dir": str(data),
                "models": {"embedder_dir": str(MODEL_DIR)},
                "llm": {"enabled": False},
                "ingest": {"batch_chunks": 32},
                "services": {n: {"port": 0} for n in ("ingest", "retrieve", "agent", "verify", "gateway")},
            }
        )
    )
    cmd = [*RAGSTACK, "-c", str(config), "ingest", "--library", "crash", str(corpus)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    try:
        deadline = time.monotonic() + 240
        while len(catalog(data)) < 64:
            assert proc.poll() is None, "ingest ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:  # killed there, or on a failed assertion (a process left running warns in a later test)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    done = check_whole(data)
    assert 0 < len(done) < DOCS

    again = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{DOCS - len(done)} indexed, {len(done)} unchanged, 0 failed" in again.stderr
    final = check_whole(data)
    assert len(final) == DOCS
    assert VectorStore(data / "lancedb", 384).count("crash") == sum(final.values())
