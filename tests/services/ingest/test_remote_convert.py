"""Remote conversion (`ingest.converter: docling-serve`) against a small server that speaks
docling-serve's HTTP API and converts with the Docling installed here (tests/tools/docling_serve.py):
the same chunks as local conversion, one request per file, failures per file, the concurrency cap,
the API key, and a run's files converted several at once in their order."""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragstack.config import IngestConfig, StateConfig, load_config
from ragstack.domain import FileProgress, FileStage, IngestSummary
from ragstack.errors import Cancelled, ConfigError, Unavailable
from ragstack.guard.paths import PathGuard
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from services.ingest import readers
from services.ingest.ahead import Ahead
from services.ingest.budgets import Budgets
from services.ingest.chunker import chunk_markdown
from services.ingest.pipeline import IngestPipeline
from services.ingest.remote_convert import DoclingServe
from services.ingest.sources import collect_paths
from tests.conftest import ROOT, SHARED
from tests.tools import state as state_tools
from tests.tools.docling_serve import DoclingServeServer

DOCS = SHARED / "data" / "documents"
FORMATS = ("pdf", "docx", "pptx", "xlsx", "html")
EVERYWHERE = PathGuard([Path("/")])


def documents() -> list[Path]:
    return sorted(p for f in FORMATS for p in (DOCS / f).iterdir() if p.is_file())


@pytest.fixture(scope="module")
def server() -> Iterator[DoclingServeServer]:
    with DoclingServeServer().serve() as running:
        yield running


@pytest.fixture
def docling(server: DoclingServeServer) -> Iterator[DoclingServeServer]:
    server.reset()
    yield server
    server.reset()


def chunks(parsed: readers.Parsed) -> list[tuple[str, tuple[str, ...], tuple[int, ...]]]:
    pieces = chunk_markdown(parsed.markdown, parsed.title, 512, 1, lambda t: len(t.split()))
    return [(c.text, c.heading_path, c.pages) for c in pieces]


def test_remote_conversion_gives_the_same_chunks_and_layout_as_local(docling: DoclingServeServer) -> None:
    files = documents()
    assert len(files) == 12 + 14 + 8 + 11 + 14  # every PDF, DOCX, PPTX, XLSX and HTML file
    remote = DoclingServe(docling.url)
    try:
        for path in files:
            data = path.read_bytes()
            local = readers.parse(path.name, data)
            converted = remote.parse(path.name, data)  # no parser pool: OCR (of the scan) here
            assert converted.markdown == local.markdown, path.name
            assert (converted.title, converted.media_type) == (local.title, local.media_type), path.name
            assert converted.layout == local.layout, path.name  # PDFs: every line's box; others: None
            assert chunks(converted) == chunks(local), path.name
    finally:
        remote.close()
    assert sum(p.suffix == ".pdf" for p in files) == 12
    # One request per file, asking for the DoclingDocument and the model-free pipeline.
    assert [r["filename"] for r in docling.requests] == [p.name for p in files]
    for request in docling.requests:
        options = request["options"]
        assert options["to_formats"] == ["json"] and options["pipeline"] == "native"
        assert options["do_ocr"] == "false" and options["include_images"] == "false"
    assert {r["options"]["from_formats"][0] for r in docling.requests} == {
        "pdf",
        "docx",
        "pptx",
        "xlsx",
        "html",
    }


class _Pool:
    """Stands in for the parser processes: parses locally, and counts what it was given."""

    def __init__(self) -> None:
        self.parsed: list[str] = []

    def parse(self, name: str, data: bytes, kind: str = "", owner: object = None) -> readers.Parsed:
        self.parsed.append(name)
        return readers.parse(name, data, kind)


