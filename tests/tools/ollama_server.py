"""A server for the Ollama HTTP API (GET /api/tags, POST /api/chat, streamed or not) in front of any
reply function, so that tests exercise the real `ollama` client: scripted replies where a test needs
exact answers, or a real small model (`llama_reply`) where one is installed. It records every request
and judges nothing."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.tools.http_serve import serving, write_chunk

Reply = Callable[[dict[str, Any]], "str | Iterator[str]"]  # chat request -> the content, or its pieces
TEST_MODEL = Path(__file__).resolve().parents[2] / "models" / "smollm2-135m" / "model.gguf"


class OllamaServer:
    def __init__(self, model: str, reply: Reply) -> None:
        self.model = model
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    @contextmanager
    def serve(self, port: int = 0) -> Iterator[OllamaServer]:
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

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
                name = f"{server_self.model}:latest"
                self._send({"models": [{"model": name, "name": name}]})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server_self.requests.append(request)
                reply = server_self.reply(request)
                pieces = iter([reply] if isinstance(reply, str) else reply)
                # Ollama's num_predict, a piece counted as a token: past it the reply stops with
                # done_reason "length", as Ollama's does.
                limit = int(request.get("options", {}).get("num_predict", -1))
                written = itertools.islice(pieces, limit) if limit >= 0 else pieces
                if request.get("stream", True):
                    self.send_response(200)
                    self.send_header("content-type", "application/x-ndjson")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for piece in written:  # as they come: a slow reply streams slowly
                        self._chunk({"message": {"role": "assistant", "content": piece}, "done": False})
                    reason = "length" if next(pieces, None) is not None else "stop"
                    self._chunk(
                        {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": reason}
                    )
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    text = "".join(written)
                    reason = "length" if next(pieces, None) is not None else "stop"
                    self._send(
                        {
                            "model": server_self.model,
                            "created_at": "2026-11-30T00:00:00Z",
                            "message": {"role": "assistant", "content": text},
                            "done": True,
                            "done_reason": reason,
                        }
                    )

            def _chunk(self, body: dict[str, Any]) -> None:
                line = json.dumps({"model": server_self.model, "created_at": "2026-11-30T00:00:00Z", **body})
                write_chunk(self, (line + "\n").encode())

        with serving(Handler, port) as server:
            self.url = f"http://127.0.0.1:{server.server_port}"
            yield self


def llama_reply(model_path: Path = TEST_MODEL, max_tokens: int = 256) -> Reply:
    """Replies from a real GGUF model through llama-cpp-python: Ollama's `format` (a JSON schema or
    "json") becomes llama.cpp's grammar-constrained JSON, so JSON mode works as in Ollama."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(model_path), n_ctx=4096, n_threads=2, seed=0, verbose=False)
    lock = threading.Lock()

    def reply(request: dict[str, Any]) -> Iterator[str]:
        options = request.get("options", {})
        limit = int(options.get("num_predict", -1))
        kwargs: dict[str, Any] = {
            "messages": request["messages"],
            "temperature": float(options.get("temperature", 0.0)),
            # one token past num_predict, so that the server sees the reply was cut
            "max_tokens": min(max_tokens, limit + 1) if limit >= 0 else max_tokens,
            "stream": True,
        }
        schema = request.get("format")
        if schema:
            kwargs["response_format"] = (
                {"type": "json_object", "schema": _loosened(schema)}
                if isinstance(schema, dict)
                else {"type": "json_object"}
            )
        with lock:  # one generation at a time: a Llama instance is not thread-safe
            for chunk in llm.create_chat_completion(**kwargs):
                piece = chunk["choices"][0]["delta"].get("content")
                if piece:
                    yield piece

    return reply


_SIZE_KEYS = {"maxLength", "minLength", "maxItems", "minItems"}


def _loosened(schema: Any) -> Any:
    """The schema without length bounds: llama.cpp unrolls them into grammar rules and gives up
    (then crashes) on long ones. The caller validates lengths anyway."""
    if isinstance(schema, dict):
        return {k: _loosened(v) for k, v in schema.items() if k not in _SIZE_KEYS}
    if isinstance(schema, list):
        return [_loosened(v) for v in schema]
    return schema


def main() -> None:
    """`python -m tests.tools.ollama_server [--port 11434]`: the test model as a local "Ollama", for
    measuring the LLM paths with `RAGSTACK__LLM__MODEL=smollm2 ragstack eval ...`."""
    import argparse
    import time

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=11434)
    parser.add_argument("--name", default="smollm2")
    parser.add_argument("--model", type=Path, default=TEST_MODEL)
    args = parser.parse_args()
    server = OllamaServer(args.name, llama_reply(args.model))
    with server.serve(port=args.port):
        print(f"serving {args.model} as {args.name!r} at {server.url}", flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
