"""The one lock around pdfium: it is not thread-safe, and two threads in it at once can abort the
process (a retrieve thread drawing a page picture beside an ingest thread reading a PDF, in one
process). It is Docling's own lock when Docling is installed, so its calls and ours take turns."""

from __future__ import annotations

import threading

try:
    from docling.utils.locks import pypdfium2_lock as PDFIUM_LOCK
except ImportError:  # no Docling here (the retrieve image): ours alone
    PDFIUM_LOCK = threading.Lock()

__all__ = ["PDFIUM_LOCK"]
