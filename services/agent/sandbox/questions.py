"""Which deterministic analysis a question asks for: the operation (sum, count, distinct count,
average, minimum, maximum), the column (by its words), the tables that have it, and row filters (words
of the question that are cells of those tables). Like the offline SQL planner, it declines rather than
guesses: a question that groups, compares, asks for a row rather than a number, names a column
ambiguously, or holds a word that nothing explains gets None."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragstack.text import STOPWORDS
from services.agent.sandbox.cell_numbers import parse_number
from services.agent.sandbox.tables import TableFile

_OPERATIONS = (  # the first that matches wins: "average total" is an average, "total number" a count
    ("average", re.compile(r"\b(average|mean|avg)\b")),
    ("max", re.compile(r"\b(maximum|max|highest|largest|biggest|greatest)\b")),
    ("min", re.compile(r"\b(minimum|min|lowest|smallest)\b")),
    ("count_distinct", re.compile(r"\b(how many|number of|count of)\s+(different|distinct|unique)\b")),
    ("count", re.compile(r"\b(how many|number of|count)\b")),
    ("sum", re.compile(r"\b(total|sum|altogether|combined)\b")),
)
_OPERATION_WORDS = set(
    "average mean avg maximum max highest largest biggest greatest minimum min lowest smallest how many "
    "number count different distinct unique total sum altogether combined".split()
)
# Shapes the analyses cannot honour: grouping, comparisons, conditions, asking for a row or a name.
_UNSUPPORTED = re.compile(
    r"\b(more|less|fewer|greater|higher|lower|bigger|smaller)\s+than\b|\bat (least|most)\b|"
    r"\b(above|below|over|under|exceed\w*|between|per|each|every|by|versus|vs|group\w*|breakdown|"
    r"except|excluding|without|with|whose|where|unless|only|not|if|ratio|percentage|share|growth|"
    r"change|difference|median|mode)\b|^\s*(which|who|whom|where|when|why|list|name)\b"
)
# Words a question may hold without changing what is computed.
_GENERIC = set(
    "what is are was were the a an of in on at to for from across all overall everything there here "
    "table tables document documents doc docs file files data dataset sheet spreadsheet report reports "
    "list listed library corpus row rows record records entry entries line lines value values column "
    "columns field fields figure figures given shown stated reported recorded mentioned included "
    "contained documented tell me give find compute calculate please much many our my your this that "
    "these those it its do does did have has had be been".split()
) | set(STOPWORDS)
_ROW_NOUNS = {"row", "record", "entry", "line"}
_IDENTIFIER = re.compile(r"(^|\s)(id|identifier|index|no|code|key|ref|reference|sku|#)$")
_WORD = re.compile(r"[a-z0-9]+")
_MAX_PHRASE = 4
Cell = tuple[str, int, str]  # (table path, position, the cell as written)


def stem(word: str) -> str:
    """English plurals to the singular, enough to meet a header: prices -> price, countries -> country."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if (len(word) > 4 and word.endswith("es") and word[-3] in "sxz") or word.endswith(("ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def key(text: str) -> str:
    """A header or cell as compared: lower-cased singular words, e.g. `Unit Prices ($)` -> `unit price`."""
    return " ".join(stem(w) for w in words(text))


@dataclass(frozen=True)
class Source:
    """One table the analysis reads: the column's position, and the row filters as alternatives
    (a row passes when, for each filter, one of its (position, cell) pairs holds)."""

    path: str
    document_id: str
    column: int
    where: tuple[tuple[tuple[int, str], ...], ...]


@dataclass(frozen=True)
class Plan:
    operation: str  # sum | count | count_distinct | average | min | max
    column: str  # the header as the first table writes it; "" for a count of rows
    sources: tuple[Source, ...]
    filters: tuple[str, ...]  # the question's words that filter rows, as the cells write them

    def describe(self) -> str:
        noun = {
            "sum": "total",
            "count": "number of values",
            "count_distinct": "number of different values",
            "average": "average",
            "min": "minimum",
            "max": "maximum",
        }[self.operation]
        what = f"the {noun} of {self.column!r}" if self.column else "the number of rows"
        tables = f"{len(self.sources)} table{'s' if len(self.sources) != 1 else ''}"
        where = f", rows with {' and '.join(repr(f) for f in self.filters)}" if self.filters else ""
        return f"{what} in {tables}{where}"


# Counting across files ("How many documents mention the harbour?", "In how many reports is ...?"):
# no table needed, but a program to read each file, so only an LLM-written program answers it.
_ACROSS_FILES = re.compile(
    r"\b(how many|number of|count(?: of)?)\s+(?:\w+\s+){0,3}?(documents?|files?|reports?)\b"
)


def across_files(question: str) -> bool:
    """Whether `question` counts the documents themselves rather than the rows of a table."""
    return bool(_ACROSS_FILES.search(question.lower()))


