"""A scripted stand-in for the Ollama HTTP API (GET /api/tags, POST /api/chat, not streamed), so
that tests exercise the real `ollama` client and the project's validation and fallbacks where no
real model runs. It answers from a script in order and records every request; it judges nothing."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]  # from the chat request to the assistant's content


class FakeOllama:
    def __init__(self, model: str, reply: Reply) -> None:
        self.model = model
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    @contextmanager
    def serve(self) -> Iterator[FakeOllama]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send({"models": [{"model": f"{fake.model}:latest", "name": f"{fake.model}:latest"}]})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append(request)
                content = fake.reply(request)
                self._send(
                    {
                        "model": fake.model,
                        "created_at": "2026-11-30T00:00:00Z",
                        "message": {"role": "assistant", "content": content},
                        "done": True,
                        "done_reason": "stop",
                    }
                )

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
