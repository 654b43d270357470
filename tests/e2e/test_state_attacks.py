"""Attacks on the stateful surfaces, as a hostile caller holding one key (reader, writer, or an admin,
whose key cannot be scoped to some libraries) would make them over gRPC (snapshots, stats, vacuum
and tuning have no HTTP route): snapshot names and restore semantics, database names, URLs and hostile
database files, the ingest queue (flooding, others' jobs, odd ids), TuneEmbedder's refusals, concurrency and
cancellation, DeleteDocument / Vacuum / Stats input, and library names that fit the rule but try to
collide. `test_attacks.py` covers the role and scope checks of every RPC; this module covers what
that leaves: bounds, names, paths, races and what a restore changes.

One stack for the module (a services token; graph off; the export's tool environment for tuning):
libraries `team` and `other` with a few documents, `bulk` with the sample corpus, a SQLite database
attached to `team`, and a snapshot `seed` of that state that later tests restore to. Each test passes
when the system defends; a defect found is asserted as the correct behaviour and marked
`xfail(strict=True)` with its reason, so the suite stays green while the defect stays recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import grpc
import pytest

from ragstack.errors import ConfigError
from ragstack.resources import Resources
from ragstack.serve import Stack
from ragstack.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc, retrieve_pb2, retrieve_pb2_grpc
from tests.conftest import ROOT, SAMPLES, make_config, start_with

pytestmark = pytest.mark.slow

TOKEN = "svc-token-state-attacks-5d2c8e1f9a"
PRINCIPALS: dict[str, dict[str, Any]] = {
    "admin": {"name": "root-admin", "role": "admin", "libraries": ["*"], "groups": ["*"]},
    "writer": {"name": "writer", "role": "writer", "libraries": ["team", "flood"]},
    "writer2": {"name": "writer2", "role": "writer", "libraries": ["team"]},
    "reader": {"name": "reader", "role": "reader", "libraries": ["team"]},
    "outsider": {"name": "outsider", "role": "writer", "libraries": ["other"]},
}
OK = grpc.StatusCode.OK
INVALID, DENIED = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND, EXHAUSTED = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.RESOURCE_EXHAUSTED
TOOL_ENV = ROOT / ".venv-export"

TEAM_MARK, OTHER_MARK = "TEAMMARK-GANNET-4411", "OTHERMARK-BITTERN-7302"
OUTSIDE_SECRET, SHOP_MARK = "OUTSIDE-SECRET-PANGOLIN-9031", "SHOPMARK-CORMORANT-2207"
STUBS: dict[str, Any] = {
    "ingest": ingest_pb2_grpc.IngestServiceStub,
    "retrieve": retrieve_pb2_grpc.RetrieveServiceStub,
}


@dataclass
class World:
    stack: Stack
    base: Path
    channels: dict[str, grpc.aio.Channel]
    ids: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def dbs(self) -> Path:
        return self.base / "dbs"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def inbox(self) -> Path:
        return self.base / "inbox"


def metadata(who: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TOKEN}"), ("x-ragstack-principal", json.dumps(PRINCIPALS[who])))


async def call(
    w: World, service: str, method: str, request: Any, who: str = "admin", deadline_s: float = 120
) -> tuple[grpc.StatusCode, str, list[Any]]:
    """(status, details, messages) of one call as `who`; never INTERNAL or a traceback for any input."""
    stub = STUBS[service](w.channels[service])
    rpc = getattr(stub, method)(request, metadata=metadata(who), timeout=deadline_s)
    try:
        items = [m async for m in rpc] if hasattr(rpc, "__aiter__") else [await rpc]
    except grpc.aio.AioRpcError as err:
        code, details = err.code(), err.details() or ""
        assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (method, code, details)
        assert "Traceback" not in details and 'File "' not in details, details
        return code, details, []
    return OK, "", items


async def ingest(w: World, library: str, files: Mapping[str, str | bytes], who: str = "admin") -> Any:
    uploads = [
        ingest_pb2.FileUpload(filename=n, content=c.encode() if isinstance(c, str) else c)
        for n, c in files.items()
    ]
    code, details, events = await call(
        w, "ingest", "Ingest", ingest_pb2.IngestRequest(library=library, files=uploads), who, 600
    )
    assert code == OK, details
    return events[-1].summary


async def docs(w: World, library: str) -> dict[str, str]:
    """source -> document id."""
    code, details, items = await call(
        w, "ingest", "ListDocuments", ingest_pb2.ListDocumentsRequest(library=library)
    )
    assert code == OK, details
    return {d.source: d.document_id for d in items[0].documents}


async def stats(w: World, library: str = "", who: str = "admin") -> Any:
    code, details, items = await call(w, "ingest", "Stats", ingest_pb2.StatsRequest(library=library), who)
    assert code == OK, details
    return items[0]


def agreeing(s: Any) -> None:
    """Every store counts each library alike."""
    for lib in s.libraries:
        assert lib.chunks == lib.vector_chunks == lib.lexical_chunks, lib


async def lexical(w: World, library: str, query: str, who: str = "admin") -> list[str]:
    req = retrieve_pb2.SearchRequest(
        query=query, library=library, top_k=10, mode=common_pb2.SEARCH_MODE_LEXICAL
    )
    code, details, items = await call(w, "retrieve", "Search", req, who)
    assert code == OK, details
    return [h.chunk.document_id for h in items[0].hits]


async def snapshots(w: World) -> list[str]:
    code, details, items = await call(w, "ingest", "ListSnapshots", ingest_pb2.ListSnapshotsRequest())
    assert code == OK, details
    return [s.name for s in items[0].snapshots]


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its content's digest (links not followed)."""
    out: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[str(path.relative_to(folder))] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[str(path.relative_to(folder))] = "dir"
    return out


