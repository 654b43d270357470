"""The offline answer shapes of the query modes on real documents (../shared/data/documents) and on
small documents written here: every cell a verbatim quote of the evidence it cites, or "not stated"."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from ragstack.domain import Chunk, SearchHit
from services.agent.generate import NumberedEvidence
from services.agent.shapes import (
    CHECKLIST,
    NOT_STATED,
    Cell,
    Table,
    compare_table,
    datasets,
    methodology,
    reproduce_checklist,
    to_markdown,
)
from services.agent.shapes.compare import parse_question
from services.agent.shapes.markdown import NO_DATASETS, SUBJECT
from services.ingest.chunker import chunk_markdown
from services.ingest.readers import parse
from services.verify.claims import refs_in
from tests.conftest import SHARED

PDFS = SHARED / "data" / "documents" / "pdf"
PAPER = "2305.03393v1-pg9.pdf"  # a page of the OTSL paper (Lysak et al. 2023)


def _chunks(name: str, markdown: str, title: str) -> list[Chunk]:
    pieces = chunk_markdown(markdown, title, 512, 1, lambda t: len(t.split()))
    return [
        Chunk(f"{name}#{i}", name, "docs", p.text, p.heading_path, p.pages, i, title, name)
        for i, p in enumerate(pieces)
    ]


def numbered(*documents: Sequence[Chunk]) -> list[NumberedEvidence]:
    chunks = [c for d in documents for c in d]
    return [NumberedEvidence(str(i), SearchHit(c, 1.0)) for i, c in enumerate(chunks, start=1)]


def written(name: str, markdown: str, title: str = "") -> list[Chunk]:
    return _chunks(name, markdown, title or name)


@pytest.fixture(scope="module")
def pdfs() -> dict[str, list[Chunk]]:
    """Every PDF of the test set, parsed once and chunked as ingest does."""
    out = {}
    for path in sorted(PDFS.glob("*.pdf")):
        parsed = parse(path.name, path.read_bytes())
        out[path.name] = _chunks(path.name, parsed.markdown, parsed.title)
    return out


@pytest.fixture(scope="module")
def paper(pdfs: dict[str, list[Chunk]]) -> list[NumberedEvidence]:
    return numbered(pdfs[PAPER])


def flat(text: str) -> str:
    return " ".join(text.split())


def assert_quoted(cell: Cell, evidence: Sequence[NumberedEvidence]) -> None:
    """A cell is NOT_STATED with no refs, or a verbatim quote of every evidence it cites."""
    if cell.text == NOT_STATED:
        assert cell.refs == ()
        return
    assert cell.refs, cell
    texts = {e.ref: flat(e.hit.chunk.text) for e in evidence}
    for ref in cell.refs:
        assert cell.text in texts[ref], (cell, ref)


# datasets -----------------------------------------------------------------------------------------


def test_datasets_of_the_paper(paper: list[NumberedEvidence]) -> None:
    found = datasets(paper)
    assert [d.name for d in found] == ["PubTabNet", "FinTabNet", "PubTables-1M"]
    sizes = {d.name: d.size for d in found}
    assert sizes == {
        "PubTabNet": "395k samples",
        "FinTabNet": "113k samples",
        "PubTables-1M": "about 1M samples",
    }
    texts = {e.ref: flat(e.hit.chunk.text) for e in paper}
    for d in found:
        assert d.refs and all(d.name in texts[r] and d.used_for in texts[r] for r in d.refs)
        assert re.search(r"train|evaluat", d.used_for), d
    # The caption of Table 1 says what PubTabNet was used for.
    assert found[0].used_for == "trained only on PubTabNet [22]"


def test_datasets_has_no_false_positives_in_any_pdf(pdfs: dict[str, list[Chunk]]) -> None:
    """Section headings ("5.1 Hyper Parameter Optimization"), captions ("Table 1.", "Figure 7-26."),
    authors, contents pages and representations a model is "trained on" (OTSL) are no datasets."""
    everything = numbered(*pdfs.values())
    assert [d.name for d in datasets(everything)] == ["PubTabNet", "FinTabNet", "PubTables-1M"]
    for name, chunks in pdfs.items():
        if name != PAPER:
            assert datasets(numbered(chunks)) == (), name


DATASET_NOTES = """# Data

