"""Conversion by a docling-serve server (`ingest.converter: docling-serve`): the formats RAGStack
converts through Docling (PDF, DOCX, PPTX, XLSX, HTML) are sent to its HTTP API, `POST
/v1/convert/file` (multipart `files`, `to_formats=json`), and the DoclingDocument of the answer's
`document.json_content` goes through the same code as one converted here (pdf_reader.lines_of,
to_markdown and the page layout; docling_reader.markdown_of), so the chunks are the same. PDFs are
asked for Docling's model-free native pipeline, the one run here: a server that does not know it
refuses the request, and the file fails saying so, rather than coming back in another shape.

Where it runs: in the service process, on the pipeline's parsing threads (one ingest run converts
up to `ingest.docling_serve_max_concurrent` files at once, handed on in their order:
services/ingest/ahead.py), not in a parser process (services/ingest/parse_worker.py). No local
parser runs: what runs here is the budgets' checks before sending (the same as for a local parse:
a container's members, HTML's depth and text, a PDF's page count), an HTML page's main content,
the request (its time bounded by the timeouts, the answer's size by
`ingest.docling_serve_max_response_mb`) and linear passes over the document. A parser process
would only hold one of the few worker slots (`ingest.parse_workers`) while waiting on the network,
and cap the requests in flight at their count, where the server is there to take more. The cap
is `ingest.docling_serve_max_concurrent` requests at once, a semaphore per process. OCR stays
local and in a parser process: a PDF whose pages lack a text layer is read there whole (the same
result, from the same code; the server's answer is dropped).

A server that requires an API key (docling-serve's `DOCLING_SERVE_API_KEY`) is sent it in the
`X-Api-Key` header of every request. The key is read from the environment variable that
`ingest.docling_serve_api_key_env` names, once, when the service starts (a missing or empty one
stops the start, naming the variable); it is never in the config, a log line or an error message.

A cancelled ingest (CancelIngestJob, a sync's pause, SIGTERM) stops waiting for its files at once:
those not yet sent never are, and those in flight fail the file; the server is left to finish
them, and each keeps its place under the cap until it answers, since the server is still busy.

Failures fail the file, never the batch: the server's status and its message
(`docling-serve at URL answered 500: ...`), a refused connection, a timeout, an answer too large or
not a DoclingDocument, each named. A refused key (401, 403) names the setting to look at.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from functools import partial
from importlib.util import find_spec
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import httpx

from ragstack.errors import (
    Cancelled,
    ConfigError,
    DeadlineExceeded,
    FailedPrecondition,
    RagstackError,
    Unavailable,
    UnsupportedFormat,
)
from ragstack.extras import MissingExtra
from services.ingest import readers
from services.ingest.budgets import Budgets, OverBudget
from services.ingest.pdf_reader import PagesNeedOcr

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from ragstack.config import IngestConfig
    from services.ingest.parse_worker import ParsePool

log = logging.getLogger(__name__)

# The formats sent, as docling-serve's `from_formats` names them: the server converts nothing else.
FORMATS = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".html": "html",
    ".htm": "html",
}
assert set(FORMATS) == set(readers.DOCLING) | {".pdf"}, "every format converted through Docling"
ENDPOINT = "/v1/convert/file"
KEY_HEADER = "X-Api-Key"  # docling-serve's API key header (its DOCLING_SERVE_API_KEY)
KEY_SETTING = "ingest.docling_serve_api_key_env"
# What is converted here (pdf_reader._converter, docling_reader._converter): the native PDF pipeline
# (no layout, OCR or table model), no images. OCR of pages without text stays local.
OPTIONS = {
    "to_formats": "json",
    "pipeline": "native",
    "pdf_backend": "docling_parse",  # the threaded docling-parse backend, as here (the API's name)
    "do_ocr": "false",
    "force_ocr": "false",
    "do_table_structure": "false",
    "include_images": "false",
    "image_export_mode": "placeholder",
}
_ERROR_BODY_BYTES = 64 * 1024  # of an error answer, read for its message
_MESSAGE_CHARS = 300
STOPPED = "the conversion was stopped: its ingest was cancelled or the service is stopping"
_STOP_CHECK_S = 0.05  # how soon a waiting file sees its ingest's cancel


class DoclingServe:
    """A client of one docling-serve server; one per process (it holds the cap). Thread-safe."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        max_concurrent: int = 4,
        max_response_mb: float = 256.0,
        api_key: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        """`url`: the server's base URL (http or https); `timeout_s`: one file's whole request,
        from sending to the answer's last byte; `max_concurrent`: requests in flight at once;
        `api_key`: sent in every request's X-Api-Key header (`api_key_env`: the variable it came
        from, for the errors to name)."""
        if api_key and not _header_safe(api_key):
            raise ConfigError("the docling-serve API key is not printable ASCII (an HTTP header's value)")
        self.url = url.rstrip("/")
        self.max_concurrent = max_concurrent
        self._key = api_key or None
        self._key_env = api_key_env
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._max_bytes = int(max_response_mb * 1024 * 1024)
        self._max_response_mb = max_response_mb
        # The cap: a request holds a place from before it is sent until the server has answered,
        # also when the file's ingest stopped waiting for it (the server is still converting).
        self._places = threading.BoundedSemaphore(max_concurrent)
        self._closed = threading.Event()
        # trust_env=False: no proxy or certificate settings from the environment (config only).
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=max_concurrent, max_keepalive_connections=max_concurrent),
            follow_redirects=False,
            trust_env=False,
            headers={KEY_HEADER: self._key} if self._key else None,
        )

    @classmethod
    def from_config(
        cls, ingest: IngestConfig, environ: Mapping[str, str] | None = None
    ) -> DoclingServe | None:
        """The client `ingest.converter` asks for; None for local conversion. The API key is read
        from `environ` (the process's environment by default); a ConfigError names a variable
        that is missing or unusable, never its value."""
        if ingest.converter != "docling-serve":
            return None
        assert ingest.docling_serve_url  # the config refuses docling-serve without a URL
        name = ingest.docling_serve_api_key_env
        key = _api_key(name, os.environ if environ is None else environ) if name else None
        return cls(
            ingest.docling_serve_url,
            timeout_s=ingest.docling_serve_timeout_s,
            connect_timeout_s=ingest.docling_serve_connect_timeout_s,
            max_concurrent=ingest.docling_serve_max_concurrent,
            max_response_mb=ingest.docling_serve_max_response_mb,
            api_key=key,
            api_key_env=name,
        )

    def converts(self, name: str, kind: str = "") -> bool:
        """Whether the file `name` (of `kind`, as readers.parse takes it) is converted remotely."""
        return kind == "html" or (kind != "beir" and PurePath(name).suffix.lower() in FORMATS)

    def parse(
        self,
        name: str,
        data: bytes,
        kind: str = "",
        budgets: Budgets | None = None,
        pool: ParsePool | None = None,
        stop: threading.Event | None = None,
    ) -> readers.Parsed:
        """readers.parse with the conversion done by the server. A PDF with pages without a text
        layer is parsed locally instead, by `pool` (OCR runs in a parser process), or here when
        there is no pool (then only the missing pages are read by OCR). Once `stop` is set (the
        ingest was cancelled) the file fails at once: see `document`."""
        convert = partial(self.document, stop=stop)
        try:
            return readers.parse(name, data, kind, budgets, remote=convert, ocr=pool is None)
        except PagesNeedOcr as err:
            assert pool is not None
            log.info("%s: %s; read locally, with OCR", name, err)
            return pool.parse(name, data, kind, stop)

    def document(self, name: str, data: bytes, stop: threading.Event | None = None) -> DoclingDocument:
        """The file `name` converted by the server (one request). Raises a RagstackError naming
        the server and what went wrong. Once `stop` is set, Cancelled: a request still waiting
        for its turn is never sent, one in flight is no longer waited for."""
        if find_spec("docling_core") is None:
            raise MissingExtra(
                "converting with docling-serve needs the `docling` extra: pip install 'ragstack[docling]'"
            )
        suffix = PurePath(name).suffix.lower()
        if suffix not in FORMATS:
            raise UnsupportedFormat(
                f"docling-serve is not asked to convert {suffix or '(no extension)'} files"
            )
        media_type = readers.DOCLING.get(suffix, "application/pdf")
        form = {**OPTIONS, "from_formats": FORMATS[suffix]}
        try:
            return self._read(self._answer(name, data, media_type, form, stop))
        except Exception as err:
            scrubbed = self._scrubbed(err)
            if scrubbed is err:
                raise
            raise scrubbed from None

    def close(self) -> None:
        """Files still waiting for the server fail as stopped; requests in flight are left to end."""
        self._closed.set()
        self._client.close()

    def _answer(
        self, name: str, data: bytes, media_type: str, form: dict[str, str], stop: threading.Event | None
    ) -> bytes:
        """The server's answer, waited for until `stop` is set or the client closed. The request
        runs on a daemon thread of its own: one the file stopped waiting for (a server that takes
        minutes) must not hold the process at exit."""

        def stopped() -> bool:
            return self._closed.is_set() or (stop is not None and stop.is_set())

        while not self._places.acquire(timeout=_STOP_CHECK_S):
            if stopped():
                raise Cancelled(STOPPED)
        if stopped():  # (set while it waited for the place: the file is not sent)
            self._places.release()
            raise Cancelled(STOPPED)
        answer: Future[bytes] = Future()

        def send() -> None:
            try:
                answer.set_result(self._post(name, data, media_type, form))
            except BaseException as err:  # handed to the waiting file, if it still waits
                answer.set_exception(err)
            finally:
                self._places.release()

        try:
            threading.Thread(target=send, name="docling-serve-request", daemon=True).start()
        except BaseException:  # (no thread to be had): the place is not kept
            self._places.release()
            raise
        while not wait_for([answer], timeout=_STOP_CHECK_S).done:  # (a TimeoutError is the server's)
            if stopped():
                raise Cancelled(STOPPED)
        return answer.result()

    def _post(self, name: str, data: bytes, media_type: str, form: dict[str, str]) -> bytes:
        deadline = time.monotonic() + self._timeout_s
        try:
            with self._client.stream(
                "POST", self.url + ENDPOINT, data=form, files={"files": (name, data, media_type)}
            ) as response:
                if response.status_code != 200:
                    body = _read_some(response, _ERROR_BODY_BYTES)
                    raise self._refusal(response.status_code, body)
                return self._body(response, deadline)
        except httpx.ConnectTimeout:
            raise Unavailable(
                f"docling-serve at {self.url} did not accept a connection within "
                f"{self._connect_timeout_s:g} s (ingest.docling_serve_connect_timeout_s)"
            ) from None
        except httpx.TimeoutException:
            raise self._too_slow() from None
        except httpx.ConnectError as err:
            raise Unavailable(f"docling-serve at {self.url} could not be reached: {_said(err)}") from None
        except httpx.HTTPError as err:
            raise Unavailable(
                f"docling-serve at {self.url} failed: {type(err).__name__}: {_said(err)}"
            ) from None

    def _body(self, response: httpx.Response, deadline: float) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise OverBudget(
                    f"docling-serve at {self.url} answered more than {self._max_response_mb:g} MB, over "
                    f"ingest.docling_serve_max_response_mb ({self._max_response_mb:g})"
                )
            chunks.append(chunk)
            if time.monotonic() > deadline:  # an answer that trickles in: the whole request is timed
                raise self._too_slow()
        return b"".join(chunks)

    def _refusal(self, status: int, body: bytes) -> Exception:
        """The error for an answer other than 200: the server's fault or busy (5xx, 429), or our
        request refused as sent (other 4xx: a key, an option this server does not know)."""
        message = f"docling-serve at {self.url} answered {status}: {_message(body)}"
        if status >= 500 or status == 429:
            return Unavailable(message)
        if status in (401, 403):
            if self._key is None:
                message += f"; the server requires an API key: set {KEY_SETTING}"
            else:
                message += (
                    f"; the server refused the API key read from ${self._key_env or '?'} ({KEY_SETTING})"
                )
        return FailedPrecondition(message)

    def _scrubbed(self, err: Exception) -> Exception:
        """`err` as it is, or, should the server or a library have echoed the API key in it, an
        error of the same kind without the key (and without its cause, which may hold it too)."""
        text = str(err)
        if self._key is None or self._key not in text:
            return err
        text = text.replace(self._key, "[the API key]")
        if isinstance(err, RagstackError):
            try:
                return type(err)(text)
            except TypeError:
                pass
        return Unavailable(f"docling-serve at {self.url} failed: {type(err).__name__}: {text}")

    def _too_slow(self) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"docling-serve at {self.url} did not answer within {self._timeout_s:g} s "
            f"(ingest.docling_serve_timeout_s)"
        )

    def _read(self, raw: bytes) -> DoclingDocument:
        """The answer's DoclingDocument: ConvertDocumentResponse's `document.json_content`."""
        from docling_core.types.doc import DoclingDocument
        from pydantic import ValidationError

        try:
            body = json.loads(raw)
        except ValueError:
            raise Unavailable(f"docling-serve at {self.url} answered something that is not JSON") from None
        if not isinstance(body, dict):
            raise Unavailable(f"docling-serve at {self.url} answered JSON that is not a conversion's answer")
        status = body.get("status")
        if status not in ("success", "partial_success"):  # as Docling here takes them
            raise UnsupportedFormat(
                f"docling-serve at {self.url} could not convert it (status {status}): {_errors(body)}"
            )
        document = body.get("document")
        content = document.get("json_content") if isinstance(document, dict) else None
        if not isinstance(content, dict):
            raise Unavailable(f"docling-serve at {self.url} answered without document.json_content")
        try:
            return DoclingDocument.model_validate(content)
        except ValidationError as err:
            first = err.errors()[0] if err.errors() else {"loc": (), "msg": str(err)}
            where = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise Unavailable(
                f"docling-serve at {self.url} answered a document that is not a DoclingDocument here: "
                f"{where}: {first['msg']}"[:500]
            ) from None


