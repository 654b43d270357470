"""Where a PDF's lines lie on its pages, kept at ingest, and where a chunk lies, found from them.

The PDF reader knows every line's box; chunking works on the Markdown made from the lines, so a
chunk does not remember its boxes. Keeping the lines (with their text) lets a chunk be located
later by its text: a line belongs to the chunk when the chunk's text holds it, compared on letters
and digits only (hyphenation, spacing and Markdown marks differ between the two). The lines at a
chunk's two ends may hold only part of it (chunks end at sentences, lines do not): a long line is
taken when it holds the chunk's first or last words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragstack.domain import ChunkRegion

MIN_LINE_CHARS = 6  # shorter lines (page numbers, bullets) would match anywhere
EDGE_CHARS = 24  # a chunk's first or last letters that locate a line it starts or ends inside
MAX_REGIONS = 64  # per chunk: a picture stays readable


@dataclass(frozen=True)
class LayoutLine:
    """One line's box, as fractions of its page, the origin at the top left."""

    page: int
    left: float
    top: float
    right: float
    bottom: float
    text: str


@dataclass(frozen=True)
class PageLayout:
    """The lines of a PDF, in the reader's order."""

    lines: tuple[LayoutLine, ...] = ()

    def to_json(self) -> str:
        rows = [
            [ln.page, round(ln.left, 5), round(ln.top, 5), round(ln.right, 5), round(ln.bottom, 5), ln.text]
            for ln in self.lines
        ]
        return json.dumps({"version": 1, "lines": rows}, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> PageLayout:
        rows = json.loads(raw).get("lines", [])
        return cls(
            tuple(
                LayoutLine(int(p), float(x0), float(y0), float(x1), float(y1), str(t))
                for p, x0, y0, x1, y1, t in rows
            )
        )


def box(
    page: int, size: tuple[float, float], left: float, top: float, right: float, bottom: float, text: str
) -> LayoutLine:
    """A line from PDF coordinates (points, the origin at the bottom left, `top` > `bottom`);
    `left` == `right` (OCR gives no horizontal position) spans the page's width."""
    width, height = size
    if right <= left:
        left, right = 0.0, width
    return LayoutLine(
        page,
        _fraction(left, width),
        _fraction(height - top, height),
        _fraction(right, width),
        _fraction(height - bottom, height),
        text,
    )


def _fraction(value: float, whole: float) -> float:
    return min(1.0, max(0.0, value / whole)) if whole > 0 else 0.0


_NOT_ALNUM = re.compile(r"[\W_]+")


def _letters(text: str) -> str:
    return _NOT_ALNUM.sub("", text).lower()


def regions(layout: PageLayout, text: str, pages: Sequence[int]) -> tuple[ChunkRegion, ...]:
    """The boxes of the chunk with `text` on `pages`: runs of its lines merged, in reading order."""
    wanted = set(pages)
    letters = _letters(text)
    if not letters:
        return ()
    head, tail = letters[:EDGE_CHARS], letters[-EDGE_CHARS:]
    found: list[tuple[int, LayoutLine]] = []
    for i, line in enumerate(layout.lines):
        if wanted and line.page not in wanted:
            continue
        own = _letters(line.text)
        if len(own) < MIN_LINE_CHARS:
            continue
        if own in letters or (len(own) >= EDGE_CHARS and (head in own or tail in own)):
            found.append((i, line))
    return tuple(_merge(found))[:MAX_REGIONS]


def _merge(found: Iterable[tuple[int, LayoutLine]]) -> Iterable[ChunkRegion]:
    """Consecutive lines of one page and column become one box."""
    run: ChunkRegion | None = None
    last = -2
    for i, line in found:
        if run is not None and i == last + 1 and line.page == run.page and _same_column(run, line):
            run = ChunkRegion(
                run.page,
                min(run.left, line.left),
                min(run.top, line.top),
                max(run.right, line.right),
                max(run.bottom, line.bottom),
            )
        else:
            if run is not None:
                yield run
            run = ChunkRegion(line.page, line.left, line.top, line.right, line.bottom)
        last = i
    if run is not None:
        yield run


def _same_column(run: ChunkRegion, line: LayoutLine) -> bool:
    """The line starts below the run, near it, and overlaps it horizontally."""
    return (
        line.top >= run.top
        and line.top - run.bottom < 0.05
        and line.left < run.right
        and line.right > run.left
    )
