"""How an answer is cut into units, the same for the agent's citation policy and the verifier's
claims: Markdown lines, tables, headings, quotes and code, so that no structure carries an uncited
statement along with a cited one, and what the policy removes is taken out of its own lines only.
Examples of our own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragstack.answer_units import Unit, answer_units, finished_part, is_name, says_not_stated
from ragstack.query_trace import QueryTrace
from services.agent.stages.ground import grounded_text
from services.verify.claims import split_claims

STATEMENT = "Lighthouses were once lit by burning whale oil in most harbours"  # uncited, long
CITED = "Tantivy stores positions for phrase queries [1]."
DOCUMENT = "Tantivy stores positions for phrase queries.\n\n    index.search(query, limit=10)\n"
EVIDENCE: Any = [SimpleNamespace(ref="1", hit=SimpleNamespace(chunk=SimpleNamespace(text=DOCUMENT)))]


def ground(text: str, policy: str = "lenient") -> str:
    return grounded_text(text, EVIDENCE, policy, QueryTrace(trace_id="t", question="q", library="l"))


def test_tables_give_labels_and_cells_with_their_place() -> None:
    table = f"| Engine | Feature |\n|---|:--:|\n| Tantivy | {CITED} |\n| {STATEMENT} | phrases [1] |"
    assert [(u.kind, u.text, u.first, u.cell) for u in answer_units(table)] == [
        ("label", "Engine", 0, 0),
        ("label", "Feature", 0, 1),
        ("label", "Tantivy", 2, 0),
        ("cell", CITED, 2, 1),
        ("label", STATEMENT, 3, 0),
        ("cell", "phrases [1]", 3, 1),
    ]
    assert is_name("Tantivy") and not is_name(STATEMENT)  # past policy.LABEL_WORDS words
    assert not is_name("the-moon-is-made-of-green-cheese") and not is_name("月亮是由绿色奶酪制成的")


def test_a_line_is_its_own_unless_it_continues_the_one_before() -> None:
    text = (
        f"> {STATEMENT}\nTantivy stores positions\nfor phrase queries [1].\n## Index layout\n"
        "- an item that wraps\n  onto a second line\n```\ncode here\n```"
    )
    assert [(u.kind, u.text) for u in answer_units(text)] == [
        ("prose", STATEMENT),
        ("prose", "Tantivy stores positions\nfor phrase queries [1]."),
        ("label", "Index layout"),
        ("item", "an item that wraps\nonto a second line"),
        ("code", "code here"),
    ]
    assert answer_units("Summary\n===\n") == [Unit("label", "Summary", 0, 1)]


@pytest.mark.parametrize(
    "hidden",
    [
        f"{STATEMENT}\n{CITED}",
        f"> {STATEMENT}\n{CITED}",
        f"{CITED}\n\n> Lighthouses were once lit\n> by burning whale oil in most harbours",
        f"### {STATEMENT}\n{CITED}",
        f"**{STATEMENT}**\n{CITED}",
        f"{STATEMENT}\n---\n{CITED}",
        f"| Engine | Feature |\n|---|---|\n| {STATEMENT} | {CITED} |",
        f"| Engine | Feature |\n|---|---|\n| Tantivy | {CITED} |\n| Lucene | {STATEMENT} \\| too |",
        f"{CITED}\n| Lighthouses were once lit | by burning whale oil in most harbours |",
        f"{CITED}\n```\n{STATEMENT}\n```",
        f"{CITED} Not stated: {STATEMENT}.",
        f"# 灯塔曾经在大多数港口燃烧鲸油点亮灯光\n{CITED}",
        f"Tantivy stores positions for phrase queries. [1] {STATEMENT}.",
        f"{CITED}\n```\n{STATEMENT}",
        f"{CITED}\n```{STATEMENT}```",
        f"> | Engine | Feature |\n> |---|---|\n> | {STATEMENT} | {CITED} |",
        f"| Engine | Feature |\n|---|---|\n| Tantivy | {CITED}<br>{STATEMENT}. |",
        f"{CITED}<br>{STATEMENT}.",
        f"- {CITED}\n  {STATEMENT}",
        f"{CITED}\nNot stated (whale oil in harbours).",
        f"{CITED}\n- Whale-oil-once-lit-most-harbours-lighthouses: not stated",
        f"{CITED}\nⓁⓘⓖⓗⓣⓗⓞⓤⓢⓔⓢ ⓦⓔⓡⓔ ⓛⓘⓣ ⓑⓨ ⓦⓗⓐⓛⓔ ⓞⓘⓛ",
        f"{CITED}\n{STATEMENT} <!-- [1] -->\n{STATEMENT} `[1]`.",
        f"{CITED}\n| Lighthouses |\n|---|\n| were once lit by burning |\n| whale oil in most harbours |",
        # on the same line, a sentence that does not start with an ASCII capital
        f"{CITED} {STATEMENT.lower()}.",
        f"{CITED} **{STATEMENT}** indeed.",
        f"{CITED} _{STATEMENT.lower()}_.",
        f"{CITED} Ébauche: {STATEMENT.lower()}.",
        f"{CITED} ({STATEMENT.lower()}.)",
        "Tantivy stores positions for phrase queries [1]。灯塔曾经在大多数港口燃烧鲸油点亮灯光。",
        f"Tantivy stores positions for phrase queries [1]। {STATEMENT}।",  # Devanagari's danda
        f"{CITED}\n{STATEMENT}. <!-- (not from the documents) -->",  # a declaration nobody sees
        f"{CITED} $5 million of {STATEMENT.lower()}.",
        f"{CITED} ¡{STATEMENT}!",
    ],
)
def test_the_citation_policy_removes_what_rides_on_another_line_or_in_a_structure(hidden: str) -> None:
    delivered = ground(hidden)
    assert "whale" not in delivered.lower() and "鲸油" not in delivered and "ⓦⓗⓐⓛⓔ" not in delivered
    assert "Tantivy stores positions" in delivered
    assert not any(line.strip() in ("#", "###", ">", "****", "```") for line in delivered.splitlines())
    assert ground(hidden, "strict") == ""


def test_a_quoted_note_title_is_a_label() -> None:
    answer = "> **Note**\n> Tantivy stores positions for phrase queries [1]."
    assert ground(answer) == answer and ground(answer, "strict") == answer


def test_what_is_grounded_stays_as_written() -> None:
    answer = (
        "## Storage\nTantivy stores positions\nfor phrase queries [1].\n\n"
        "- Items keep  their spacing [1].\n   - and nesting [1].\n\n"
        "```\nindex.search(query, limit=10)\n```\n\n---\n"
        "Tantivy stores positions. [1] It also stores offsets [1].\n\n"
        f"| Engine | Phrases |\n|---|---|\n| Tantivy | {CITED} |\n| Lucene | not stated |"
    )
    assert ground(answer) == answer  # short labels, a quoted code block, markers after the stop


def test_brackets_that_cite_nothing_and_quotes_inside_a_cited_sentence_stay() -> None:
    for answer in (
        "Index with `items[i]` to read an element [1].",
        "- [x] Tantivy stores positions for phrase queries [1]",
        "See the [guide][1] for phrase queries [1].",
    ):
        assert ground(answer) == answer
    quoting = f'A blog wrote "{STATEMENT}." and was wrong [1]. {STATEMENT}.'
    assert ground(quoting) == f'A blog wrote "{STATEMENT}." and was wrong [1].'
    # a quotation's own full stop, then the quoting sentence going on in lower case: one sentence
    # (a statement can still ride there: the README says so)
    quoted = f'He wrote "{STATEMENT}." and cited it [1].'
    assert ground(quoted) == quoted
    # the closing quote stays with its sentence, and what follows it is found and removed
    assert ground(f'A blog wrote "whales." [1] {STATEMENT}.') == 'A blog wrote "whales." [1]'


def test_what_goes_takes_its_markup_with_it() -> None:
    for hidden in (f"## {STATEMENT} ##", f"**{STATEMENT}**:", f"{STATEMENT}\n===", f"{STATEMENT}\n---"):
        assert ground(f"{hidden}\n\n{CITED}") == CITED, hidden


def test_a_removal_touches_its_own_cell_or_sentence_only() -> None:
    answer = "Note that phrases need positions [1].\n\n| Engine | Positions |\n|---|---|\n| Lucene | No |"
    assert ground(answer) == answer.replace("| Lucene | No |", "| Lucene |  |")
    mixed = f"{CITED} {STATEMENT}. Offsets are stored  too [1]."
    assert ground(mixed) == f"{CITED} Offsets are stored too [1]."


def test_not_stated_is_only_a_cell_that_says_nothing_more() -> None:
    assert says_not_stated("not stated") and says_not_stated("Hardware: not stated (missing)")
    assert says_not_stated("Not stated in the documents.")
    assert not says_not_stated(f"Not stated, although {STATEMENT.lower()}")
    assert not says_not_stated(f"Not stated: {STATEMENT.lower()}")


def test_the_verifier_judges_each_line_on_its_own_and_no_label() -> None:
    claims = split_claims(f"> {STATEMENT}\n{CITED}\n\n## Engines\n| A | B |\n|---|---|\n| Tantivy | x [1] |")
    assert [(c.text, c.refs) for c in claims] == [
        (STATEMENT, ()),  # not merged into the cited line after it
        ("Tantivy stores positions for phrase queries.", ("1",)),
        ("x", ("1",)),
    ]
    # a label too long to be a name is judged like a sentence (the shaped modes run no policy)
    table = f"| Engine | Feature |\n|---|---|\n| {STATEMENT} | x [1] |\n\n### {STATEMENT} [1]"
    assert [(c.text, c.refs) for c in split_claims(table)] == [
        (STATEMENT, ()),
        ("x", ("1",)),
        (STATEMENT, ("1",)),
    ]
    # an item's or a line's sentences after a <br> are claims of their own too
    for answer in (f"- {CITED} {STATEMENT}.", f"{CITED}<br>{STATEMENT}."):
        assert [c.refs for c in split_claims(answer)] == [("1",), ()], answer
    lower = split_claims(f"{CITED} {STATEMENT.lower()}. **{STATEMENT}** too.")
    assert [(c.text, c.refs) for c in lower] == [
        ("Tantivy stores positions for phrase queries.", ("1",)),
        (f"{STATEMENT.lower()}.", ()),  # not merged into the cited sentence before it
        (f"{STATEMENT} too.", ()),
    ]


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("Night scenes [1]. He also wor", "Night scenes [1]."),
        ("Night scenes. [1][2] He", "Night scenes. [1][2]"),  # markers after the full stop go with it
        ('He said "at night." Then', 'He said "at night."'),
        ("Night *scenes.* Then", "Night *scenes.*"),
        ("Steps:\n- light [1]\n- came", "Steps:\n- light [1]"),  # the next item began: this one ended
        ("| a | b |\n|---|---|\n| 1 | 2 |\n| 3", "| a | b |\n|---|---|\n| 1 | 2 |"),
        ("It cost 3.5 mill", ""),  # a decimal point ends nothing
        ("no sentence ends here", ""),
        ("夜景で知られる。[1]彼は", "夜景で知られる。[1]"),  # scripts without spaces
        ("वह रात के दृश्यों के लिए जाना जाता है [1]। चाँद", "वह रात के दृश्यों के लिए जाना जाता है [1]।"),
        ("Finished [1].\n\nAnd th", "Finished [1]."),
        ("Finished [1].", "Finished [1]."),
        ("Night scenes [1]. He shot 3.", "Night scenes [1]."),  # "3." at the cut may have been "3.5"
        ("Night scenes [1]. Shot at night, e.g. with", "Night scenes [1]."),  # no end at e.g.
        ("Night scenes [1].\nHe was known for night scenes and\nwas", "Night scenes [1]."),  # wrapped
        ("Night scenes [1].\nHe was known for night scenes and\n", "Night scenes [1]."),
        ("Run it [1]:\n\n```\npip install x\n", "Run it [1]:"),  # an unclosed code block goes
        ("Run it [1]:\n\n```\npip install x\n```\n\nThen", "Run it [1]:\n\n```\npip install x\n```"),
        # headings and a table header with nothing under them yet go; with nothing else, all goes
        ("Night scenes [1].\n\n## More\n\nHe", "Night scenes [1]."),
        ("## Tomas Brek, cinematographer\nHe", ""),
        ("| Person | Known for |\n|---|---|\n| Tomas", ""),
        ("Steps:\n1. Light the", "Steps:"),  # a list item's number is no sentence's end
        ('Night scenes [1]. He wrote "at night." and th', "Night scenes [1]."),
        ("Night scenes [1].\nIl était connu pour les scènes\nécrites la nuit et", "Night scenes [1]."),
        ("Night scenes [1].\n\n~~~\n```\n~~~\n\nAnd th", "Night scenes [1].\n\n~~~\n```\n~~~"),
        ("He filmed in the U.S. [1] The nig", "He filmed in the U.S. [1]"),  # "The" starts a sentence
        ("He filmed in the U.S. Army bas", ""),  # a name goes on
        ("Er drehte am 3. Oktober [1]. Danach", "Er drehte am 3. Oktober [1]."),  # "3." is an ordinal
        ("He filmed in the U.S. Can", ""),  # the last word may be unfinished ("Canada")
        ("He filmed with George F. Will wro", ""),  # an initial before a name
    ],
)
def test_a_cut_draft_keeps_what_it_finished(written: str, kept: str) -> None:
    assert finished_part(written) == kept
