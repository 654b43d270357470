"""The tripwire of services/ingest/build.PIPELINE: what our own readers and chunker make of fixed
inputs (the shared data's Markdown ground truths and CSV files, and texts of our own) is recorded
per pipeline version. A change that alters any chunk fails here until PIPELINE is raised, so that
libraries built before are chunked again at their next ingest. PDF and the Docling formats are not
covered (their output also moves with third-party releases): a change there raises PIPELINE by hand."""

from __future__ import annotations

import hashlib
import json

from services.ingest import build, readers
from services.ingest.chunker import chunk_markdown
from tests.conftest import ROOT

DOCUMENTS = ROOT.parent / "shared" / "data" / "documents"
# Sentences, quotes, abbreviations, scripts and lists that the chunker's rules are about.
OWN = {
    "quotes.txt": '"Stop." He left at 3 p.m. sharp. (See the log.) Then: «Fin.» 終わり。次の文。\n\n'
    "Dr. Okafor met Mr. Lind, e.g. at 9 a.m., in the U.S. The talk ran long!\n",
    "notes.md": "# Field notes\n\n## Pumps\n\n- Prime the pump.\n- Open the valve; wait 10 s.\n\n"
    "| part | torque |\n|---|---|\n| bolt A | 12 Nm |\n| bolt B | 15 Nm |\n\n"
    "```python\nprint('x. y')\n```\n\n"
    + " ".join(f"Step {i} checks the seal before the next one begins." for i in range(80)),
    # Chunks that start with the sentence before (overlap): where a sentence ends shows in them.
    "keepers.txt": " ".join(
        f"Keeper {i} served in the U.S. The lamp {i} burned whale oil until dawn, e.g. in winter. "
        f"Am {i % 28 + 1}. Oktober kam das Schiff {i}."
        for i in range(60)
    ),
}
BEIR_LINE = json.dumps({"_id": "d1", "title": "Tides", "text": "High water came early. Low water came late."})
# Raise PIPELINE, then record the digest its test prints. An old version's entry may go.
DIGESTS = {2: "5cae7cfe31a454d39ccfc8df55807a706ea9a2784c68e8a922a20004912cb833"}


def _inputs() -> list[tuple[str, bytes, str]]:
    found = [(p.name, p.read_bytes(), "") for p in sorted(DOCUMENTS.glob("*/groundtruth/*.md"))]
    found += [(p.name, p.read_bytes(), "") for p in sorted(DOCUMENTS.glob("csv/*.csv"))]
    found += [(name, text.encode(), "") for name, text in OWN.items()]
    return [*found, ("corpus.jsonl", BEIR_LINE.encode(), "beir")]


def test_chunks_are_those_recorded_for_the_pipeline_version(embedder) -> None:  # type: ignore[no-untyped-def]
    inputs = _inputs()
    assert len(inputs) > 70
    digest = hashlib.sha256()
    for name, data, kind in inputs:
        parsed = readers.parse(name, data, kind)
        pieces = chunk_markdown(parsed.markdown, parsed.title, 512, 1, embedder.count_tokens)
        record = [name, parsed.title, parsed.media_type, [(p.text, p.heading_path, p.pages) for p in pieces]]
        digest.update(json.dumps(record, ensure_ascii=False).encode())
    assert digest.hexdigest() == DIGESTS.get(build.PIPELINE), (
        f"what documents are chunked into changed (digest {digest.hexdigest()}): raise "
        "services/ingest/build.PIPELINE, so that libraries built before are indexed again at their next "
        "ingest, and record the digest in DIGESTS under the new version"
    )
