"""The offline answer shapes of the query modes (compare, methodology, datasets, reproduce): pure,
deterministic functions of the question and the numbered evidence, every cell a verbatim quote
with its refs, or "not stated"."""

from services.agent.shapes.cells import (
    CHECKLIST,
    NOT_STATED,
    Cell,
    ChecklistItem,
    DatasetMention,
    Section,
    Table,
)
from services.agent.shapes.compare import compare_table
from services.agent.shapes.datasets import datasets
from services.agent.shapes.markdown import to_markdown
from services.agent.shapes.methodology import methodology
from services.agent.shapes.reproduce import reproduce_checklist

__all__ = [
    "CHECKLIST",
    "NOT_STATED",
    "Cell",
    "ChecklistItem",
    "DatasetMention",
    "Section",
    "Table",
    "compare_table",
    "datasets",
    "methodology",
    "reproduce_checklist",
    "to_markdown",
]
