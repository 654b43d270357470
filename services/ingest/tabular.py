"""CSV and other delimited text as the header, sample rows and the row count (a Markdown table)."""

from __future__ import annotations

import csv
import io

from ragstack.errors import UnsupportedFormat

SAMPLE_ROWS = 20


def csv_markdown(text: str, title: str) -> str:
    sample = text[:20_000]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = [r for r in csv.reader(io.StringIO(text), dialect) if any(c.strip() for c in r)]
    if not rows:
        raise UnsupportedFormat("empty table")
    header, body = rows[0], rows[1:]
    width = max(len(r) for r in rows)
    header = header + [""] * (width - len(header))

    def line(cells: list[str]) -> str:
        cells = cells + [""] * (width - len(cells))
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ").strip() for c in cells) + " |"

    table = [line(header), "|" + "---|" * width, *(line(r) for r in body[:SAMPLE_ROWS])]
    shown = min(len(body), SAMPLE_ROWS)
    note = f"{len(body)} data rows, {width} columns; the first {shown} are shown."
    return f"# {title}\n\n{note}\n\n" + "\n".join(table) + "\n"
