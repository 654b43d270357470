"""Sessions: the follow-up rewrite without an LLM, and the turn store on both state backends (SQLite
and PostgreSQL)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from ragstack.config import StateConfig
from ragstack.errors import InvalidArgument
from services.agent import sessions
from services.agent.sessions import SessionStore, Turn, check_session_id, standalone, topic
from tests.tools import state as state_tools

BM25 = [Turn("How does BM25 rank documents?", "How does BM25 rank documents?", "...")]
CURIE = [Turn("When was Marie Curie born?", "When was Marie Curie born?", "1867")]


@pytest.mark.parametrize(
    ("turns", "follow_up", "expected"),
    [
        (BM25, "What are its parameters?", "What are BM25's parameters?"),
        (BM25, "Who invented it?", "Who invented BM25?"),
        (BM25, "and what about TF-IDF?", "How does TF-IDF rank documents?"),
        (BM25, "How does dense retrieval work?", "How does dense retrieval work?"),  # stands on its own
        (CURIE, "Where did she study?", "Where did Marie Curie study?"),
        (CURIE, "What was her first discovery?", "What was Marie Curie's first discovery?"),
        (CURIE, "Who married her?", "Who married Marie Curie?"),
        ([], "What are its parameters?", "What are its parameters?"),  # nothing to refer to
    ],
)
def test_follow_ups_become_standalone(turns: list[Turn], follow_up: str, expected: str) -> None:
    assert standalone(follow_up, turns) == expected


def test_the_topic_prefers_a_name_to_a_code() -> None:
    assert topic("What values of k1 and b does BM25 use?") == "BM25"
    assert topic("what is k1?") == "k1"


def test_store_keeps_turns_in_order_and_lists_sessions(state_config: StateConfig, tmp_path: Path) -> None:
    store = SessionStore(state_tools.store(state_config, tmp_path, sessions))
    store.add("a", "q1", "q1", "a1", False, "2026-11-30T10:00:00")
    store.add("b", "q2", "q2", "a2", True, "2026-11-30T11:00:00")
    store.add("a", "q3", "q3 standalone", "a3", False, "2026-11-30T12:00:00")
    assert store.recent("a") == [Turn("q1", "q1", "a1"), Turn("q3", "q3 standalone", "a3")]
    assert store.recent("a", 1) == [Turn("q3", "q3 standalone", "a3")]
    assert [(s.session_id, s.turns, s.last_question) for s in store.list()] == [
        ("a", 2, "q3"),
        ("b", 1, "q2"),
    ]
    store.add("ann:x", "q4", "q4", "a4", False, "2026-11-30T13:00:00", cited=["c1"], drafted=["c1", "c2"])
    assert store.recent("ann:x") == [Turn("q4", "q4", "a4", ("c1",), ("c1", "c2"))]
    # A principal sees its own sessions by their bare ids; the local admin those without an owner.
    assert [(s.session_id, s.turns) for s in store.list(owner="ann")] == [("x", 1)]
    assert [s.session_id for s in store.list(owner="local")] == ["a", "b"]
    assert [s.session_id for s in store.list(1)] == ["ann:x"]
    store.close()
    with pytest.raises(InvalidArgument):
        check_session_id("no spaces allowed")


def test_turns_added_at_once_to_one_session_all_count(state_config: StateConfig, tmp_path: Path) -> None:
    """Two replicas answering in the same session at the same moment (each its own connection): every
    turn is kept with a number of its own, and none fails."""
    stores = [
        SessionStore(state_tools.store(state_config, tmp_path, sessions), sessions_kept=4, turns_kept=50)
        for _ in range(3)
    ]
    errors: list[Exception] = []

    def answer(w: int) -> None:
        for i in range(8):
            try:
                session = "ann:talk" if i % 2 else f"ann:side{w}"
                stores[w].add(session, f"q{w}.{i}", "s", "a", False, f"2026-12-01T10:{i:02d}:{w:02d}")
            except Exception as err:
                errors.append(err)

    threads = [threading.Thread(target=answer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(stores[0].recent("ann:talk", 50)) == 12
    assert sorted(s.session_id for s in stores[0].list(owner="ann")) == ["side0", "side1", "side2", "talk"]
    for store in stores:
        store.close()


def test_recall_memory_is_each_principals_own(state_config: StateConfig, tmp_path: Path) -> None:
    store = SessionStore(state_tools.store(state_config, tmp_path, sessions))
    store.remember("lib", "What is the salary band of grade 7?", "...", ["hr-doc"], "2026-11-30", "ann")
    store.remember("lib", "How are okapis fed?", "...", ["zoo"], "2026-11-30", "bob")
    store.remember("lib", "first", "...", ["d1"], "2026-11-29")
    store.remember("lib", "second", "...", ["d2"], "2026-11-29")
    assert [m.question for m in store.memories("lib", "ann")] == ["What is the salary band of grade 7?"]
    assert [m.documents for m in store.memories("lib", "bob")] == [("zoo",)]
    assert [m.question for m in store.memories("lib")] == ["second", "first"]  # ties: the latest first
    assert [m.question for m in store.memories("lib", limit=1)] == ["second"]
    assert store.memories("other", "ann") == []
    store.close()


def test_each_caller_keeps_its_newest_sessions_turns_and_memories(
    state_config: StateConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many asks one caller makes, what it leaves in the shared state is bounded, and
    another caller's sessions are never what makes room."""
    monkeypatch.setattr(sessions, "MEMORIES_KEPT", 3)
    store = SessionStore(state_tools.store(state_config, tmp_path, sessions), sessions_kept=2, turns_kept=3)
    store.add("bob:keep", "b1", "b1", "a", False, "2026-11-30T00:00:00")
    store.add("local-one", "l1", "l1", "a", False, "2026-11-30T00:00:01")
    for n in range(5):  # one long session: its newest three turns stay, numbered on
        store.add("ann:long", f"q{n}", f"q{n}", "a", False, f"2026-11-30T01:00:0{n}")
    assert [t.question for t in store.recent("ann:long", 10)] == ["q2", "q3", "q4"]
    for n in range(4):  # new sessions: the two most recently active stay
        store.add(f"ann:s{n}", f"s{n}", f"s{n}", "a", False, f"2026-11-30T02:00:0{n}")
    assert [s.session_id for s in store.list(owner="ann")] == ["s3", "s2"]
    assert [s.session_id for s in store.list(owner="bob")] == ["keep"]
    assert [s.session_id for s in store.list(owner="local")] == ["local-one"]
    for n in range(5):
        store.remember("lib", f"m{n}", "a", ["d"], f"2026-11-30T03:00:0{n}", "ann")
    store.remember("lib", "bob's", "a", ["d"], "2026-11-30T04:00:00", "bob")
    store.remember("other", "elsewhere", "a", ["d"], "2026-11-30T04:00:00", "ann")
    assert [m.question for m in store.memories("lib", "ann", limit=10)] == ["m4", "m3", "m2"]
    assert [m.question for m in store.memories("lib", "bob")] == ["bob's"]
    assert [m.question for m in store.memories("other", "ann")] == ["elsewhere"]
    store.close()


