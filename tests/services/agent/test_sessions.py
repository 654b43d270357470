"""Sessions: the follow-up rewrite without an LLM, and the turn store on real SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstack.errors import InvalidArgument
from services.agent.sessions import SessionStore, Turn, check_session_id, standalone, topic

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


def test_store_keeps_turns_in_order_and_lists_sessions(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "sessions.sqlite")
    store.add("a", "q1", "q1", "a1", False, "2026-11-30T10:00:00")
    store.add("b", "q2", "q2", "a2", True, "2026-11-30T11:00:00")
    store.add("a", "q3", "q3 standalone", "a3", False, "2026-11-30T12:00:00")
    assert store.recent("a") == [Turn("q1", "q1", "a1"), Turn("q3", "q3 standalone", "a3")]
    assert store.recent("a", 1) == [Turn("q3", "q3 standalone", "a3")]
    assert [(s.session_id, s.turns, s.last_question) for s in store.list()] == [
        ("a", 2, "q3"),
        ("b", 1, "q2"),
    ]
    store.close()
    with pytest.raises(InvalidArgument):
        check_session_id("no spaces allowed")


def test_recall_memory_is_each_principals_own(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "sessions.sqlite"
    with sqlite3.connect(path) as old:  # a store from before principals: its memories were the local admin's
        old.execute(
            "CREATE TABLE memory (library TEXT NOT NULL, question TEXT NOT NULL, answer TEXT NOT NULL,"
            " documents TEXT NOT NULL, at TEXT NOT NULL)"
        )
        old.execute("INSERT INTO memory VALUES ('lib', 'old q', 'old a', '[\"d0\"]', '2026-11-01')")
    store = SessionStore(path)
    store.remember("lib", "What is the salary band of grade 7?", "...", ["hr-doc"], "2026-11-30", "ann")
    store.remember("lib", "How are okapis fed?", "...", ["zoo"], "2026-11-30", "bob")
    assert [m.question for m in store.memories("lib", "ann")] == ["What is the salary band of grade 7?"]
    assert [m.documents for m in store.memories("lib", "bob")] == [("zoo",)]
    assert [m.question for m in store.memories("lib")] == ["old q"]  # the local admin's
    assert store.memories("other", "ann") == []