def test_pages_without_a_text_layer_are_read_in_a_parser_process(docling: DoclingServeServer) -> None:
    """OCR stays local, in a parser process: a scan is converted remotely, then read there whole."""
    pool = _Pool()
    remote = DoclingServe(docling.url)
    try:
        scan = DOCS / "pdf" / "scanned_ocr_test.pdf"
        parsed = remote.parse(scan.name, scan.read_bytes(), pool=pool)  # type: ignore[arg-type]
        assert "Docling bundles PDF document conversion" in parsed.markdown
        text = DOCS / "pdf" / "multi_page.pdf"
        remote.parse(text.name, text.read_bytes(), pool=pool)  # type: ignore[arg-type]
    finally:
        remote.close()
    assert pool.parsed == ["scanned_ocr_test.pdf"]
    assert [r["filename"] for r in docling.requests] == ["scanned_ocr_test.pdf", "multi_page.pdf"]


def _pipeline(
    root: Path, embedder, converter: DoclingServe, budgets: Budgets | None = None
) -> IngestPipeline:  # type: ignore[no-untyped-def]
    return IngestPipeline(
        Catalog(state_tools.store(StateConfig(), root, catalog_store)),
        VectorStore(root / "lance", embedder.dimension, writer=True),
        LexicalStore(root / "tantivy", writer=True),
        embedder,
        chunk_tokens=512,
        overlap_sentences=1,
        max_file_bytes=50_000_000,
        budgets=budgets,
        converter=converter,
    )


def _outcomes(events: list[FileProgress | IngestSummary]) -> dict[str, str]:
    """Each file's last stage, or its failure's reason."""
    out = {}
    for e in events:
        if isinstance(e, FileProgress):
            out[Path(e.source).name] = e.reason if e.stage is FileStage.FAILED else e.stage.name
    return out


