"""Deterministic analyses, no LLM: a question such as "What is the total revenue?", "How many
customers are listed?" or "What is the average price of widgets?" becomes a small Python program over
the CSV tables extracted from the documents, run in the sandbox like any other code. The analysis
keeps the program, its output, the number and the documents whose rows it used."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.agent.sandbox.cell_numbers import parse_number
from services.agent.sandbox.questions import Plan, plan
from services.agent.sandbox.runner import Limits, Outcome, run
from services.agent.sandbox.tables import Doc, library

Execute = Callable[[str, Mapping[str, bytes], Limits], Outcome]


@dataclass(frozen=True)
class Analysis:
    """What was computed and how. `value` is None when the program failed (the outcome says why)."""

    question: str
    operation: str
    column: str
    description: str  # in words: "the total of 'Revenue' in 2 tables, rows with 'North'"
    value: float | None
    text: str  # the value as the program printed it ("1234.50"), "" when it failed
    rows: int  # values the operation used
    skipped: int  # non-empty cells of the column that are not numbers (numeric operations)
    files: tuple[str, ...]  # the tables (paths under the sandbox's /docs) that gave rows
    document_ids: tuple[str, ...]  # the documents those tables came from, to cite
    code: str
    outcome: Outcome

    def sentence(self) -> str:
        """The answer in one sentence, e.g. "The total of 'Revenue' in 2 tables is 1234.50." """
        if self.value is None:
            return f"The analysis of {self.description} failed."
        return f"{self.description[:1].upper()}{self.description[1:]} is {self.text}."


_PROGRAM = '''\
"""{description}"""
import csv
import json
import sys
from decimal import Decimal

OPERATION = {operation!r}
COLUMN = {column!r}
# table -> the column's position (-1: count rows), and filters: a row counts when, for each filter,
# one of its (position, cell) pairs holds.
TABLES = {tables}


{parse_number}


values = []
used = {{}}
skipped = 0
for path, spec in TABLES.items():
    with open("/docs/" + path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    for row in rows:
        row = row + [""] * (max(spec["column"], 0) + 1 - len(row))
        cells = [c.strip() for c in row]
        if not all(any(p < len(cells) and cells[p] == cell for p, cell in alts) for alts in spec["where"]):
            continue
        cell = "row" if spec["column"] < 0 else cells[spec["column"]]
        if not cell:
            continue
        if OPERATION in ("count", "count_distinct"):
            value = cell.casefold()
        else:
            value = parse_number(cell)
            if value is None:
                skipped += 1
                continue
        values.append(value)
        used[path] = used.get(path, 0) + 1

if OPERATION == "count":
    result = Decimal(len(values))
elif OPERATION == "count_distinct":
    result = Decimal(len(set(values)))
elif not values:
    print("no numbers to compute with", file=sys.stderr)
    sys.exit(3)
elif OPERATION == "sum":
    result = sum(values, Decimal(0))
elif OPERATION == "average":
    result = (sum(values, Decimal(0)) / len(values)).quantize(Decimal("0.000001"))
elif OPERATION == "min":
    result = min(values)
else:
    result = max(values)
text = format(result, "f")
if "." in text and OPERATION == "average":
    text = text.rstrip("0").rstrip(".")
print(f"{{OPERATION}} of {{COLUMN or 'rows'}}: {{text}} ({{len(values)}} values from {{len(used)}} tables)")
print(json.dumps({{"value": text, "rows": len(values), "skipped": skipped, "files": used}}))
'''


def program(p: Plan) -> str:
    """The Python program that computes `p` over the sandbox's /docs."""
    tables = {
        s.path: {"column": s.column, "where": [[list(pair) for pair in alts] for alts in s.where]}
        for s in p.sources
    }
    return _PROGRAM.format(
        description=p.describe().replace('"""', "'''").replace("\\", "/"),
        operation=p.operation,
        column=p.column,
        tables=json.dumps(tables, indent=4, ensure_ascii=False),
        parse_number=inspect.getsource(parse_number).strip(),
    )


def analyse(
    question: str,
    documents: Sequence[Doc],
    limits: Limits | None = None,
    execute: Execute = run,
) -> Analysis | None:
    """The analysis `question` asks for over the tables of `documents`, run in the sandbox; None
    when the question is not one the deterministic analyses can tell. Raises SandboxUnavailable
    (from runner.run) when the sandbox cannot run here."""
    view = library(documents)
    names = {doc.document_id: doc.name for doc in documents}
    chosen = plan(question, view.tables, names)
    if chosen is None:
        return None
    code = program(chosen)
    outcome = execute(code, view.files, limits or Limits())
    return _analysis(question, chosen, code, outcome, view.sources)


def _result(outcome: Outcome) -> dict[str, object] | None:
    if outcome.exit != 0 or outcome.killed_by:
        return None
    lines = outcome.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return result if isinstance(result, dict) and isinstance(result.get("value"), str) else None


def _analysis(question: str, p: Plan, code: str, outcome: Outcome, sources: Mapping[str, str]) -> Analysis:
    result = _result(outcome)
    files: dict[str, int] = {}
    value: float | None = None
    text = ""
    if result is not None:
        text = str(result["value"])
        value = float(text)
        raw = result.get("files")
        files = {str(k): int(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    used = tuple(path for path, count in files.items() if count > 0 and path in sources)
    rows, skipped = (result.get("rows", 0), result.get("skipped", 0)) if result else (0, 0)
    return Analysis(
        question=question,
        operation=p.operation,
        column=p.column,
        description=p.describe(),
        value=value,
        text=text,
        rows=int(rows) if isinstance(rows, int) else 0,
        skipped=int(skipped) if isinstance(skipped, int) else 0,
        files=used,
        document_ids=tuple(dict.fromkeys(sources[path] for path in used)),
        code=code,
        outcome=outcome,
    )