def build_files(w: World) -> None:
    for folder in (w.dbs, w.outside, w.inbox):
        folder.mkdir(parents=True)
    (w.inbox / "notes.md").write_text(
        "# Parking\n\nVisitor parking uses the north gate of the Kestrel tower.\n"
    )
    with sqlite3.connect(w.dbs / "shop.sqlite") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT, note TEXT)")
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(1, "late", SHOP_MARK), (2, "shipped", "ok")])
    with sqlite3.connect(w.outside / "real.sqlite") as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.execute("INSERT INTO t VALUES (?)", (OUTSIDE_SECRET,))
    (w.outside / "secret.txt").write_text(OUTSIDE_SECRET + "\n")
    # Hostile database files inside the roots: views that never end, or build huge values, read
    # when the schema is sampled at attach time.
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, 'v' || x AS y FROM c"
    with sqlite3.connect(w.dbs / "endless.sqlite") as db:
        db.execute(f"CREATE VIEW endless AS {endless}")
    with sqlite3.connect(w.dbs / "blob.sqlite") as db:
        db.execute("CREATE VIEW big AS SELECT hex(zeroblob(400000000)) AS b")
    with sqlite3.connect(w.dbs / "ext.sqlite") as db:
        db.execute(f"CREATE VIEW ext AS SELECT load_extension('{w.outside / 'evil.so'}') AS x")
    with duckdb.connect(str(w.dbs / "endless.duckdb")) as duck:
        duck.execute(f"CREATE VIEW endless AS {endless}")
    with duckdb.connect(str(w.dbs / "reads.duckdb")) as duck:
        duck.execute(
            f"CREATE VIEW leak AS SELECT * FROM read_csv('{w.outside / 'secret.txt'}', header = false)"
        )