def test_a_file_from_before_versions_is_adopted_with_its_rows(tmp_path: Path) -> None:
    """A sessions.sqlite made before principals and turn evidence: its memories were the local
    admin's, its turns carry no evidence, and both stay."""
    with sqlite3.connect(tmp_path / "sessions.sqlite") as old:
        old.executescript(
            "CREATE TABLE turns (session_id TEXT NOT NULL, n INTEGER NOT NULL, question TEXT NOT NULL,"
            " standalone TEXT NOT NULL, answer TEXT NOT NULL, abstained INTEGER NOT NULL, at TEXT NOT NULL,"
            " PRIMARY KEY (session_id, n));"
            "CREATE TABLE memory (library TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL,"
            " documents TEXT NOT NULL, at TEXT NOT NULL);"
            "INSERT INTO turns VALUES ('s', 1, 'old turn', 'old turn', 'old answer', 0, '2026-11-01');"
            "INSERT INTO memory VALUES ('lib', 'old q', 'old a', '[\"d0\"]', '2026-11-01');"
        )
    old.close()
    store = SessionStore(state_tools.store(StateConfig(), tmp_path, sessions))
    assert store.recent("s") == [Turn("old turn", "old turn", "old answer")]
    assert [(m.question, m.documents) for m in store.memories("lib")] == [("old q", ("d0",))]
    assert store.memories("lib", "ann") == []
    store.add("s", "new", "new", "a", False, "2026-11-02", cited=["c"])
    assert [t.question for t in store.recent("s")] == ["old turn", "new"]
    store.close()
