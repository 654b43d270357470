"""Splits an answer into claims, each with the citation refs it carries (`[1]`, `[1, 3]`)."""

from __future__ import annotations

from dataclasses import dataclass

from ragstack.answer_units import answer_units, is_name, says_not_stated, sentences_of, visible
from ragstack.text import (
    CITATION_MARKER,
    LEADING_MARKERS,
    citation_refs,
    declares_ungrounded,
)

_MARKER = CITATION_MARKER


@dataclass(frozen=True)
class DraftClaim:
    claim_id: str
    text: str
    refs: tuple[str, ...]


def refs_in(text: str) -> set[str]:
    """Every citation ref the text's markers name."""
    return set(citation_refs(text))


def without_markers(text: str) -> str:
    return _MARKER.sub("", text)


def split_claims(answer: str) -> list[DraftClaim]:
    """One claim per sentence of prose, of a table cell and of a list item (ragstack/answer_units.py:
    a line is its own unless it continues the one before), with the refs of the markers inside it.
    Headings, a table's header and its first column (the rows' names) are not claims while they
    are names (`answer_units.is_name`: a longer one states something, and is judged whole); nor
    are cells or items that say the documents do not state something. Markers written after the full stop
    (`Text. [1] Next...`) open the next sentence; they belong to the one before."""
    claims: list[DraftClaim] = []
    for unit in answer_units(answer):
        if unit.kind == "label" and is_name(unit.text):  # names a row, a column or a section
            continue
        if unit.kind in ("code", "label"):
            _add(claims, unit.text)
            continue
        for sentence in sentences_of(unit):
            lead = LEADING_MARKERS.match(sentence)
            if lead and claims:
                prev = claims[-1]
                merged = tuple(dict.fromkeys((*prev.refs, *citation_refs(lead.group(0)))))
                claims[-1] = DraftClaim(prev.claim_id, prev.text, merged)
                sentence = sentence[lead.end() :]
            _add(claims, sentence)
    return claims


def _add(claims: list[DraftClaim], unit: str) -> None:
    text = _MARKER.sub("", unit).replace("**", "").strip()
    # One that says it is not from the documents, or that they do not state it, is no claim on them.
    if text and not declares_ungrounded(visible(text)) and not says_not_stated(text):
        claims.append(DraftClaim(f"c{len(claims) + 1}", text, tuple(dict.fromkeys(citation_refs(unit)))))