TEAM_DOCS = {
    "handbook.md": f"# Handbook\n\nThe Kestrel tower cafeteria serves lunch from noon. Marker {TEAM_MARK}.\n",
    "bikes.md": "# Bicycles\n\nBicycle storage sits in the basement of the Kestrel tower.\n",
}
OTHER_DOCS = {"roadmap.md": f"# Roadmap\n\nThe Halden project ships {OTHER_MARK} in spring.\n"}


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[World]:
    base = tmp_path_factory.mktemp("state-attacks")
    if not (TOOL_ENV / "bin" / "python").exists():
        pytest.fail(f"no export tool environment at {TOOL_ENV}: run make install")
    cfg = make_config(
        base / "data",
        services={"token": TOKEN},
        ingest={"graph": False, "allowed_roots": [str(base / "inbox")], "job_backoff_s": 1},
        sql={"allowed_roots": [str(base / "dbs")]},
        models={"tuned_dir": str(base / "tuned"), "tool_env": str(TOOL_ENV)},
    )
    stack = await start_with(cfg, resources, gateway=False)
    channels = {name: grpc.aio.insecure_channel(stack.peers[name]) for name in STUBS}
    w = World(stack, base, channels)
    try:
        build_files(w)
        assert (await ingest(w, "team", TEAM_DOCS)).indexed == 2
        assert (await ingest(w, "other", OTHER_DOCS)).indexed == 1
        bulk = {p.name: p.read_bytes() for p in sorted(SAMPLES.glob("*.md"))}
        assert (await ingest(w, "bulk", bulk)).indexed == len(bulk)
        for lib in ("team", "other"):
            w.ids.update({s.rsplit("/", 1)[-1]: i for s, i in (await docs(w, lib)).items()})
        req = ingest_pb2.AttachDatabaseRequest(
            library="team", name="shop", url=f"sqlite:///{w.dbs}/shop.sqlite"
        )
        code, details, _ = await call(w, "ingest", "AttachDatabase", req)
        assert code == OK, details
        code, details, _ = await call(
            w, "ingest", "CreateSnapshot", ingest_pb2.CreateSnapshotRequest(name="seed")
        )
        assert code == OK, details
        yield w
    finally:
        for channel in channels.values():
            await channel.close()
        await stack.stop()


# --- 1. snapshot names ------------------------------------------------------------------------------

BAD_SNAPSHOTS = ["", ".", "..", "../evil", "a/b", "a\\b", "/abs", "a\x00b", "x" * 65, "x" * 3000, "é"]
BAD_SNAPSHOTS += ["ｓｎａｐ", "snap\u200b", "a b", "a\nb", "x.lock", ".x", "x.", "a..b", "~", "*", "a:b"]


@pytest.mark.parametrize("name", BAD_SNAPSHOTS, ids=[repr(n[:12]) for n in BAD_SNAPSHOTS])
async def test_snapshot_names_outside_the_rule_are_invalid(world: World, name: str) -> None:
    before = tree(world.base)
    for method, req in (
        ("CreateSnapshot", ingest_pb2.CreateSnapshotRequest(name=name)),
        ("RestoreSnapshot", ingest_pb2.RestoreSnapshotRequest(name=name)),
        ("DeleteSnapshot", ingest_pb2.DeleteSnapshotRequest(name=name)),
    ):
        code, details, _ = await call(world, "ingest", method, req)
        assert code == INVALID and "snapshot name" in details, (method, code, details)
    assert tree(world.base) == before  # nothing written anywhere
    assert await snapshots(world) == ["seed"]


async def test_a_long_name_in_a_refusal_does_not_stall_the_service(world: World) -> None:
    name = "x" * 20_000
    refused = asyncio.create_task(
        call(world, "ingest", "CreateSnapshot", ingest_pb2.CreateSnapshotRequest(name=name), deadline_s=60)
    )
    await asyncio.sleep(0.05)
    started = time.monotonic()
    code, details, _ = await call(
        world, "ingest", "ListSnapshots", ingest_pb2.ListSnapshotsRequest(), "admin", 60
    )
    others_wait = time.monotonic() - started
    code_long, details_long, _ = await refused
    assert code == OK and code_long == INVALID, (code, details, code_long)
    assert others_wait < 2.0 and len(details_long) < 1000, (others_wait, len(details_long))


EDGE_SNAPSHOTS = ["-", "-rf", "_", "a.b-c_D9", "x" * 64, "CON", "x.lockx", "HEAD", "main", "manifest.json"]