We evaluate on the SQuAD 2.0 benchmark and on Natural Questions. The MS MARCO collection consists of
8.8M passages drawn from Bing results. Our retriever is fine-tuned on MS MARCO and tested on the BEIR
benchmark.

## Negatives

Figure 2 shows the benchmark results for each data set. In March 2023, Smith et al. released a new
corpus of reviews. We benchmark OTSL against HTML on every table. The model trained on OTSL is faster.
Training data sets were collected by hand, and Table 3 lists them. On this benchmark OTSL outperforms
HTML by a wide margin. In the 2009 paper, the authors thank NVIDIA.

## More

We compare with BERT and RoBERTa on GLUE and SuperGLUE benchmarks. The Stanford Question Answering
Dataset (SQuAD) contains more than 100,000 questions. Later readers were trained only on SQuAD.
Answers were drawn from the European Social Survey (ESS) dataset, round 9.
"""


def test_datasets_from_cue_words_with_sizes_and_use() -> None:
    evidence = numbered(written("notes.md", DATASET_NOTES))
    found = {d.name: d for d in datasets(evidence)}
    assert list(found) == [
        "SQuAD 2.0",
        "MS MARCO",
        "BEIR",
        "GLUE",
        "SuperGLUE",
        "Stanford Question Answering Dataset (SQuAD)",
        "European Social Survey (ESS)",
    ]
    assert found["MS MARCO"].size == "8.8M passages"
    assert found["Stanford Question Answering Dataset (SQuAD)"].size == "more than 100,000 questions"
    # Named by its abbreviation later, with a weak cue the full name confirms.
    assert (
        found["Stanford Question Answering Dataset (SQuAD)"].used_for
        == "Later readers were trained only on SQuAD"
    )
    assert all(
        d.size == ""
        for n, d in found.items()
        if n not in ("MS MARCO", "Stanford Question Answering Dataset (SQuAD)")
    )
    assert (
        found["MS MARCO"].used_for
        == "Our retriever is fine-tuned on MS MARCO and tested on the BEIR benchmark"
    )
    assert found["SQuAD 2.0"].used_for.startswith("We evaluate on the SQuAD 2.0 benchmark")
    # "Natural Questions" follows a weak cue ("evaluate on") that no strong cue confirms: left out.
    assert "Natural Questions" not in found


def test_datasets_merges_mentions_and_keeps_every_ref() -> None:
    a = written("a.md", "We train on the PubLayNet dataset, which holds 360k pages of articles.")
    b = written("b.md", "Results on PubLayNet are reported in the appendix of this report.")
    c = written("c.md", "The DocBank benchmark (500k pages) is used for evaluation only.")
    found = datasets(numbered(a, b, c))
    assert [(d.name, d.size, d.refs) for d in found] == [
        ("PubLayNet", "360k pages", ("1", "2")),
        ("DocBank", "500k pages", ("3",)),
    ]
    assert found[1].used_for == "The DocBank benchmark (500k pages) is used for evaluation only"


def test_no_datasets_is_said_so() -> None:
    evidence = numbered(written("plain.md", "The nut is tightened by hand until it is seated on the bolt."))
    assert datasets(evidence) == ()
    assert to_markdown(datasets(evidence)) == NO_DATASETS


# compare ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "things", "aspects"),
    [
        ("Compare A and B on X and Y", ("A", "B"), ("X", "Y")),
        ("A vs B: which is faster", ("A", "B"), ("faster",)),
        ("How do A, B and C differ in cost?", ("A", "B", "C"), ("cost",)),
        ("How does LanceDB compare to Qdrant in terms of latency?", ("LanceDB", "Qdrant"), ("latency",)),
        (
            "What are the differences between the Boots nut and the elastic stop nut?",
            ("Boots nut", "elastic stop nut"),
            (),
        ),
        ("Which is cheaper, LanceDB or Qdrant?", ("LanceDB", "Qdrant"), ("cheaper",)),
        ("Compare the documents", (), ()),
        ("What is the capital of France?", (), ()),
    ],
)
def test_compare_questions(question: str, things: tuple[str, ...], aspects: tuple[str, ...]) -> None:
    asked = parse_question(question)
    assert (asked.things, asked.aspects) == (things, aspects)


def test_compare_table_on_the_paper(paper: list[NumberedEvidence]) -> None:
    table = compare_table("Compare OTSL and HTML on TED score, inference time and memory use", paper)
    assert table.columns == ("TED score", "inference time", "memory use")
    assert [name for name, _ in table.rows] == ["OTSL", "HTML"]
    for name, cells in table.rows:
        assert len(cells) == 3
        for cell in cells:
            assert_quoted(cell, paper)
        assert "TED score" in cells[0].text and name in cells[0].text
        assert "inference" in cells[1].text and name in cells[1].text
        assert cells[2] == Cell(NOT_STATED)  # the page says nothing of memory


LANCEDB = """# LanceDB notes

