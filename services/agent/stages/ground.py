"""Ground: every sentence of the draft says what grounds it (generation.citation_policy). A sentence
cites the evidence (`[n]` with a ref the draft was given) or declares it is not from the documents;
one with neither is removed (lenient) or withholds the whole answer (strict). The sentences are
those of the answer's units as the verifier reads them (ragstack/answer_units.py): each line, list
item and table cell on its own, and a heading or row name too long to be a name, so that no
Markdown structure lets an uncited statement ride on a cited one; a code block is grounded when the
documents hold it as written. What is removed is taken out of its unit's own lines (a cell: its
cell). Applied to what is delivered: the `delta` events carried the draft as it was written,
`done.answer` is the answer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragstack.answer_units import (
    Unit,
    answer_units,
    is_name,
    says_not_stated,
    sentences_of,
    table_cells,
    visible,
)
from ragstack.query_trace import QueryTrace
from ragstack.text import (
    CLOSERS,
    LEADING_MARKERS,
    STOPS,
    WIDE_STOPS,
    citation_refs,
    declares_ungrounded,
)
from services.agent.generate import NumberedEvidence


def grounded_text(text: str, evidence: Sequence[NumberedEvidence], policy: str, trace: QueryTrace) -> str:
    """An LLM's draft as delivered under `policy` (strict, lenient or keep): "" when withheld."""
    if policy == "keep":
        return text
    refs = {e.ref for e in evidence}
    documents = [" ".join(e.hit.chunk.text.split()) for e in evidence]
    judged = [(unit, _ungrounded(unit, refs, documents)) for unit in answer_units(text)]
    ungrounded = [s for _, found in judged for s in found]
    if not ungrounded:
        return text
    trace.ungrounded = ungrounded
    if policy == "strict":
        trace.no_draft_reason = (
            f"{len(ungrounded)} sentence(s) neither cite the documents nor say they are not from them "
            "(generation.citation_policy: strict)"
        )
        return ""
    lines: list[str | None] = list(text.split("\n"))
    rows: dict[int, list[str]] = {}  # a table row's cells, read once however many change
    for unit, found in judged:
        if found and unit.cell >= 0:
            if unit.first not in rows:
                row = lines[unit.first]
                assert row is not None
                rows[unit.first] = table_cells(row)
            cells = rows[unit.first]
            cells[unit.cell] = _tidy(_without(cells[unit.cell], found))
        elif found:
            _take_out(lines, unit, found)
    for at, cells in rows.items():
        row = lines[at]
        assert row is not None
        quote = re.match(r"\s*(?:>\s?)*", row)
        lines[at] = (quote.group(0) if quote else "") + "| " + " | ".join(cells) + " |"
    return "\n".join(line for line in lines if line is not None).strip()


def _ungrounded(unit: Unit, refs: set[str], documents: list[str]) -> list[str]:
    """The unit's sentences that neither cite nor say they are not from the documents."""
    if unit.kind == "label" and is_name(unit.text):
        return []
    if unit.kind == "code":
        code = " ".join(unit.text.split())
        return [] if code and any(code in d for d in documents) else [unit.text]
    if unit.kind in ("cell", "item") and says_not_stated(unit.text):
        return []
    sentences: list[str] = []
    grounded: list[bool] = []
    for sentence in sentences_of(unit):
        lead = LEADING_MARKERS.match(sentence)
        if lead and sentences and _cites(lead.group(0), refs):  # `Text. [1] Next`: the [1] is Text's
            grounded[-1] = True
            sentence = sentence[lead.end() :].strip()
        sentences.append(sentence)
        grounded.append(not sentence or _cites(sentence, refs) or declares_ungrounded(visible(sentence)))
    return [s for s, ok in zip(sentences, grounded, strict=True) if not ok]


def _cites(text: str, refs: set[str]) -> bool:
    """Whether the text cites, and only refs the draft was given. Markers a reader does not see
    (in a comment, in code) do not count; nor do brackets that are no numbered ref (`[x]`, `[i]`)."""
    cited = {r for r in citation_refs(visible(text)) if r.isdigit()}
    return bool(cited) and cited <= refs  # no made-up source


