"""A test's HTTP server on loopback, served from a thread: the fake sites, model servers and
converters the tests talk to through real clients."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], port: int = 0) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on 127.0.0.1 (`port` 0: a free one) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True  # a request still open does not hold the test's end
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def write_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    """One chunk of a `transfer-encoding: chunked` body, sent at once."""
    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    handler.wfile.flush()