LanceDB is embedded in the process, whereas Qdrant is deployed as a separate server.
Its query latency is about 5 ms for one million vectors on a laptop.
It stores its tables as Lance files on local disk or object storage.
"""
QDRANT = """# Qdrant notes

Qdrant keeps its collections in segments on disk with a write-ahead log for durability.
It scales out by sharding each collection across the nodes of a cluster.
A filtered search in Qdrant has a latency of 2 to 10 ms depending on the payload index.
"""


def test_compare_table_rows_are_the_documents_named() -> None:
    evidence = numbered(
        written("lancedb.md", LANCEDB, "LanceDB notes"), written("qdrant.md", QDRANT, "Qdrant")
    )
    table = compare_table("Compare LanceDB and Qdrant on latency, storage, deployment and licence", evidence)
    assert table.columns == ("latency", "storage", "deployment", "licence")
    rows = dict(table.rows)
    assert list(rows) == ["LanceDB", "Qdrant"]
    for cells in rows.values():
        for cell in cells:
            assert_quoted(cell, evidence)
    # From the row's own document, although the sentence calls it "Its".
    assert rows["LanceDB"][0] == Cell(
        "Its query latency is about 5 ms for one million vectors on a laptop.", ("1",)
    )
    assert rows["LanceDB"][1].text.startswith("It stores its tables")
    assert rows["Qdrant"][0].text.startswith("A filtered search in Qdrant has a latency")
    # A sentence that contrasts the two gives each row its own part of it when that part says it.
    assert rows["Qdrant"][2] == Cell("whereas Qdrant is deployed as a separate server.", ("1",))
    assert (
        rows["LanceDB"][2].text
        == "LanceDB is embedded in the process, whereas Qdrant is deployed as a separate server."
    )
    assert rows["LanceDB"][3] == rows["Qdrant"][3] == Cell(NOT_STATED)


def test_compare_cells_match_close_forms_of_the_aspect() -> None:
    evidence = numbered(
        written("lancedb.md", LANCEDB, "LanceDB notes"), written("qdrant.md", QDRANT, "Qdrant")
    )
    table = compare_table("How do LanceDB and Qdrant differ in scalability?", evidence)
    assert table == Table(
        ("scalability",),
        (
            ("LanceDB", (Cell(NOT_STATED),)),
            (
                "Qdrant",
                (Cell("It scales out by sharding each collection across the nodes of a cluster.", ("2",)),),
            ),
        ),
    )


def test_compare_table_without_named_things_has_a_row_per_document(pdfs: dict[str, list[Chunk]]) -> None:
    evidence = numbered(pdfs[PAPER], pdfs["amt_handbook_sample.pdf"], pdfs["multi_page.pdf"])
    table = compare_table("Compare these documents", evidence)
    titles = list(dict.fromkeys(e.hit.chunk.title for e in evidence))
    assert [name for name, _ in table.rows] == titles
    assert table.columns == ("overview",)
    for name, (cell,) in table.rows:
        assert_quoted(cell, evidence)
        assert all(e.hit.chunk.title == name for e in evidence if e.ref in cell.refs)


# methodology --------------------------------------------------------------------------------------


def test_methodology_of_the_paper(paper: list[NumberedEvidence]) -> None:
    sections = methodology("How was the model trained and evaluated?", paper)
    assert [s.title for s in sections] == ["Steps", "Settings", "Data"]
    for s in sections:
        assert s.items and all(c.text != NOT_STATED for c in s.items), s.title
        for cell in s.items:
            assert_quoted(cell, paper)
    steps, settings, data = (" ".join(c.text for c in s.items) for s in sections)
    assert "independently trained and evaluated" in steps
    assert "enc=6, dec=6, heads=8" in settings and "AMD EPYC 7763 CPU @2.45 GHz" in settings
    assert "PubTabNet (395k samples)" in data and "bigger data set like PubTables-1M" in data
    # Headings are no steps, outcomes are no steps.
    assert "Optimized Table Tokenization" not in steps and "outperforms" not in steps


PROTOCOL = """# Fine-tuning protocol

