from __future__ import annotations

import itertools

from services.ingest.chunker import chunk_markdown, sections
from tests.conftest import SAMPLES


def words(text: str) -> int:
    return len(text.split())


DOC = """# Guide

Intro sentence one. Intro sentence two.

## Install

### Linux

Run the installer first. Then check the version. Finally restart the shell.

```bash
pip install ragstack
# a comment, not a heading
ragstack --help
```

| os | command |
|----|---------|
| debian | apt install x |
| fedora | dnf install x |
| arch | pacman -S x |

## Usage

Ask a question.
"""


def test_heading_paths_start_with_the_title() -> None:
    paths = [s.heading_path for s in sections(DOC, "ignored")]
    assert paths == [("Guide",), ("Guide", "Install", "Linux"), ("Guide", "Usage")]


def test_text_without_h1_uses_the_given_title() -> None:
    assert sections("## A\ntext\n", "File")[0].heading_path == ("File", "A")
    assert sections("plain text only", "File")[0].heading_path == ("File",)


def test_code_block_is_never_cut_and_its_comment_is_no_heading() -> None:
    chunks = chunk_markdown(DOC, "Guide", max_tokens=8, overlap_sentences=1, count_tokens=words)
    code = [c for c in chunks if "pip install ragstack" in c.text]
    assert len(code) == 1
    assert "```bash\npip install ragstack\n# a comment, not a heading\nragstack --help\n```" in code[0].text
    assert all("a comment, not a heading" not in p for c in chunks for p in c.heading_path)


def test_table_splits_between_rows_and_repeats_its_header() -> None:
    chunks = chunk_markdown(DOC, "Guide", max_tokens=12, overlap_sentences=0, count_tokens=words)
    rows = [c for c in chunks if "install x" in c.text or "pacman" in c.text]
    assert len(rows) >= 2
    for c in rows:
        assert "| os | command |" in c.text
    for row in ("| debian | apt install x |", "| fedora | dnf install x |", "| arch | pacman -S x |"):
        assert sum(row in c.text for c in chunks) == 1


def test_chunks_respect_budget_and_overlap_one_sentence() -> None:
    prose = "# T\n\n" + " ".join(f"Sentence number {i} is here." for i in range(20))
    chunks = chunk_markdown(prose, "T", max_tokens=15, overlap_sentences=1, count_tokens=words)
    assert len(chunks) > 3
    assert all(words(c.text) <= 15 for c in chunks)
    for prev, nxt in itertools.pairwise(chunks):
        last = prev.text.split(". ")[-1].rstrip(".")
        assert nxt.text.startswith(last)


def test_overlong_sentence_is_cut_between_words() -> None:
    text = "# T\n\n" + " ".join(["word"] * 50) + "."
    chunks = chunk_markdown(text, "T", max_tokens=20, overlap_sentences=0, count_tokens=words)
    assert len(chunks) == 3 and all(words(c.text) <= 20 for c in chunks)


def test_real_tokenizer_budget(embedder) -> None:
    text = (SAMPLES / "bm25.md").read_text()
    chunks = chunk_markdown(text, "BM25", 128, 1, embedder.count_tokens)
    assert len(chunks) > 3
    # Only atomic units (code blocks, table rows) may exceed the budget.
    assert all(embedder.count_tokens(c.text) <= 128 or "```" in c.text or "|" in c.text for c in chunks)


def test_a_sentence_longer_than_the_model_reads_is_cut_to_the_budget(embedder) -> None:
    # 1,000 word pieces with no sentence end: over the embedder's 256 and the 512 budget.
    text = "# T\n\n" + " ".join(f"term{i % 7}" for i in range(500))
    chunks = chunk_markdown(text, "T", 512, 1, embedder.count_tokens)
    assert len(chunks) == 2 and all(embedder.count_tokens(c.text) <= 512 for c in chunks)


def test_page_markers_give_chunks_their_pages() -> None:
    doc = (
        "<!-- page 1 -->\n# Report\n\nFirst page text. More of it.\n<!-- page 2 -->\nSecond page text.\n\n"
        "## Part\n\nOnly page two.\n<!-- page 3 -->\nPage three here."
    )
    chunks = chunk_markdown(doc, "R", max_tokens=100, overlap_sentences=0, count_tokens=words)
    assert [(c.heading_path, c.pages) for c in chunks] == [
        (("Report",), (1, 2)),
        (("Report", "Part"), (2, 3)),
    ]
    assert all("<!--" not in c.text for c in chunks)


def test_a_chunk_keeps_the_quotes_and_brackets_that_close_its_sentences() -> None:
    text = "He said \"stop.\" Then he left (see above.) She wrote 'done.' The end."
    (chunk,) = chunk_markdown(f"# Notes\n\n{text}\n", "Notes", 100, 0, words)
    assert chunk.text == text
