"""The offline answer shapes of the query modes (compare, methodology, datasets, reproduce): pure,
deterministic functions of the question and the numbered evidence, every cell a verbatim quote
with its refs, or "not stated"."""

from services.agent.shapes.cells import (
    NOT_STATED,
    Cell,
    ChecklistItem,
    DatasetMention,
    Section,
    Table,
)
from services.agent.shapes.compare import compare_table
from services.agent.shapes.datasets import datasets

__all__ = [
    "NOT_STATED",
    "Cell",
    "ChecklistItem",
    "DatasetMention",
    "Section",
    "Table",
    "compare_table",
    "datasets",
]