First, we split the ReviewSet corpus into train, dev and test sets (80/10/10). Then we fine-tune
BERT-base with a learning rate of 2e-5 and a batch size of 32 for 3 epochs. Finally, we compute
macro F1 on the held-out test split and report the mean of five seeds.
"""
RECIPE = """# Bread

Mix the flour and the water in a large bowl until no dry flour is left. Then knead the dough on a
floured table until it is smooth. Bake the loaf in a hot oven until the crust is brown.
"""


def test_methodology_of_written_documents() -> None:
    evidence = numbered(written("protocol.md", PROTOCOL))
    steps, settings, data = methodology("How was BERT fine-tuned?", evidence)
    assert [c.text for c in steps.items] == [
        "First, we split the ReviewSet corpus into train, dev and test sets (80/10/10).",
        "Then we fine-tune BERT-base with a learning rate of 2e-5 and a batch size of 32 for 3 epochs.",
        "Finally, we compute macro F1 on the held-out test split and report the mean of five seeds.",
    ]
    assert [c.text for c in settings.items] == [steps.items[1].text]
    assert data.items[0].text == steps.items[0].text
    assert all(c.refs == ("1",) for s in (steps, settings, data) for c in s.items)
    # A document with no settings and no data: those sections say "not stated".
    bread = methodology("How is the bread made?", numbered(written("bread.md", RECIPE)))
    assert [c.text for c in bread[1].items] == [c.text for c in bread[2].items] == [NOT_STATED]
    assert len(bread[0].items) >= 1 and all(c.refs == ("1",) for c in bread[0].items)


# reproduce ----------------------------------------------------------------------------------------


def test_reproduce_checklist_of_the_paper(paper: list[NumberedEvidence]) -> None:
    checklist = reproduce_checklist("Can the OTSL results be reproduced?", paper)
    assert [c.item for c in checklist] == list(CHECKLIST)
    cells = {c.item: c.cell for c in checklist}
    for cell in cells.values():
        assert_quoted(cell, paper)
    assert cells["Code"] == Cell(NOT_STATED)  # the page gives no repository
    assert "publicly available data sets" in cells["Data"].text
    assert "enc=6, dec=6, heads=8" in cells["Hyper-parameters"].text
    assert "AMD EPYC 7763 CPU" in cells["Hardware"].text
    assert "TED scores" in cells["Evaluation"].text
    assert "- Code: not stated (missing)" in to_markdown(checklist).splitlines()


RELEASED = """# Reproducibility

