"""An answer's units as its reader sees them: prose sentences, list items, table cells, code blocks,
and labels (headings, a table's header cells, a row's first cell, a bold line of its own). The
agent's citation policy (services/agent/stages/ground.py) and the verifier's claims
(services/verify/claims.py) split an answer the same way, so that no Markdown structure carries an
uncited statement past both: a line is never merged into a sentence on another line unless it
continues it (starts in lower case). A label names
what follows (a row, a column, a section): the verifier judges no label, and the citation policy
lets only a short one go uncited (`is_name`). Each unit keeps the lines it came from, so the
policy can take out what it removes there and nowhere else."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ragstack import policy
from ragstack.text import (
    CITATION_MARKER,
    CLOSERS,
    QUOTE_CLOSERS,
    STOPS,
    WIDE_STOPS,
    split_sentences,
    stop_of_words,
)

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_TABLE_RULE = re.compile(r"^\s*:?-{1,}:?\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s+|$)")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_SETEXT = re.compile(r"^\s*(?:=+|-+)\s*$")
_SEPARATOR = re.compile(r"[-=*_~#>|:.`\s]*")  # a line of only these states nothing (a rule, an underline)
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)(?P<text>[^*_\n]+)\1\s*(?::\s*)?$")
# "not stated", alone, after a short label ("Hardware: not stated") or with a few words or a
# parenthesis after it ("not stated in the documents", "not stated (missing)"): nothing more.
_NOT_STATED = re.compile(
    r"^(?:(?P<label>[^:\n]{1,60}):\s*)?not stated(?: [\w'-]+){0,3}"
    r"\s*(?:\([\w'-]+(?: [\w'-]+){0,2}\))?\s*[.!]?$",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+|\d+")
_WIDE = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")  # scripts written without spaces
# Where a draft cut mid-way is finished (finished_part): a sentence's end (any script's stop, the
# quotes, brackets, emphasis and citation markers that close it) before a space or the cut, but no
# abbreviation's stop, no list item's number, no number's at the cut ("3." may have been "3.5"),
# and no quotation's followed by a lower-case word; a line's end when the next line does not go on
# with it (a blank line, or one that does not start in lower case).
_CLOSED = rf"[{re.escape(CLOSERS)}]*(?:{CITATION_MARKER.pattern})*"
_SENTENCE_END = re.compile(rf"[{re.escape(STOPS)}](?P<closed>{_CLOSED})(?=\s|$)|[{WIDE_STOPS}]{_CLOSED}")

Kind = Literal["prose", "item", "cell", "label", "code"]


@dataclass(frozen=True)
class Unit:
    kind: Kind
    text: str  # as read: list, quote and heading markers dropped, its lines joined by "\n"
    first: int  # its lines in answer.split("\n"), first and last
    last: int
    cell: int = -1  # a table cell's or label's column (-1: not in a table)


def answer_units(answer: str) -> list[Unit]:
    """The answer's units in order: runs of prose (split them with split_sentences), list items,
    table cells, fenced code blocks, and labels."""
    lines = answer.split("\n")
    units: list[Unit] = []
    run: list[str] = []  # the prose, or list item, being read
    run_kind: Kind = "prose"
    start = 0

    def end_run(at: int) -> None:
        nonlocal run
        if run:
            units.append(Unit(run_kind, "\n".join(run), start, at - 1))
            run = []

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence:
            end_run(i)
            i = _code(lines, i, fence.group(1), units)
            continue
        if "|" in stripped and (i + 1 < len(lines) and _is_rule_row(lines[i + 1])):
            end_run(i)
            i = _table(lines, i, units)
            continue
        if _SEPARATOR.fullmatch(stripped):  # blank, a rule, a setext underline
            if _SETEXT.match(line) and run and run_kind == "prose":
                units.append(Unit("label", " ".join(run), start, i))  # the paragraph above is a heading
                run = []
            end_run(i)
            i += 1
            continue
        label = _label(_QUOTE.sub("", line))  # a quote's heading or bold title is one too
        if label is not None:
            end_run(i)
            units.append(Unit("label", label, i, i))
        elif _BULLET.match(line):
            end_run(i)
            run, run_kind, start = [_BULLET.sub("", line).strip()], "item", i
        else:
            text = _QUOTE.sub("", line).strip()
            if not run or not _continues(text):
                end_run(i)
                run_kind, start = "prose", i
            run.append(text)
        i += 1
    end_run(len(lines))
    return [u for u in units if u.text.strip()]


def _label(line: str) -> str | None:
    """The text of a heading line, or of a line that is only bold text; None for any other line."""
    if heading := _HEADING.match(line):
        return line[heading.end() :].strip().rstrip("#").strip()
    if bold := _BOLD_LINE.match(line):
        return bold.group("text").strip()
    return None


def _continues(line: str) -> bool:
    """Whether a line goes on with the sentence of the line before: it starts in lower case."""
    text = line.lstrip()
    return bool(text) and text[0].islower()


def _code(lines: list[str], at: int, fence: str, units: list[Unit]) -> int:
    """Reads the fenced block opened on line `at`; returns the line after it. Text after the opening
    fence beyond a language name is part of the code, and so is everything to the end of the answer
    when no fence closes it."""
    closing = re.compile(rf"\s*{re.escape(fence[0])}{{{len(fence)},}}\s*")
    close = next((j for j in range(at + 1, len(lines)) if closing.fullmatch(lines[j])), len(lines))
    info = lines[at].strip()[len(fence) :].strip()
    body = lines[at + 1 : close]
    text = "\n".join(([info] if len(info.split()) > 1 or fence[0] in info else []) + body)
    units.append(Unit("code", text, at, min(close, len(lines) - 1)))
    return close + 1


def _is_rule_row(line: str) -> bool:
    return "-" in line and all(_TABLE_RULE.match(c) for c in table_cells(line))


def table_cells(line: str) -> list[str]:
    """A table row's cells as written (escaped pipes kept), without its quote marker and outer pipes."""
    return [c.strip() for c in _CELL_SPLIT.split(_QUOTE.sub("", line).strip().strip("|"))]


