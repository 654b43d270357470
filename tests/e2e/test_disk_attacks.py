"""Attacks with a full disk: the data dir (or one store's folder) on a real small tmpfs, so LanceDB,
tantivy and the SQLite state meet a real ENOSPC, driven through the real services over gRPC on
loopback, the HTTP gateway and the `ragstack` CLI.

Written by a helper against the interface (README, protos, settings) before it read the code. Found
here and fixed while it was written: every RPC that met the full disk (prune, delete, SubmitIngest,
snapshots, restore, vacuum, attach, sources, feedback) answered INTERNAL; every question failed with
500 (its session turn or recall memory could not be written); an empty store folder (a mount point
for a disk of its own) was taken for an old layout; a job whose end could not be written held its
library in that worker until a restart; a full disk under tantivy alone often reached the run only as
"an index writer was killed", so each file failed and the run went on.

What is expected, from the house rules: a refusal is clear (RESOURCE_EXHAUSTED naming the full disk or
`ingest.min_free_mb`, never INTERNAL or a traceback), nothing indexed before is lost, every store
agrees with the catalog, the services stay up and answer searches and questions, and once there is
room again everything works without a restart.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from ragstack.resources import Resources
from ragstack.serve import Stack
from ragstack.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    retrieve_pb2,
    retrieve_pb2_grpc,
)
from tests.conftest import make_config, start_with

S = ingest_pb2
OK = grpc.StatusCode.OK
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
BROKEN = (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
ENDED = {
    S.INGEST_JOB_STATE_DONE,
    S.INGEST_JOB_STATE_FAILED,
    S.INGEST_JOB_STATE_CANCELLED,
    S.INGEST_JOB_STATE_DEAD,
}
# What a clear refusal for a full disk says: the disk, or the setting that keeps room on it.
DISK_WORDS = ("no space left", "disk", "min_free_mb")

DOCS = {
    "kestrel.md": (
        "# Kestrel station\n\nThe Kestrel weather station on Mount Orrin logs wind gusts every ninety "
        "seconds and sends them by radio to the valley office.\n\n## Power\n\nA pair of copper "
        "panels and a nickel battery keep the Kestrel station running through the winter.\n"
    ),
    "quokka.md": (
        "# Quokka ferry\n\nThe quokka ferry leaves Pelican Wharf at seven and reaches Rottnest "
        "Landing forty minutes later.\n\n## Tickets\n\nTickets for the quokka ferry are sold "
        "at the wharf kiosk, cash only.\n"
    ),
    "basalt.md": (
        "# Basalt quarry\n\nThe basalt quarry at Tarn Hollow ships crushed stone on Tuesdays by "
        "barge along the Merrow canal.\n"
    ),
}
MARK = {"kestrel.md": "gusts", "quokka.md": "Wharf", "basalt.md": "barge"}


# --- the disk ---------------------------------------------------------------------------------------


def fill(disk: Path) -> Path:
    """Write a filler file on `disk` until it is full (ENOSPC); returns the file."""
    filler = disk / "filler.bin"
    with open(filler, "ab", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\1" * size
            try:
                while True:
                    f.write(block)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
    return filler


def room(filler: Path) -> None:
    filler.unlink()


def free_bytes(disk: Path) -> int:
    return os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize


# --- a stack with its data dir on a tmpfs -------------------------------------------------------------


@dataclass
class Rig:
    stack: Stack
    disk: Path
    channel: grpc.aio.Channel
    http: httpx.AsyncClient

    @property
    def data(self) -> Path:
        return self.stack.cfg.data_dir

    @property
    def ingest(self) -> ingest_pb2_grpc.IngestServiceStub:
        return ingest_pb2_grpc.IngestServiceStub(self.channel)

    @property
    def retrieve(self) -> retrieve_pb2_grpc.RetrieveServiceStub:
        return retrieve_pb2_grpc.RetrieveServiceStub(grpc.aio.insecure_channel(self.stack.peers["retrieve"]))

    @property
    def agent(self) -> agent_pb2_grpc.AgentServiceStub:
        return agent_pb2_grpc.AgentServiceStub(grpc.aio.insecure_channel(self.stack.peers["agent"]))


@asynccontextmanager
async def running(cfg: Any, resources: Resources, disk: Path) -> AsyncIterator[Rig]:
    stack = await start_with(cfg, resources)
    channel = grpc.aio.insecure_channel(stack.peers["ingest"])
    http = httpx.AsyncClient(base_url=stack.gateway_url, timeout=60)
    try:
        yield Rig(stack, disk, channel, http)
    finally:
        await http.aclose()
        await channel.close()
        await stack.stop()


def config(disk: Path, tmp_path: Path, **ingest: Any) -> Any:
    inbox = tmp_path / "inbox"
    inbox.mkdir(exist_ok=True)
    (tmp_path / "dbs").mkdir(exist_ok=True)
    settings = {
        "graph": False,
        "min_free_mb": 0,  # the real ENOSPC paths; the floor is attacked on its own
        "job_backoff_s": 0.5,
        "job_attempts": 4,
        "source_polling": False,
        "allowed_roots": [str(inbox)],
    }
    settings.update(ingest)
    return make_config(
        disk / "data",
        ingest=settings,
        sql={"allowed_roots": [str(tmp_path / "dbs")]},
        retrieve={"page_search": False},
    )


async def call(stub_method: Callable[..., Any], request: Any, deadline_s: float = 60) -> tuple[Any, str, Any]:
    """(status, details, reply) of one unary call."""
    try:
        reply = await stub_method(request, timeout=deadline_s)
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or "", None
    return OK, "", reply


async def ingest(rig: Rig, names: list[str], prune: bool = False, paths: list[str] | None = None) -> Any:
    """Ingest uploads (or paths) through the Ingest stream: (status, details, summary)."""
    files = [S.FileUpload(filename=n, content=DOCS[n].encode()) for n in names]
    request = S.IngestRequest(library="default", files=files, paths=paths or [], prune=prune)
    summary = None
    try:
        async for event in rig.ingest.Ingest(request, timeout=120):
            if event.HasField("summary"):
                summary = event.summary
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or "", summary
    return OK, "", summary


def clear(code: Any, details: str) -> None:
    """A refusal that names the disk, not a crash."""
    assert code not in BROKEN, (code, details[:500])
    assert "Traceback" not in details and 'File "' not in details, details[:500]
    assert code == EXHAUSTED, (code, details[:500])
    assert any(w in details.lower() for w in DISK_WORDS), details[:500]


async def documents(rig: Rig) -> set[str]:
    listed = await rig.ingest.ListDocuments(S.ListDocumentsRequest(library="default"), timeout=30)
    return {d.source.rsplit("/", 1)[-1] for d in listed.documents}


async def found(rig: Rig, name: str, mode: int = common_pb2.SEARCH_MODE_LEXICAL) -> bool:
    """Does a search for the document's own word find it?"""
    reply = await rig.retrieve.Search(
        retrieve_pb2.SearchRequest(query=MARK[name], library="default", top_k=5, mode=mode), timeout=30
    )
    return any(h.chunk.text and MARK[name] in h.chunk.text for h in reply.hits)


