"""Structure-aware chunking of Markdown: heading paths, sentence packing with overlap, and atomic
code blocks and table rows (a fence is never cut; a table splits only between rows)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ragstack.text import split_sentences

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# Readers of paged formats put this line before each page's content.
PAGE_MARKER = re.compile(r"<!-- page (\d+) -->")


def page_marker(page: int) -> str:
    return f"<!-- page {page} -->"


def split_pages(markdown: str) -> list[tuple[int, str]]:
    """(page, text) for each page marker's page; [] when the text has no page markers."""
    pages: list[tuple[int, list[str]]] = []
    for line in markdown.splitlines():
        marker = PAGE_MARKER.fullmatch(line.strip())
        if marker:
            pages.append((int(marker.group(1)), []))
        elif pages:
            pages[-1][1].append(line)
    return [(page, "\n".join(lines).strip()) for page, lines in pages if "\n".join(lines).strip()]


@dataclass(frozen=True)
class Unit:
    """The smallest piece the chunker moves: a sentence, a code block, a table row, a list item."""

    text: str
    prose: bool  # only prose sentences are repeated as overlap
    sep: str = " "  # how it joins the previous unit
    header: str = ""  # a table row's header, repeated when the table continues in a new chunk
    page: int = 0  # 1-based page the unit is on; 0 for formats without pages


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]
    units: list[Unit]


@dataclass(frozen=True)
class TextChunk:
    text: str
    heading_path: tuple[str, ...]
    pages: tuple[int, ...] = ()


def _blocks(lines: list[str]) -> Iterator[tuple[str, str | list[str]]]:
    """Yields ("heading", (level, text)) / ("code", text) / ("table", rows) / ("para", text)."""
    i = 0
    para: list[str] = []

    def flush() -> Iterator[tuple[str, str | list[str]]]:
        if para:
            yield "para", "\n".join(para)
            para.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            yield from flush()
            marker = fence.group(1)
            block = [line]
            i += 1
            while i < len(lines):
                block.append(lines[i])
                i += 1
                if lines[i - 1].strip().startswith(marker) and len(block) > 1:
                    break
            yield "code", "\n".join(block)
            continue
        marker = PAGE_MARKER.fullmatch(line.strip())
        if marker:
            yield from flush()
            yield "page", marker.group(1)
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            yield from flush()
            yield "heading", f"{len(heading.group(1))}\t{heading.group(2)}"
            i += 1
            continue
        if line.lstrip().startswith("|"):
            yield from flush()
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(lines[i])
                i += 1
            yield "table", rows
            continue
        if not line.strip():
            yield from flush()
        elif re.match(r"^\s*([-*+]|\d+[.)])\s+", line):
            yield from flush()
            para.append(line)
            yield from flush()
        else:
            para.append(line)
        i += 1
    yield from flush()


def sections(markdown: str, title: str) -> list[Section]:
    """Splits Markdown into sections, each with its heading path (the title first)."""
    stack: list[tuple[int, str]] = []
    out: list[Section] = []
    current: list[Unit] = []

    def path() -> tuple[str, ...]:
        names = [t for _, t in stack]
        return tuple(names) if names and stack[0][0] == 1 else (title, *names)

    page = 0
    for kind, value in _blocks(markdown.splitlines()):
        if kind == "page":
            assert isinstance(value, str)
            page = int(value)
        elif kind == "heading":
            assert isinstance(value, str)
            if current:
                out.append(Section(path(), current))
                current = []
            level_s, text = value.split("\t", 1)
            level = int(level_s)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, text.strip()))
        elif kind == "code":
            assert isinstance(value, str)
            current.append(Unit(value, prose=False, sep="\n\n", page=page))
        elif kind == "table":
            assert isinstance(value, list)
            header = (
                value[:2] if len(value) > 2 and set(value[1].replace("|", "").strip()) <= set("-: ") else []
            )
            body = value[len(header) :]
            head = "\n".join(header)
            if header:
                current.append(Unit(head, prose=False, sep="\n\n", page=page))
            for row in body:
                current.append(Unit(row, prose=False, sep="\n", header=head, page=page))
        else:
            assert isinstance(value, str)
            for j, sentence in enumerate(split_sentences(value, keep_lines=True)):
                current.append(Unit(sentence, prose=True, sep=" " if j else "\n\n", page=page))
    if current:
        out.append(Section(path(), current))
    return out


