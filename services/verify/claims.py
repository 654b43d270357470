"""Splits an answer into claims, each with the citation refs it carries (`[1]`, `[1, 3]`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragstack.text import CITATION_MARKER, citation_refs, declares_ungrounded, split_sentences

_MARKER = CITATION_MARKER
_LEADING = re.compile(r"^(?:\s*(?<!!)\[(\s*[\w.-]+(?:\s*,\s*[\w.-]+)*\s*)\](?!\())+")


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
    """One claim per sentence of prose, and per cell of a Markdown table (its first column names
    the row: no claim) and per list item of a shaped answer (compare, methodology, checklist), with
    the refs of the markers inside it. Headings, a table's header, and cells or items that say the
    documents do not state something are not claims. Markers written after the full stop (`Text.
    [1] Next...`) open the next sentence; they belong to the one before."""
    claims: list[DraftClaim] = []
    for kind, text in _units(answer):
        if kind == "cell":
            _add(claims, text)
            continue
        for sentence in split_sentences(text):
            lead = _LEADING.match(sentence)
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
    if text and not declares_ungrounded(text) and not _NOT_STATED.search(text):
        claims.append(DraftClaim(f"c{len(claims) + 1}", text, tuple(dict.fromkeys(citation_refs(unit)))))


_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_TABLE_RULE = re.compile(r"^\s*:?-{2,}:?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
# "not stated", alone or after a short label ("Hardware: not stated (missing)").
_NOT_STATED = re.compile(r"^(?:[\w*' -]{1,40}:\s*)?not stated\b", re.IGNORECASE)


def _units(answer: str) -> list[tuple[str, str]]:
    """The answer as ("prose", text) runs and ("cell", text) units: table cells and list items."""
    units: list[tuple[str, str]] = []
    prose: list[str] = []
    header = True  # the next table row is a header
    for line in answer.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            cells = [c.strip() for c in _CELL_SPLIT.split(stripped.strip("|"))]
            if all(_TABLE_RULE.match(c) for c in cells):
                continue
            if not header:
                units.extend(("cell", c.replace("\\|", "|")) for c in cells[1:] if c)
            header = False
            continue
        header = True
        if stripped.startswith("#") or _BULLET.match(line):
            if prose:  # a heading or an item ends the prose before it
                units.append(("prose", "\n".join(prose)))
                prose = []
            if _BULLET.match(line):
                units.append(("cell", _BULLET.sub("", line).strip()))
            continue
        prose.append(line)
    if prose:
        units.append(("prose", "\n".join(prose)))
    return [u for u in units if u[1].strip()]
