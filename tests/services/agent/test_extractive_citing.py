"""An extractive answer is cut into claims as the verifier cuts an answer: each of its sentences,
as an answer's are read (`split_sentences(any_start=True)`), carries the marker of the evidence it
quotes, so the verifier judges none of them as uncited."""

from __future__ import annotations

from services.agent.generate import cite, extractive_answer, number_evidence, strips
from services.verify.claims import split_claims
from tests.services.agent.test_loop import hit

EMAIL = (  # our own: a sentence that starts with an amount, then one in lower case
    "The library fined the reader 3 euros for the atlas on Monday. €2 more was due for the maps "
    "on Friday. please return both books soon."
)


def test_every_sentence_of_a_quoted_passage_carries_its_marker() -> None:
    evidence = number_evidence([hit("mail", EMAIL)])
    candidates = strips(evidence)
    extract = extractive_answer(
        "What was the reader fined for the atlas?", candidates, [0.9] * len(candidates), 3, lambda s: False
    )
    claims = split_claims(extract.answer)
    assert len(claims) >= 2 and all(c.refs == ("1",) for c in claims), extract.answer


def test_a_marker_follows_the_quote_or_bracket_that_closes_a_sentence() -> None:
    assert cite('He said "stop."', "1") == 'He said "stop." [1]'
    assert cite("Positions are stored (for phrases.)", "2") == "Positions are stored (for phrases.) [2]"
    assert cite("Positions are stored.", "1") == "Positions are stored [1]."
    assert [c.refs for c in split_claims('He said "stop." [1] It worked [1].')] == [("1",), ("1",)]
