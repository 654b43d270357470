"""The shared state layer on both backends: statements, transactions, versioned schemas, and
`ragstack migrate`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import StateConfig
from ragstack.errors import FailedPrecondition
from ragstack.state import Migration, MigrationRequired, open_state
from ragstack.state.db import connect_state
from ragstack.state.migrations import pending, version

V1 = Migration(1, "a table of pets", "CREATE TABLE pets (name TEXT PRIMARY KEY, legs INTEGER NOT NULL)")
V2 = Migration(2, "pets get an owner", "ALTER TABLE pets ADD COLUMN owner TEXT NOT NULL DEFAULT ''")


def test_a_new_store_is_made_whole_and_records_its_version(state_config: StateConfig, tmp_path: Path) -> None:
    db = open_state(state_config, tmp_path, "pets", [V1, V2])
    db.execute("INSERT INTO pets (name, legs, owner) VALUES (?, ?, ?)", ("rex", 4, "ann"))
    assert db.one("SELECT name, legs, owner FROM pets") == ("rex", 4, "ann")
    assert version(db) == 2
    db.close()
    again = open_state(state_config, tmp_path, "pets", [V1, V2])  # reopening changes nothing
    assert version(again) == 2 and again.all("SELECT name FROM pets") == [("rex",)]
    again.close()


def test_a_store_behind_the_release_is_refused_until_migrated(
    state_config: StateConfig, tmp_path: Path
) -> None:
    open_state(state_config, tmp_path, "pets", [V1]).close()
    with pytest.raises(
        MigrationRequired, match=r"version 1.*needs 2 \(2: pets get an owner\).*ragstack migrate"
    ):
        open_state(state_config, tmp_path, "pets", [V1, V2])
    db = connect_state(state_config, tmp_path, "pets")
    assert [m.version for m in pending(db, [V1, V2])] == [2]
    db.close()
    migrated = open_state(state_config, tmp_path, "pets", [V1, V2], migrate=True)
    assert version(migrated) == 2
    migrated.close()
    auto = state_config.model_copy(update={"auto_migrate": True})
    open_state(auto, tmp_path, "pets", [V1, V2]).close()


def test_a_store_ahead_of_the_release_is_refused(state_config: StateConfig, tmp_path: Path) -> None:
    open_state(state_config, tmp_path, "pets", [V1, V2]).close()
    with pytest.raises(FailedPrecondition, match="newer than this release"):
        open_state(state_config, tmp_path, "pets", [V1])


def test_a_transaction_commits_whole_or_not_at_all(state_config: StateConfig, tmp_path: Path) -> None:
    db = open_state(state_config, tmp_path, "pets", [V1])
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO pets (name, legs) VALUES (?, ?)", ("tom", 4))
        raise RuntimeError("midway")
    assert db.all("SELECT name FROM pets") == []
    with db.transaction():
        db.executemany("INSERT INTO pets (name, legs) VALUES (?, ?)", [("a", 2), ("b", 8)])
        with db.transaction():  # nested: part of the outer one
            db.execute("UPDATE pets SET legs = legs + 1 WHERE name = ?", ("a",))
    assert db.all("SELECT name, legs FROM pets ORDER BY name") == [("a", 3), ("b", 8)]
    assert db.execute("DELETE FROM pets WHERE legs > ?", (5,)) == 1
    # A literal % is not a placeholder on either backend.
    assert db.one("SELECT count(*) FROM pets WHERE name LIKE 'a%'") == (1,)
    db.close()


def test_two_processes_opening_a_new_store_at_once_apply_it_once(
    state_config: StateConfig, tmp_path: Path
) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            open_state(state_config, tmp_path, "pets", [V1, V2]).close()
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=open_one) for _ in range(4)]  # a connection each, like processes
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    db = connect_state(state_config, tmp_path, "pets")
    assert db.all("SELECT version FROM schema_migrations ORDER BY version") == [(1,), (2,)]
    db.close()


def test_stores_of_one_postgres_database_do_not_share_tables(tmp_path: Path) -> None:
    from tests.tools.state import config_for

    cfg = config_for("postgres")
    one = open_state(cfg, tmp_path, "pets", [V1])
    other = open_state(cfg.model_copy(update={"schema_prefix": "other"}), tmp_path, "pets", [V1])
    one.execute("INSERT INTO pets (name, legs) VALUES ('rex', 4)")
    assert other.all("SELECT name FROM pets") == []
    one.close()
    other.close()


def test_a_postgres_connection_lost_between_calls_is_opened_again(tmp_path: Path) -> None:
    from tests.tools.state import config_for, postgres_server

    cfg = config_for("postgres")
    db = open_state(cfg, tmp_path, "pets", [V1])
    db.execute("INSERT INTO pets (name, legs) VALUES ('rex', 4)")
    postgres_server().execute_admin(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE application_name = 'ragstack-ragstack_pets'"
    )
    assert db.all("SELECT name FROM pets") == [("rex",)]
    db.close()


def test_a_closed_store_refuses_statements_and_opens_no_connection(
    state_config: StateConfig, tmp_path: Path
) -> None:
    """What a thread still runs after its service closed the store is refused, not run on a
    connection opened again that nobody would close."""
    from ragstack.errors import Unavailable

    db = open_state(state_config, tmp_path, "pets", [V1])
    db.execute("INSERT INTO pets (name, legs) VALUES ('rex', 4)")
    opened = db.connections
    db.close()
    for statement in (lambda: db.all("SELECT name FROM pets"), lambda: db.execute("DELETE FROM pets")):
        with pytest.raises(Unavailable, match="state store pets: closed, this process is stopping"):
            statement()
    assert db.connections == opened
    db.close()  # twice is harmless
    again = open_state(state_config, tmp_path, "pets", [V1])
    assert again.all("SELECT name, legs FROM pets") == [("rex", 4)]
    again.close()


def test_a_postgres_deadlock_is_unavailable_saying_so_and_keeps_the_connection(tmp_path: Path) -> None:
    """PostgreSQL aborts one of two transactions that wait on each other: its caller gets Unavailable
    (try again) naming the deadlock, not a lost connection, and its connection serves on."""
    from ragstack.errors import Unavailable
    from tests.tools.state import config_for

    cfg = config_for("postgres")
    setup = open_state(cfg, tmp_path, "pets", [V1])
    setup.execute("INSERT INTO pets (name, legs) VALUES ('rex', 4), ('tom', 4)")
    dbs = [open_state(cfg, tmp_path, "pets", [V1]) for _ in range(2)]
    both_hold_one = threading.Barrier(2, timeout=20)
    errors: list[Exception] = []

    def cross(db: object, first: str, then: str) -> None:
        try:
            with db.transaction() as tx:  # type: ignore[attr-defined]
                tx.execute("UPDATE pets SET legs = legs + 1 WHERE name = ?", (first,))
                both_hold_one.wait()
                tx.execute("UPDATE pets SET legs = legs + 1 WHERE name = ?", (then,))
        except Exception as err:
            errors.append(err)

    threads = [
        threading.Thread(target=cross, args=(dbs[0], "rex", "tom")),
        threading.Thread(target=cross, args=(dbs[1], "tom", "rex")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(errors) == 1 and isinstance(errors[0], Unavailable), errors
    assert "rolled the transaction back, try again: deadlock detected" in str(errors[0])
    assert sorted(setup.all("SELECT legs FROM pets")) == [(5,), (5,)]  # the other one committed whole
    connections = [db.connections for db in dbs]
    assert [db.one("SELECT count(*) FROM pets")[0] for db in dbs] == [2, 2]  # type: ignore[index]
    assert [db.connections for db in dbs] == connections  # neither opened a new connection
    for db in (setup, *dbs):
        db.close()


def test_an_unreachable_postgres_is_unavailable_with_the_reason(tmp_path: Path) -> None:
    from ragstack.errors import Unavailable

    cfg = StateConfig(url="postgresql://nobody@127.0.0.1:9/none", connect_timeout_s=2)
    with pytest.raises(Unavailable, match="state store pets: PostgreSQL unreachable"):
        open_state(cfg, tmp_path, "pets", [V1])


def test_a_state_url_must_name_postgres() -> None:
    with pytest.raises(ValueError, match="postgresql://"):
        StateConfig(url="mysql://x/y")


def test_one_process_leads_and_another_takes_over_when_it_stops_or_dies(
    state_config: StateConfig, tmp_path: Path
) -> None:
    from ragstack.state.locks import SharedLock

    first, second, third = (SharedLock(state_config, tmp_path, "poller") for _ in range(3))
    try:
        assert first.lead() and first.lead()  # asked again, it still leads
        assert not second.lead()
        first.close()  # a clean stop hands the lead over at once
        assert second.lead()
        assert not third.lead()
        # Its process dies: PostgreSQL ends its session (or the kernel closes its lock file) a moment later,
        # so the next leader comes at a later try, not necessarily the first.
        if second._db is not None:
            pid = second._db.one("SELECT pg_backend_pid()")[0]  # type: ignore[index]
            third._db.one("SELECT pg_terminate_backend(?)", (pid,))  # type: ignore[union-attr]
        else:
            os.close(second._leading)  # type: ignore[arg-type]
            second._leading = None
        deadline = time.monotonic() + 10
        while not third.lead():
            assert time.monotonic() < deadline, "no process took the lead over from a dead one"
            time.sleep(0.05)
    finally:  # a failed assertion leaves no open connection to warn in a later test
        for lock in (first, second, third):
            lock.close()


def test_a_lead_under_way_when_its_lock_closes_ends_before_the_close(tmp_path: Path) -> None:
    """A stopping service closes its poller's lock while the poller's last `lead`, no longer awaited,
    may still run in a thread: it must neither take the lead after the close nor reconnect."""
    from ragstack.errors import Unavailable
    from ragstack.state.locks import SharedLock
    from tests.tools.state import config_for

    cfg = config_for("postgres")
    lock, other = SharedLock(cfg, tmp_path, "poller"), SharedLock(cfg, tmp_path, "poller")
    try:
        db = lock._db
        assert db is not None
        asked, go = threading.Event(), threading.Event()
        one = db.one

        def slow_one(sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
            if sql == "SELECT 1":  # the lead's first statement: hold it there
                asked.set()
                go.wait(10)
            return one(sql, params)

        db.one = slow_one  # type: ignore[method-assign]
        leading: list[bool] = []
        leader = threading.Thread(target=lambda: leading.append(lock.lead()))
        leader.start()
        assert asked.wait(10)
        closer = threading.Thread(target=lock.close)
        closer.start()
        closer.join(0.3)
        assert closer.is_alive()  # the close waits for the lead under way
        go.set()
        leader.join(10)
        closer.join(10)
        assert leading == [True] and not closer.is_alive()
        assert other.lead()  # the close let go of what that lead took
        assert db.connections == 1  # nothing reconnected
        assert not lock.lead()  # closed: it leads no more
        with pytest.raises(Unavailable, match="poller lock is closed"):
            with lock.hold():
                pass
    finally:
        lock.close()
        other.close()


def test_a_shared_lock_is_held_by_one_holder_at_a_time(state_config: StateConfig, tmp_path: Path) -> None:
    from ragstack.state.locks import SharedLock

    locks = [SharedLock(state_config, tmp_path, "commit") for _ in range(3)]  # as three processes
    inside, most = [0], [0]
    guard = threading.Lock()

    def turns(lock: SharedLock) -> None:
        for _ in range(5):
            with lock.hold():
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                threading.Event().wait(0.005)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=turns, args=(lock,)) for lock in locks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    for lock in locks:
        lock.close()
