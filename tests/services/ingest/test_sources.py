"""Sources kept in sync, below the RPCs: a folder source on the real pipeline (LanceDB, tantivy and
SQLite in a temp dir, the real embedder), its polls, jobs, retries, dead letters and breaker."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ragstack.config import SourceConfig, StateConfig
from ragstack.domain import FileProgress, FileStage, IngestSummary
from ragstack.errors import Cancelled
from ragstack.guard.paths import PathGuard
from ragstack.stores import catalog as catalog_store
from ragstack.stores.catalog import Catalog
from ragstack.stores.lexical import LexicalStore
from ragstack.stores.vectors import VectorStore
from ragstack.v1 import ingest_pb2
from services.ingest import jobs as job_store
from services.ingest.jobs import JobStore
from services.ingest.pipeline import IngestPipeline
from services.ingest.syncing import state as source_state
from services.ingest.syncing import sync
from services.ingest.syncing.backends import Backend, Checkpoint, FolderBackend, ScanError, ScanStopped
from services.ingest.syncing.poller import SourcePoller, poll_principal
from services.ingest.syncing.state import CLOSED, HALF_OPEN, OPEN, Retries, SourceStore
from services.ingest.syncing.sync import SourceSync
from tests.tools import state as state_tools


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Reads:
    """The folder backend, counting the files it reads; `listed` is called with each item it lists."""

    def __init__(self, inner: Backend, listed: Callable[[str], None]) -> None:
        self.inner = inner
        self.count = 0
        self.listed = listed

    def scan(self, known, wanted):  # type: ignore[no-untyped-def]
        for entry in self.inner.scan(known, wanted):
            self.listed(entry.name)
            if hasattr(entry, "read"):
                read = entry.read

                def counted(read=read):  # type: ignore[no-untyped-def]
                    self.count += 1
                    return read()

                entry = type(entry)(entry.source, entry.name, entry.revision, entry.size, counted, entry.kind)
            yield entry

    def close(self) -> None:
        self.inner.close()


class World:
    def __init__(self, tmp: Path, embedder, state: StateConfig) -> None:  # type: ignore[no-untyped-def]
        self.folder = tmp / "inbox"
        self.folder.mkdir()
        self.clock = Clock()
        self.catalog = Catalog(state_tools.store(StateConfig(), tmp, catalog_store))
        self.pipeline = IngestPipeline(
            self.catalog,
            VectorStore(tmp / "lance", embedder.dimension, writer=True),
            LexicalStore(tmp / "tantivy", writer=True),
            embedder,
            chunk_tokens=256,
            overlap_sentences=1,
            max_file_bytes=20_000,
        )
        self.store = SourceStore(
            state_tools.store(state, tmp, source_state),
            Retries(attempts=3, backoff_s=10, breaker_failures=3, breaker_cooldown_s=60),
            now=self.clock,
        )
        self.paths = PathGuard([tmp])
        self.backends: list[Reads] = []
        self.listed: Callable[[str], None] = lambda name: None
        self.sync = SourceSync(self.store, self.pipeline, self._open, "default")
        self.jobs = JobStore(state_tools.store(state, tmp, job_store))
        self.poller = SourcePoller(self.store, self.sync, self.jobs, lambda: None, watch=False)

    def limit_scans(self, seconds: float) -> None:
        """`ingest.source_scan_timeout_s` at `seconds` for the syncs and polls from now on."""
        self.sync = SourceSync(self.store, self.pipeline, self._open, "default", seconds)
        self.poller = SourcePoller(self.store, self.sync, self.jobs, lambda: None, watch=False)

    def _open(self, spec: SourceConfig, checkpoint: Checkpoint) -> Backend:
        backend = Reads(FolderBackend(spec.url, self.paths, 1000, checkpoint), lambda n: self.listed(n))
        self.backends.append(backend)
        return backend

    def add(self, **spec: object) -> SourceConfig:
        source = SourceConfig.model_validate(
            {"name": "notes", "kind": "folder", "url": str(self.folder), "library": "lib", **spec}
        )
        self.store.add(source)
        return source

    def write(self, name: str, text: str) -> Path:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def sync_now(self, name: str = "notes") -> tuple[dict[str, FileStage], IngestSummary]:
        """Runs the source's job as the worker would; (source -> last stage, summary)."""
        stages: dict[str, FileStage] = {}
        summary = None
        for event in self.sync.run(name):
            if isinstance(event, IngestSummary):
                summary = event
            else:
                stages[event.source] = event.stage
        assert summary is not None
        return stages, summary

    def indexed(self) -> dict[str, str]:
        return {d.source: d.revision for d in self.catalog.list("lib")}


