"""An answer's units as its reader sees them: prose sentences, list items, table cells, and labels
(headings, a table's header cells, a row's first cell). The agent's citation policy
(services/agent/stages/ground.py) and the verifier's claims (services/verify/claims.py) split an
answer the same way, so that no Markdown structure can carry an uncited statement past both: a line
is never merged into a cited sentence on another line unless it continues it (starts in lower case).
A label names what follows (a row, a column, a section): the verifier judges no label, and the
citation policy lets only a short one go uncited (`is_name`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ragstack import policy
from ragstack.text import words

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_TABLE_RULE = re.compile(r"^\s*:?-{2,}:?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_CONTINUES = re.compile(r"^\s*[a-z]")  # a wrapped sentence's next line
# "not stated", alone or after a short label ("Hardware: not stated (missing)").
_NOT_STATED = re.compile(r"^(?:[\w*' -]{1,40}:\s*)?not stated\b", re.IGNORECASE)


@dataclass(frozen=True)
class Unit:
    kind: Literal["prose", "item", "cell", "label"]
    text: str


def answer_units(answer: str) -> list[Unit]:
    """The answer's units in order: runs of prose (split them with split_sentences), list items,
    table cells, and labels."""
    units: list[Unit] = []
    prose: list[str] = []

    def end_prose() -> None:
        if prose:
            units.append(Unit("prose", "\n".join(prose)))
            prose.clear()

    header = True  # the next table row is a header
    for line in answer.splitlines():
        stripped = line.strip()
        if stripped.startswith("|"):
            end_prose()
            cells = [c.strip() for c in _CELL_SPLIT.split(stripped.strip("|"))]
            if all(_TABLE_RULE.match(c) for c in cells):
                continue
            for i, cell in enumerate(cells):
                if cell:
                    units.append(Unit("label" if header or i == 0 else "cell", cell.replace("\\|", "|")))
            header = False
            continue
        header = True
        if stripped.startswith("#"):
            end_prose()
            units.append(Unit("label", stripped.lstrip("#").strip()))
        elif _BULLET.match(line):
            end_prose()
            units.append(Unit("item", _BULLET.sub("", line).strip()))
        elif text := _QUOTE.sub("", line).strip():
            if not _CONTINUES.match(text):
                end_prose()
            prose.append(text)
        else:
            end_prose()
    end_prose()
    return [u for u in units if u.text.strip()]


def says_not_stated(text: str) -> bool:
    """A cell or item that says the documents do not state something: no claim on them."""
    return bool(_NOT_STATED.search(text))


def is_name(label: str) -> bool:
    """Whether a label is short enough to be a name; a longer one states something."""
    return len(words(label)) <= policy.LABEL_WORDS