def test_a_failing_server_fails_its_files_and_the_batch_goes_on(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for relative, name in [
        ("docx/word_sample.docx", "fine.docx"),
        ("pdf/code_and_formula.pdf", "fine.pdf"),
        ("docx/lorem_ipsum.docx", "broken.docx"),
        ("html/example_01.html", "slow.html"),
        ("pdf/multi_page.pdf", "long.pdf"),  # 5 pages, over the budget below: never sent
    ]:
        shutil.copy(DOCS / relative, folder / name)
    (folder / "notes.md").write_text("# Notes\n\nRead here, never sent.\n")
    (folder / "corrupt.docx").write_bytes(b"PK\x03\x04 not a zip after all" * 10)
    docling.fail["broken.docx"] = (500, "Conversion failed:\n  the worker died")
    docling.slow["slow.html"] = 60.0  # until the test is over
    remote = DoclingServe(docling.url, timeout_s=5.0)
    pipeline = _pipeline(tmp_path / "store", embedder, remote, Budgets(max_pages=4))
    try:
        events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
    finally:
        remote.close()
    summary = events[-1]
    assert isinstance(summary, IngestSummary)
    outcome = _outcomes(events)
    assert (
        outcome["broken.docx"]
        == f"docling-serve at {docling.url} answered 500: Conversion failed: the worker died"
    )
    assert outcome["slow.html"] == (
        f"docling-serve at {docling.url} did not answer within 5 s (ingest.docling_serve_timeout_s)"
    )
    assert outcome["corrupt.docx"].startswith(
        f"docling-serve at {docling.url} could not convert it (status failure): MsWordDocumentBackend"
    )
    assert outcome["long.pdf"] == "has 5 pages, over ingest.max_pages (4)"
    assert (summary.indexed, summary.failed) == (3, 4)
    assert {Path(d.source).name for d in pipeline.list_documents("docs")} == {
        "fine.docx",
        "fine.pdf",
        "notes.md",
    }
    # The budget was checked before sending, the text file read here: neither was sent.
    sent = sorted(r["filename"] for r in docling.requests)
    assert sent == ["broken.docx", "corrupt.docx", "fine.docx", "fine.pdf", "slow.html"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_is_down_fails_its_files_and_the_batch_goes_on(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(DOCS / "docx" / "word_sample.docx", folder / "word.docx")
    shutil.copy(DOCS / "pdf" / "multi_page.pdf", folder / "paper.pdf")
    (folder / "notes.md").write_text("# Notes\n\nRead here.\n")
    url = f"http://127.0.0.1:{_closed_port()}"
    remote = DoclingServe(url, connect_timeout_s=2.0)
    pipeline = _pipeline(tmp_path / "store", embedder, remote)
    try:
        events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
    finally:
        remote.close()
    outcome = _outcomes(events)
    for name in ("word.docx", "paper.pdf"):
        assert outcome[name].startswith(f"docling-serve at {url} could not be reached: "), outcome[name]
        assert "refused" in outcome[name].lower()
    assert outcome["notes.md"] == "INDEXED"
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and (summary.indexed, summary.failed) == (1, 2)
    remote = DoclingServe(url)
    with pytest.raises(Unavailable, match="could not be reached"):
        remote.document("page.html", b"<html><body><p>x</p></body></html>")
    remote.close()


def test_the_concurrency_cap_holds(docling: DoclingServeServer) -> None:
    page = b"<html><body><h1>Cap</h1><p>One paragraph of text.</p></body></html>"

    def burst(remote: DoclingServe, n: int) -> int:
        docling.max_in_flight = 0
        errors: list[BaseException] = []

        def one() -> None:
            try:
                remote.document("page.html", page)
            except BaseException as err:  # reported below
                errors.append(err)

        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        return docling.max_in_flight

    docling.delay_s = 0.3
    capped, wide = DoclingServe(docling.url, max_concurrent=2), DoclingServe(docling.url, max_concurrent=6)
    try:
        assert burst(capped, 8) == 2  # requests overlap, never more than the cap
        assert burst(wide, 6) > 2  # the server itself would take more at once
    finally:
        capped.close()
        wide.close()
    assert len(docling.requests) == 14


def test_the_config_names_the_server_and_refuses_other_schemes(tmp_path: Path) -> None:
    assert DoclingServe.from_config(IngestConfig()) is None  # local conversion by default
    cfg = load_config(
        None,
        {
            "RAGSTACK__INGEST__CONVERTER": "docling-serve",
            "RAGSTACK__INGEST__DOCLING_SERVE_URL": "https://docling.internal:5001/",
            "RAGSTACK__INGEST__DOCLING_SERVE_MAX_CONCURRENT": "8",
        },
    )
    remote = DoclingServe.from_config(cfg.ingest)
    assert remote is not None and remote.url == "https://docling.internal:5001"
    remote.close()
    with pytest.raises(ConfigError, match=r"ingest.*set ingest\.docling_serve_url"):
        load_config(None, {"RAGSTACK__INGEST__CONVERTER": "docling-serve"})
    for url in (
        "file:///etc/passwd",
        "ftp://docling:21",
        "docling:5001",
        "http://",
        "http://u:p@docling:5001",
    ):
        with pytest.raises(ConfigError, match=r"ingest\.docling_serve_url"):
            load_config(None, {"RAGSTACK__INGEST__DOCLING_SERVE_URL": url})


KEY = "k3y-Only-The-Server-And-The-Test-Know"
WRONG = "an0ther-Key-That-Is-Not-It"


def _key_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(DOCS / "docx" / "word_sample.docx", folder / "word.docx")
    shutil.copy(DOCS / "pdf" / "code_and_formula.pdf", folder / "paper.pdf")
    return folder


def _keyed(url: str, value: str | None) -> DoclingServe:
    """The client the config makes, the key read from an environment holding `value` (None: no key)."""
    environ = {"RAGSTACK_TEST_DOCLING_KEY": value} if value is not None else {}
    settings = {
        "RAGSTACK__INGEST__CONVERTER": "docling-serve",
        "RAGSTACK__INGEST__DOCLING_SERVE_URL": url,
    }
    if value is not None:
        settings["RAGSTACK__INGEST__DOCLING_SERVE_API_KEY_ENV"] = "RAGSTACK_TEST_DOCLING_KEY"
    remote = DoclingServe.from_config(load_config(None, settings).ingest, environ)
    assert remote is not None
    return remote


def _ingest(tmp_path: Path, embedder, remote: DoclingServe, folder: Path) -> list:  # type: ignore[no-untyped-def]
    pipeline = _pipeline(tmp_path, embedder, remote)
    try:
        return list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
    finally:
        remote.close()


def test_the_api_key_is_sent_with_every_request_and_never_shown(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx's and httpcore's own logging too
    folder = _key_folder(tmp_path)
    docling.api_key = KEY
    setting = "ingest.docling_serve_api_key_env"

    # The right key (read stripped, as docling-serve strips what it receives): every file converted.
    events = _ingest(tmp_path / "right", embedder, _keyed(docling.url, f"  {KEY}\n"), folder)
    assert _outcomes(events) == {"paper.pdf": "INDEXED", "word.docx": "INDEXED"}
    assert docling.keys == [KEY, KEY] and docling.refused == 0

    # A wrong key: each file fails naming the server's answer and the setting, never the key.
    events = _ingest(tmp_path / "wrong", embedder, _keyed(docling.url, WRONG), folder)
    for reason in _outcomes(events).values():
        assert reason == (
            f"docling-serve at {docling.url} answered 401: The provided API Key is invalid.; the server "
            f"refused the API key read from $RAGSTACK_TEST_DOCLING_KEY ({setting})"
        )
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and (summary.indexed, summary.failed) == (0, 2)

    # No key where one is required: the setting to set is named.
    events = _ingest(tmp_path / "none", embedder, _keyed(docling.url, None), folder)
    for reason in _outcomes(events).values():
        assert reason == (
            f"docling-serve at {docling.url} answered 401: Missing field X-Api-Key.; the server requires "
            f"an API key: set {setting}"
        )
    assert docling.keys[2:] == [WRONG, WRONG, None, None] and docling.refused == 4

    # A server that echoes the key in its error: the key is cut out of the message.
    docling.fail["word.docx"] = (500, f"worker died holding X-Api-Key={KEY}")
    events = _ingest(tmp_path / "echo", embedder, _keyed(docling.url, KEY), folder)
    assert _outcomes(events)["word.docx"] == (
        f"docling-serve at {docling.url} answered 500: worker died holding X-Api-Key=[the API key]"
    )
    summary = events[-1]
    assert isinstance(summary, IngestSummary) and KEY not in " ".join(summary.failures)
    # Nothing logged it, httpx's and httpcore's debug logging included (the requests were logged).
    assert "HTTP Request: POST" in caplog.text and "send_request_headers" in caplog.text
    assert KEY not in caplog.text and WRONG not in caplog.text


def test_the_api_key_setting_names_a_variable_that_must_be_set(docling: DoclingServeServer) -> None:
    cfg = load_config(
        None,
        {
            "RAGSTACK__INGEST__CONVERTER": "docling-serve",
            "RAGSTACK__INGEST__DOCLING_SERVE_URL": docling.url,
            "RAGSTACK__INGEST__DOCLING_SERVE_API_KEY_ENV": "DOCLING_KEY",
        },
    )
    assert cfg.ingest.docling_serve_api_key_env == "DOCLING_KEY"
    name = "ingest.docling_serve_api_key_env names the environment variable DOCLING_KEY"
    with pytest.raises(ConfigError, match=f"^{name}, which is not set in the ingest service's environment$"):
        DoclingServe.from_config(cfg.ingest, {})
    with pytest.raises(ConfigError, match=f"^{name}, which is empty$"):
        DoclingServe.from_config(cfg.ingest, {"DOCLING_KEY": " \n"})
    with pytest.raises(ConfigError, match=f"^{name}, whose value is not printable ASCII") as err:
        DoclingServe.from_config(cfg.ingest, {"DOCLING_KEY": "sécret-line\nbreak"})
    assert "sécret" not in str(err.value)
    # A name, not a key: what cannot name a variable is refused without being shown.
    with pytest.raises(ConfigError, match=r"ingest\.docling_serve_api_key_env: String should match") as err:
        load_config(None, {"RAGSTACK__INGEST__DOCLING_SERVE_API_KEY_ENV": "sk-live/9f8e7d"})
    assert "9f8e7d" not in str(err.value)
    # The service's own environment by default.
    assert DoclingServe.from_config(IngestConfig(), {}) is None


# A run's files converted several at once (services/ingest/ahead.py with workers).


def _parallel_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for relative, name in [
        ("pdf/code_and_formula.pdf", "a.pdf"),
        ("docx/word_sample.docx", "b.docx"),
        ("pdf/multi_page.pdf", "c.pdf"),
        ("docx/lorem_ipsum.docx", "d.docx"),
    ]:
        shutil.copy(DOCS / relative, folder / name)
    (folder / "e.md").write_text("# Notes\n\nRead here, between the converted ones.\n")
    shutil.copy(DOCS / "docx" / "word_sample.docx", folder / "f.docx")
    return folder


def _stored(pipeline: IngestPipeline) -> dict[str, list[tuple[str, tuple[str, ...], tuple[int, ...], int]]]:
    return {
        Path(d.source).name: [
            (c.text, c.heading_path, c.pages, c.position)
            for c in pipeline._vectors.chunks_of("docs", d.document_id)  # type: ignore[attr-defined]
        ]
        for d in pipeline.list_documents("docs")
    }


def test_a_run_converts_up_to_the_cap_at_once_in_the_files_order(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
) -> None:
    folder = _parallel_folder(tmp_path)
    docling.delay_s = 0.5  # every request: long enough for the others of a run to arrive meanwhile
    runs = {}
    for cap in (1, 4):
        docling.max_in_flight = 0
        remote = DoclingServe(docling.url, max_concurrent=cap)
        pipeline = _pipeline(tmp_path / f"cap{cap}", embedder, remote)
        try:
            events = list(pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs"))
        finally:
            remote.close()
        runs[cap] = (events, _stored(pipeline), docling.max_in_flight)

    sequential, parallel = runs[1], runs[4]
    assert sequential[2] == 1  # one at a time, as before
    assert parallel[2] == 4  # the server had the run's four first files at once
    # The same events in the same order (so the same batches written in the same order) ...
    progress = [[e for e in events if isinstance(e, FileProgress)] for events, _, _ in (sequential, parallel)]
    assert progress[0] == progress[1]
    names = [Path(e.source).name for e in progress[1] if e.stage is FileStage.CHUNKED]
    assert names == ["a.pdf", "b.docx", "c.pdf", "d.docx", "e.md", "f.docx"]
    summary = parallel[0][-1]
    assert isinstance(summary, IngestSummary) and (summary.indexed, summary.failed) == (6, 0)
    # ... and the same chunks.
    assert parallel[1] == sequential[1] and len(parallel[1]) == 6
    assert sorted(r["filename"] for r in docling.requests) == sorted(
        ["a.pdf", "b.docx", "c.pdf", "d.docx", "f.docx"] * 2
    )


def test_a_run_stopped_by_its_reader_stops_converting(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(12):
        shutil.copy(DOCS / "docx" / "word_sample.docx", folder / f"{i:02}.docx")
    docling.delay_s = 0.3
    remote = DoclingServe(docling.url, max_concurrent=3)
    pipeline = _pipeline(tmp_path / "store", embedder, remote)
    try:
        run = pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs")
        first = next(run)
        assert isinstance(first, FileProgress) and Path(first.source).name == "00.docx"
        run.close()  # as the Ingest RPC does when its caller goes away
        sent = len(docling.requests)
    finally:
        remote.close()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("ingest-parse")]
    assert docling.in_flight == 0  # closing waited for the files in hand
    assert 3 <= sent < 12 and docling.max_in_flight == 3
    assert len(docling.requests) == sent  # nothing started after


def _in_flight_within(docling: DoclingServeServer, n: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while docling.in_flight < n:
        assert time.monotonic() < deadline, "the server never got the request"
        time.sleep(0.02)


def test_a_stopped_conversion_is_no_longer_waited_for_and_a_waiting_one_never_sent(
    docling: DoclingServeServer,
) -> None:
    page = b"<html><body><h1>Held</h1><p>One paragraph of text.</p></body></html>"
    docling.slow["held.html"] = 60  # answered when the fixture resets the server
    remote = DoclingServe(docling.url, max_concurrent=1)
    stop = threading.Event()
    ended: dict[str, tuple[str, float]] = {}

    def convert(name: str) -> None:
        try:
            remote.document(name, page, stop=stop)
        except Cancelled as err:
            ended[name] = (str(err), time.monotonic())

    threads = [threading.Thread(target=convert, args=(n,)) for n in ("held.html", "queued.html")]
    try:
        threads[0].start()
        _in_flight_within(docling, 1)
        threads[1].start()  # waits for the one place under the cap
        time.sleep(0.2)
        stopped = time.monotonic()
        stop.set()
        for t in threads:
            t.join(timeout=10)
        assert sorted(ended) == ["held.html", "queued.html"]
        assert all("cancelled" in reason and at - stopped < 1.0 for reason, at in ended.values())
        with pytest.raises(Cancelled, match="cancelled"):
            remote.document("late.html", page, stop=stop)  # stopped before it was sent
        assert [r["filename"] for r in docling.requests] == ["held.html"]
    finally:
        remote.close()


@pytest.mark.parametrize("stop", [None, threading.Event()], ids=["no cancel event", "a cancel event"])
def test_closing_the_client_fails_the_files_still_waiting(
    docling: DoclingServeServer, stop: threading.Event | None
) -> None:
    """The service stopping: a file waiting for its place under the cap fails as stopped at once."""
    page = b"<html><body><h1>Held</h1><p>One paragraph of text.</p></body></html>"
    docling.slow["held.html"] = 60
    remote = DoclingServe(docling.url, max_concurrent=1)
    ended: dict[str, BaseException] = {}

    def convert(name: str) -> None:
        try:
            remote.document(name, page, stop=stop)
        except BaseException as err:  # whatever it is: the test says below
            ended[name] = err

    held = threading.Thread(target=convert, args=("held.html",))
    held.start()
    _in_flight_within(docling, 1)
    queued = threading.Thread(target=convert, args=("queued.html",))
    queued.start()
    time.sleep(0.2)
    remote.close()
    queued.join(timeout=2)
    assert not queued.is_alive()
    assert isinstance(ended["queued.html"], Cancelled) and "stopped" in str(ended["queued.html"])


def test_a_request_that_could_not_start_gives_its_place_back_and_a_servers_timeout_is_its_own(
    docling: DoclingServeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = b"<html><body><h1>Place</h1><p>One paragraph of text.</p></body></html>"
    remote = DoclingServe(docling.url, max_concurrent=1)
    start = threading.Thread.start

    def no_thread_once(thread: threading.Thread) -> None:
        if thread.name == "docling-serve-request":
            monkeypatch.setattr(threading.Thread, "start", start)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", no_thread_once)
    try:
        with pytest.raises(RuntimeError, match="new thread"):
            remote.document("first.html", page)
        assert remote.document("second.html", page) is not None  # the one place was given back

        def times_out(*args: object) -> bytes:
            raise TimeoutError("the request's own timeout")

        monkeypatch.setattr(remote, "_post", times_out)
        raised: list[BaseException] = []
        waiting = threading.Thread(target=lambda: raised.extend(_raised(remote.document, "third.html", page)))
        waiting.start()
        waiting.join(timeout=5)
        assert not waiting.is_alive() and isinstance(raised[0], TimeoutError)  # not taken for the poll's
    finally:
        remote.close()


def _raised(call: Callable[..., object], *args: object) -> list[BaseException]:
    try:
        call(*args)
    except BaseException as err:  # the test looks at it
        return [err]
    return []


_NEVER_ANSWERS = """
import socket, sys, threading, time
from services.ingest.remote_convert import DoclingServe
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
held = []
threading.Thread(target=lambda: held.append(listener.accept()), daemon=True).start()
remote = DoclingServe(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=120)
stop = threading.Event()
def convert():
    try:
        remote.document("page.html", b"<html><body><p>x</p></body></html>", stop=stop)
    except Exception as err:
        print(err, flush=True)
waiting = threading.Thread(target=convert)
waiting.start()
while not held:
    time.sleep(0.02)
stop.set()
waiting.join()
remote.close()
"""


def test_a_request_no_file_waits_for_does_not_hold_the_process_at_exit() -> None:
    """After a cancel, a server that takes minutes to answer must not keep the stopping service alive
    (SIGTERM) until it does: the request's thread does not hold the interpreter's exit."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _NEVER_ANSWERS], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "was stopped" in done.stdout and time.monotonic() - started < 20


def test_a_cancelled_run_stops_waiting_for_its_conversions(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
    docling: DoclingServeServer,
    spans,  # type: ignore[no-untyped-def]
) -> None:
    """CancelIngestJob while the server converts: the run ends within a moment, not when the server
    answers (up to ingest.docling_serve_timeout_s); its files fail as stopped, nothing is indexed."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        shutil.copy(DOCS / "docx" / "word_sample.docx", folder / f"{i:02}.docx")
        docling.slow[f"{i:02}.docx"] = 60
    remote = DoclingServe(docling.url, max_concurrent=2)
    pipeline = _pipeline(tmp_path / "store", embedder, remote)
    cancelled = threading.Event()
    events: list[FileProgress | IngestSummary] = []
    spans.clear()
    run = threading.Thread(
        target=lambda: events.extend(
            pipeline.run(collect_paths([str(folder)], EVERYWHERE), "docs", cancelled=cancelled)
        )
    )
    try:
        run.start()
        _in_flight_within(docling, 2)
        stopped = time.monotonic()
        cancelled.set()
        run.join(timeout=20)
        took = time.monotonic() - stopped
    finally:
        remote.close()
    assert took < 2.0
    outcomes = _outcomes(events)
    assert len(outcomes) == 4 and all("was stopped" in reason for reason in outcomes.values()), outcomes
    assert len(docling.requests) == 2  # the files after the cancel were never sent
    assert pipeline.list_documents("docs") == []
    parses = [s for s in spans.get_finished_spans() if s.name == "ingest.parse"]
    assert len(parses) == 4 and {s.status.status_code.name for s in parses} == {"UNSET"}  # no failures
    assert all([e.name for e in s.events] == ["cancelled"] for s in parses)


def test_ahead_with_workers_hands_results_over_in_order_and_holds_its_bounds() -> None:
    lock = threading.Lock()
    running, most, started = 0, 0, []

    def work(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            started.append(i)
        time.sleep(0.004 * (3 - i % 4))  # later items finish first
        with lock:
            running -= 1
        if i == 5:
            raise ValueError("five")
        return i * i

    with Ahead(range(40), work, lambda _: 2, 6, "test-ahead", workers=4) as ahead:
        got = []
        for taken, (i, result) in enumerate(ahead, start=1):
            got.append((i, result))
            time.sleep(0.002)  # a slow reader
            # Held under 6 (3 results of 2) when one is started, plus the 4 in hand.
            assert len(started) - taken <= 3 + 4, (i, len(started))
    assert [i for i, _ in got] == list(range(40))
    assert [r for i, r in got if i != 5] == [i * i for i in range(40) if i != 5]
    assert isinstance(got[5][1], ValueError)
    assert most == 4


class _Stop(BaseException):
    pass


def test_ahead_with_workers_stops_cleanly() -> None:
    started: list[int] = []

    def start(i: int) -> int:
        started.append(i)
        return i

    ahead = Ahead(range(10_000), start, lambda _: 1, 4, "test-ahead", workers=3)
    taken = [next(iter(ahead)) for _ in range(2)]
    ahead.close()
    assert [i for i, _ in taken] == [0, 1]
    assert len(started) <= 2 + 4 + 3
    assert not [t.name for t in threading.enumerate() if t.name.startswith("test-ahead")]

    def items() -> Iterator[int]:
        yield from range(3)
        raise _Stop

    with Ahead(items(), lambda i: i, lambda _: 1, 4, "test-ahead", workers=2) as ahead:
        reader = iter(ahead)
        assert [next(reader) for _ in range(3)] == [(0, 0), (1, 1), (2, 2)]
        with pytest.raises(_Stop):
            next(reader)

    def work(i: int) -> int:
        if i == 2:
            raise _Stop
        time.sleep(0.01)
        return i

    with Ahead(range(100), work, lambda _: 1, 4, "test-ahead", workers=3) as ahead:
        reader = iter(ahead)
        assert [next(reader) for _ in range(2)] == [(0, 0), (1, 1)]
        with pytest.raises(_Stop):
            next(reader)