@pytest.fixture
def world(tmp_path: Path, embedder, state_config: StateConfig) -> Iterator[World]:  # type: ignore[no-untyped-def]
    w = World(tmp_path, embedder, state_config)
    yield w
    w.store.close()
    w.jobs.close()


def test_an_added_a_changed_and_a_deleted_file_are_picked_up_by_one_poll(world: World) -> None:
    keep = world.write("keep.md", "# Keep\n\nThe lighthouse keeper logs the tides every evening.")
    change = world.write("change.md", "# Change\n\nThe ferry leaves at nine.")
    gone = world.write("gone.md", "# Gone\n\nThe old bridge was closed for repairs.")
    world.add()
    assert world.poller.poll("notes")  # a job was queued
    stages, summary = world.sync_now()
    assert summary.indexed == 3 and set(world.indexed()) == {str(p.resolve()) for p in (keep, change, gone)}

    added = world.write("sub/added.md", "# Added\n\nThe market opens on Saturdays.")
    change.write_text("# Change\n\nThe ferry now leaves at ten.")
    os.utime(change, (world.clock.now + 5, world.clock.now + 5))
    gone.unlink()
    assert world.poller.poll("notes")
    stages, summary = world.sync_now()
    assert stages[str(added.resolve())] is FileStage.INDEXED
    assert stages[str(change.resolve())] is FileStage.INDEXED
    assert stages[str(gone.resolve())] is FileStage.REMOVED
    assert str(keep.resolve()) not in stages  # unchanged: listed, never read
    assert (summary.indexed, summary.removed, summary.unchanged) == (2, 1, 1)
    assert set(world.indexed()) == {str(p.resolve()) for p in (keep, change, added)}
    hits = world.pipeline._lexical.search("ferry ten", "lib", 3)[0]  # type: ignore[attr-defined]
    assert hits and hits[0].source == str(change.resolve())


def test_an_unchanged_source_costs_a_listing_and_queues_nothing(world: World) -> None:
    world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add()
    world.poller.poll("notes")
    world.sync_now()
    reads_before = sum(b.count for b in world.backends)
    assert world.poller.poll("notes") == ""  # nothing to do: no job
    assert sum(b.count for b in world.backends) == reads_before
    assert world.jobs.list() and len(world.jobs.list()) == 1


def test_a_touched_file_is_read_once_then_known_by_its_new_revision(world: World) -> None:
    path = world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add()
    world.sync_now()
    os.utime(path, (world.clock.now + 99, world.clock.now + 99))
    stages, _ = world.sync_now()
    assert stages[str(path.resolve())] is FileStage.UNCHANGED  # same bytes
    assert world.poller.poll("notes") == ""  # the new mtime is recorded: no read next time


def test_keep_policy_leaves_the_documents_of_deleted_files(world: World) -> None:
    path = world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add(delete="keep")
    world.sync_now()
    path.unlink()
    assert world.poller.poll("notes") == ""
    assert str(path.resolve()) in world.indexed()


def test_globs_choose_the_items(world: World) -> None:
    world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.write("drafts/b.md", "# B\n\nBananas ripen in the south.")
    world.write("c.txt", "Cherries are picked in June.")
    world.add(include=["*.md"], exclude=["drafts/*"])
    world.sync_now()
    assert [Path(s).name for s in world.indexed()] == ["a.md"]