async def test_snapshot_names_at_the_edge_of_the_rule_work_end_to_end(world: World) -> None:
    for name in EDGE_SNAPSHOTS:
        code, details, _ = await call(
            world, "ingest", "CreateSnapshot", ingest_pb2.CreateSnapshotRequest(name=name)
        )
        assert code == OK, (name, details)
    assert await snapshots(world) == ["seed", *EDGE_SNAPSHOTS]
    assert sorted(p.name for p in (world.data / "snapshots").iterdir()) == sorted(["seed", *EDGE_SNAPSHOTS])
    for name in ("-", "x" * 64):
        code, details, _ = await call(
            world, "ingest", "RestoreSnapshot", ingest_pb2.RestoreSnapshotRequest(name=name)
        )
        assert code == OK, (name, details)
    for name in EDGE_SNAPSHOTS:
        code, details, _ = await call(
            world, "ingest", "DeleteSnapshot", ingest_pb2.DeleteSnapshotRequest(name=name)
        )
        assert code == OK, (name, details)
    assert await snapshots(world) == ["seed"]
    assert [p.name for p in (world.data / "snapshots").iterdir()] == ["seed"]
    agreeing(await stats(world))


# --- 2. an admin scoped to one library -------------------------------------------------------------


def test_an_admin_key_cannot_be_scoped(tmp_path: Path) -> None:
    """Snapshots, vacuum, statistics and everyone's jobs span every library: a key that reads as an
    admin of one library is refused when the config is loaded, not silently widened."""
    key = {"name": "team-admin", "key": "sta-adm-team-0a1b2c3d4e5f", "role": "admin", "libraries": ["team"]}
    with pytest.raises(ConfigError, match="admin uses every library"):
        make_config(tmp_path / "data", gateway={"api_keys": [key]})


async def test_restore_rolls_back_every_library_to_the_snapshot(world: World) -> None:
    """What a restore changes: every library, the ones the caller did not name included."""
    later = await ingest(world, "other", {"later.md": "# Later\n\nAdded after the seed.\n"}, "outsider")
    assert later.indexed == 1
    await reset(world)
    assert list(await docs(world, "other")) == ["upload://other/roadmap.md"]
    assert set(await docs(world, "team")) == {"upload://team/handbook.md", "upload://team/bikes.md"}


async def reset(w: World) -> None:
    """Back to the `seed` snapshot (the full admin), and the stores agree."""
    code, details, _ = await call(
        w, "ingest", "RestoreSnapshot", ingest_pb2.RestoreSnapshotRequest(name="seed")
    )
    assert code == OK, details
    agreeing(await stats(w))


# --- 3. databases: names, URLs, hostile files, other libraries --------------------------------------


async def attach(
    w: World, name: str, url: str, library: str = "team", who: str = "admin", deadline_s: float = 60
) -> Any:
    req = ingest_pb2.AttachDatabaseRequest(
        library=library, name=name, url=url.format(dbs=w.dbs, outside=w.outside)
    )
    return await call(w, "ingest", "AttachDatabase", req, who, deadline_s)


async def databases(w: World, library: str = "team") -> set[str]:
    code, details, items = await call(
        w, "retrieve", "ListDatabases", retrieve_pb2.ListDatabasesRequest(library=library)
    )
    assert code == OK, details
    return {d.name for d in items[0].databases}


BAD_DB_NAMES = ["", "../x", "a/b", "x" * 65, "a\x00", "é", "a b", "a;b", "a'b"]


@pytest.mark.parametrize("name", BAD_DB_NAMES, ids=[repr(n[:10]) for n in BAD_DB_NAMES])
async def test_database_names_are_checked(world: World, name: str) -> None:
    code, details, _ = await attach(world, name, "sqlite:///{dbs}/shop.sqlite")
    assert code == INVALID and "name" in details, (code, details)
    code, details, _ = await call(
        world, "ingest", "DetachDatabase", ingest_pb2.DetachDatabaseRequest(library="team", name=name)
    )
    assert code in (INVALID, NOT_FOUND), (code, details)
    assert await databases(world) == {"shop"}