def _operation(text: str) -> str | None:
    return next((name for name, pattern in _OPERATIONS if pattern.search(text)), None)


def _is_numeric(tables: Iterable[TableFile], column: str) -> bool:
    cells = [
        row[i]
        for t in tables
        for i, h in enumerate(t.table.header)
        if key(h) == column
        for row in t.table.rows
        if row[i].strip()
    ]
    return bool(cells) and sum(parse_number(c) is not None for c in cells) >= 0.8 * len(cells)


def _column(asked: set[str], tables: Sequence[TableFile], numeric: bool) -> str | None:
    """The header key that the question's words name best; None when none or two tie."""
    scores: dict[str, tuple[int, int]] = {}
    for t in tables:
        for header in t.table.header:
            name = key(header)
            parts = set(name.split())
            matched = parts & asked
            if matched and name not in scores:
                scores[name] = (len(matched), -len(parts - matched))
    if numeric:
        scores = {n: s for n, s in scores.items() if _is_numeric(tables, n)}
    if not scores:
        return None
    best = max(scores.values())
    names = [n for n, s in scores.items() if s == best]
    return names[0] if len(names) == 1 else None


def _cells(tables: Sequence[TableFile], column: str) -> dict[str, list[Cell]]:
    """Cell keys of the tables that have `column` (other columns) -> (path, position, cell)."""
    found: dict[str, list[Cell]] = {}
    for t in tables:
        target = [i for i, h in enumerate(t.table.header) if key(h) == column]
        for row in t.table.rows:
            for i, cell in enumerate(row):
                if i not in target and cell.strip() and len(cell) <= 80:
                    found.setdefault(key(cell), []).append((t.path, i, cell.strip()))
    return found


def _filters(
    tokens: list[str], loose: set[str], cells: dict[str, list[Cell]]
) -> tuple[list[list[Cell]], set[str]]:
    """Phrases of the question (longest first) that are cells and hold a word nothing else explains."""
    phrases: list[list[Cell]] = []
    explained: set[str] = set()
    i = 0
    while i < len(tokens):
        for n in range(min(_MAX_PHRASE, len(tokens) - i), 0, -1):
            phrase = tokens[i : i + n]
            if set(phrase) & loose and " ".join(phrase) in cells:
                phrases.append(cells[" ".join(phrase)])
                explained |= set(phrase)
                i += n
                break
        else:
            i += 1
    return phrases, explained


def plan(question: str, tables: Sequence[TableFile], names: dict[str, str]) -> Plan | None:
    """The analysis `question` asks for over `tables` (names: document id -> its name), or None."""
    text = question.lower()
    operation = _operation(text)
    if operation is None or _UNSUPPORTED.search(text):
        return None
    tokens = [stem(w) for w in words(text)]
    asked = {t for t in tokens if t not in _OPERATION_WORDS and t not in STOPWORDS}
    numeric = operation in ("sum", "average", "min", "max")
    column = _column(asked, tables, numeric)
    if column is None:
        if operation != "count" or not asked & _ROW_NOUNS:
            return None
        column = ""
    elif operation == "count" and _is_numeric(tables, column) and not _IDENTIFIER.search(column):
        operation = "sum"  # "how many units" over a Units column of counts is their total
    chosen = [t for t in tables if not column or column in {key(h) for h in t.table.header}]
    headers = {p for t in chosen for h in t.table.header for p in key(h).split()}
    loose = {t for t in tokens if t not in _GENERIC and t not in _OPERATION_WORDS and t not in headers}
    phrases, explained = _filters(tokens, loose, _cells(chosen, column))
    loose -= explained
    named = {doc for doc, name in names.items() if loose and loose <= set(key(name).split())}
    if loose and not named:
        return None  # a word of the question that nothing explains: a condition we cannot apply
    if named:
        chosen = [t for t in chosen if t.document_id in named]
    sources = _sources(chosen, column, phrases)
    if not sources or any(t.table.partial for t in chosen if t.path in {s.path for s in sources}):
        return None
    label = next((h for t in chosen for h in t.table.header if key(h) == column), "")
    filters = tuple(dict.fromkeys(p[0][2] for p in phrases))
    return Plan(operation, label, sources, filters)


def _sources(chosen: Sequence[TableFile], column: str, phrases: list[list[Cell]]) -> tuple[Source, ...]:
    """The tables to read: each filter must be satisfiable in a table for it to take part."""
    sources = []
    for t in chosen:
        where = []
        for phrase in phrases:
            alternatives = tuple(dict.fromkeys((i, cell) for path, i, cell in phrase if path == t.path))
            if not alternatives:
                break
            where.append(alternatives)
        else:
            position = next((i for i, h in enumerate(t.table.header) if key(h) == column), -1)
            sources.append(Source(t.path, t.document_id, position, tuple(where)))
    return tuple(sources)
