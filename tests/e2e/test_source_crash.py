"""`kill -9` of the ingester while it syncs a folder source, again and again at random points (a
poll, a job's scan, a batch being written), with files added, changed and deleted while it is
down: once it runs to the end, the library holds exactly the folder's files, each at its current
content, each once in every store."""

from __future__ import annotations

import hashlib
import random
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
from tests.e2e.test_processes import RAGSTACK, env, free_ports

FILES = 240


def catalog(data: Path) -> dict[str, tuple[str, str, int]]:
    """source -> (document id, fingerprint, chunks) of the library, as committed."""
    path = data / "catalog.sqlite"
    if not path.exists():
        return {}
    try:
        with sqlite3.connect(path) as db:
            rows = db.execute(
                "SELECT source, document_id, fingerprint, chunk_count FROM documents WHERE library = 'synced'"
            ).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return {}
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def write(folder: Path, i: int, version: int = 0) -> None:
    body = f"# Note {i}\n\nmarker{i}v{version} " + f"The lock keeper of canal {i} writes a log. " * 40
    (folder / f"note{i:04d}.md").write_text(body + "\n")


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """The ingest service, once it serves (its log says so)."""
    before = log.read_text().count("ingest serving") if log.exists() else 0
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*RAGSTACK, "-c", str(config), "serve", "--service", "ingest"],
            stdout=subprocess.DEVNULL,
            stderr=out,
            env=env(),
        )
    deadline = time.monotonic() + 120
    while log.read_text().count("ingest serving") == before:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    return proc


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_kill_9_at_random_points_loses_no_change_and_duplicates_no_document(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    for i in range(FILES):
        write(folder, i)
    data = tmp_path / "data"
    (port,) = free_ports(1)
    config = tmp_path / "ragstack.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data_dir": str(data),
                "models": {"embedder_dir": str(MODEL_DIR)},
                "llm": {"enabled": False},
                "ingest": {
                    "batch_chunks": 24,
                    "graph": False,
                    "allowed_roots": [str(tmp_path)],
                    "source_tick_s": 0.2,
                },
                "services": {"ingest": {"port": port}},
                "sources": [
                    {
                        "name": "notes",
                        "kind": "folder",
                        "url": str(folder),
                        "library": "synced",
                        "interval_s": 1,
                    }
                ],
            }
        )
    )
    log = tmp_path / "ingest.log"
    # Once in the middle of the first sync's job, with part of the folder committed...
    proc = start(config, log)
    deadline = time.monotonic() + 300
    while len(catalog(data)) < 24:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    kill(proc)
    assert 0 < len(catalog(data)) < FILES
    # ... the folder changes while it is down ...
    for i in range(0, 30, 3):
        write(folder, i, version=1)  # changed
    for i in range(1, 30, 3):
        (folder / f"note{i:04d}.md").unlink()  # deleted
    for i in range(FILES, FILES + 10):
        write(folder, i)  # added
    # ... then at random points: a poll, a job's scan, a batch being written, a removal.
    rng = random.Random(7)
    for _ in range(5):
        proc = start(config, log)
        time.sleep(rng.uniform(0.2, 4.0))
        kill(proc)

    proc = start(config, log)
    try:
        expected = {str(p.resolve()): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
        deadline = time.monotonic() + 420
        while {s: v[1] for s, v in catalog(data).items()} != expected:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, (len(catalog(data)), len(expected))
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    docs = catalog(data)
    vectors = VectorStore(data / "lancedb", 384)._open()
    assert vectors.count_rows("library = 'synced'") == sum(chunks for _, _, chunks in docs.values())
    for _, (doc_id, _, chunks) in docs.items():
        assert vectors.count_rows(f"library = 'synced' AND document_id = {sql_str(doc_id)}") == chunks
    lexical = LexicalStore(data / "tantivy" / "chunks")
    for i in (0, 3, FILES + 1, FILES - 1):  # changed, changed, added, untouched
        version = 1 if i < 30 and i % 3 == 0 else 0
        hits = lexical.search(f"marker{i}v{version}", "synced", 3)
        assert hits and Path(hits[0][0].source).name == f"note{i:04d}.md", i
    assert not lexical.search("marker0v0", "synced", 3)  # the old version is gone
    assert not lexical.search("marker1v0", "synced", 3)  # a deleted file's document too