# Where a sentence may start (a line's start, after a sentence's end or a tag) and end: a line's
# end or a tag, and, after its full stop, the next sentence (text.split_sentences, any_start).
_STOP = f"[{re.escape(STOPS + WIDE_STOPS)}]"
_CLOSE = f"[{re.escape(CLOSERS)}]"
_AFTER = rf"(?<=[{re.escape(STOPS + WIDE_STOPS)}\u2026\])>])|(?<={_STOP}{_CLOSE})|(?<={_STOP}{_CLOSE}{{2}})"
_STARTS = rf"(?:^|(?:{_AFTER})[ \t]*)"
_ENDS = r"(?=[ \t]*(?:$|<))"
_ENDS_AFTER_STOP = r"(?=[ \t]+\S|[ \t]*(?:$|<))"  # not "3." inside "3.5"
_STOPPED = re.compile(rf"{_STOP}{_CLOSE}*(?:\s*\[[^\]]*\])*$")
_BR_AT_END = re.compile(r"<br\s*/?>\s*$", re.IGNORECASE)
_LONGEST = 5_000  # characters of a sentence that is looked for where it stands
_WIDE_STOPPED = re.compile(rf"[{WIDE_STOPS}]{_CLOSE}*(?:\s*\[[^\]]*\])*$")


def _take_out(lines: list[str | None], unit: Unit, sentences: list[str]) -> None:
    """Removes `sentences` from the unit's own lines (a table cell's are taken out of its cell by
    the caller); a unit whose text cannot be found there (or a code block) goes whole, so nothing
    ungrounded stays for want of a match."""
    if unit.kind in ("code", "label"):  # a code block, heading, bold line or setext heading goes whole
        lines[unit.first : unit.last + 1] = [None] * (unit.last + 1 - unit.first)
        return
    before = [line for line in lines[unit.first : unit.last + 1] if line is not None]
    after = _without("\n".join(before), sentences).split("\n")
    if len(after) == len(before):
        tidied = [line if line == was else _tidy(line) for line, was in zip(after, before, strict=True)]
    else:  # a removal ran over a line break: tidy them all
        tidied = [_tidy(line) for line in after]
    kept_lines: list[str | None] = [line if line.strip() else None for line in tidied]
    span = unit.last + 1 - unit.first
    lines[unit.first : unit.last + 1] = (kept_lines + [None] * span)[:span]


def _without(text: str, sentences: list[str]) -> str:
    """`text` without `sentences`, each found where a sentence starts and ends (never a piece of
    another sentence that reads the same), after the one before it; "" when one is not found."""
    kept: list[str] = []
    at = 0
    if any(len(sentence) > _LONGEST for sentence in sentences):
        return ""  # its pattern would take long to build: the unit goes whole
    for sentence in sentences:
        # Word by word: line breaks, quote markers and indentation may lie between the words.
        pattern = r"(?:\s|>)*".join(re.escape(w) for w in sentence.split())
        end = sentence[-64:]  # where a stop and its markers may be; searched from every stop, a
        # whole sentence of stops would take quadratic time
        ends = "" if _WIDE_STOPPED.search(end) else _ENDS_AFTER_STOP if _STOPPED.search(end) else _ENDS
        found = re.compile(_STARTS + pattern + ends, re.MULTILINE).search(text, at)
        if found is None:
            return ""
        kept.append(text[at : found.start()])
        at = found.end()
    return "".join(kept) + text[at:]


def _tidy(line: str) -> str:
    """A line a removal changed: the spaces it left inside closed up, and nothing but a marker left
    means nothing left."""
    indent = line[: len(line) - len(line.lstrip())]
    body = re.sub(r"[ \t]{2,}", " ", line.strip())
    while tail := _BR_AT_END.search(body[-64:]):  # one <br> at a time: a pattern for a run of
        body = body[: len(body) - len(tail.group(0))].rstrip()  # them backtracks on a long one
    return "" if re.fullmatch(r"(?:#{1,6}|>|[-*+]|\d+[.)]|[*_]{2,4})?", body) else indent + body
