"""pdfium is not thread-safe: page pictures drawn (retrieve) while PDFs are read (ingest) in other
threads of one process must neither abort the process nor fail a good PDF. Without the shared lock
this corrupts the heap (malloc aborts) or reports readable PDFs as unreadable. Run in a process of
its own, so a regression fails this test instead of killing the test run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SHARED

SCRIPT = """
import sys, threading
from pathlib import Path
from services.ingest.pdf_reader import page_count
from services.retrieve.page_picture import draw

pdfs = [p.read_bytes() for p in sorted(Path(sys.argv[1]).glob("*.pdf"))[:4]]
errors = []

def work(i):
    try:
        for r in range(30):
            data = pdfs[(i + r) % len(pdfs)]
            draw(data, 1 + r % page_count(data), [], 400)
    except Exception as err:
        errors.append(repr(err))

threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors:", errors)
"""


def test_pages_drawn_and_read_in_six_threads_at_once(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(SHARED / "data" / "documents" / "pdf")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "errors: []", done.stdout
