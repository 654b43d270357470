"""Splits an answer into claims, each with the citation refs it carries (`[1]`, `[1, 3]`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragstack.text import declares_ungrounded, split_sentences

# A citation marker: `[1]`, `[1, 3]`, `[doc-2]`; never the text of a Markdown link or image
# (`[here](url)`, `![x](url)`), which a quoted document may hold.
_MARKER = re.compile(r"\s*(?<!!)\[(\s*[\w.-]+(?:\s*,\s*[\w.-]+)*\s*)\](?!\()")
_LEADING = re.compile(r"^(?:\s*(?<!!)\[(\s*[\w.-]+(?:\s*,\s*[\w.-]+)*\s*)\](?!\())+")


@dataclass(frozen=True)
class DraftClaim:
    claim_id: str
    text: str
    refs: tuple[str, ...]


def _refs(text: str) -> list[str]:
    return [r.strip() for m in _MARKER.finditer(text) for r in m.group(1).split(",")]


def refs_in(text: str) -> set[str]:
    """Every citation ref the text's markers name."""
    return set(_refs(text))


def without_markers(text: str) -> str:
    return _MARKER.sub("", text)


def split_claims(answer: str) -> list[DraftClaim]:
    """One claim per sentence, with the refs of the markers inside it. Markers written after the
    full stop (`Text. [1] Next...`) open the next sentence; they belong to the one before."""
    claims: list[DraftClaim] = []
    for sentence in split_sentences(answer):
        lead = _LEADING.match(sentence)
        if lead and claims:
            prev = claims[-1]
            merged = tuple(dict.fromkeys((*prev.refs, *_refs(lead.group(0)))))
            claims[-1] = DraftClaim(prev.claim_id, prev.text, merged)
            sentence = sentence[lead.end() :]
        text = _MARKER.sub("", sentence).strip()
        if text and not declares_ungrounded(text):  # says it is not from the documents: no claim on them
            claims.append(DraftClaim(f"c{len(claims) + 1}", text, tuple(dict.fromkeys(_refs(sentence)))))
    return claims
