"""How an answer is cut into units, the same for the agent's citation policy and the verifier's
claims: Markdown lines, tables, headings and quotes, so that no structure carries an uncited
statement along with a cited one. Examples of our own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ragstack.answer_units import Unit, answer_units, is_name
from ragstack.query_trace import QueryTrace
from services.agent.stages.ground import grounded_text
from services.verify.claims import split_claims

STATEMENT = "Lighthouses were once lit by burning whale oil in most harbours"  # uncited, long
CITED = "Tantivy stores positions for phrase queries [1]."
EVIDENCE: Any = [SimpleNamespace(ref="1")]


def lenient(text: str) -> str:
    return grounded_text(text, EVIDENCE, "lenient", QueryTrace(trace_id="t", question="q", library="l"))


def test_tables_give_labels_and_cells() -> None:
    table = f"| Engine | Feature |\n|---|:--:|\n| Tantivy | {CITED} |\n| {STATEMENT} | phrases [1] |"
    assert answer_units(table) == [
        Unit("label", "Engine"),
        Unit("label", "Feature"),
        Unit("label", "Tantivy"),
        Unit("cell", CITED),
        Unit("label", STATEMENT),
        Unit("cell", "phrases [1]"),
    ]
    assert is_name("Tantivy") and not is_name(STATEMENT)  # past policy.LABEL_WORDS words


def test_a_line_is_its_own_unless_it_continues_the_sentence_before() -> None:
    text = f"> {STATEMENT}\nTantivy stores positions\nfor phrase queries [1].\n## Index layout\n- an item"
    assert answer_units(text) == [
        Unit("prose", STATEMENT),
        Unit("prose", "Tantivy stores positions\nfor phrase queries [1]."),
        Unit("label", "Index layout"),
        Unit("item", "an item"),
    ]


def test_the_citation_policy_removes_what_rides_on_another_line_or_in_a_structure() -> None:
    for hidden in (
        f"{STATEMENT}\n{CITED}",
        f"> {STATEMENT}\n{CITED}",
        f"### {STATEMENT}\n{CITED}",
        f"| Engine | Feature |\n|---|---|\n| {STATEMENT} | {CITED} |",
        f"| Engine | Feature |\n|---|---|\n| Tantivy | {CITED} |\n| Lucene | {STATEMENT} |",
    ):
        delivered = lenient(hidden)
        assert STATEMENT not in delivered and "Tantivy stores positions" in delivered, hidden
        assert not any(line.strip() in ("#", "###", ">") for line in delivered.splitlines())


def test_short_labels_wrapped_sentences_and_not_stated_cells_are_kept() -> None:
    answer = (
        f"## Storage\nTantivy stores positions\nfor phrase queries [1].\n\n"
        f"| Engine | Phrases |\n|---|---|\n| Tantivy | {CITED} |\n| Lucene | not stated |"
    )
    assert lenient(answer) == answer
    strict = grounded_text(
        f"{STATEMENT}\n{CITED}", EVIDENCE, "strict", QueryTrace(trace_id="t", question="q", library="l")
    )
    assert strict == ""  # the uncited line withholds the answer, as a sentence would


def test_the_verifier_judges_each_line_on_its_own_and_no_label() -> None:
    claims = split_claims(f"> {STATEMENT}\n{CITED}\n\n## Engines\n| A | B |\n|---|---|\n| Tantivy | x [1] |")
    assert [(c.text, c.refs) for c in claims] == [
        (STATEMENT, ()),  # not merged into the cited line after it
        ("Tantivy stores positions for phrase queries.", ("1",)),
        ("x", ("1",)),
    ]
