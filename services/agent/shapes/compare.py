"""The compare table: one row per thing the question compares, one column per aspect it asks
about, each cell the evidence sentence (or clause) that speaks of both, quoted with its ref."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath

from ragstack.text import content_words
from services.agent.generate import NumberedEvidence
from services.agent.shapes.cells import MISSING, Cell, Table
from services.agent.shapes.quotes import (
    Quote,
    covered,
    document_name,
    mentions,
    phrase_words,
    quotes,
)

_ASPECT_CUE = (
    r"(?:in\s+terms\s+of|with\s+(?:respect|regard)\s+to|when\s+it\s+comes\s+to|regarding|concerning"
    r"|as\s+to|on|in|by|for|across)"
)
_ASPECTS = rf"(?:\s+{_ASPECT_CUE}\s+(?P<aspects>.+))?"
_FORMS = (
    # Compare A and B on X and Y / Contrast A with B in terms of X
    re.compile(rf"^(?:please\s+)?(?:compare|contrast)\s+(?P<things>.+?){_ASPECTS}$", re.I),
    # How do A, B and C differ in cost? / How does A compare to B on X?
    re.compile(
        r"^(?:how|in\s+what\s+ways?|where)\s+(?:do|does|did)\s+(?P<things>.+?)\s+"
        r"(?:differ|compare|contrast|vary)(?:\s+(?:from|to|with|against)\s+(?P<other>.+?))?"
        rf"{_ASPECTS}$",
        re.I,
    ),
    # What are the differences between A and B in X?
    re.compile(rf"\b(?:differences?|distinctions?)\s+between\s+(?P<things>.+?){_ASPECTS}$", re.I),
    # Which is faster, A or B? / Which one has lower latency: A or B?
    re.compile(
        r"^(?:which|what)\s+(?:one\s+)?(?:is|are|has|have|was|gives|offers)\s+(?P<tail>[^,:]+?)\s*[,:]\s*"
        rf"(?P<things>.+?\s+or\s+.+?){_ASPECTS}$",
        re.I,
    ),
    # A vs B: which is faster / A versus B on X
    re.compile(
        r"^(?P<things>.+?\s+(?:vs\.?|versus)\s+.+?)"
        rf"(?:\s*[:,;?]\s*(?P<tail>.+)|\s+-\s+(?P<dash>.+)|{_ASPECTS})$",
        re.I,
    ),
)
_THING_SEPARATOR = re.compile(
    r"\s*[,;/]\s*(?:and\s+|or\s+)?|\s+(?:and|or|with|to|against|vs\.?|versus|&)\s+", re.I
)
_ASPECT_SEPARATOR = re.compile(r"\s*[,;/]\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+", re.I)
_DETERMINER = re.compile(r"^(?:the|a|an|their|its|his|her|our|these|those|both|each|of)\s+", re.I)
# Words that name no particular thing: "compare the documents", "which is better".
_GENERIC = frozenset(
    """document documents doc docs paper papers source sources file files system systems method methods
    approach approaches model models option options them these those they it one two all both each
    better best worse worst more most less least which what who""".split()
)
GENERAL_ASPECTS = ("differences", "overview")
MAX_ROWS, MAX_COLUMNS = 8, 8  # past these a question lists more than a table answers


@dataclass(frozen=True)
class Asked:
    """What a compare question asks: the things it compares (none: the evidence's documents)
    and the aspects it compares them on (none: their differences, or an overview)."""

    things: tuple[str, ...]
    aspects: tuple[str, ...]


def parse_question(question: str) -> Asked:
    q = " ".join(question.split()).strip().rstrip("?.!").strip()
    for form in _FORMS:
        m = form.match(q) if form.pattern.startswith("^") else form.search(q)
        if not m:
            continue
        groups = {k: v for k, v in m.groupdict().items() if v}
        things = _split(
            " and ".join(filter(None, (groups.get("things"), groups.get("other")))), _THING_SEPARATOR
        )
        aspects = _split(groups.get("aspects", ""), _ASPECT_SEPARATOR)
        tail = groups.get("tail") or groups.get("dash") or ""
        if not aspects and tail:
            aspects = _tail_aspects(tail)
        things = tuple(t for t in things if not phrase_words(t) <= _GENERIC_STEMS)
        return Asked(things, aspects)
    return Asked((), ())


_GENERIC_STEMS = frozenset(w for g in _GENERIC for w in content_words(g)) | _GENERIC


def _split(text: str, separator: re.Pattern[str]) -> tuple[str, ...]:
    out: list[str] = []
    for piece in separator.split(text):
        piece = piece.strip(" \t\"'`.,;:!?()")
        while _DETERMINER.match(piece):
            piece = _DETERMINER.sub("", piece, count=1)
        if piece and piece.lower() not in (p.lower() for p in out):
            out.append(piece)
    return tuple(out)


def _tail_aspects(tail: str) -> tuple[str, ...]:
    """ "which is faster" -> ("faster",); "which one has lower latency" -> ("lower latency",)."""
    cue = re.search(rf"\b{_ASPECT_CUE}\s+(?P<aspects>.+)$", tail, re.I)
    if cue:
        return _split(cue.group("aspects"), _ASPECT_SEPARATOR)
    kept = [w for w in tail.split() if phrase_words(w) - _GENERIC_STEMS and w.lower() not in _QUESTION_WORDS]
    return _split(" ".join(kept), _ASPECT_SEPARATOR)


_QUESTION_WORDS = frozenset("which what who is are has have was one more less does do".split())


def compare_table(question: str, evidence: Sequence[NumberedEvidence]) -> Table:
    """Rows: the things the question names, else the evidence's documents; columns: the aspects it
    names, else "differences" (when it asks for them) or "overview". A cell quotes the best
    sentence that names its row (or comes from the row's document) and speaks of its aspect."""
    asked = parse_question(question)
    # A table someone can read, and a bounded cost: every cell scores every quotable sentence.
    asked = replace(asked, things=asked.things[:MAX_ROWS], aspects=asked.aspects[:MAX_COLUMNS])
    quoted = quotes(evidence)
    if asked.things:
        rows = asked.things
        owners = {row: {e.ref for e in evidence if _owns(row, e)} for row in rows}
    else:
        rows = tuple(dict.fromkeys(document_name(e) for e in evidence))[:MAX_ROWS]
        owners = {row: {e.ref for e in evidence if document_name(e) == row} for row in rows}
    general = not asked.aspects
    columns = asked.aspects or (_general_column(question),)
    asked_words = frozenset(content_words(question))
    table_rows = []
    for row in rows:
        others = [r for r in rows if r != row] if asked.things else []
        fill = _Fill(row, others, owners[row], asked_words, general)
        table_rows.append((row, tuple(fill.cell(column, quoted) for column in columns)))
    return Table(tuple(columns), tuple(table_rows))


def _general_column(question: str) -> str:
    return GENERAL_ASPECTS[0] if re.search(r"\bdiffer", question, re.I) else GENERAL_ASPECTS[1]


def _owns(row: str, e: NumberedEvidence) -> bool:
    """Whether the evidence comes from the document the row names (its title or file name)."""
    chunk = e.hit.chunk
    return mentions(f"{chunk.title} {re.sub(r'[-_.]+', ' ', PurePath(chunk.source).stem)}", row)


@dataclass(frozen=True)
class _Fill:
    row: str
    others: list[str]
    owned: set[str]  # refs of the evidence from the row's document
    asked: frozenset[str]  # the question's content words
    general: bool  # no aspect asked: any sentence about the row will do

    def cell(self, aspect: str, quoted: Sequence[Quote]) -> Cell:
        wanted = phrase_words(aspect)
        scored = [(s, q) for q in quoted if (s := self._score(q, wanted)) is not None]
        if not scored:
            return MISSING
        _, best = max(scored, key=lambda x: (x[0], -x[1].rank, -x[1].position))
        text = self._narrowed(best.text, wanted)
        refs = tuple(dict.fromkeys(q.ref for q in quoted if text in q.text))
        return Cell(text, refs)

    def _score(self, q: Quote, wanted: frozenset[str]) -> float | None:
        named = mentions(q.text, self.row)
        if not named and q.ref not in self.owned:
            return None
        coverage = 1.0
        if not self.general:
            found = covered(wanted, q.words)
            if not found:
                return None
            coverage = found / len(wanted)
        relevant = len(self.asked & q.words) / len(self.asked) if self.asked else 0.0
        elsewhere = any(mentions(q.text, o) for o in self.others)
        return (
            coverage
            + 0.5 * named
            - (0.25 if elsewhere and not named else 0.0)
            + 0.2 * relevant
            - 0.02 * q.rank
        )

    def _narrowed(self, sentence: str, wanted: frozenset[str]) -> str:
        """A sentence that contrasts this row with others ("A is fast, whereas B is slow"; "A is
        fast; B is slow") is narrowed to its part that names this row alone and still speaks of
        the aspect, when it has one."""
        if not any(mentions(sentence, o) for o in self.others):
            return sentence
        need = covered(wanted, content_words(sentence))
        for part in _CONTRAST.split(sentence):
            part = part.strip().rstrip(",;")
            if (
                len(part.split()) >= 4
                and mentions(part, self.row)
                and not any(mentions(part, o) for o in self.others)
                and (self.general or covered(wanted, content_words(part)) >= need)
            ):
                return part
        return sentence


# Where a sentence turns from one thing to another.
_CONTRAST = re.compile(
    r";\s+|,\s+(?=(?:whereas|while|whilst|but|although|though|unlike|in contrast)\b)", re.I
)
