"""A small server for docling-serve's HTTP API, in front of the locally installed Docling, so that
tests exercise RAGStack's docling-serve client over real HTTP.

It speaks what RAGStack uses of the API: `POST /v1/convert/file` (multipart: `files`, and the
options as form fields, read by Docling's own request model `ConvertDocumentsOptions`: a bad value
gets 422 with FastAPI's `detail` list) answered with Docling's own response model
(`ConvertDocumentResponse`: `document.json_content` and the rest, `status`, `errors`,
`processing_time`), and `GET /health`. It converts with Docling's `DocumentConverter` and only the
model-free pipelines: PDFs with the native pipeline (`pipeline=native`; any other pipeline needs
models, so 422), the other formats with Docling's default backends. One file per request.

It records every request (file name and options), the most requests it had in flight at once, and
can be told to answer a file with an error status or to be slow. Told an API key (`api_key`), it
requires it as docling-serve does (`DOCLING_SERVE_API_KEY`): the `X-Api-Key` header, stripped, or
401 with docling-serve's own messages, before anything is converted. It judges nothing.
"""

from __future__ import annotations

import io
import json
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LIST_FIELDS = {"from_formats", "to_formats", "ocr_lang"}  # repeated form fields


class DoclingServeServer:
    def __init__(self) -> None:
        self.url = ""
        self.requests: list[dict[str, Any]] = []  # {"filename", "options"}: the form as received
        self.fail: dict[str, tuple[int, str]] = {}  # file name -> (status, detail) to answer with
        self.slow: dict[str, float] = {}  # file name -> seconds to wait before converting (or reset)
        self.delay_s = 0.0  # every request waits this long first
        self.api_key: str | None = None  # required in X-Api-Key when set
        self.keys: list[str | None] = []  # the X-Api-Key header of every conversion request
        self.refused = 0  # requests answered 401
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._convert_lock = threading.Lock()  # one conversion at a time (requests still overlap)
        self._converters: dict[tuple[Any, ...], Any] = {}
        self._released = threading.Event()  # ends the waits of slow requests

    def reset(self, idle_within_s: float = 30.0) -> None:
        """Forgets what it was told and saw, once no request is in flight (a request whose client
        gave up is still served: the next test must not see it)."""
        self._released.set()
        deadline = time.monotonic() + idle_within_s
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        self._released.clear()
        with self._lock:
            self.requests.clear()
            self.fail.clear()
            self.slow.clear()
            self.delay_s = 0.0
            self.api_key = None
            self.keys.clear()
            self.refused = 0
            self.max_in_flight = 0

    @contextmanager
    def serve(self) -> Iterator[DoclingServeServer]:
        owner = self
        with warnings.catch_warnings():  # Docling's request models warn of deprecated fields at import
            warnings.simplefilter("ignore")
            import docling.datamodel.service.options
            import docling.datamodel.service.responses  # noqa: F401

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._send(200, {"status": "ok"})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.path != "/v1/convert/file":
                    self._send(404, {"detail": "Not Found"})
                    return
                refusal = owner._check_key(self.headers.get("x-api-key"))
                if refusal is not None:
                    self._send(401, {"detail": refusal})
                    return
                owner._begin()
                try:
                    status, answer = owner._answer(self.headers.get("content-type", ""), body)
                except Exception as err:  # the server's own failure, as a server would say it
                    status, answer = 500, {"detail": f"{type(err).__name__}: {err}"}
                finally:
                    owner._end()
                self._send(status, answer)

            def _send(self, status: int, body: dict[str, Any] | str) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        thread = threading.Thread(target=server.serve_forever, name="docling-serve", daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)

    def _check_key(self, candidate: str | None) -> str | None:
        """docling-serve's check (docling_serve/auth.py): None, or why the request is refused."""
        with self._lock:
            self.keys.append(candidate)
            if not self.api_key:
                return None
            if candidate is None:
                refusal = "Missing field X-Api-Key."
            elif candidate.strip() != self.api_key:
                refusal = "The provided API Key is invalid."
            else:
                return None
            self.refused += 1
            return refusal

    def _begin(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _end(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _answer(self, content_type: str, body: bytes) -> tuple[int, dict[str, Any] | str]:
        from docling.datamodel.service.options import ConvertDocumentsOptions
        from pydantic import ValidationError

        form, files = _multipart(content_type, body)
        with self._lock:
            self.requests.append({"filename": files[0][0] if files else None, "options": form})
        if len(files) != 1:
            return 422, {"detail": "this test server converts exactly one file a request"}
        filename, data = files[0]
        if self.delay_s:
            time.sleep(self.delay_s)
        if filename in self.slow:
            self._released.wait(self.slow[filename])
        if filename in self.fail:
            status, detail = self.fail[filename]
            return status, {"detail": detail}
        try:
            # Docling's model warns about its deprecated fields; warnings' filters are global, so
            # under the lock that conversions take too.
            with self._convert_lock, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                options = ConvertDocumentsOptions.model_validate(form)
        except ValidationError as err:
            return 422, json.dumps({"detail": json.loads(err.json(include_url=False))})
        if options.pipeline.value != "native":
            return 422, {"detail": f"pipeline {options.pipeline.value} needs models; this server has none"}
        return 200, self._convert(filename, data, options)

    def _convert(self, filename: str, data: bytes, options: Any) -> str:
        from docling.datamodel.base_models import DocumentStream
        from docling.datamodel.service.responses import ConvertDocumentResponse

        start = time.monotonic()
        with self._convert_lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = self._converter(options).convert(
                DocumentStream(name=filename, stream=io.BytesIO(data)), raises_on_error=False
            )
        formats = {f.value for f in options.to_formats}
        document: dict[str, Any] = {"filename": filename}
        if result.status.value in ("success", "partial_success"):
            if "json" in formats:
                content = result.document.export_to_dict()
                if options.image_export_mode.value == "placeholder":
                    _drop_images(content)
                document["json_content"] = content
            if "md" in formats:
                document["md_content"] = result.document.export_to_markdown()
        answer = ConvertDocumentResponse.model_validate(
            {
                "document": document,
                "status": result.status.value,
                "errors": [e.model_dump(mode="json") for e in result.errors],
                "processing_time": time.monotonic() - start,
            }
        )
        return answer.model_dump_json()

    def _converter(self, options: Any) -> Any:
        from docling.datamodel.base_models import InputFormat
        from docling.datamodel.pipeline_options import NativePdfPipelineOptions
        from docling.document_converter import DocumentConverter, NativePdfFormatOption

        key = (tuple(sorted(f.value for f in options.from_formats)), options.include_images)
        if key not in self._converters:
            images = options.include_images
            pdf = NativePdfPipelineOptions(generate_page_images=images, generate_picture_images=images)
            self._converters[key] = DocumentConverter(
                allowed_formats=list(options.from_formats),
                format_options={InputFormat.PDF: NativePdfFormatOption(pipeline_options=pdf)},
            )
        return self._converters[key]


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, Any], list[tuple[str, bytes]]]:
    """(form fields, repeated ones as lists; [(file name, bytes)] of the `files` parts)."""
    message = BytesParser(policy=policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    form: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    if not message.is_multipart():
        return form, files
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            payload = b""
        if name == "files":
            files.append((str(part.get_filename() or ""), payload))
        elif isinstance(name, str):
            value = payload.decode()
            if name in LIST_FIELDS:
                form.setdefault(name, []).append(value)
            else:
                form[name] = value
    return form, files


def _drop_images(content: dict[str, Any]) -> None:
    """`image_export_mode=placeholder`: the document without its pictures' and pages' images."""
    for picture in content.get("pictures", []):
        picture.pop("image", None)
    for page in content.get("pages", {}).values():
        page.pop("image", None)