DB_URLS = [
    "file:///{dbs}/shop.sqlite",
    "mysql://u@127.0.0.1/db",
    "sqlite:///:memory:",
    "sqlite://",
    "sqlite:///",
    "sqlite:///{dbs}/shop.sqlite?mode=rwc",
    "sqlite:///{dbs}/shop.sqlite?vfs=unix-none",
    "sqlite:///{dbs}/new.sqlite",
    "sqlite:///{dbs}/%2e%2e/outside/real.sqlite",
    "sqlite:///{dbs}/shop.sqlite\x00/../../outside/real.sqlite",
    "sqlite://evil.example.com/{dbs}/shop.sqlite",
    "sqlite:////proc/self/root{outside}/real.sqlite",
    "sqlite:///file:{outside}/real.sqlite?mode=ro",
    "duckdb:///:memory:",
    "duckdb:///{dbs}/new.duckdb",
    "duckdb:///{dbs}/shop.sqlite",
    "duckdb:///{dbs}/reads.duckdb",
]


@pytest.mark.parametrize("url", DB_URLS, ids=[u[:40] for u in DB_URLS])
async def test_database_urls_reach_nothing_outside_and_create_nothing(world: World, url: str) -> None:
    before = (tree(world.dbs), tree(world.outside))
    code, details, _ = await attach(world, "probe", url)
    try:
        assert OUTSIDE_SECRET not in details
        if code == OK:  # attached: it is a file under the roots, and it reads nothing from outside
            req = retrieve_pb2.SqlRequest(library="team", database="probe", sql="SELECT * FROM leak")
            _, d2, items = await call(world, "retrieve", "Sql", req)
            assert OUTSIDE_SECRET not in d2 + str(items), items
        else:
            assert code in (
                INVALID,
                DENIED,
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.FAILED_PRECONDITION,
            ), (
                code,
                details,
            )
        assert (tree(world.dbs), tree(world.outside)) == before  # no file created or changed
    finally:
        await call(
            world, "ingest", "DetachDatabase", ingest_pb2.DetachDatabaseRequest(library="team", name="probe")
        )


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{dbs}/endless.sqlite",
        "duckdb:///{dbs}/endless.duckdb",
        "sqlite:///{dbs}/blob.sqlite",
        "sqlite:///{dbs}/ext.sqlite",
    ],
)
async def test_hostile_views_do_not_hang_the_attach_or_the_service(world: World, url: str) -> None:
    """The schema's sample values are read at attach time: through a view that never ends, one that
    builds a 800 MB value, or one that loads an extension."""
    started = time.monotonic()
    code, details, _ = await attach(world, "hostile", url, deadline_s=90)
    took = time.monotonic() - started
    try:
        assert code in (OK, INVALID, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE), (
            details
        )
        assert took < 60, took
        if code == OK:
            view = url.rsplit("/", 1)[-1].split(".")[0]
            view = {"blob": "big"}.get(view, view)
            req = retrieve_pb2.SqlRequest(
                library="team", database="hostile", sql=f"SELECT count(*) FROM {view}"
            )
            c2, d2, _ = await call(world, "retrieve", "Sql", req, deadline_s=60)
            assert c2 in (OK, INVALID, grpc.StatusCode.FAILED_PRECONDITION), (c2, d2)
        assert "shop" in await databases(world)  # the service answers
    finally:
        await call(
            world,
            "ingest",
            "DetachDatabase",
            ingest_pb2.DetachDatabaseRequest(library="team", name="hostile"),
        )


async def test_databases_stay_in_their_library(world: World) -> None:
    for who, library in (("outsider", "other"), ("admin", "other"), ("admin", "bulk")):
        req = retrieve_pb2.SqlRequest(library=library, database="shop", sql="SELECT note FROM orders")
        code, details, items = await call(world, "retrieve", "Sql", req, who)
        assert code == NOT_FOUND and SHOP_MARK not in details + str(items), (who, library, code, details)
    # The same name in another library is another database; detaching it leaves team's.
    code, details, _ = await attach(world, "shop", "sqlite:///{dbs}/blob.sqlite", "other", "outsider")
    assert code == DENIED, details  # writers attach nothing
    code, details, _ = await attach(world, "shop", "sqlite:///{dbs}/ext.sqlite", "other")
    if code == OK:
        await call(
            world, "ingest", "DetachDatabase", ingest_pb2.DetachDatabaseRequest(library="other", name="shop")
        )
    req = retrieve_pb2.SqlRequest(library="team", database="shop", sql="SELECT note FROM orders WHERE id = 1")
    code, details, items = await call(world, "retrieve", "Sql", req, "reader")
    assert code == OK and SHOP_MARK in str(items[0]), details