def _read_some(response: httpx.Response, limit: int) -> bytes:
    out = b""
    for chunk in response.iter_bytes():
        out += chunk
        if len(out) >= limit:
            break
    return out[:limit]


def _api_key(name: str, environ: Mapping[str, str]) -> str:
    """The API key in the environment variable `name`, stripped (as docling-serve strips what it
    receives). Refused, naming the variable and never the value: missing, empty, or not a header's
    printable ASCII."""
    where = f"{KEY_SETTING} names the environment variable {name}"
    if name not in environ:
        raise ConfigError(f"{where}, which is not set in the ingest service's environment")
    key = environ[name].strip()
    if not key:
        raise ConfigError(f"{where}, which is empty")
    if not _header_safe(key):
        raise ConfigError(f"{where}, whose value is not printable ASCII (an HTTP header's value)")
    return key


def _header_safe(value: str) -> bool:
    return all(" " <= c <= "~" for c in value)


def _message(body: bytes) -> str:
    """An error answer's message: FastAPI's `detail` when it is JSON, else its text."""
    text = body.decode("utf-8", "replace")
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        pass
    else:
        detail = parsed.get("detail", parsed) if isinstance(parsed, dict) else parsed
        text = detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
    return " ".join(text.split())[:_MESSAGE_CHARS] or "(no message)"


def _errors(body: dict[str, Any]) -> str:
    errors = body.get("errors")
    if not isinstance(errors, list):
        errors = []
    said = [str(e.get("error_message", "")).strip() for e in errors if isinstance(e, dict)]
    return " ".join("; ".join(s for s in said if s).split())[:_MESSAGE_CHARS] or "no reason given"


def _said(err: Exception) -> str:
    return " ".join(str(err).split())[:_MESSAGE_CHARS] or type(err).__name__
