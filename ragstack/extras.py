"""Optional parts of RAGStack, installed as pip extras (`pip install 'ragstack[docling,ocr]'`): a
file or a source that needs a missing one fails with the extra named, and nothing else does."""

from __future__ import annotations

from importlib.util import find_spec

from ragstack.errors import RagstackError

# extra -> the module that shows it is installed
EXTRAS = {"docling": "docling", "ocr": "rapidocr", "postgres": "psycopg"}


class MissingExtra(RagstackError):
    code = "FAILED_PRECONDITION"


def installed(extra: str) -> bool:
    return find_spec(EXTRAS[extra]) is not None


def require(extra: str, purpose: str) -> None:
    """Raises MissingExtra naming `extra` when its module is not installed."""
    if not installed(extra):
        raise MissingExtra(f"{purpose} needs the `{extra}` extra: pip install 'ragstack[{extra}]'")
