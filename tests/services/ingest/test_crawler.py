"""The crawler against a real HTTP server on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from services.ingest.crawler import USER_AGENT, CrawlLimits, crawl
from services.ingest.readers import parse

PAGES = {
    "/robots.txt": ("text/plain", "User-agent: *\nDisallow: /private/\n"),
    "/": (
        "text/html",
        '<html><head><title>Home</title></head><body><nav><a href="/a.html">A</a></nav>'
        '<main><h1>Home</h1><p>Welcome to the okapi site.</p><a href="/a.html#top">A</a>'
        '<a href="/private/secret.html">secret</a><a href="http://elsewhere.invalid/x">away</a>'
        '<a href="/data.bin">data</a></main></body></html>',
    ),
    "/a.html": (
        "text/html",
        "<html><body><main><h1>Page A</h1><p>Okapis live in the Congo.</p>"
        '<a href="/b.html">B</a></main></body></html>',
    ),
    "/b.html": ("text/html", "<html><body><main><h1>Page B</h1><p>Too deep.</p></main></body></html>"),
    "/private/secret.html": ("text/html", "<html><body>secret</body></html>"),
    "/data.bin": ("application/octet-stream", "0101"),
}


AGENTS: list[str] = []
LOOPBACK = ("127.0.0.1",)  # the test site is internal: allowed explicitly, as an intranet would be


class Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        AGENTS.append(self.headers.get("user-agent", ""))
        if self.path not in PAGES:
            self.send_error(404)
            return
        kind, body = PAGES[self.path]
        data = body.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("etag", f'"{len(data)}"')
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_polite_same_host_crawl(site: str) -> None:
    pauses: list[float] = []
    items, skipped = crawl(
        f"{site}/",
        CrawlLimits(max_pages=10, max_depth=1, delay_s=0.25, fetch_allow=LOOPBACK),
        sleep=pauses.append,
    )
    assert [i.source for i in items] == [f"{site}/", f"{site}/a.html"]  # b.html is two hops away
    reasons = dict(skipped)
    assert reasons[f"{site}/private/secret.html"] == "disallowed by robots.txt"
    assert reasons[f"{site}/data.bin"].startswith("not HTML")
    assert not any("elsewhere" in url for url, _ in skipped)  # other hosts are never queued
    assert pauses == [0.25, 0.25]  # one pause before every request after the first page
    assert all(agent == USER_AGENT for agent in AGENTS)
    assert items[1].revision and items[1].kind == "html"
    page = parse(items[0].source, items[0].read(), items[0].kind)
    assert (
        page.title == "Home"
        and "okapi" in page.markdown
        and "/a.html" not in page.markdown.split("Welcome")[0]
    )


def test_page_limit(site: str) -> None:
    items, _ = crawl(
        f"{site}/",
        CrawlLimits(max_pages=1, max_depth=3, delay_s=0, fetch_allow=LOOPBACK),
        sleep=lambda s: None,
    )
    assert len(items) == 1


async def test_ingest_service_crawls_urls(site: str, stack) -> None:  # type: ignore[no-untyped-def]
    import grpc

    from ragstack.v1 import ingest_pb2, ingest_pb2_grpc

    async with grpc.aio.insecure_channel(stack.peers["ingest"]) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        request = ingest_pb2.IngestRequest(library="web", urls=[f"{site}/"])
        events = [e async for e in stub.Ingest(request, timeout=60)]
    summary = events[-1].summary
    assert summary.indexed >= 2 and summary.failed >= 1
    assert any("robots.txt" in f for f in summary.failures)
