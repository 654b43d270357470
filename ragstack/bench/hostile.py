"""`ragstack bench hostile`: hostile and freak files fed to a stack of its own (fresh stores), one at a
time. For each: how long until it fails and the reason (which should name a budget), the service's
peak memory above its level before (this process: the services run in it) and the parser worker's
peak, how long a small ingest started beside it takes, how long a search takes meanwhile, and
whether anything of it was left in the stores.

Crawls go to a local server on loopback (allowed for this run only): a 400 MB body without a length
and a page that drips a byte at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ragstack import domain as d
from ragstack.bench import hostile_files as files
from ragstack.cli.session import embedded_config
from ragstack.config import Config
from ragstack.rpc.clients import IngestClient, RetrieveClient, open_channel
from ragstack.serve import start_stack

_SMALL = "# Okapi\n\nThe okapi is a giraffid of the Congo rainforest, with striped legs.\n"


@dataclass(frozen=True)
class Case:
    name: str
    file: str  # the file's name ("" for a crawl)
    make: Callable[[Config], bytes]  # its bytes, sized past the configured budgets
    url: str = ""  # path on the local server, for a crawl


def cases() -> list[Case]:
    def over_mb(cfg: Config) -> int:
        return int(cfg.ingest.max_unpacked_mb) * 2

    return [
        Case("docx zip bomb", "bomb.docx", lambda c: files.docx_bomb(over_mb(c))),
        Case("xlsx bomb", "bomb.xlsx", lambda c: files.xlsx_bomb(over_mb(c))),
        Case("pptx bomb", "bomb.pptx", lambda c: files.pptx_bomb(over_mb(c))),
        Case(
            "docx, a million paragraphs of text", "text.docx", lambda c: files.docx(1_000_000, "Lorem ipsum")
        ),
        Case("docx, a million empty paragraphs", "empty.docx", lambda c: files.docx(1_000_000)),
        Case("HTML nested 100,000 deep", "nested.html", lambda c: files.nested_html(100_000)),
        Case("one line of 40 MB", "line.txt", lambda c: files.one_line_text(40)),
        Case("TIFF of 1,000 frames", "frames.tiff", lambda c: files.tiff(1000)),
        Case("PDF of 5,000 blank pages", "blank.pdf", lambda c: files.blank_pdf(5000)),
        Case("400 MB HTTP body", "", lambda c: b"", url="/big"),
        Case("page dripping a byte at a time", "", lambda c: b"", url="/drip"),
    ]


async def bench_hostile(
    cfg: Config, only: list[str] | None = None, on_case: Callable[[str], None] = lambda name: None
) -> list[dict[str, Any]]:
    picked = [c for c in cases() if not only or any(o.lower() in c.name.lower() for o in only)]
    with tempfile.TemporaryDirectory(prefix="ragstack-hostile-") as tmp, hostile_site() as site:
        root = Path(tmp)
        local = embedded_config(cfg, root / "data", allow_paths=[str(root)])
        local.ingest.fetch_allow = [*local.ingest.fetch_allow, "127.0.0.1"]
        stack = await start_stack(local, services=("ingest", "retrieve"), gateway=False)
        channels = [open_channel(stack.peers[n], token=local.services.token) for n in ("ingest", "retrieve")]
        ingest = IngestClient(channels[0], local.deadlines.ingest_s)
        retrieve = RetrieveClient(channels[1], local.deadlines.retrieve_s)
        try:
            await _small_ingest(ingest, root, "warm-up")
            rows = []
            for case in picked:
                on_case(case.name)
                rows.append(await _run(case, local, ingest, retrieve, root, site))
            return rows
        finally:
            for channel in channels:
                await channel.close()
            await stack.stop()


async def _run(
    case: Case, cfg: Config, ingest: IngestClient, retrieve: RetrieveClient, root: Path, site: str
) -> dict[str, Any]:
    paths: list[str] = []
    if case.file:
        path = root / case.file
        path.write_bytes(await asyncio.to_thread(case.make, cfg))
        paths = [str(path)]
    urls = [site + case.url] if case.url else []
    with _Peaks() as peaks:
        start = time.monotonic()
        hostile = asyncio.create_task(_collect(ingest.ingest(paths=paths, urls=urls, library="hostile")))
        await asyncio.sleep(0.5)  # the hostile file is being read when the small ingest and query come
        small_s = await _small_ingest(ingest, root, case.name)
        query_start = time.monotonic()
        await retrieve.search("okapi rainforest", "default", 3, d.SearchMode.HYBRID)
        query_ms = (time.monotonic() - query_start) * 1000
        events = await hostile
        seconds = time.monotonic() - start
    failures = [e.reason for e in events if isinstance(e, d.FileProgress) and e.stage == d.FileStage.FAILED]
    left = await ingest.list_documents("hostile")
    return {
        "case": case.name,
        "seconds": round(seconds, 2),
        "failed": bool(failures),
        "reason": failures[0] if failures else "",
        "service_peak_mb": round(peaks.service_mb, 1),
        "parser_peak_mb": round(peaks.children_mb, 1),
        "small_ingest_s": round(small_s, 2),
        "query_ms": round(query_ms, 1),
        "documents_left": len(left),  # of the hostile library: none may be (half) indexed
    }


async def _collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


async def _small_ingest(ingest: IngestClient, root: Path, name: str) -> float:
    path = root / f"small-{abs(hash(name))}.md"
    path.write_text(_SMALL + f"\nIt was ingested beside: {name}.\n")
    start = time.monotonic()
    events = await _collect(ingest.ingest(paths=[str(path)], library="default"))
    summary = events[-1]
    if not isinstance(summary, d.IngestSummary) or summary.indexed != 1:
        raise RuntimeError(f"the small ingest beside {name!r} did not index its file: {summary}")
    return time.monotonic() - start


class _Peaks:
    """Peak resident memory above the level at the start, of this process and of its children (the
    parser worker), sampled every 50 ms."""

    def __init__(self) -> None:
        self.service_mb = 0.0
        self.children_mb = 0.0
        self._stop = threading.Event()
        self._base = _rss_mb("self")
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.service_mb = max(self.service_mb, _rss_mb("self") - self._base)
            self.children_mb = max(self.children_mb, sum(_rss_mb(str(pid)) for pid in _children()))


def _rss_mb(pid: str) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children() -> list[int]:
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):
            found.extend(int(p) for p in (task / "children").read_text().split())
    return found


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path not in ("/big", "/drip"):  # robots.txt among them: none
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        try:
            if self.path == "/big":  # 400 MB, no content-length
                block = b"<p>" + b"x" * (1024 * 1024 - 3)
                for _ in range(400):
                    self.wfile.write(block)
            else:  # a byte every 0.2 s, for a minute
                for _ in range(300):
                    self.wfile.write(b"<")
                    self.wfile.flush()
                    time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def hostile_site() -> Iterator[str]:
    """A local server: `/big` streams 400 MB without a length, `/drip` a byte every 0.2 s."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
