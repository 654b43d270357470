"""`ragstack.RAG` and `AsyncRAG`: the stack embedded in a program, as the README shows it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragstack import domain as d
from tests.conftest import ROOT


def readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- example: rag-api -->\n```python\n(.*?)```", text, re.S)
    assert match, "the README's RAG example is gone"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_example_runs(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", readme_example()], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "1 indexed, 0 failed"
    assert "Friday at noon" in out.stdout and "[1]" in out.stdout
    assert lines[-1] == "DoneEvent"  # the stream ends with the answer
    assert (tmp_path / "rag-data" / "catalog.sqlite").exists()


async def test_async_rag_ingests_searches_asks_and_deletes(tmp_path: Path) -> None:
    from ragstack import AsyncRAG

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "lamps.md").write_text(
        "# Lamps\n\nThe Brek lamp dims to a tenth of its light after ten minutes.\n"
    )
    (notes / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    seen: list[d.FileProgress] = []
    async with AsyncRAG(tmp_path / "data", environ={"RAGSTACK__LLM__ENABLED": "false"}) as rag:
        summary = await rag.ingest([notes], library="home", on_progress=seen.append)
        assert (summary.indexed, summary.failed) == (1, 1) and "broken.pdf" in summary.failures[0]
        assert {Path(e.source).name for e in seen} >= {"lamps.md", "broken.pdf"}
        hits = await rag.search("lamp dims", library="home")
        assert hits and hits[0].chunk.source.endswith("lamps.md")
        done = await rag.ask("How much does the Brek lamp dim after ten minutes?", library="home")
        assert "a tenth" in done.answer and done.citations and done.manifest.verified
        (doc,) = await rag.documents("home")
        assert await rag.delete_document(doc.document_id, "home") > 0
        assert await rag.documents("home") == []


def test_rag_outside_its_block_says_so(tmp_path: Path) -> None:
    from ragstack import RAG

    rag = RAG(tmp_path / "data")
    with pytest.raises(RuntimeError, match="RAG is closed"):
        rag.ask("anything")
