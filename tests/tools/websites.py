"""A small web server for tests: pages by path, answering If-None-Match and If-Modified-Since as a
real server does, every request recorded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.tools.http_serve import serving


@dataclass
class Page:
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 200


class Web:
    """Serves `pages` by path, answering If-None-Match and If-Modified-Since as a server does; records
    every request as (method, path, headers)."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.pages: dict[str, Page] = {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        asked = {k.lower(): v for k, v in handler.headers.items()}
        self.requests.append((handler.command, handler.path, asked))
        page = self.pages.get(handler.path, Page(b"not here", status=404))
        etag, modified = page.headers.get("ETag"), page.headers.get("Last-Modified")
        fresh = (etag and asked.get("if-none-match") == etag) or (
            not etag and modified and asked.get("if-modified-since") == modified
        )
        status, body = (304, b"") if fresh and page.status == 200 else (page.status, page.body)
        handler.send_response(status)
        for name, value in page.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


@contextmanager
def serve_web() -> Iterator[Web]:
    """A Web on a free loopback port, in a thread, for the block."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.answer(self)

        def do_PROPFIND(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            site.answer(self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with serving(Handler) as server:
        site = Web(server.server_port)
        yield site
