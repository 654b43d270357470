"""The answer text of a shape: Markdown whose every quote is followed by its citation markers.

Quotes stay verbatim except for what Markdown and the verifier's marker grammar need: line breaks
collapse to spaces, `|` is escaped (`\\|`), and a bracketed reference inside the quote (a paper's
own "[22]") is escaped (`\\[22\\]`) so it renders as written and is not read as a citation marker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.agent.shapes.cells import (
    NOT_STATED,
    Cell,
    ChecklistItem,
    DatasetMention,
    Section,
    Table,
)

NO_DATASETS = "No dataset, benchmark or corpus is named in the sources found."
SUBJECT = "Compared"  # the header of a compare table's first column
_BRACKETED = re.compile(r"(?<!\\)\[(\s*[\w.-]+(?:\s*,\s*[\w.-]+)*\s*)\](?!\()")

Shape = Table | Sequence[Section] | Sequence[DatasetMention] | Sequence[ChecklistItem]


def markers(refs: Sequence[str]) -> str:
    """`[2]`, `[1, 3]`; "" for none."""
    return f"[{', '.join(refs)}]" if refs else ""


def inline(text: str) -> str:
    """Quoted text made safe for one Markdown line or table cell (see the module's note)."""
    flat = " ".join(text.split())
    flat = re.sub(r"(?<!\\)\|", r"\\|", flat)
    return _BRACKETED.sub(r"\\[\1\\]", flat)


def cell_text(cell: Cell) -> str:
    """A cell's text followed by its markers; NOT_STATED as the plain words."""
    if not cell.refs:
        return NOT_STATED
    return f"{inline(cell.text)} {markers(cell.refs)}"


def to_markdown(shape: Shape) -> str:
    """The answer text of `compare_table`, `methodology`, `datasets` or `reproduce_checklist`."""
    if isinstance(shape, Table):
        return _table(shape)
    items = tuple(shape)
    if not items:
        return NO_DATASETS  # the only shape that can be empty
    sections = [x for x in items if isinstance(x, Section)]
    found = [x for x in items if isinstance(x, DatasetMention)]
    checks = [x for x in items if isinstance(x, ChecklistItem)]
    if len(sections) == len(items):
        return _sections(sections)
    if len(found) == len(items):
        return "\n".join(_dataset(d) for d in found)
    if len(checks) == len(items):
        return "\n".join(_check(c) for c in checks)
    raise TypeError(f"not an answer shape: {[type(x).__name__ for x in items]}")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(table: Table) -> str:
    lines = [
        _row([SUBJECT, *(inline(c) for c in table.columns)]),
        _row(["---"] * (len(table.columns) + 1)),
    ]
    lines += [_row([inline(name), *(cell_text(c) for c in cells)]) for name, cells in table.rows]
    return "\n".join(lines)


def _sections(sections: Sequence[Section]) -> str:
    blocks = []
    for s in sections:
        blocks.append("\n".join([f"### {s.title}", *(f"- {cell_text(c)}" for c in s.items)]))
    return "\n\n".join(blocks)


def _dataset(d: DatasetMention) -> str:
    line = f"- **{inline(d.name)}**"
    if d.size:
        line += f" ({inline(d.size)})"
    if d.used_for:
        line += f": {inline(d.used_for)}"
    return f"{line} {markers(d.refs)}"


def _check(c: ChecklistItem) -> str:
    if not c.cell.refs:
        return f"- {c.item}: {NOT_STATED} (missing)"
    return f"- {c.item}: {cell_text(c.cell)}"
