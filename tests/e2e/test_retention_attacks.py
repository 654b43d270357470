"""Attacks on three bounds that keep the state from growing with use: each caller's newest feedback
verdicts (services/agent/feedback.py, on SQLite and PostgreSQL), the number of store snapshots and
the disk they may take (ragstack/stores/snapshots.py, also over gRPC), and each caller's newest query
traces (ragstack/traces.py, also over HTTP with API keys).

Written by a helper against the interfaces before it read the code. The six defects it found are
fixed (PostgreSQL feedback puts racing and deadlocking, a trace write's temp file pruned by another
write, stray files taken for traces, one trace id of two owners): their tests pass now.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragstack import auth
from ragstack.config import StateConfig
from ragstack.domain import Feedback, IngestSummary
from ragstack.errors import AlreadyExists, InvalidArgument, ResourceExhausted, RpcError, TraceNotFound
from ragstack.guard.paths import PathGuard
from ragstack.query_trace import QueryTrace
from ragstack.resources import Resources
from ragstack.rpc.clients import IngestClient, open_channel
from ragstack.serve import Stack
from ragstack.state import StateDB, open_state
from ragstack.state.migrations import MigrationRequired
from ragstack.stores import catalog as catalog_store
from ragstack.stores import snapshots
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.snapshots import StoreLifecycle
from ragstack.stores.vectors import VectorStore
from ragstack.traces import TraceStore
from services.agent import feedback
from services.agent.ask import Agent
from services.agent.feedback import FeedbackStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.sources import collect_paths
from tests.conftest import SAMPLES, make_config, start_with
from tests.tools import state as state_tools

FLOOR = 256 * 2**20  # the default of ingest.min_free_mb, in bytes

# =====================================================================================================
# 1. Feedback: each principal's newest `kept` verdicts
# =====================================================================================================


def _verdict(n: int, principal: str, at: str, rating: str = "up") -> Feedback:
    return Feedback(f"{n:032x}", rating, "", principal, f"Q{n}", "team", at)


def _at(n: int) -> str:
    return f"2026-12-01T{n // 60:02d}:{n % 60:02d}:00"


_OPENED: list[StateDB] = []


@pytest.fixture(autouse=True)
def _close_what_was_opened() -> Iterator[None]:
    """Every state connection a test opened is closed after it, passed or failed."""
    yield
    while _OPENED:
        _OPENED.pop().close()


def _db(cfg: StateConfig, data: Path) -> StateDB:
    db = state_tools.store(cfg, data, feedback)
    _OPENED.append(db)
    return db


def _feedback_store(cfg: StateConfig, data: Path, kept: int) -> FeedbackStore:
    return FeedbackStore(_db(cfg, data), kept=kept)


def _by_principal(store: FeedbackStore) -> dict[str, list[str]]:
    """Each principal's verdicts (their questions), as list() orders them."""
    out: dict[str, list[str]] = {}
    for f in store.list(100_000):
        out.setdefault(f.principal, []).append(f.question)
    return out


