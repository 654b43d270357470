"""A document's index build: what, besides its bytes and its groups, decides the chunks and pages it
is indexed as. The catalog keeps each document's build; one whose bytes are unchanged is indexed
again when its build is not the pipeline's, so a parsing or chunking fix and a change of
`ingest.chunk_tokens` or `ingest.overlap_sentences` reach a library at its next ingest (at the cost
of re-indexing, once, every document they touch). Vectors are not part of it: a library's embedder
and its windows change through `ragstack tune embedder --reembed`."""

from __future__ import annotations

# Raise it when a change to parsing or chunking changes what a document's chunks or pages hold:
# tests/services/ingest/test_pipeline_version.py fails when our readers' and chunker's output on
# fixed inputs moves; a change to PDF or Docling parsing is raised by hand.
# 1 (never written: the empty build): before builds were recorded.
# 2: a sentence keeps the closing quotes and brackets after its stop; one may end with an
#    abbreviation before a word that starts sentences ("the U.S. The"); an ordinal before a month
#    or century ends none ("am 3. Oktober").
PIPELINE = 2


def index_build(chunk_tokens: int, overlap_sentences: int) -> str:
    """The build a pipeline with these settings writes, readable: `p2-c512-o1`."""
    return f"p{PIPELINE}-c{chunk_tokens}-o{overlap_sentences}"


def why_again(old: str, new: str) -> str:
    """Why a document with unchanged bytes is indexed again (FileProgress.reason on INDEXED)."""
    return f"indexed again: built as {old or 'before builds were recorded'}, now {new}"