def _table(lines: list[str], at: int, units: list[Unit]) -> int:
    """Reads the table whose header is line `at`; returns the line after it."""
    columns = len(table_cells(lines[at]))
    i = at
    while i < len(lines) and "|" in lines[i] and lines[i].strip():
        if i != at + 1:  # the rule row
            for column, cell in enumerate(table_cells(lines[i])):
                if cell:
                    # The first column names the rows, when there are other columns to name.
                    kind: Kind = "label" if i == at or (column == 0 and columns > 1) else "cell"
                    units.append(Unit(kind, cell.replace("\\|", "|"), i, i, column))
        i += 1
    return i


def says_not_stated(text: str) -> bool:
    """A cell or item that says only that the documents do not state something (after a label
    short enough to be a name): no claim on them."""
    found = _NOT_STATED.match(text.strip())
    return found is not None and is_name(found.group("label") or "")


def is_name(label: str) -> bool:
    """Whether a label is short enough to be a name (policy.LABEL_WORDS words; two characters of a
    script written without spaces count as a word); a longer one states something."""
    words = len(_WORD.findall(_WIDE.sub(" ", label))) + len(_WIDE.findall(label)) / 2
    return words <= policy.LABEL_WORDS


_UNSEEN = re.compile(r"<!--.*?-->|`[^`\n]*`", re.DOTALL)
_LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def sentences_of(unit: Unit) -> list[str]:
    """A prose run's, list item's or cell's sentences (an answer's: `split_sentences(any_start)`);
    `<br>` ends one."""
    return split_sentences(_LINE_BREAK.sub("\n\n", unit.text), any_start=True)


def visible(text: str) -> str:
    """The text as its reader sees it said: without HTML comments and code spans, where neither a
    citation marker nor a declaration counts."""
    return _UNSEEN.sub(" ", text)


def finished_part(answer: str) -> str:
    """What stays of a draft the LLM stopped writing mid-way: the answer up to its last finished
    sentence or line, without a code block it had not closed and without the headings or table
    header that had nothing after them yet; "" when nothing with content was finished."""
    ends = [m.end() for m in _SENTENCE_END.finditer(answer) if _ends_sentence(answer, m)]
    ends += [at for at in _line_ends(answer)]
    if not ends:
        return ""
    kept = answer[: max(ends)]
    lines = kept.split("\n")
    opened = _unclosed_fence(lines)
    if opened is not None:  # cut inside a code block: the block goes
        lines = lines[:opened]
    content = [u for u in answer_units("\n".join(lines)) if u.kind != "label"]
    if not content:
        return ""
    return "\n".join(lines[: content[-1].last + 1]).rstrip()


def _ends_sentence(answer: str, m: re.Match[str]) -> bool:
    before = answer[max(0, m.start() - 24) : m.start() + 1]
    after = answer[m.end() : m.end() + 40].lstrip()
    if stop_of_words(before, after, answer=True) or _is_item_number(answer, m.start()):
        return False
    if m.end() == len(answer):
        return not before[-2:-1].isdigit()
    closed = m.group("closed") or ""
    return not (any(q in closed for q in QUOTE_CLOSERS) and after[:1].islower())


def _is_item_number(answer: str, stop: int) -> bool:
    """Whether the stop at `stop` ends a numbered list item's number ("1." at a line's start)."""
    start = answer.rfind("\n", max(0, stop - 16), stop) + 1
    if start == 0 and stop > 16:
        return False
    return answer[start:stop].strip(" \t>").isdigit()


def _line_ends(answer: str) -> list[int]:
    """Where a line ends that the next line does not go on with."""
    out = []
    at = answer.find("\n")
    while at >= 0:
        after = answer[at + 1 : at + 64]
        line = after.split("\n", 1)[0]
        if (not line.strip() and "\n" in after) or (line.strip() and not _continues(line)):
            out.append(at)
        at = answer.find("\n", at + 1)
    return out


def _unclosed_fence(lines: list[str]) -> int | None:
    """The line of a code fence that no later fence closes (the same character, at least as long)."""
    opened: tuple[int, str] | None = None
    for at, line in enumerate(lines):
        fence = _FENCE.match(line)
        if fence is None:
            continue
        mark = fence.group(1)
        if opened is None:
            opened = (at, mark)
        elif (
            mark[0] == opened[1][0] and len(mark) >= len(opened[1]) and not line.strip()[len(mark) :].strip()
        ):
            opened = None
    return None if opened is None else opened[0]
