"""Numbers as tables write them. `parse_number` is self-contained: the generated programs carry its
source, so the planner's idea of a numeric column and the program's arithmetic agree."""

from __future__ import annotations

from decimal import Decimal


def parse_number(cell: str) -> Decimal | None:
    """A cell's number: `1,234.50`, `$1,234`, `-3.5`, `(12)` (negative), `12%`, `€ 7`, `1 234`;
    None for anything else (text, dates, empty)."""
    import re
    from decimal import Decimal, InvalidOperation

    text = cell.strip().replace("\u2212", "-").replace("\u00a0", " ")
    negative = text.startswith("(") and text.endswith(")")
    if negative:
        text = text[1:-1].strip()
    text = re.sub(r"^([+-]?)\s*[$€£¥]\s*", r"\1", text)
    text = re.sub(r"\s*(%|[$€£¥]|usd|eur|gbp)$", "", text, flags=re.IGNORECASE)
    if re.fullmatch(r"[+-]?\d{1,3}([, ]\d{3})+(\.\d+)?", text):
        text = text.replace(",", "").replace(" ", "")
    if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)", text):
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return -value if negative else value