async def agree(rig: Rig) -> tuple[int, int]:
    """Every store counts the library as the catalog does: (documents, chunks)."""
    stats = await rig.ingest.Stats(S.StatsRequest(library="default"), timeout=30)
    libs = {lib.name: lib for lib in stats.libraries}
    if "default" not in libs:
        return 0, 0
    lib = libs["default"]
    assert lib.chunks == lib.vector_chunks == lib.lexical_chunks, lib
    return lib.documents, lib.chunks


async def searchable_as_listed(rig: Rig, expected: set[str]) -> None:
    """The catalog lists exactly `expected`, and lexical and dense searches find each of them."""
    assert await documents(rig) == expected
    await agree(rig)
    for name in expected:
        assert await found(rig, name), name
        assert await found(rig, name, common_pb2.SEARCH_MODE_DENSE), name
    for name in set(DOCS) - expected:
        assert not await found(rig, name), name


async def healthy(rig: Rig) -> None:
    r = await rig.http.get("/health/ready")
    assert r.status_code == 200, r.text


async def job_until(rig: Rig, job_id: str, states: set[int], limit_s: float = 30) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        job = (await rig.ingest.GetIngestJob(S.GetIngestJobRequest(job_id=job_id), timeout=30)).job
        if job.state in states or time.monotonic() > deadline:
            return job
        await asyncio.sleep(0.1)