def test_a_failing_item_backs_off_then_is_dead_lettered_and_retried_on_demand(world: World) -> None:
    world.write("big.md", "# Big\n\n" + "Too many words here. " * 2000)  # over max_file_bytes
    world.add()
    _, summary = world.sync_now()
    assert summary.failed == 1 and "ingest.max_file_mb" in summary.failures[0]
    failure = next(iter(world.store.failures("notes").values()))
    assert failure.attempts == 1 and not failure.dead and failure.retry_at > world.clock.now
    assert world.poller.poll("notes") == ""  # backing off: no job
    for attempt in (2, 3):
        world.clock.now += 10_000
        assert world.poller.poll("notes")
        world.sync_now()
        failure = next(iter(world.store.failures("notes").values()))
        assert failure.attempts == attempt
    assert failure.dead
    world.clock.now += 100_000
    assert world.poller.poll("notes") == ""  # dead: left alone
    assert world.store.retry("notes") == 1
    assert world.poller.poll("notes")  # tried again


def test_a_new_revision_of_a_dead_item_is_tried_again(world: World) -> None:
    path = world.write("big.md", "# Big\n\n" + "Too many words here. " * 2000)
    world.add()
    for _ in range(3):
        world.clock.now += 10_000
        world.sync_now()
    assert next(iter(world.store.failures("notes").values())).dead
    path.write_text("# Small now\n\nA short note about owls.")
    os.utime(path, (world.clock.now + 7, world.clock.now + 7))
    stages, _ = world.sync_now()
    assert stages[str(path.resolve())] is FileStage.INDEXED
    assert world.store.failures("notes") == {}


def test_the_breaker_opens_after_failed_polls_and_closes_when_the_source_recovers(world: World) -> None:
    world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add()
    hidden = world.folder.rename(world.folder.with_name("away"))
    for _ in range(3):
        world.clock.now += 700  # past any backoff
        assert world.poller.poll("notes") == ""
    state = world.store.get("notes")
    assert state.breaker == OPEN and state.failures == 3 and "does not exist" in state.last_error
    world.clock.now += 30
    assert "notes" not in [s.spec.name for s in world.store.due()]  # cooling down
    world.clock.now += 31
    assert [s.spec.name for s in world.store.due()] == ["notes"]
    assert world.store.polling("notes") == HALF_OPEN
    world.poller.poll("notes")  # the trial fails: open again
    assert world.store.get("notes").breaker == OPEN
    hidden.rename(world.folder)
    world.clock.now += 61
    assert world.poller.poll("notes")  # the trial succeeds
    state = world.store.get("notes")
    assert (state.breaker, state.failures, state.last_error) == (CLOSED, 0, "")


def test_a_job_whose_scan_fails_counts_against_the_breaker(world: World) -> None:
    world.add()
    world.folder.rmdir()
    with pytest.raises(Exception, match="does not exist"):
        world.sync_now()
    assert world.store.get("notes").failures == 1


def test_a_scan_that_runs_too_long_fails_the_poll_and_the_job(world: World) -> None:
    """A source whose listing is slow (a server that answers each request just inside its own
    deadline) holds a poll slot, and a job's worker, only for the scan's time limit: then the poll,
    or the sync, fails naming the setting, and the breaker counts it."""
    for i in range(4):
        world.write(f"{i}.md", f"# Note {i}\n\nThe tide table for week {i} is pinned by the door.")
    world.add()
    world.limit_scans(0.3)
    listed: list[str] = []

    def slowly(name: str) -> None:
        listed.append(name)
        time.sleep(0.2)

    world.listed = slowly
    assert world.poller.poll("notes") == ""  # no job queued
    state = world.store.get("notes")
    assert state.failures == 1 and "ran past 0.3 s (ingest.source_scan_timeout_s)" in state.last_error
    assert len(listed) < 4  # stopped before the last item
    with pytest.raises(ScanError, match=r"scan of source 'notes' ran past 0.3 s"):
        world.sync_now()
    assert world.store.get("notes").failures == 2
    world.listed = lambda name: None
    _, summary = world.sync_now()  # quick enough: whole
    assert summary.indexed == 4