# --- 4. the ingest queue ----------------------------------------------------------------------------


def upload_job(library: str, name: str, text: str) -> ingest_pb2.SubmitIngestRequest:
    files = [ingest_pb2.FileUpload(filename=name, content=text.encode())]
    return ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(library=library, files=files))


async def job_state(w: World, job_id: str, who: str = "admin") -> Any:
    code, details, items = await call(
        w, "ingest", "GetIngestJob", ingest_pb2.GetIngestJobRequest(job_id=job_id), who
    )
    assert code == OK, details
    return items[0].job


async def until_ended(w: World, job_id: str, limit_s: float = 120) -> Any:
    ended = (
        ingest_pb2.INGEST_JOB_STATE_DONE,
        ingest_pb2.INGEST_JOB_STATE_FAILED,
        ingest_pb2.INGEST_JOB_STATE_CANCELLED,
        ingest_pb2.INGEST_JOB_STATE_DEAD,
    )
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        job = await job_state(w, job_id)
        if job.state in ended:
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")


async def test_others_cannot_cancel_a_job(world: World) -> None:
    code, details, (sub,) = await call(
        world, "ingest", "SubmitIngest", upload_job("team", "jobdoc.md", "# Job\n\nA queued doc.\n"), "writer"
    )
    assert code == OK, details
    job_id = sub.job.job_id
    for who, expected in (("writer2", NOT_FOUND), ("outsider", NOT_FOUND), ("reader", DENIED)):
        code, details, _ = await call(
            world, "ingest", "CancelIngestJob", ingest_pb2.CancelIngestJobRequest(job_id=job_id), who
        )
        assert code == expected, (who, code, details)
    assert (await until_ended(world, job_id)).state == ingest_pb2.INGEST_JOB_STATE_DONE


JOB_IDS = ["", "../x", "%", "' OR 1=1 --", "\x00", "x" * 3000, "*", "0" * 32]


@pytest.mark.parametrize("job_id", JOB_IDS, ids=[repr(j[:10]) for j in JOB_IDS])
async def test_odd_job_ids_read_as_unknown(world: World, job_id: str) -> None:
    for method, req in (
        ("GetIngestJob", ingest_pb2.GetIngestJobRequest(job_id=job_id)),
        ("CancelIngestJob", ingest_pb2.CancelIngestJobRequest(job_id=job_id)),
    ):
        code, details, _ = await call(world, "ingest", method, req, "writer")
        assert code in (NOT_FOUND, INVALID), (method, code, details)


@pytest.mark.parametrize("limit", [-1, 2**31 - 1])
async def test_job_listing_limits(world: World, limit: int) -> None:
    code, details, items = await call(
        world, "ingest", "ListIngestJobs", ingest_pb2.ListIngestJobsRequest(limit=limit), "writer"
    )
    assert code == INVALID or (code == OK and len(items[0].jobs) <= 1000), (code, details)


FLOOD = 300


async def test_a_writer_cannot_flood_the_queue(world: World) -> None:
    ids: list[str] = []
    refused: list[tuple[Any, str]] = []
    try:
        for n in range(FLOOD):
            code, details, items = await call(
                world,
                "ingest",
                "SubmitIngest",
                upload_job("flood", f"f{n}.md", f"# F{n}\n\nflood {n}\n"),
                "writer",
            )
            if code != OK:
                refused.append((code, details))
                break
            ids.append(items[0].job.job_id)
        assert refused and refused[0][0] == EXHAUSTED, (len(ids), refused)
        assert "ingest.job_pending_limit" in refused[0][1], refused  # the limit is named
    finally:
        for job_id in ids:
            await call(
                world, "ingest", "CancelIngestJob", ingest_pb2.CancelIngestJobRequest(job_id=job_id), "writer"
            )


