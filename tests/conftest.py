"""Shared fixtures: the real ONNX embedder, the sample corpus, and a whole stack on loopback."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragstack import locations
from ragstack.config import Config, TelemetryConfig, load_config
from ragstack.models import EMBEDDER
from ragstack.resources import Resources
from ragstack.telemetry import setup_tracing
from tests.tools.state import state_config  # noqa: F401  (the fixture, for every test module)

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "corpus"
SHARED = ROOT.parent / "shared"
MODEL_DIR = locations.models_dir() / EMBEDDER  # where `ragstack models install` put it

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Nothing a test runs writes into the user's own RAGStack folders: a command without a config gets a
# home of its own, which sees the installed models.
_HOME = Path(tempfile.mkdtemp(prefix="ragstack-test-home-"))
(_HOME / "models").symlink_to(MODEL_DIR.parent, target_is_directory=True)
os.environ[locations.HOME_ENV] = str(_HOME)
atexit.register(shutil.rmtree, _HOME, True)


@functools.cache
def instruction_detector() -> Any:
    """One spaCy parser for every test's agent (it loads in under a second)."""
    from ragstack.nlp import load_parser
    from services.agent.instructions import InstructionDetector

    return InstructionDetector(load_parser())


def make_config(data_dir: Path, **sections: dict) -> Config:
    """A config on free loopback ports, stores in `data_dir`, no LLM (tests that want one say so)."""
    raw = {
        "data_dir": str(data_dir),
        "models": {"embedder_dir": str(MODEL_DIR)},
        "services": {n: {"port": 0} for n in ("ingest", "retrieve", "agent", "verify", "gateway")},
        "llm": {"enabled": False},
        "retrieve": {"page_search": True},  # exercised in the tests; off by default
        # The tests ingest the checkout's samples, shared/data and their own temp folders by path.
        "ingest": {"allowed_roots": [str(ROOT), str(SHARED), tempfile.gettempdir()]},
    }
    for key, value in sections.items():
        raw.setdefault(key, {}).update(value)
    path = data_dir.parent / f"{data_dir.name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path, {})


async def start_with(cfg: Config, resources: Resources, **kw: Any) -> Any:
    """`start_stack` for `cfg` with the session's loaded embedder (loading it again costs seconds)."""
    from ragstack.serve import start_stack

    res = Resources(cfg)
    res.__dict__["embedder"] = resources.embedder
    if cfg.retrieve.query_precision == resources.cfg.retrieve.query_precision:
        res.__dict__["query_embedder"] = resources.query_embedder
    return await start_stack(cfg, resources=res, **kw)


@pytest.fixture(scope="session")
def spans() -> InMemorySpanExporter:
    setup_tracing(TelemetryConfig())
    exporter = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    return exporter


@pytest.fixture(scope="session")
def resources(tmp_path_factory: pytest.TempPathFactory) -> Resources:
    if not (MODEL_DIR / "model.onnx").exists():
        pytest.fail(f"no embedder at {MODEL_DIR}: run `ragstack models install` (make install does it)")
    return Resources(make_config(tmp_path_factory.mktemp("res") / "data"))


@pytest.fixture(scope="session")
def embedder(resources: Resources):  # type: ignore[no-untyped-def]
    return resources.embedder


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the bundled sample corpus (tests may change files in their own copies)."""
    target = tmp_path_factory.mktemp("corpus") / "corpus"
    shutil.copytree(SAMPLES, target)
    return target


@pytest.fixture(scope="session")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, resources: Resources, corpus: Path, spans: InMemorySpanExporter
) -> AsyncIterator:
    """All four services and the gateway in this process, with the sample corpus ingested."""
    from ragstack.rpc.clients import IngestClient, open_channel
    from ragstack.serve import start_stack

    # The tests' web sites and database files are on this machine: allowed as an intranet would be.
    cfg = make_config(
        tmp_path_factory.mktemp("stack") / "data",
        ingest={"fetch_allow": ["127.0.0.1"]},
        sql={"allowed_roots": [tempfile.gettempdir()]},
    )
    res = Resources(cfg)
    res.__dict__["embedder"] = resources.embedder  # share the loaded models
    res.__dict__["query_embedder"] = resources.query_embedder
    running = await start_stack(cfg, resources=res)
    channel = open_channel(running.peers["ingest"])
    events = [e async for e in IngestClient(channel, 600).ingest(paths=[str(corpus)])]
    await channel.close()
    summary = events[-1]
    assert summary.failed == 0 and summary.indexed == len(sorted(SAMPLES.glob("*.md")))
    assert (
        summary.entities > 0
        and summary.communities > 0
        and summary.communities_summarized == summary.communities
    )
    yield running
    await running.stop()


@pytest.fixture(scope="session", autouse=True)
def _state_server() -> Any:
    """The PostgreSQL server the state tests share, stopped at the end of the session."""
    from tests.tools import state

    yield
    state.stop_server()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Any]:
    """`mount(folder, size)` mounts a tmpfs of `size` there (again: resizes it), for writes that
    meet a real full disk; all are unmounted at the end. Skips where this machine may not mount."""
    mounted: list[Path] = []

    def mount(folder: Path, size: str) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        options = f"remount,size={size}" if folder in mounted else f"size={size}"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True
        )
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        if folder not in mounted:
            mounted.append(folder)
        return folder

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