def test_a_poll_stops_when_its_source_is_paused_or_removed_meanwhile(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan ends at its next item, queues nothing and counts for nothing; a paused source can
    still be synced by hand, whole; a job's scan stops only for a removal."""
    monkeypatch.setattr(sync, "CHECK_EVERY_S", 0.0)  # the state is looked at before every item
    for i in range(6):
        world.write(f"{i}.md", f"# Note {i}\n\nThe tide table for week {i} is pinned by the door.")
    world.add()
    listed: list[str] = []

    def pause_at_the_second(name: str) -> None:
        listed.append(name)
        if len(listed) == 2:
            world.store.set_paused("notes", True)

    def stopped() -> float:
        labels = {"source": "notes", "outcome": "stopped"}
        return REGISTRY.get_sample_value("ragstack_source_polls_total", labels) or 0.0

    before = stopped()
    world.listed = pause_at_the_second
    assert world.poller.poll("notes") == ""  # no job
    assert listed == ["0.md", "1.md"]  # and no item listed after the pause
    state = world.store.get("notes")
    assert (state.breaker, state.failures, state.last_error) == (CLOSED, 0, "")
    assert world.jobs.active("notes") is None and stopped() == before + 1

    listed.clear()
    world.listed = listed.append
    _, summary = world.sync_now()  # by hand: the pause holds back polls, not this
    assert summary.indexed == 6 and len(listed) == 6

    world.store.set_paused("notes", False)
    world.write("6.md", "# Note 6\n\nThe harbour closes at dusk.")
    world.listed = lambda name: world.store.remove("notes")
    assert world.poller.poll("notes") == "" and stopped() == before + 2

    world.add()
    with pytest.raises(ScanStopped, match="'notes' was removed during its scan"):
        world.sync_now()


def test_a_pause_after_the_scans_last_look_cancels_the_job_its_poll_queues(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PauseSource may look for the poll's job before it is queued: the poll looks again after
    queuing it. A pause cancels only a poll's job, never one asked for by hand."""
    monkeypatch.setattr(sync, "CHECK_EVERY_S", 3600.0)  # the scan looks once, at its first item
    for i in range(3):
        world.write(f"{i}.md", f"# Note {i}\n\nThe ferry timetable for pier {i}.")
    world.add()
    world.listed = lambda name: world.store.set_paused("notes", True) if name == "2.md" else None
    assert world.poller.poll("notes") == ""
    [queued] = world.jobs.list()
    assert queued.state == job_store.CANCELLED and queued.principal == poll_principal("notes")
    assert world.jobs.active("notes") is None

    by_hand = world.jobs.submit("lib", b"", "alice", source="notes")
    polled = world.jobs.submit("lib", b"", poll_principal("notes"), source="notes")
    assert world.jobs.active("notes", poll_principal("notes")) == polled.job_id
    assert world.jobs.active("notes", "alice") == by_hand.job_id


def _cancelled_once_it_ingests(world: World, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """A sync's cancel event, set as the sync hands its items to the pipeline (after the listing:
    the job was cancelled while it ingests)."""
    cancelled = threading.Event()
    run = world.pipeline.run

    def cancelled_as_it_ingests(*args, **kwargs):  # type: ignore[no-untyped-def]
        cancelled.set()
        return run(*args, **kwargs)

    monkeypatch.setattr(world.pipeline, "run", cancelled_as_it_ingests)
    return cancelled


def test_a_failure_once_the_sync_is_cancelled_is_not_held_against_the_item(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel (a pause, CancelIngestJob) stops the parse in flight, whose file then fails: that
    failure is the cancel's, so the item keeps its attempts and the resume tries it at once."""
    world.write("big.md", "# Big\n\n" + "The tide comes in twice a day. " * 1000)  # over max_file_bytes
    world.add()
    cancelled = _cancelled_once_it_ingests(world, monkeypatch)
    events = list(world.sync.run("notes", cancelled=cancelled))
    assert [e.stage for e in events if isinstance(e, FileProgress)][-1] is FileStage.FAILED
    assert world.store.failures("notes") == {}

    list(world.sync.run("notes"))  # not cancelled: the same failure is the item's
    assert list(world.store.failures("notes")) == [str((world.folder / "big.md").resolve())]


def test_a_sync_cancelled_as_it_embeds_drops_the_batch_and_the_next_sync_indexes_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync's `cancelled` reaches the pipeline: a batch being embedded is dropped (Cancelled),
    nothing is held against its items, and the next sync indexes them."""
    world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add()
    cancelled = _cancelled_once_it_ingests(world, monkeypatch)
    with pytest.raises(Cancelled):
        list(world.sync.run("notes", cancelled=cancelled))
    assert world.store.failures("notes") == {}
    assert world.pipeline.list_documents("lib", None) == []

    monkeypatch.undo()
    summary = list(world.sync.run("notes"))[-1]
    assert isinstance(summary, IngestSummary) and summary.indexed == 1


def test_a_sync_cancelled_mid_ingest_keeps_the_outcomes_of_what_it_finished(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while the third file is embedded: the second, written in the batch before, is
    reported indexed and its earlier failure cleared; the first, found unchanged by its bytes, keeps
    its new revision, so the next poll needs no read to tell."""
    for name, text in (
        ("a.md", "Apples grow north."),
        ("b.md", "Beets grow south."),
        ("c.md", "Corn grows."),
    ):
        world.write(name, f"# {name}\n\n{text}")
    world.add()
    world.sync_now()
    a = world.write("a.md", "# a.md\n\nApples grow north.")  # the same bytes, a new mtime
    os.utime(a, ns=(a.stat().st_mtime_ns + 10**9,) * 2)
    b = str(world.write("b.md", "# b.md\n\nBeets grow east now.").resolve())
    world.write("c.md", "# c.md\n\nCorn grows taller now.")
    world.store.item_failed("notes", b, "an earlier revision", "a failure of an earlier attempt")
    before = world.indexed()
    monkeypatch.setattr(world.pipeline, "_batch_chunks", 1)  # a batch a file
    cancelled = threading.Event()
    embed = world.pipeline.embed
    calls: list[int] = []

    def cancel_at_the_second_batch(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:
            cancelled.set()
        return embed(*args, **kwargs)

    monkeypatch.setattr(world.pipeline, "embed", cancel_at_the_second_batch)
    events: list[FileProgress] = []
    with pytest.raises(Cancelled):
        for event in world.sync.run("notes", cancelled=cancelled):
            events.append(event)  # type: ignore[arg-type]
    assert [e.source for e in events if e.stage is FileStage.INDEXED] == [b]
    assert world.store.failures("notes") == {}
    after = world.indexed()
    a_source, c_source = str(a.resolve()), str((world.folder / "c.md").resolve())
    assert after[a_source] != before[a_source]  # the unchanged file's new revision was noted
    assert after[c_source] == before[c_source]  # the dropped batch left the old document


def test_one_job_at_a_time_per_source(world: World) -> None:
    world.write("a.md", "# A\n\nApples grow in the northern orchard.")
    world.add()
    job = world.poller.poll("notes")
    assert world.jobs.active("notes") == job
    request = ingest_pb2.IngestRequest.FromString(world.jobs.claim()[1])  # type: ignore[index]
    assert request.source == "notes"


def test_config_sources_are_declared_and_cannot_be_changed_through_the_api(world: World) -> None:
    spec = SourceConfig(name="cfg", kind="folder", url=str(world.folder))
    world.store.declare([spec])
    with pytest.raises(Exception, match=r"declared in ragstack\.yaml"):
        world.store.add(spec)
    with pytest.raises(Exception, match=r"declared in ragstack\.yaml"):
        world.store.remove("cfg")
    world.store.declare([])
    assert [s.spec.name for s in world.store.list()] == []


def test_the_store_keeps_failures_members_and_schedules(state_config: StateConfig, tmp_path: Path) -> None:
    """The source store on its own: retries pull the next poll forward, members are a set, a pause
    holds the schedule and a resume makes the source due."""
    clock = Clock()
    store = SourceStore(
        state_tools.store(state_config, tmp_path, source_state), Retries(attempts=2), now=clock
    )
    store.add(SourceConfig(name="s", kind="folder", url=str(tmp_path), interval_s=3600))
    store.poll_succeeded("s", "job-1")
    store.poll_succeeded("s")  # no job queued: the last one's id stays
    assert (store.get("s").next_poll, store.get("s").last_job_id) == (clock.now + 3600, "job-1")
    failure = store.item_failed("s", "a.md", "r1", "boom")
    assert store.get("s").next_poll == failure.retry_at < clock.now + 3600
    store.poll_succeeded("s")  # the pending retry still comes first
    assert store.get("s").next_poll == failure.retry_at
    assert store.item_failed("s", "a.md", "r1", "boom again").dead
    assert store.failures("s")["a.md"].attempts == 2
    assert store.retry("s") == 1 and not store.failures("s")["a.md"].dead
    store.items_ok("s", ["a.md"])
    assert store.failures("s") == {}
    store.add_members("s", ["a.md", "b.md"])
    store.add_members("s", ["b.md", "c.md"])
    store.remove_members("s", ["a.md"])
    assert store.members("s") == {"b.md", "c.md"}
    store.poll_succeeded("s")
    assert store.set_paused("s", True).paused and store.get("s").next_poll == clock.now + 3600
    assert store.due() == []
    assert not store.set_paused("s", False).paused and [s.spec.name for s in store.due()] == ["s"]
    store.remove("s")
    assert store.list() == [] and store.members("s") == set()
    store.close()


OLD_SCHEMA = """
CREATE TABLE sources (
  name TEXT PRIMARY KEY, spec TEXT NOT NULL, origin TEXT NOT NULL, paused INTEGER NOT NULL DEFAULT 0,
  breaker TEXT NOT NULL DEFAULT 'closed', failures INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '', last_poll_at TEXT NOT NULL DEFAULT '',
  last_success_at TEXT NOT NULL DEFAULT '', next_poll REAL NOT NULL DEFAULT 0,
  last_job_id TEXT NOT NULL DEFAULT '');
CREATE TABLE item_failures (
  name TEXT NOT NULL, item TEXT NOT NULL, revision TEXT NOT NULL, attempts INTEGER NOT NULL,
  error TEXT NOT NULL, failed_at TEXT NOT NULL, retry_at REAL NOT NULL, dead INTEGER NOT NULL,
  PRIMARY KEY (name, item));
CREATE TABLE members (name TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (name, item));
"""


def test_a_store_from_before_versions_is_adopted_with_its_rows(tmp_path: Path) -> None:
    """sources.sqlite as releases before versioned schemas made it: its rows stay."""
    spec = SourceConfig(name="old", kind="folder", url=str(tmp_path))
    with sqlite3.connect(tmp_path / "sources.sqlite") as old:
        old.executescript(OLD_SCHEMA)
        old.execute(
            "INSERT INTO sources (name, spec, origin, next_poll) VALUES ('old', ?, 'api', 5)",
            (spec.model_dump_json(),),
        )
        old.execute("INSERT INTO members VALUES ('old', 'a.md')")
    old.close()
    store = SourceStore(state_tools.store(StateConfig(), tmp_path, source_state))
    assert [(s.spec, s.origin, s.next_poll) for s in store.list()] == [(spec, "api", 5.0)]
    assert store.members("old") == {"a.md"}
    store.close()