# --- 5. TuneEmbedder --------------------------------------------------------------------------------


def tune(library: str, **kw: Any) -> ingest_pb2.TuneEmbedderRequest:
    return ingest_pb2.TuneEmbedderRequest(library=library, **kw)


async def test_tuning_is_refused_to_writers_and_readers(world: World) -> None:
    for who, library, why in (
        ("writer", "team", "admin"),
        ("reader", "team", "admin"),
    ):
        code, details, _ = await call(world, "ingest", "TuneEmbedder", tune(library, reembed=True), who)
        assert code == DENIED and why in details, (who, library, code, details)


TUNE_SETTINGS = [
    {"epochs": math.nan},
    {"epochs": math.inf},
    {"epochs": -1.0},
    {"epochs": 1e9},
    {"max_pairs": -1},
    {"max_pairs": 100_001},
    {"max_pairs": 2**31 - 1},
    {"pairs": "../x"},
    {"revert": True, "reembed": True},
]


@pytest.mark.parametrize("settings", TUNE_SETTINGS, ids=[str(s) for s in TUNE_SETTINGS])
async def test_tuning_settings_out_of_range_are_invalid(world: World, settings: dict[str, Any]) -> None:
    code, details, events = await call(
        world, "ingest", "TuneEmbedder", tune("team", **settings), deadline_s=30
    )
    assert code == INVALID, (code, details, [e.stage for e in events])


@pytest.mark.parametrize("library", ["../x", "x" * 65, "a/b", "nothing-here"])
async def test_tuning_odd_libraries(world: World, library: str) -> None:
    code, details, _ = await call(world, "ingest", "TuneEmbedder", tune(library, reembed=True), deadline_s=30)
    assert code == (NOT_FOUND if library == "nothing-here" else INVALID), (code, details)


async def test_concurrent_tunings_are_refused_and_a_disconnect_frees_the_slot(world: World) -> None:
    before = await stats(world, "bulk")
    stub = STUBS["ingest"](world.channels["ingest"])
    first = stub.TuneEmbedder(tune("bulk", reembed=True), metadata=metadata("admin"), timeout=300)
    event = await first.read()  # it runs
    assert event.stage, event
    same = await call(world, "ingest", "TuneEmbedder", tune("bulk", reembed=True), deadline_s=30)
    other = await call(world, "ingest", "TuneEmbedder", tune("team", reembed=True), deadline_s=30)
    first.cancel()  # the client goes away
    assert same[0] == grpc.StatusCode.ALREADY_EXISTS, same[:2]
    assert other[0] == EXHAUSTED, other[:2]
    for _ in range(300):  # the slot is freed once the cancelled run has stopped
        code, details, events = await call(
            world, "ingest", "TuneEmbedder", tune("team", reembed=True), deadline_s=120
        )
        if code != EXHAUSTED and code != grpc.StatusCode.ALREADY_EXISTS:
            break
        await asyncio.sleep(0.1)
    assert code == OK and events[-1].stage == "done", (code, details)
    after = await stats(world, "bulk")
    agreeing(after)
    assert after.libraries[0].embedder == before.libraries[0].embedder == ""
    assert after.libraries[0].chunks == before.libraries[0].chunks


# --- 6. DeleteDocument, Vacuum, Stats --------------------------------------------------------------

DOC_IDS = ["", "*", "%", "' OR '1'='1", "x' OR library = 'other' --", "\x00", "a" * 3000, "roadmap"]


@pytest.mark.parametrize("doc_id", DOC_IDS, ids=[repr(d[:12]) for d in DOC_IDS])
async def test_odd_document_ids_delete_nothing(world: World, doc_id: str) -> None:
    doc_id = world.ids["roadmap.md"] if doc_id == "roadmap" else doc_id  # another library's document
    before = {lib: await docs(world, lib) for lib in ("team", "other")}
    code, details, _ = await call(
        world,
        "ingest",
        "DeleteDocument",
        ingest_pb2.DeleteDocumentRequest(document_id=doc_id, library="team"),
        "writer",
    )
    assert code in (NOT_FOUND, INVALID), (code, details)
    assert {lib: await docs(world, lib) for lib in ("team", "other")} == before