Our code and trained models are available at https://github.com/example/review-bert under the MIT
licence. The ReviewSet corpus is publicly available from the authors on request. All models were
trained on four NVIDIA A100 GPUs with 80 GB of memory each.
"""


def test_reproduce_checklist_of_written_documents() -> None:
    evidence = numbered(written("protocol.md", PROTOCOL), written("released.md", RELEASED))
    cells = {c.item: c.cell for c in reproduce_checklist("How can I reproduce this?", evidence)}
    assert cells["Code"].text.startswith("Our code and trained models are available at https://github.com")
    assert cells["Data"].text == "The ReviewSet corpus is publicly available from the authors on request."
    assert "learning rate of 2e-5" in cells["Hyper-parameters"].text
    assert cells["Hardware"].text.startswith("All models were trained on four NVIDIA A100 GPUs")
    assert "macro F1" in cells["Evaluation"].text
    assert cells["Code"].refs == cells["Hardware"].refs == ("2",)
    # Without the release notes, code and hardware are missing.
    alone = reproduce_checklist("How can I reproduce this?", numbered(written("protocol.md", PROTOCOL)))
    missing = [c.item for c in alone if c.cell.text == NOT_STATED]
    assert missing == ["Code", "Hardware"]
    assert all(c.cell.refs == () for c in alone if c.item in missing)
    lines = to_markdown(alone).splitlines()
    assert lines[0] == "- Code: not stated (missing)" and lines[3] == "- Hardware: not stated (missing)"


# to_markdown --------------------------------------------------------------------------------------

_CELL = re.compile(r"^(?P<text>.*) \[(?P<refs>[\w.-]+(?:, [\w.-]+)*)\]$")


def _unescape(text: str) -> str:
    return re.sub(r"\\([|\[\]])", r"\1", text)


def _split_row(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_markdown_table_round_trips_its_cells(paper: list[NumberedEvidence]) -> None:
    piped = written("pipes.md", "# Pipes\n\nOTSL output is read as a | b | c rows when latency matters.")
    evidence = [*paper, NumberedEvidence("p1", SearchHit(piped[0], 1.0))]
    table = compare_table("Compare OTSL and HTML on TED score and latency", evidence)
    text = to_markdown(table)
    lines = text.splitlines()
    assert _split_row(lines[0]) == [SUBJECT, "TED score", "latency"]
    assert set(_split_row(lines[1])) == {"---"}
    assert len(lines) == 2 + len(table.rows)
    for line, (name, cells) in zip(lines[2:], table.rows, strict=True):
        parts = _split_row(line)
        assert len(parts) == 1 + len(cells)  # no `|` of a quote splits a row
        assert parts[0] == name
        for part, cell in zip(parts[1:], cells, strict=True):
            if cell.text == NOT_STATED:
                assert part == NOT_STATED
                continue
            m = _CELL.match(part)
            assert m, part
            assert _unescape(m.group("text")) == cell.text
            assert tuple(m.group("refs").split(", ")) == cell.refs
    assert dict(table.rows)["OTSL"][1] == Cell(
        "OTSL output is read as a | b | c rows when latency matters.", ("p1",)
    )


def test_markdown_lists_round_trip_their_markers(paper: list[NumberedEvidence]) -> None:
    sections = methodology("How was the model trained?", paper)
    text = to_markdown(sections)
    assert [line for line in text.splitlines() if line.startswith("### ")] == [
        "### Steps",
        "### Settings",
        "### Data",
    ]
    items = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    cells = [c for s in sections for c in s.items]
    assert len(items) == len(cells)
    for item, cell in zip(items, cells, strict=True):
        m = _CELL.match(item)
        assert m and _unescape(m.group("text")) == cell.text
        # The verifier reads the cell's markers, and not the paper's own "[22]" inside the quote.
        assert refs_in(item) == set(cell.refs)
    found = datasets(paper)
    lines = to_markdown(found).splitlines()
    assert lines[0] == "- **PubTabNet** (395k samples): trained only on PubTabNet \\[22\\] [1]"
    assert all(refs_in(line) == set(d.refs) for line, d in zip(lines, found, strict=True))


def test_shapes_are_deterministic(paper: list[NumberedEvidence]) -> None:
    question = "Compare OTSL and HTML on TED score and inference time"
    assert compare_table(question, paper) == compare_table(question, list(paper))
    assert methodology(question, paper) == methodology(question, paper)
    assert datasets(paper) == datasets(paper)
    assert isinstance(compare_table(question, []), Table)
    assert compare_table(question, []).rows == (
        ("OTSL", (Cell(NOT_STATED),) * 2),
        ("HTML", (Cell(NOT_STATED),) * 2),
    )