def _split_long(unit: Unit, budget: int, count: Callable[[str], int]) -> list[Unit]:
    """A prose sentence over the budget is cut between words; code and table rows never are. A very
    long one (a run-on line of megabytes) is first cut into windows of about `budget` characters
    (a third of a budget's tokens, or so), so no long text is ever counted and the time stays in
    proportion to the length; the packer joins the windows back into chunks."""
    if not unit.prose:
        return [unit]
    text = unit.text
    if len(text) <= budget * _LONG and count(text) <= budget:
        return [unit]
    windows = _windows(text, budget * _WINDOW) if len(text) > budget * _LONG else [text]
    pieces: list[str] = []
    for window in windows:
        pieces.extend([window] if count(window) <= budget else _fitting_runs(window.split(), budget, count))
    return [Unit(p, prose=True, sep=" ", page=unit.page) for p in pieces]


_LONG = 8  # characters per token past which a sentence is cut into windows before it is counted
_WINDOW = 1  # characters per token of a window (a third of a budget or so: windows pack into chunks)


def _windows(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of about `size` characters, cut at whitespace (a longer word stays whole)."""
    start = 0
    while start < len(text):
        end = start + size
        if end < len(text):
            cut = text.rfind(" ", start, end)
            end = cut if cut > start else (text.find(" ", end) if " " in text[end:] else len(text))
        piece = " ".join(text[start:end].split())
        if piece:
            yield piece
        start = end + 1


def _fitting_runs(words: list[str], budget: int, count: Callable[[str], int]) -> list[str]:
    """The words in the longest runs that fit the budget, found by doubling then halving (a few
    counts per run); a single word over the budget is a run of its own."""
    runs: list[str] = []
    start = 0
    while start < len(words):
        fits, over = 1, 2
        while start + fits < len(words) and count(" ".join(words[start : start + over])) <= budget:
            fits, over = over, over * 2
        over = min(over, len(words) - start + 1)
        while over - fits > 1:
            mid = (fits + over) // 2
            if count(" ".join(words[start : start + mid])) <= budget:
                fits = mid
            else:
                over = mid
        runs.append(" ".join(words[start : start + fits]))
        start += fits
    return runs


def chunk_markdown(
    markdown: str,
    title: str,
    max_tokens: int,
    overlap_sentences: int,
    count_tokens: Callable[[str], int],
) -> list[TextChunk]:
    """Packs each section's units into chunks of at most `max_tokens` (a single atomic unit may
    exceed it), starting every chunk after the first with the last prose sentences of the one before."""
    # A unit is measured when split, packed and overlapped: a bounded cache, since the pieces a long
    # sentence is cut into are measured once each.
    count_tokens = functools.lru_cache(maxsize=4096)(count_tokens)
    chunks: list[TextChunk] = []
    for section in sections(markdown, title):
        units = [p for u in section.units for p in _split_long(u, max_tokens, count_tokens)]
        current: list[Unit] = []
        size = 0
        fresh = 0  # units in `current` that are not overlap
        for unit in units:
            n = count_tokens(unit.text)
            if current and fresh and size + n > max_tokens:
                chunks.append(TextChunk(_join(current), section.heading_path, _pages(current)))
                overlap = [u for u in current[-overlap_sentences:] if u.prose] if overlap_sentences else []
                if overlap and sum(count_tokens(u.text) for u in overlap) + n > max_tokens:
                    overlap = []
                if unit.header:
                    overlap = [Unit(unit.header, prose=False, sep="\n\n", page=unit.page)]
                current, size, fresh = overlap, sum(count_tokens(u.text) for u in overlap), 0
            current.append(unit)
            size += n
            fresh += 1
        if current and fresh:
            chunks.append(TextChunk(_join(current), section.heading_path, _pages(current)))
    if not chunks:
        # Headings and nothing else (a title slide): the headings are the text.
        headings = [m.group(2) for line in markdown.splitlines() if (m := _HEADING.match(line))]
        if headings:
            chunks.append(TextChunk("\n".join(headings), (title,)))
    return chunks


def pack_sentences(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """`text` as consecutive pieces of whole sentences, each at most `budget` word pieces (a longer
    sentence, or a line of code or a table row, cut between words); whitespace is normalised."""
    count = functools.lru_cache(maxsize=1024)(count)  # a sentence is measured when split and packed
    units = [Unit(s, prose=True, sep=" ") for s in split_sentences(text)]
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for unit in (p for u in units for p in _split_long(u, budget, count)):
        n = count(unit.text)
        if current and size + n > budget:
            pieces.append(" ".join(current))
            current, size = [], 0
        current.append(unit.text)
        size += n
    if current:
        pieces.append(" ".join(current))
    return pieces


def _pages(units: list[Unit]) -> tuple[int, ...]:
    return tuple(sorted({u.page for u in units if u.page}))


def _join(units: list[Unit]) -> str:
    text = units[0].text
    for u in units[1:]:
        text += u.sep + u.text
    return text.strip()
