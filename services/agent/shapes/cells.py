"""The answer shapes of the query modes: what the offline path fills with quotes from the evidence."""

from __future__ import annotations

from dataclasses import dataclass

NOT_STATED = "not stated"


@dataclass(frozen=True)
class Cell:
    """A quote from the evidence (a whole sentence or a clause of one) with the refs it quotes, or
    NOT_STATED with no refs."""

    text: str
    refs: tuple[str, ...] = ()


MISSING = Cell(NOT_STATED)


@dataclass(frozen=True)
class Table:
    """A compare table: one row per compared thing, one cell per aspect (column)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[Cell, ...]], ...]


@dataclass(frozen=True)
class Section:
    """A methodology section: "Steps", "Settings" or "Data"."""

    title: str
    items: tuple[Cell, ...]


@dataclass(frozen=True)
class DatasetMention:
    name: str
    size: str  # as written, e.g. "395k samples"; "" when not stated
    used_for: str  # the clause saying how it is used; "" when none does
    refs: tuple[str, ...]


CHECKLIST = ("Code", "Data", "Hyper-parameters", "Hardware", "Evaluation")


@dataclass(frozen=True)
class ChecklistItem:
    """One of CHECKLIST, with the evidence that states it, or NOT_STATED (then it is missing)."""

    item: str
    cell: Cell