def test_ties_in_created_at_keep_exactly_what_list_shows_first(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Verdicts given in the same second: the store keeps `kept` of them, and the ones it keeps are
    the ones its own listing puts first (created_at, then trace id), on both backends."""
    store = _feedback_store(state_config, tmp_path, kept=2)
    same = "2026-12-01T10:00:00"
    for n in (3, 1, 4, 2, 0):
        store.put(_verdict(n, "ana", same))
        listed = store.list(100)
        assert len(listed) <= 2
    assert [f.trace_id for f in store.list(100)] == [f"{0:032x}", f"{1:032x}"]
    # A verdict past the others in time still wins over the tie.
    store.put(_verdict(9, "ana", "2026-12-01T10:00:01"))
    assert [f.question for f in store.list(100)] == ["Q9", "Q0"]


def test_re_rating_counts_as_new_and_a_back_dated_verdict_goes_at_once(
    state_config: StateConfig, tmp_path: Path
) -> None:
    store = _feedback_store(state_config, tmp_path, kept=3)
    for n in range(1, 5):
        store.put(_verdict(n, "ana", _at(n)))
    assert _by_principal(store) == {"ana": ["Q4", "Q3", "Q2"]}
    store.put(_verdict(2, "ana", _at(10), "down"))  # re-rated: now the newest
    assert _by_principal(store) == {"ana": ["Q2", "Q4", "Q3"]}
    assert store.list(1)[0].rating == "down"
    store.put(_verdict(1, "ana", _at(11)))  # forgotten earlier, given again: back as the newest
    assert _by_principal(store) == {"ana": ["Q1", "Q2", "Q4"]}
    store.put(_verdict(7, "ana", _at(0)))  # older than every kept one (a skewed clock)
    assert _by_principal(store) == {"ana": ["Q1", "Q2", "Q4"]}


HOSTILE_PRINCIPALS = [
    "ana",
    "ana%",
    "%",
    "_",
    "an_",
    "a%a",
    "ana'--",
    "ana' OR '1'='1",
    "ana:x",
    ":ana",
    "?",
    "ana?",
    "ana\\",
    "ANA",
    "ana ",
    " ana",
    "ana;DELETE FROM feedback",
    "ana\u00e9",
    "",
]


def test_principals_with_sql_and_like_metacharacters_are_trimmed_apart(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Each principal ends with its own newest `kept`; `%`, `_`, quotes, `:` and `?` neither widen
    nor break the trim, and near-identical names (case, spaces) are other people."""
    kept = 2
    store = _feedback_store(state_config, tmp_path, kept=kept)
    for round_ in range(kept + 2):  # interleaved: every put trims while the others hold verdicts
        for i, who in enumerate(HOSTILE_PRINCIPALS):
            n = round_ * 100 + i
            store.put(_verdict(n, who, _at(n)))
    got = _by_principal(store)
    assert set(got) == set(HOSTILE_PRINCIPALS)
    for i, who in enumerate(HOSTILE_PRINCIPALS):
        assert got[who] == [f"Q{(kept + 1) * 100 + i}", f"Q{kept * 100 + i}"], who


def test_kept_one_keeps_only_the_last_verdict_and_leaves_the_others(
    state_config: StateConfig, tmp_path: Path
) -> None:
    store = _feedback_store(state_config, tmp_path, kept=1)
    store.put(_verdict(500, "ben", _at(1)))
    store.put(_verdict(501, "cy", _at(2)))
    for n in range(10, 20):
        store.put(_verdict(n, "ana", _at(n)))
        assert _by_principal(store)["ana"] == [f"Q{n}"]
    store.put(_verdict(12, "ana", _at(30), "down"))  # re-rating a forgotten one
    assert [(f.principal, f.question, f.rating) for f in store.list(10)] == [
        ("ana", "Q12", "down"),
        ("cy", "Q501", "up"),
        ("ben", "Q500", "up"),
    ]


def _indexes(db: StateDB) -> set[str]:
    if db.dialect == "sqlite":
        return {r[0] for r in db.all("SELECT name FROM sqlite_master WHERE type = 'index'")}
    return {r[0] for r in db.all("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")}


def test_a_v1_store_must_be_migrated_and_then_trims_what_it_held(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """A store at schema 1 (before retention) with more verdicts than `kept`: refused until migrated,
    then the index is there and the next put trims that person to `kept`, nobody else."""
    old = open_state(state_config, tmp_path, feedback.STORE, feedback.MIGRATIONS[:1])
    _OPENED.append(old)
    v1 = FeedbackStore(old, kept=1_000)
    for n in range(6):
        v1.put(_verdict(n, "ana", _at(n)))
    v1.put(_verdict(99, "ben", _at(0)))
    assert "feedback_by_principal" not in _indexes(old)
    old.close()
    with pytest.raises(MigrationRequired):
        state_tools.store(state_config, tmp_path, feedback)
    migrated_cfg = state_config.model_copy(update={"auto_migrate": True})
    db = _db(migrated_cfg, tmp_path)
    assert "feedback_by_principal" in _indexes(db)
    store = FeedbackStore(db, kept=2)
    assert len(store.list(100)) == 7  # migrating deletes nothing
    store.put(_verdict(10, "ana", _at(10)))
    assert _by_principal(store) == {"ana": ["Q10", "Q5"], "ben": ["Q99"]}
    # Opened again without auto_migrate: it is current now.
    _db(state_config, tmp_path)


def _run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrap(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=wrap, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def test_concurrent_puts_of_different_principals_each_keep_their_newest(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """Several writers (each its own connection, as replicas of the agent are), one principal each:
    no put fails and each ends with exactly its newest `kept`."""
    kept, writers, puts = 3, 6, 15
    stores = [_feedback_store(state_config, tmp_path, kept) for _ in range(writers)]

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(puts):
                stores[w].put(_verdict(w * 1000 + i, f"p{w}", _at(i)))

        return run

    assert _run_threads([writer(w) for w in range(writers)]) == []
    got = _by_principal(stores[0])
    assert got == {
        f"p{w}": [f"Q{w * 1000 + i}" for i in range(puts - 1, puts - 1 - kept, -1)] for w in range(writers)
    }


def test_concurrent_puts_on_sqlite_never_leave_more_than_kept(tmp_path: Path) -> None:
    """SQLite takes its write lock up front: several connections putting for the same principal,
    new verdicts and re-ratings mixed, end with at most `kept` and no failure."""
    kept, writers = 3, 5
    stores = [_feedback_store(StateConfig(), tmp_path, kept) for _ in range(writers)]

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(20):
                n = (i % 6) if i % 3 == 0 else w * 100 + i  # some re-ratings of shared ids
                stores[w].put(_verdict(n, "ana", f"2026-12-01T10:{i:02d}:{w:02d}"))

        return run

    assert _run_threads([writer(w) for w in range(writers)]) == []
    assert len(stores[0].list(1_000)) == kept


class _PausedDB:
    """A StateDB whose statements run as they would, except that the trimming DELETE of a put first
    calls `before_delete` (inside the put's transaction, after its insert): a test can line up what
    two writers on two connections do at the same moment."""

    def __init__(self, db: StateDB, before_delete: Callable[[], None]) -> None:
        self._db = db
        self._before_delete = before_delete
        self.dialect = db.dialect

    @contextmanager
    def transaction(self) -> Iterator[_PausedDB]:
        with self._db.transaction():
            yield self

    def execute(self, sql: str, params: Any = ()) -> int:
        if sql.lstrip().upper().startswith("DELETE"):
            self._before_delete()
        return self._db.execute(sql, params)

    def all(self, sql: str, params: Any = ()) -> list[Any]:
        return self._db.all(sql, params)

    def one(self, sql: str, params: Any = ()) -> Any:
        return self._db.one(sql, params)

    def one_at_a_time(self, key: str) -> None:
        self._db.one_at_a_time(key)

    @property
    def offset_only(self) -> str:
        return self._db.offset_only

    def close(self) -> None:
        self._db.close()


def _pg_config() -> StateConfig:
    return state_tools.config_for("postgres")


def _overlapping(
    cfg: StateConfig, data: Path, kept: int, first: Feedback, second: Feedback
) -> list[BaseException]:
    """Two writers on two connections at the same moment: the first has inserted and is about to
    trim when the second starts; the first trims only once the second waits for a lock (or is done)."""
    second_db = _db(cfg, data)
    second_pid = second_db._conn.info.backend_pid
    watcher = _db(cfg, data)
    started, done = threading.Event(), threading.Event()

    def until_the_second_waits() -> None:
        started.set()
        deadline = time.monotonic() + 20
        waiting = "SELECT count(*) FROM pg_locks WHERE pid = ? AND NOT granted"
        while not done.is_set() and not watcher.one(waiting, (second_pid,))[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the second put neither waited nor finished"
            time.sleep(0.01)

    slow = FeedbackStore(_PausedDB(_db(cfg, data), until_the_second_waits), kept=kept)  # type: ignore[arg-type]
    fast = FeedbackStore(second_db, kept=kept)

    def later() -> None:
        assert started.wait(20)
        try:
            fast.put(second)
        finally:
            done.set()

    errors = _run_threads([lambda: (slow.put(first), None)[1], later])
    watcher.close()
    return errors


def test_two_concurrent_new_verdicts_never_leave_more_than_kept_on_postgres(tmp_path: Path) -> None:
    cfg = _pg_config()
    plain = _feedback_store(cfg, tmp_path, kept=2)
    plain.put(_verdict(1, "ana", _at(1)))
    plain.put(_verdict(2, "ana", _at(2)))
    errors = _overlapping(cfg, tmp_path, 2, _verdict(3, "ana", _at(3)), _verdict(4, "ana", _at(4)))
    assert errors == []
    assert _by_principal(plain) == {"ana": ["Q4", "Q3"]}


def test_a_re_rating_is_not_lost_to_a_concurrent_trim_on_postgres(tmp_path: Path) -> None:
    cfg = _pg_config()
    plain = _feedback_store(cfg, tmp_path, kept=2)
    plain.put(_verdict(1, "ana", _at(1)))
    plain.put(_verdict(2, "ana", _at(2)))
    re_rated, go = threading.Event(), threading.Event()

    def hold() -> None:  # the re-rating: inserted, its trim waits for `go`
        re_rated.set()
        assert go.wait(20)

    slow = FeedbackStore(_PausedDB(_db(cfg, tmp_path), hold), kept=2)  # type: ignore[arg-type]
    fast_db = _db(cfg, tmp_path)
    fast_pid = fast_db._conn.info.backend_pid
    fast = FeedbackStore(fast_db, kept=2)
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> threading.Thread:
        def target() -> None:
            try:
                call()
            except BaseException as err:
                errors.append(err)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    first = run(lambda: slow.put(_verdict(1, "ana", _at(5), "down")))  # Q1 re-rated: the newest
    assert re_rated.wait(20)
    second = run(lambda: fast.put(_verdict(3, "ana", _at(4))))  # a new verdict, trims one
    deadline = time.monotonic() + 20
    while not plain._db.one("SELECT count(*) FROM pg_locks WHERE pid = ? AND NOT granted", (fast_pid,))[0]:  # type: ignore[index]
        assert time.monotonic() < deadline, "the second put never waited for the first"
        time.sleep(0.01)
    go.set()
    first.join(30)
    second.join(30)
    assert errors == []
    assert [(f.question, f.rating) for f in plain.list(10)] == [("Q1", "down"), ("Q3", "up")]


def test_concurrent_re_ratings_never_fail_on_postgres(tmp_path: Path) -> None:
    cfg = _pg_config()
    plain = _feedback_store(cfg, tmp_path, kept=3)
    for n in (1, 2, 3):
        plain.put(_verdict(n, "ana", _at(n)))
    errors = _overlapping(
        cfg, tmp_path, 2, _verdict(1, "ana", _at(10), "down"), _verdict(2, "ana", _at(11), "down")
    )
    assert errors == [], [str(e)[:200] for e in errors]
    assert _by_principal(plain) == {"ana": ["Q2", "Q1"]}


# =====================================================================================================
# 2. Snapshots: at most ingest.max_snapshots, and never filling the disk
# =====================================================================================================

EVERYWHERE = PathGuard([Path("/")])


@dataclass
class Stores:
    data: Path
    docs: Path
    catalog: Catalog
    vectors: VectorStore
    lexical: LexicalStore
    pipeline: IngestPipeline

    def lifecycle(self, max_snapshots: int) -> StoreLifecycle:
        return StoreLifecycle(
            self.data, self.catalog, self.vectors, self.lexical, max_snapshots=max_snapshots
        )

    def ingest(self, *names: str) -> None:
        for name in names:
            shutil.copy(SAMPLES / name, self.docs / name)
        events = list(self.pipeline.run(collect_paths([str(self.docs)], EVERYWHERE), "default"))
        assert isinstance(events[-1], IngestSummary) and events[-1].failed == 0, events[-1]

    def documents(self) -> set[str]:
        return {d.source.rsplit("/", 1)[-1] for d in self.catalog.list("default")}

    def branches(self) -> list[str]:
        return sorted(self.vectors._open().branches.list())

    def snapshot_entries(self) -> list[str]:
        folder = self.data / "snapshots"
        return sorted(p.name for p in folder.iterdir()) if folder.exists() else []

    def copied(self) -> int:
        """What a snapshot copies, counted as the lifecycle counts it (tantivy + the catalog files)."""
        catalog = self.data / "catalog.sqlite"
        parts = [snapshots.folder_bytes(Path(f"{catalog}{s}")) for s in ("", "-wal", "-shm")]
        return snapshots.folder_bytes(self.data / "tantivy") + sum(parts)


@pytest.fixture
def stores(tmp_path: Path, embedder: Any) -> Stores:
    docs = tmp_path / "docs"
    docs.mkdir()
    data = tmp_path / "data"
    catalog = Catalog(state_tools.store(StateConfig(), data, catalog_store))
    vectors = VectorStore(data / "lancedb", embedder.dimension, writer=True)
    lexical = LexicalStore(data / "tantivy" / "chunks", writer=True)
    pipeline = IngestPipeline(
        catalog, vectors, lexical, embedder, chunk_tokens=256, overlap_sentences=1, max_file_bytes=200_000
    )
    s = Stores(data, docs, catalog, vectors, lexical, pipeline)
    s.ingest("bm25.md")
    return s


def _assert_no_trace_of(s: Stores, name: str) -> None:
    assert not (s.data / "snapshots" / name).exists()
    assert not [e for e in s.snapshot_entries() if e.startswith((f".new-{name}", f".deleting-{name}"))]
    assert f"snapshot-{name}" not in s.branches()


def test_leftovers_do_not_count_the_name_check_comes_first_and_delete_frees_a_slot(stores: Stores) -> None:
    s = stores
    folder = s.data / "snapshots"
    # What interrupted creates and deletes leave, and strays: none is a snapshot.
    for stray in (".new-ghost-0a1b2c3d", ".deleting-old-0a1b2c3d", "not-a-snapshot"):
        (folder / stray).mkdir(parents=True)
    (folder / ".new-ghost-0a1b2c3d" / "manifest.json").write_text(json.dumps({"name": "ghost"}))
    (folder / "README").write_text("hands off")
    table = s.vectors._open()  # a branch an interrupted create left, without its folder
    table.branches.create("snapshot-ghost", from_version=int(table.version))
    bounded = s.lifecycle(max_snapshots=2)
    bounded.create("one")
    bounded.create("two")
    assert not [e for e in s.snapshot_entries() if e.startswith(".")]  # tidied
    assert s.branches() == ["snapshot-one", "snapshot-two"]
    with pytest.raises(
        ResourceExhausted, match=r"2 snapshots exist, the limit is 2 \(ingest\.max_snapshots\)"
    ):
        bounded.create("three")
    _assert_no_trace_of(s, "three")
    with pytest.raises(AlreadyExists):  # the name is checked before the limit
        bounded.create("one")
    with pytest.raises(InvalidArgument):
        bounded.create("../three")
    assert [x.name for x in bounded.snapshots()] == ["one", "two"]
    # A second lifecycle on the same folder counts the same snapshots.
    with pytest.raises(ResourceExhausted):
        s.lifecycle(max_snapshots=2).create("three")
    bounded.delete("one")
    assert "snapshot-one" not in s.branches()
    bounded.create("three")
    assert [x.name for x in bounded.snapshots()] == ["two", "three"]
    assert s.lifecycle(max_snapshots=1).snapshots() == bounded.snapshots()
    with pytest.raises(ResourceExhausted, match="the limit is 1"):  # a lowered limit refuses, keeps both
        s.lifecycle(max_snapshots=1).create("four")
    assert len(bounded.snapshots()) == 2


def test_a_failed_create_leaves_nothing_and_uses_no_slot(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = stores
    bounded = s.lifecycle(max_snapshots=1)

    def broken(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    for part, method in ((s.lexical, "copy_to"), (s.catalog, "backup_to")):  # after the branches exist
        with monkeypatch.context() as m:
            m.setattr(part, method, broken)
            with pytest.raises(OSError, match="No space left"):
                bounded.create("broken")
        _assert_no_trace_of(s, "broken")
        assert s.snapshot_entries() == []
        assert bounded.snapshots() == []
    bounded.create("broken")  # the name and the one slot are free
    assert [x.name for x in bounded.snapshots()] == ["broken"] and "snapshot-broken" in s.branches()


def test_the_disk_floor_is_exact_leaves_nothing_and_keeps_snapshots_restorable(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = stores
    bounded = s.lifecycle(max_snapshots=5)
    real = shutil.disk_usage(s.data)
    asked: list[Path] = []
    spare = {"bytes": 0}

    def fake(path: Any) -> Any:
        asked.append(Path(path))
        return real._replace(free=s.copied() + FLOOR + spare["bytes"])

    monkeypatch.setattr(snapshots.shutil, "disk_usage", fake)
    spare["bytes"] = -1  # one byte short of the floor after the copies
    with pytest.raises(ResourceExhausted, match=r"at least 256 MiB must stay free"):
        bounded.create("first")
    _assert_no_trace_of(s, "first")
    assert s.snapshot_entries() == [] and s.branches() == []
    assert asked and all(p == s.data or s.data in p.parents for p in asked)  # the disk the copies go to
    spare["bytes"] = 0  # exactly the floor left: allowed
    bounded.create("first")
    before = s.documents()
    s.ingest("chunking.md", "reranking.md")
    assert s.documents() > before
    spare["bytes"] = -(s.copied() + FLOOR)  # a full disk
    with pytest.raises(ResourceExhausted, match=r"MiB are free on the disk of"):
        bounded.create("second")
    _assert_no_trace_of(s, "second")
    monkeypatch.undo()
    bounded.restore("first")
    assert s.documents() == before
    assert [x.name for x in bounded.snapshots()] == ["first"]


def test_concurrent_creates_never_pass_the_limit(stores: Stores) -> None:
    s = stores
    bounded = s.lifecycle(max_snapshots=2)
    made: list[str] = []
    barrier = threading.Barrier(5, timeout=30)

    def create(name: str) -> Callable[[], None]:
        def run() -> None:
            barrier.wait()
            made.append(bounded.create(name).name)

        return run

    errors = _run_threads([create(f"c{i}") for i in range(5)])
    assert len(made) == 2 and len(errors) == 3 and all(isinstance(e, ResourceExhausted) for e in errors)
    assert sorted(x.name for x in bounded.snapshots()) == sorted(made)
    assert sorted(b.removeprefix("snapshot-") for b in s.branches()) == sorted(made)
    assert s.snapshot_entries() == sorted(made)


# =====================================================================================================
# 3. Traces: each caller's newest traces.retention, in a folder of its own
# =====================================================================================================


def _tid(n: int) -> str:
    return f"{n:032x}"


def _digest_folder(root: Path, owner: str) -> Path:
    return root / "by" / hashlib.sha256(owner.encode()).hexdigest()[:32]


def _aged(path: Path | None, n: int) -> None:
    """Gives a written trace a distinct age: larger `n`, newer."""
    assert path is not None
    os.utime(path, ns=(1_700_000_000_000_000_000 + n * 10**9,) * 2)


HOSTILE_OWNERS = [
    "../x",
    "..",
    ".",
    "/",
    "/etc",
    "",
    "x" * 10_000,
    "\u00e9\u2603\U0001f600",
    "a\x00b",
    "by",
    "LOCAL",
]
HOSTILE_OWNERS += ["local ", "local/..", "*", "by/*", "\\..\\x"]


def test_owner_names_cannot_leave_the_traces_folder_or_share_one(tmp_path: Path) -> None:
    root = tmp_path / "traces"
    store = TraceStore(root, retention=3)
    root.mkdir()
    outside = set(tmp_path.iterdir())
    folders = set()
    for i, owner in enumerate(HOSTILE_OWNERS):
        path = store.write(_tid(i), {"owner": owner}, owner=owner)
        assert path is not None and path.resolve().parent.parent == (root / "by").resolve(), owner
        assert len(path.parent.name) == 32 and path.parent.name != owner
        folders.add(path.parent)
        assert store.read(_tid(i)) == {"owner": owner}
    assert len(folders) == len(HOSTILE_OWNERS)  # one folder each
    assert set(tmp_path.iterdir()) == outside and [p.name for p in root.iterdir()] == ["by"]
    assert {p.stem for p in store.list()} == {_tid(i) for i in range(len(HOSTILE_OWNERS))}


def test_one_caller_flooding_never_evicts_another(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=3)
    _aged(store.write(_tid(1), {"who": "local"}), 1)  # the local admin's, in the top folder
    _aged(store.write(_tid(2), {"who": "ben"}, owner="ben"), 2)
    _aged(store.write(_tid(3), {"who": "ana%"}, owner="ana%"), 3)
    for n in range(100, 160):
        _aged(store.write(_tid(n), {"who": "ana"}, owner="ana"), n)
    for n, who in ((1, "local"), (2, "ben"), (3, "ana%")):
        assert store.read(_tid(n)) == {"who": who}
    assert sorted(p.stem for p in _digest_folder(tmp_path, "ana").iterdir()) == [
        _tid(n) for n in (157, 158, 159)
    ]
    for n in (100, 156):
        with pytest.raises(TraceNotFound):
            store.read(_tid(n))
    # The local admin's flood does not reach into by/ either.
    for n in range(200, 220):
        _aged(store.write(_tid(n), {"who": "local"}), n)
    assert store.read(_tid(2)) == {"who": "ben"} and store.read(_tid(159)) == {"who": "ana"}
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"{_tid(n)}.json" for n in (217, 218, 219)]


def test_list_spans_many_owners_newest_first(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=2)
    expected = []
    n = 0
    for round_ in range(3):
        for owner in [f"user{i}" for i in range(25)] + ["local"]:
            n += 1
            _aged(store.write(_tid(n), {"n": n}, owner=owner), n)
            if round_ > 0:
                expected.append(_tid(n))
    listed = [p.stem for p in store.list()]
    assert listed == list(reversed(expected))  # 26 owners x their 2 newest, newest first
    for tid in listed:
        assert store.read(tid)["n"] == int(tid, 16)


@pytest.mark.parametrize(
    "bad",
    [
        "../..",
        "../" + "a" * 29,
        "..%2F..",
        "A" * 32,
        "a" * 31,
        "a" * 33,
        "a" * 32 + "\n",
        "by/" + "a" * 29,
        "",
    ],
)
def test_reads_of_odd_ids_are_refused(tmp_path: Path, bad: str) -> None:
    store = TraceStore(tmp_path / "traces", retention=2)
    store.write(_tid(1), {"n": 1}, owner="ana")
    (tmp_path / ("a" * 32 + ".json")).write_text("{}")  # beside the folder: must never be read
    with pytest.raises(InvalidArgument):
        store.read(bad)
    with pytest.raises(InvalidArgument):
        store.write(bad, {}, owner="ana")


def test_stray_entries_in_by_are_ignored_by_write_and_read(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=2)
    by = tmp_path / "by"
    by.mkdir()
    (by / "README").write_text("not a trace")
    (by / f"{_tid(5)}.json").write_text('{"who": "nobody"}')  # one level too high
    stray = by / "0123"
    stray.mkdir()
    (stray / "notes.txt").write_text("x")
    for n in range(1, 5):
        _aged(store.write(_tid(n), {"n": n}, owner="ana"), n)
    assert store.read(_tid(4)) == {"n": 4}
    with pytest.raises(TraceNotFound):
        store.read(_tid(5))
    assert (by / "README").exists() and (stray / "notes.txt").exists()
    assert [p.stem for p in store.list()] == [_tid(4), _tid(3)]


def test_a_write_left_half_done_does_not_break_listing(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ragstack.cli.main import cli

    cfg = make_config(tmp_path / "data")
    store = TraceStore(cfg.traces_dir, cfg.traces.retention)
    trace = QueryTrace(
        trace_id=_tid(1), principal="ana", question="Where is BM25 defined?", library="default"
    )
    store.write(_tid(1), trace.to_json(), owner="ana")
    (_digest_folder(cfg.traces_dir, "ana") / ".tmp-k3j2h1.json").write_text(
        '{"trace_id": "'
    )  # killed mid-write
    assert [p.stem for p in store.list()] == [_tid(1)]
    shown = CliRunner().invoke(cli, ["--config", str(tmp_path / "data.yaml"), "traces", "list"])
    assert shown.exit_code == 0, shown.output
    assert _tid(1) in shown.output


def test_concurrent_writers_of_different_owners_and_of_one_owner_under_retention(tmp_path: Path) -> None:
    """Writers of different callers never touch each other's folder; writers of one caller with room
    to spare lose nothing."""
    store = TraceStore(tmp_path, retention=5)
    roomy = TraceStore(tmp_path, retention=10_000)

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(40):
                store.write(_tid(w * 1000 + i), {"w": w, "i": i}, owner=f"user{w}")
                roomy.write(_tid(900_000 + w * 1000 + i), {"w": w, "i": i}, owner="shared")

        return run

    assert _run_threads([writer(w) for w in range(6)]) == []
    for w in range(6):
        assert len(list(_digest_folder(tmp_path, f"user{w}").glob("*.json"))) == 5
        assert store.read(_tid(w * 1000 + 39)) == {"w": w, "i": 39}  # each one's last is kept
    assert len(list(_digest_folder(tmp_path, "shared").glob("*.json"))) == 240


def test_a_slow_write_survives_other_writes_of_the_same_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ragstack.traces as traces_mod

    store = TraceStore(tmp_path, retention=2)
    dumped, go = threading.Event(), threading.Event()
    slow_thread: list[threading.Thread] = []
    real_dump = traces_mod.json.dump

    def dump(obj: Any, fh: Any, **kw: Any) -> None:
        real_dump(obj, fh, **kw)
        if slow_thread and threading.current_thread() is slow_thread[0]:
            dumped.set()
            assert go.wait(20)

    monkeypatch.setattr(traces_mod.json, "dump", dump)
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            store.write(_tid(1), {"n": 1}, owner="ana")
        except BaseException as err:
            errors.append(err)

    slow_thread.append(threading.Thread(target=slow))
    slow_thread[0].start()
    assert dumped.wait(20)
    time.sleep(0.01)
    store.write(_tid(2), {"n": 2}, owner="ana")
    store.write(_tid(3), {"n": 3}, owner="ana")
    go.set()
    slow_thread[0].join(20)
    assert errors == [], errors
    assert store.read(_tid(1)) == {"n": 1}
    assert len(list(_digest_folder(tmp_path, "ana").glob("*.json"))) == 2


def _trace_agent(store: TraceStore) -> Agent:
    """An Agent for its trace() alone (its answer path is not used here)."""
    agent = Agent.__new__(Agent)
    agent._traces = store
    return agent


@contextmanager
def _as(name: str, role: auth.Role = auth.Role.READER) -> Iterator[None]:
    token = auth.PRINCIPAL.set(auth.Principal(name, role))
    try:
        yield
    finally:
        auth.PRINCIPAL.reset(token)


def test_agent_trace_shows_owners_and_admins_only(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=2)
    agent = _trace_agent(store)
    for n, who in ((1, "ana"), (2, "ben")):
        store.write(
            _tid(n),
            QueryTrace(trace_id=_tid(n), principal=who, question=f"q{n}", library="default").to_json(),
            owner=who,
        )
    with _as("ana"):
        assert agent.trace(_tid(1))["question"] == "q1"
        with pytest.raises(TraceNotFound):
            agent.trace(_tid(2))
    with _as("root", auth.Role.ADMIN):
        assert agent.trace(_tid(2))["question"] == "q2"


def test_one_trace_id_of_two_owners_stays_readable_by_each(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=2)
    agent = _trace_agent(store)
    shared = "ab" * 16
    for who in ("ben", "ana", "local"):
        store.write(
            shared,
            QueryTrace(trace_id=shared, principal=who, question=f"by {who}", library="default").to_json(),
            owner=who,
        )
    seen = {}
    for who in ("ana", "ben"):
        with _as(who):
            try:
                seen[who] = agent.trace(shared)["question"]
            except TraceNotFound:
                seen[who] = "NOT FOUND"
    assert seen == {"ana": "by ana", "ben": "by ben"}


# =====================================================================================================
# Over the real stack: snapshots over gRPC, traces over HTTP with API keys
# =====================================================================================================

TOKEN = "svc-token-retention-5c2e81f0a7"
KEYS = {
    "ana": {"key": "ana-key-3f8e1c0b9a7d65", "role": "reader"},
    "ben": {"key": "ben-key-8c1d2e3f4a5b60", "role": "reader"},
    "boss": {"key": "boss-key-0a9b8c7d6e5f41", "role": "admin"},
}
H = {name: {"x-api-key": spec["key"]} for name, spec in KEYS.items()}
RETENTION = 2


@pytest.fixture(scope="module")
async def keyed(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    cfg = make_config(
        tmp_path_factory.mktemp("retention") / "data",
        gateway={"api_keys": [{"name": n, "libraries": ["*"], **spec} for n, spec in KEYS.items()]},
        services={"token": TOKEN},
        ingest={"graph": False, "max_snapshots": 1},
        traces={"retention": RETENTION},
        generation={"feedback_kept": 1},
    )
    stack = await start_with(cfg, resources)
    channel = open_channel(stack.peers["ingest"], token=TOKEN)
    ingest = IngestClient(channel, 120)
    events = [e async for e in ingest.ingest(files=[(n, (SAMPLES / n).read_bytes()) for n in ("bm25.md",)])]
    await channel.close()
    assert isinstance(events[-1], IngestSummary) and events[-1].indexed == 1
    yield stack
    await stack.stop()


async def _rpc_fails(code: str, call: Any) -> str:
    with pytest.raises(RpcError) as err:
        await call
    assert err.value.code == code, err.value
    return err.value.message


async def test_grpc_refuses_a_snapshot_past_the_limit_or_the_disk_with_resource_exhausted(
    keyed: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = open_channel(keyed.peers["ingest"], token=TOKEN)
    ingest = IngestClient(channel, 120)
    folder = keyed.cfg.data_dir / "snapshots"
    await ingest.create_snapshot("one")
    message = await _rpc_fails("RESOURCE_EXHAUSTED", ingest.create_snapshot("two"))
    assert "1 snapshots exist, the limit is 1 (ingest.max_snapshots)" in message
    assert "exists" in await _rpc_fails("ALREADY_EXISTS", ingest.create_snapshot("one"))
    assert [x.name for x in await ingest.list_snapshots()] == ["one"]
    await ingest.delete_snapshot("one")
    real = shutil.disk_usage("/")
    monkeypatch.setattr(snapshots.shutil, "disk_usage", lambda _p: real._replace(free=FLOOR))
    message = await _rpc_fails("RESOURCE_EXHAUSTED", ingest.create_snapshot("two"))
    assert "256 MiB must stay free" in message
    monkeypatch.undo()
    assert await ingest.list_snapshots() == []
    assert [p.name for p in folder.iterdir()] == []  # no copy, no staging folder left
    await ingest.create_snapshot("two")
    restored, _ = await ingest.restore_snapshot("two")
    assert restored.name == "two" and restored.documents == 1
    await ingest.delete_snapshot("two")
    await channel.close()


async def test_http_one_readers_questions_never_push_out_anothers_trace(keyed: Stack) -> None:
    async with httpx.AsyncClient(base_url=keyed.gateway_url, timeout=60) as http:

        async def ask(who: str, question: str) -> str:
            r = await http.post("/v1/query", json={"question": question, "stream": False}, headers=H[who])
            assert r.status_code == 200, r.text
            return str(r.json()["trace_id"])

        bens = await ask("ben", "What does BM25 score?")
        anas = [
            await ask("ana", f"What is term frequency saturation, take {i}?") for i in range(RETENTION + 2)
        ]
        mine = await http.get(f"/v1/traces/{bens}", headers=H["ben"])
        assert mine.status_code == 200 and mine.json()["principal"] == "ben"
        theirs = await http.get(f"/v1/traces/{bens}", headers=H["ana"])
        assert theirs.status_code == 404 and "BM25 score" not in theirs.text
        assert (await http.get(f"/v1/traces/{bens}", headers=H["boss"])).status_code == 200
        for gone in anas[:2]:
            assert (await http.get(f"/v1/traces/{gone}", headers=H["ana"])).status_code == 404
        for kept in anas[2:]:
            r = await http.get(f"/v1/traces/{kept}", headers=H["ana"])
            assert r.status_code == 200 and r.json()["principal"] == "ana"
            assert (await http.get(f"/v1/traces/{kept}", headers=H["ben"])).status_code == 404
        # Feedback goes only on a trace still kept.
        fb = {"trace_id": anas[0], "rating": "up"}
        assert (await http.post("/v1/feedback", json=fb, headers=H["ana"])).status_code == 404
        for kept in anas[2:]:  # generation.feedback_kept is 1: only her last verdict stays
            fb = {"trace_id": kept, "rating": "down"}
            assert (await http.post("/v1/feedback", json=fb, headers=H["ana"])).status_code == 201
        fb = {"trace_id": bens, "rating": "up"}
        assert (await http.post("/v1/feedback", json=fb, headers=H["ben"])).status_code == 201
        listed = (await http.get("/v1/feedback", headers=H["boss"])).json()["feedback"]
        assert sorted((f["principal"], f["trace_id"]) for f in listed) == [("ana", anas[-1]), ("ben", bens)]
        assert (await http.get("/v1/feedback", headers=H["ana"])).status_code == 403
        for odd in (
            "..%2F..%2Fconfig",
            "%2E%2E",
            "..",
            anas[-1].upper(),
            anas[-1] + ".json",
            anas[-1] + "%00",
        ):
            r = await http.get(f"/v1/traces/{odd}", headers=H["ana"])
            assert r.status_code in (400, 404), (odd, r.status_code)
            assert "principal" not in r.text