@pytest.mark.parametrize("days", [-1, 2**31 - 1, 1_000_000])
async def test_vacuum_windows_out_of_range(world: World, days: int) -> None:
    code, details, items = await call(
        world, "ingest", "Vacuum", ingest_pb2.VacuumRequest(older_than_days=days)
    )
    if days < 0:
        assert code == INVALID and "older_than_days" in details, (code, details)
    else:  # a window longer than history removes nothing, or is refused naming the field
        assert (code == OK and items[0].versions_removed == 0) or (
            code == INVALID and "older_than_days" in details
        ), (code, details)
    agreeing(await stats(world))


@pytest.mark.parametrize("library", ["../team", "x" * 65, "team\x00", "é", "."])
async def test_stats_of_malformed_libraries_are_invalid(world: World, library: str) -> None:
    code, details, _ = await call(world, "ingest", "Stats", ingest_pb2.StatsRequest(library=library))
    assert code == INVALID and "library name" in details, (code, details)


# --- 7. library names that fit the rule but try to collide ------------------------------------------

ODD_LIBRARIES = ["Team", "team.", "team-x", "-", "..a", "_", "TEAM.lock", "x" * 64]


async def test_odd_library_names_stay_apart(world: World) -> None:
    marks = {lib: f"LIBMARK{n}QUAIL" for n, lib in enumerate(ODD_LIBRARIES)}
    for lib, mark in marks.items():
        summary = await ingest(world, lib, {"m.md": f"# Mark\n\nThis library holds {mark} only.\n"})
        assert summary.indexed == 1, lib
    try:
        for lib, mark in marks.items():
            own = await lexical(world, lib, mark)
            assert len(own) == 1, (lib, own)
            assert await lexical(world, "team", mark) == [], (lib, "seen from team")
            assert list(await docs(world, lib)) == [f"upload://{lib}/m.md"]
        assert await lexical(world, "Team", TEAM_MARK) == []
        s = await stats(world)
        agreeing(s)
        assert {lib.name: lib.documents for lib in s.libraries if lib.name in marks} == dict.fromkeys(
            marks, 1
        )
    finally:
        for lib in marks:
            for doc_id in (await docs(world, lib)).values():
                await call(
                    world,
                    "ingest",
                    "DeleteDocument",
                    ingest_pb2.DeleteDocumentRequest(document_id=doc_id, library=lib),
                )


# --- 8. restore while an ingest runs -----------------------------------------------------------------


async def test_restore_during_an_ingest_leaves_every_store_agreeing(world: World) -> None:
    files = {
        f"r{n}.md": f"# R{n}\n\n" + " ".join(f"Sentence {k} of racing document {n}." for k in range(300))
        for n in range(8)
    }
    uploads = [ingest_pb2.FileUpload(filename=k, content=v.encode()) for k, v in files.items()]
    stub = STUBS["ingest"](world.channels["ingest"])
    stream = stub.Ingest(
        ingest_pb2.IngestRequest(library="race", files=uploads), metadata=metadata("admin"), timeout=300
    )
    while (event := await stream.read()) is not grpc.aio.EOF and not (
        event.HasField("file") and event.file.stage == ingest_pb2.FILE_STAGE_INDEXED
    ):
        pass
    code, details, _ = await call(
        world, "ingest", "RestoreSnapshot", ingest_pb2.RestoreSnapshotRequest(name="seed"), deadline_s=300
    )
    assert code in (OK, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED), (code, details)
    rest = []
    while (event := await stream.read()) is not grpc.aio.EOF:
        rest.append(event)
    assert rest and rest[-1].HasField("summary"), rest[-1:]
    s = await stats(world)
    agreeing(s)
    race = await docs(world, "race")
    lib = next((x for x in s.libraries if x.name == "race"), None)
    assert (lib.documents if lib else 0) == len(race)
    assert set(await docs(world, "team")) >= {"upload://team/handbook.md", "upload://team/bikes.md"}
    await reset(world)
    assert await docs(world, "race") == {}