# =====================================================================================================
# 1. The default floor (ingest.min_free_mb: 256) on a disk smaller than it
# =====================================================================================================


async def test_the_default_floor_refuses_an_ingest_and_a_snapshot_naming_the_setting(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    disk = small_disk(tmp_path / "disk", "48m")
    cfg = config(disk, tmp_path, min_free_mb=256)
    async with running(cfg, resources, disk) as rig:
        await healthy(rig)
        code, details, _ = await ingest(rig, ["kestrel.md"])
        clear(code, details)
        assert "ingest.min_free_mb" in details, details
        assert await documents(rig) == set()
        code, details, _ = await call(rig.ingest.CreateSnapshot, S.CreateSnapshotRequest(name="s1"))
        clear(code, details)
        assert "ingest.min_free_mb" in details, details
        assert (await rig.ingest.ListSnapshots(S.ListSnapshotsRequest(), timeout=30)).snapshots == []
        # Search, ask and health still answer.
        assert not await found(rig, "kestrel.md")
        r = await rig.http.post(
            "/v1/query", json={"question": "Where is the Kestrel station?", "stream": False}
        )
        assert r.status_code == 200, r.text
        await healthy(rig)


async def test_the_default_floor_over_http_is_a_clear_refusal(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    """POST /v1/ingest (SSE) and /v1/ingest/jobs on a disk under the floor: an error naming the
    setting, in the stream or the job, never a 500."""
    disk = small_disk(tmp_path / "disk", "48m")
    cfg = config(disk, tmp_path, min_free_mb=256, job_attempts=1)
    async with running(cfg, resources, disk) as rig:
        files = {"files": ("kestrel.md", DOCS["kestrel.md"].encode(), "text/markdown")}
        r = await rig.http.post("/v1/ingest", files=files, data={"library": "default"})
        assert r.status_code != 500, r.text
        assert "ingest.min_free_mb" in r.text, r.text
        r = await rig.http.post("/v1/ingest/jobs", files=files, data={"library": "default"})
        assert r.status_code in (202, 429, 507), r.text
        if r.status_code == 202:
            job_id = r.json()["job_id"] if "job_id" in r.json() else r.json()["job"]["job_id"]
            job = await job_until(rig, job_id, ENDED)
            assert job.state in ENDED, job
            assert "ingest.min_free_mb" in job.error, job
        else:
            assert "ingest.min_free_mb" in r.text
        assert await documents(rig) == set()


def test_the_cli_on_a_disk_under_the_floor_says_so_without_a_traceback(
    tmp_path: Path, small_disk: Any
) -> None:
    disk = small_disk(tmp_path / "disk", "48m")
    config(disk, tmp_path, min_free_mb=256)
    folder = tmp_path / "inbox" / "notes"
    folder.mkdir()
    (folder / "kestrel.md").write_text(DOCS["kestrel.md"])
    yaml_path = disk / "data.yaml"
    assert yaml_path.exists()
    env = {**os.environ, "RAGSTACK_CONFIG": str(yaml_path)}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ragstack"), "ingest", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-2000:]
    assert "ingest.min_free_mb" in out, out[-2000:]
    assert "Traceback" not in out, out[-2000:]


# =====================================================================================================
# 2. The disk full for real (min_free_mb 0): every operation, once refused, once recovered
# =====================================================================================================
#
# Each case: kestrel.md and quokka.md ingested from a folder with room, then the disk filled to the
# last byte, then one operation. Two tests per operation: its refusal is clear (RESOURCE_EXHAUSTED
# naming the disk), and it loses nothing (the stores agree and hold what they held, or all of what it
# did) and works again once there is room, without a restart.

BOTH = {"kestrel.md", "quokka.md"}


@dataclass
class Case:
    rig: Rig
    folder: Path
    trace_id: str = ""


def _write(folder: Path, names: set[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(DOCS[name])


def leftovers(folder: Path) -> list[str]:
    """Hidden entries (staging, half-done work) in a store's folder."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.exists() else []


async def _setup(rig: Rig, folder: Path) -> Case:
    _write(folder, BOTH)
    code, details, summary = await ingest(rig, [], paths=[str(folder)])
    assert code == OK and summary.indexed == 2, (details, summary)
    return Case(rig, folder)


async def _quokka_id(rig: Rig) -> str:
    listed = await rig.ingest.ListDocuments(S.ListDocumentsRequest(library="default"), timeout=30)
    return next(d.document_id for d in listed.documents if d.source.endswith("quokka.md"))


def _basalt_job() -> Any:
    upload = S.FileUpload(filename="basalt.md", content=DOCS["basalt.md"].encode())
    return S.SubmitIngestRequest(request=S.IngestRequest(library="default", files=[upload]))


def _shop(c: Case) -> Path:
    shop = c.folder.parent.parent / "dbs" / "shop.db"
    if not shop.exists():
        with sqlite3.connect(shop) as db:
            db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT)")
            db.executemany("INSERT INTO orders (status) VALUES (?)", [("late",), ("shipped",)])
        db.close()
    return shop


def _source(c: Case) -> Any:
    return S.SourceSpec(
        name="handbook", kind=S.SOURCE_KIND_FOLDER, url=str(c.folder), library="default", interval_s=3600
    )


# Each operation: (before the disk fills, with room; the act on a full disk -> (code, details);
# what must hold after it, given whether it succeeded; the act again once there is room).


async def _nothing(c: Case) -> None:
    pass


async def _upload(c: Case) -> tuple[Any, str]:
    code, details, summary = await ingest(c.rig, ["basalt.md"])
    if code == OK and summary.failed:  # refused file by file, the reason named
        return EXHAUSTED, " ".join(summary.failures)
    return code, details


async def _upload_after(c: Case, ok: bool) -> None:
    await searchable_as_listed(c.rig, set(DOCS) if ok else BOTH)


async def _prune(c: Case) -> tuple[Any, str]:
    (c.folder / "quokka.md").unlink(missing_ok=True)
    code, details, summary = await ingest(c.rig, [], paths=[str(c.folder)], prune=True)
    if code == OK and summary.removed == 0:
        return EXHAUSTED, " ".join([*summary.failures, *summary.notes])
    return code, details


async def _removed_after(c: Case, ok: bool) -> None:
    await searchable_as_listed(c.rig, {"kestrel.md"} if ok else BOTH)


async def _delete(c: Case) -> tuple[Any, str]:
    request = S.DeleteDocumentRequest(document_id=await _quokka_id(c.rig), library="default")
    code, details, _ = await call(c.rig.ingest.DeleteDocument, request)
    return code, details


async def _submit(c: Case) -> tuple[Any, str]:
    code, details, reply = await call(c.rig.ingest.SubmitIngest, _basalt_job())
    if code == OK:
        c.trace_id = reply.job.job_id
    return code, details


async def _submit_after(c: Case, ok: bool) -> None:
    jobs = (await c.rig.ingest.ListIngestJobs(S.ListIngestJobsRequest(), timeout=30)).jobs
    assert [j.job_id for j in jobs] == ([c.trace_id] if ok else [])
    await searchable_as_listed(c.rig, BOTH)


async def _submit_again(c: Case) -> None:
    if not c.trace_id:
        code, details, reply = await call(c.rig.ingest.SubmitIngest, _basalt_job())
        assert code == OK, details
        c.trace_id = reply.job.job_id
    job = await job_until(c.rig, c.trace_id, ENDED)
    assert job.state == S.INGEST_JOB_STATE_DONE and job.summary.indexed == 1, job
    await searchable_as_listed(c.rig, set(DOCS))


async def _snapshot(c: Case) -> tuple[Any, str]:
    code, details, _ = await call(c.rig.ingest.CreateSnapshot, S.CreateSnapshotRequest(name="snap"))
    return code, details


async def _snapshot_after(c: Case, ok: bool) -> None:
    listed = (await c.rig.ingest.ListSnapshots(S.ListSnapshotsRequest(), timeout=30)).snapshots
    assert [s.name for s in listed] == (["snap"] if ok else [])
    assert leftovers(c.rig.data / "snapshots") == []
    await searchable_as_listed(c.rig, BOTH)


async def _snapshot_again(c: Case) -> None:
    code, details = await _snapshot(c)
    assert code in (OK, grpc.StatusCode.ALREADY_EXISTS), details
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK
    code, details, _ = await call(c.rig.ingest.RestoreSnapshot, S.RestoreSnapshotRequest(name="snap"))
    assert code == OK, details
    await searchable_as_listed(c.rig, BOTH)


async def _snapshot_then_basalt(c: Case) -> None:
    assert (await _snapshot(c))[0] == OK
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK


async def _restore(c: Case) -> tuple[Any, str]:
    code, details, _ = await call(c.rig.ingest.RestoreSnapshot, S.RestoreSnapshotRequest(name="snap"))
    return code, details


async def _restore_after(c: Case, ok: bool) -> None:
    await searchable_as_listed(c.rig, BOTH if ok else set(DOCS))


async def _restore_again(c: Case) -> None:
    assert (await _restore(c))[0] == OK
    await searchable_as_listed(c.rig, BOTH)
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK
    await searchable_as_listed(c.rig, set(DOCS))


async def _small_writes(c: Case) -> None:  # fragments and versions for vacuum to work on
    (c.folder / "kestrel.md").write_text(DOCS["kestrel.md"] + "\nRevised in spring.\n")
    assert (await ingest(c.rig, [], paths=[str(c.folder)]))[0] == OK
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK


async def _vacuum(c: Case) -> tuple[Any, str]:
    code, details, _ = await call(c.rig.ingest.Vacuum, S.VacuumRequest(older_than_days=0))
    return code, details


async def _vacuum_after(c: Case, ok: bool) -> None:
    await searchable_as_listed(c.rig, set(DOCS))


async def _vacuum_again(c: Case) -> None:
    assert (await _vacuum(c))[0] == OK
    await searchable_as_listed(c.rig, set(DOCS))


async def _attach(c: Case) -> tuple[Any, str]:
    request = S.AttachDatabaseRequest(library="default", name="shop", url=f"sqlite:///{_shop(c)}")
    code, details, _ = await call(c.rig.ingest.AttachDatabase, request)
    return code, details


async def _attach_after(c: Case, ok: bool) -> None:
    listed = await c.rig.retrieve.ListDatabases(retrieve_pb2.ListDatabasesRequest(library="default"))
    assert {d.name for d in listed.databases} == ({"shop"} if ok else set())


async def _attach_again(c: Case) -> None:
    code, details = await _attach(c)
    assert code in (OK, grpc.StatusCode.ALREADY_EXISTS), details
    sql = {"sql": "SELECT status, count(*) FROM orders GROUP BY status", "library": "default"}
    r = await c.rig.http.post("/v1/sql", json=sql)
    assert r.status_code == 200 and "late" in r.text, r.text


async def _add_source(c: Case) -> tuple[Any, str]:
    code, details, _ = await call(c.rig.ingest.AddSource, S.AddSourceRequest(spec=_source(c)))
    return code, details


async def _source_after(c: Case, ok: bool) -> None:
    listed = (await c.rig.ingest.ListSources(S.ListSourcesRequest(), timeout=30)).sources
    assert {s.spec.name for s in listed} == ({"handbook"} if ok else set())


async def _source_again(c: Case) -> None:
    code, details = await _add_source(c)
    assert code in (OK, grpc.StatusCode.ALREADY_EXISTS), details


async def _asked(c: Case) -> None:
    r = await _ask(c.rig, "When does the quokka ferry leave Pelican Wharf?")
    assert r.status_code == 200, r.text
    c.trace_id = r.json()["trace_id"]


async def _feedback(c: Case) -> tuple[Any, str]:
    request = agent_pb2.SendFeedbackRequest(trace_id=c.trace_id, rating=agent_pb2.RATING_UP, comment="late")
    code, details, _ = await call(c.rig.agent.SendFeedback, request)
    return code, details


async def _feedback_after(c: Case, ok: bool) -> None:
    listed = (await c.rig.agent.ListFeedback(agent_pb2.ListFeedbackRequest(limit=10), timeout=30)).feedback
    assert [f.trace_id for f in listed] == ([c.trace_id] if ok else [])


async def _feedback_again(c: Case) -> None:
    code, details = await _feedback(c)
    assert code == OK, details
    await _feedback_after(c, True)


OPS: dict[str, tuple[Any, Any, Any, Any]] = {
    "upload": (_nothing, _upload, _upload_after, lambda c: _upload_again(c)),
    "prune": (_nothing, _prune, _removed_after, lambda c: _prune_again(c)),
    "delete": (_nothing, _delete, _removed_after, lambda c: _delete_again(c)),
    "submit": (_nothing, _submit, _submit_after, _submit_again),
    "snapshot": (_nothing, _snapshot, _snapshot_after, _snapshot_again),
    "restore": (_snapshot_then_basalt, _restore, _restore_after, _restore_again),
    "vacuum": (_small_writes, _vacuum, _vacuum_after, _vacuum_again),
    "attach": (_nothing, _attach, _attach_after, _attach_again),
    "source": (_nothing, _add_source, _source_after, _source_again),
    "feedback": (_asked, _feedback, _feedback_after, _feedback_again),
}


async def _upload_again(c: Case) -> None:
    code, details, summary = await ingest(c.rig, ["basalt.md"])
    assert code == OK and summary.failed == 0, (details, summary)
    await searchable_as_listed(c.rig, set(DOCS))


async def _prune_again(c: Case) -> None:
    code, details = await _prune(c)
    assert code == OK, details
    await searchable_as_listed(c.rig, {"kestrel.md"})
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK  # and the stores still take writes
    await searchable_as_listed(c.rig, {"kestrel.md", "basalt.md"})


async def _delete_again(c: Case) -> None:
    listed = await documents(c.rig)
    if "quokka.md" in listed:
        code, details = await _delete(c)
        assert code == OK, details
    await searchable_as_listed(c.rig, {"kestrel.md"})
    assert (await ingest(c.rig, ["basalt.md"]))[0] == OK
    await searchable_as_listed(c.rig, {"kestrel.md", "basalt.md"})


CLEAR_CASES = [
    pytest.param("upload"),
    pytest.param("prune"),
    pytest.param("delete"),
    pytest.param("submit"),
    pytest.param("snapshot"),
    pytest.param("restore"),
    pytest.param("vacuum"),
    pytest.param("attach"),
    pytest.param("source"),
    pytest.param("feedback"),
]


@asynccontextmanager
async def full_disk_case(
    tmp_path: Path, resources: Resources, small_disk: Any, op: str
) -> AsyncIterator[tuple[Case, Path, Any, str]]:
    """The stack with both documents, `op`'s preparation, the disk filled, `op` done: (case, the
    filler, the code, the details)."""
    disk = small_disk(tmp_path / "disk", "64m")
    before, act, _after, _again = OPS[op]
    async with running(config(disk, tmp_path), resources, disk) as rig:
        case = await _setup(rig, tmp_path / "inbox" / "docs")
        await before(case)
        filler = fill(disk)
        code, details = await act(case)
        yield case, filler, code, details


@pytest.mark.parametrize("op", CLEAR_CASES)
async def test_on_a_full_disk_an_operation_is_refused_naming_the_disk(
    tmp_path: Path, resources: Resources, small_disk: Any, op: str
) -> None:
    async with full_disk_case(tmp_path, resources, small_disk, op) as (case, _filler, code, details):
        if code != OK:
            clear(code, details)
        await healthy(case.rig)


@pytest.mark.parametrize("op", list(OPS))
async def test_on_a_full_disk_an_operation_loses_nothing_and_works_again_once_there_is_room(
    tmp_path: Path, resources: Resources, small_disk: Any, op: str
) -> None:
    _before, _act, after, again = OPS[op]
    async with full_disk_case(tmp_path, resources, small_disk, op) as (case, filler, code, _details):
        await after(case, code == OK)
        await healthy(case.rig)
        assert await found(case.rig, "kestrel.md")  # searches go on
        room(filler)
        await again(case)
        await agree(case.rig)


# --- questions on a full disk -------------------------------------------------------------------------


async def _ask(rig: Rig, question: str, session: str = "") -> httpx.Response:
    body: dict[str, Any] = {"question": question, "stream": False}
    if session:
        body["session_id"] = session
    return await rig.http.post("/v1/query", json=body)


@pytest.mark.parametrize("session", ["", "s1"], ids=["alone", "in-a-session"])
async def test_a_question_on_a_full_disk_is_still_answered(
    tmp_path: Path, resources: Resources, small_disk: Any, session: str
) -> None:
    """Its trace, session turn and recall memory cannot be written: the answer stands all the same."""
    disk = small_disk(tmp_path / "disk", "64m")
    async with running(config(disk, tmp_path), resources, disk) as rig:
        await _setup(rig, tmp_path / "inbox" / "docs")
        filler = fill(disk)
        r = await _ask(rig, "What powers the Kestrel station?", session=session)
        try:
            assert r.status_code == 200, r.text
            assert "panels" in r.json()["answer"] or "battery" in r.json()["answer"], r.text
        finally:
            room(filler)


async def test_questions_after_a_full_disk_work_again_and_no_trace_is_left_half_written(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    disk = small_disk(tmp_path / "disk", "64m")
    async with running(config(disk, tmp_path), resources, disk) as rig:
        await _setup(rig, tmp_path / "inbox" / "docs")
        filler = fill(disk)
        for session in ("", "s1"):
            r = await _ask(rig, "What powers the Kestrel station?", session=session)
            assert r.status_code in (200, 429, 500, 503, 507), r.text
        await healthy(rig)
        assert await found(rig, "kestrel.md")
        room(filler)
        r = await _ask(rig, "What powers the Kestrel station?", session="s1")
        assert r.status_code == 200, r.text
        assert "panels" in r.json()["answer"] or "battery" in r.json()["answer"], r.text
        trace = await rig.http.get(f"/v1/traces/{r.json()['trace_id']}")
        assert trace.status_code == 200, trace.text
        r = await _ask(rig, "And how often does it log gusts?", session="s1")
        assert r.status_code == 200, r.text
        sessions = (
            await rig.agent.ListSessions(agent_pb2.ListSessionsRequest(limit=50), timeout=30)
        ).sessions
        assert {s.session_id: s.turns for s in sessions}.get("s1", 0) >= 2, sessions
        for path in (rig.data / "traces").rglob("*"):  # every file there is a whole trace
            if path.is_file():
                json.loads(path.read_text())


# --- a store on a disk of its own ----------------------------------------------------------------------


async def _stores_apart(
    tmp_path: Path, resources: Resources, small_disk: Any, store: str
) -> tuple[Any, Path]:
    """A data dir whose `store` folder is a tmpfs of 8 MB, the rest on a 64 MB one."""
    disk = small_disk(tmp_path / "disk", "64m")
    cfg = config(disk, tmp_path, job_attempts=20, job_backoff_s=0.3)
    async with running(cfg, resources, disk):
        pass  # a first start lays the data dir out
    return cfg, small_disk(cfg.data_dir / store, "8m")


async def test_a_store_folder_prepared_as_a_mount_point_is_not_taken_for_an_old_layout(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    disk = small_disk(tmp_path / "disk", "64m")
    cfg = config(disk, tmp_path)
    small_disk(cfg.data_dir / "tantivy", "8m")
    async with running(cfg, resources, disk) as rig:
        assert (await ingest(rig, ["kestrel.md"]))[0] == OK


@pytest.mark.parametrize("store", ["tantivy", "lancedb"])
async def test_a_job_whose_store_disk_is_full_says_so_and_is_indexed_once_there_is_room(
    tmp_path: Path, resources: Resources, small_disk: Any, store: str
) -> None:
    """The queue has room, one store's disk none: the job is taken, meets ENOSPC, says so, and (a full
    disk passes) is retried and indexed once there is room: its upload is not lost."""
    cfg, tight = await _stores_apart(tmp_path, resources, small_disk, store)
    async with running(cfg, resources, tmp_path / "disk") as rig:
        assert (await ingest(rig, ["kestrel.md"]))[0] == OK
        filler = fill(tight)
        code, details, reply = await call(rig.ingest.SubmitIngest, _basalt_job())
        assert code == OK, details
        deadline = time.monotonic() + 20
        job = reply.job
        while time.monotonic() < deadline and not job.error and job.state not in ENDED:
            job = (await rig.ingest.GetIngestJob(S.GetIngestJobRequest(job_id=job.job_id), timeout=30)).job
            await asyncio.sleep(0.05)
        assert job.error and any(w in job.error.lower() for w in DISK_WORDS), job
        assert "Traceback" not in job.error
        await searchable_as_listed(rig, {"kestrel.md"})
        await healthy(rig)
        room(filler)
        job = await job_until(rig, job.job_id, ENDED, 30)
        assert job.state == S.INGEST_JOB_STATE_DONE and job.summary.indexed == 1, job
        await searchable_as_listed(rig, {"kestrel.md", "basalt.md"})


async def test_a_full_lexical_disk_is_always_named_as_a_full_disk(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    """The same ingest on tantivy's full disk, a dozen times: each run stops, naming the full disk
    (whether tantivy's own writer thread or the commit meets ENOSPC first)."""
    cfg, tight = await _stores_apart(tmp_path, resources, small_disk, "tantivy")
    async with running(cfg, resources, tmp_path / "disk") as rig:
        assert (await ingest(rig, ["kestrel.md"]))[0] == OK
        seen = []
        for _ in range(12):
            filler = fill(tight)
            code, details, summary = await ingest(rig, ["quokka.md", "basalt.md"])
            room(filler)
            seen.append((code, details[:120], list(summary.failures) if summary else []))
        await searchable_as_listed(rig, {"kestrel.md"})  # this holds either way
        for code, details, _failures in seen:
            clear(code, details)


# --- restarts -------------------------------------------------------------------------------------------


async def test_a_restart_on_a_full_disk_serves_the_index_and_takes_writes_once_there_is_room(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    disk = small_disk(tmp_path / "disk", "64m")
    cfg = config(disk, tmp_path)
    async with running(cfg, resources, disk) as rig:
        await _setup(rig, tmp_path / "inbox" / "docs")
        filler = fill(disk)
    async with running(cfg, resources, disk) as rig:  # started on a full disk
        await healthy(rig)
        await searchable_as_listed(rig, BOTH)
        room(filler)
        assert (await ingest(rig, ["basalt.md"]))[0] == OK
        await searchable_as_listed(rig, set(DOCS))
        r = await _ask(rig, "When does the quokka ferry leave Pelican Wharf?")
        assert r.status_code == 200 and "seven" in r.json()["answer"], r.text


async def test_a_batch_stopped_by_a_full_lexical_disk_is_undone_across_a_restart(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    """tantivy's disk fills during a batch; the services restart with it still full, then room comes
    back: the lexical index opens, agrees with the catalog, and indexes only what is missing."""
    cfg, tight = await _stores_apart(tmp_path, resources, small_disk, "tantivy")
    disk = tmp_path / "disk"
    async with running(cfg, resources, disk) as rig:
        assert (await ingest(rig, ["kestrel.md"]))[0] == OK
        filler = fill(tight)
        code, details, summary = await ingest(rig, ["quokka.md", "basalt.md"])
        assert code == EXHAUSTED or summary.failed == 2, (code, details, summary)  # (see below)
        await searchable_as_listed(rig, {"kestrel.md"})
    async with running(cfg, resources, disk) as rig:
        await healthy(rig)
        await searchable_as_listed(rig, {"kestrel.md"})
        room(filler)
        code, details, summary = await ingest(rig, ["kestrel.md", "quokka.md", "basalt.md"])
        assert code == OK and (summary.unchanged, summary.indexed) == (1, 2), (details, summary)
        await searchable_as_listed(rig, set(DOCS))
    assert leftovers(cfg.data_dir / "tantivy") == []


# --- a job refused by the floor --------------------------------


async def test_a_job_refused_by_the_floor_is_indexed_once_the_disk_grows(
    tmp_path: Path, resources: Resources, small_disk: Any
) -> None:
    """Under ingest.min_free_mb the job says so; the disk grown past the floor, a retry indexes it."""
    disk = small_disk(tmp_path / "disk", "48m")
    cfg = config(disk, tmp_path, min_free_mb=256, job_attempts=20, job_backoff_s=0.3)
    async with running(cfg, resources, disk) as rig:
        code, details, reply = await call(rig.ingest.SubmitIngest, _basalt_job())
        if code != OK:
            clear(code, details)
            assert "ingest.min_free_mb" in details
            small_disk(disk, "400m")
            code, details, reply = await call(rig.ingest.SubmitIngest, _basalt_job())
            assert code == OK, details
        else:
            deadline = time.monotonic() + 20
            job = reply.job
            while time.monotonic() < deadline and not job.error and job.state not in ENDED:
                job = (await rig.ingest.GetIngestJob(S.GetIngestJobRequest(job_id=job.job_id))).job
                await asyncio.sleep(0.05)
            assert "ingest.min_free_mb" in job.error, job
            small_disk(disk, "400m")
        job = await job_until(rig, reply.job.job_id, ENDED, 30)
        assert job.state == S.INGEST_JOB_STATE_DONE and job.summary.indexed == 1, job
        await searchable_as_listed(rig, {"basalt.md"})
