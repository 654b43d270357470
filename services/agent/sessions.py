"""Conversations and memory: each session's turns in SQLite beside the stores, the answered questions
every later session may recall (with the documents that answered them), and the deterministic
rewrite of a follow-up into a standalone question from the turns before it."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragstack.auth import LOCAL
from ragstack.errors import InvalidArgument
from ragstack.stores.sqlite import ensure_column
from ragstack.text import STOPWORDS

_SESSION_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}\Z")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
  session_id TEXT NOT NULL,
  n INTEGER NOT NULL,
  question TEXT NOT NULL,
  standalone TEXT NOT NULL,
  answer TEXT NOT NULL,
  abstained INTEGER NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS memory (
  library TEXT NOT NULL,
  question TEXT NOT NULL,
  answer TEXT NOT NULL,
  documents TEXT NOT NULL,
  at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_by_library ON memory (library, at);
"""


@dataclass(frozen=True)
class Turn:
    question: str
    standalone: str
    answer: str
    cited: tuple[str, ...] = ()  # the chunks its answer cited
    drafted: tuple[str, ...] = ()  # every chunk it was drafted from


@dataclass(frozen=True)
class Memory:
    question: str  # standalone
    answer: str
    documents: tuple[str, ...]  # the documents its citations point at


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    turns: int
    last_question: str
    updated_at: str


def session_key(owner: str, session_id: str) -> str:
    """Where a principal's session is kept: its id qualified by the owner (`:` is in no session id or
    principal name), so the same id chosen by two callers is two conversations. The local admin's
    sessions keep their bare ids (as before principals existed)."""
    return session_id if owner == LOCAL.name else f"{owner}:{session_id}"


def check_session_id(session_id: str) -> str:
    if not _SESSION_ID.match(session_id):
        raise InvalidArgument("session_id must be 1-128 letters, digits, '-', '_' or '.'")
    return session_id


class SessionStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        # Recall memory is each principal's own: another's questions are never recalled, shown or
        # traced for a caller (memories from before principals were the local admin's).
        ensure_column(self._db, "memory", "owner", f"TEXT NOT NULL DEFAULT '{LOCAL.name}'")
        # Each turn's evidence by chunk id, carried into its session's later turns (turns from
        # before this was kept carry none).
        ensure_column(self._db, "turns", "cited", "TEXT NOT NULL DEFAULT '[]'")
        ensure_column(self._db, "turns", "drafted", "TEXT NOT NULL DEFAULT '[]'")
        self._lock = threading.Lock()

    def recent(self, session_id: str, n: int = 3) -> list[Turn]:
        """The last `n` turns, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT question, standalone, answer, cited, drafted FROM turns WHERE session_id = ? "
                "ORDER BY n DESC LIMIT ?",
                (session_id, n),
            ).fetchall()
        return [
            Turn(q, s, a, tuple(json.loads(cited)), tuple(json.loads(drafted)))
            for q, s, a, cited, drafted in reversed(rows)
        ]

    def add(
        self,
        session_id: str,
        question: str,
        standalone: str,
        answer: str,
        abstained: bool,
        at: str,
        cited: Sequence[str] = (),
        drafted: Sequence[str] = (),
    ) -> None:
        with self._lock, self._db:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()
            self._db.execute(
                "INSERT INTO turns (session_id, n, question, standalone, answer, abstained, at, cited,"
                " drafted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    count + 1,
                    question,
                    standalone,
                    answer,
                    int(abstained),
                    at,
                    json.dumps(list(cited)),
                    json.dumps(list(drafted)),
                ),
            )

    def remember(
        self, library: str, question: str, answer: str, documents: list[str], at: str, owner: str = LOCAL.name
    ) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO memory (library, question, answer, documents, at, owner)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (library, question, answer, json.dumps(documents), at, owner),
            )

    def memories(self, library: str, owner: str = LOCAL.name, limit: int = 500) -> list[Memory]:
        """`owner`'s newest answered questions in the library, newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT question, answer, documents FROM memory WHERE library = ? AND owner = ? "
                "ORDER BY at DESC, rowid DESC LIMIT ?",
                (library, owner, limit),
            ).fetchall()
        return [Memory(q, a, tuple(json.loads(docs))) for q, a, docs in rows]

    def list(self, limit: int = 50, owner: str | None = None) -> list[SessionInfo]:
        """The newest sessions: of `owner` only, with their ids as the owner chose them; of every
        owner when None, with the owner-qualified ids."""
        args: tuple[object, ...] = ()
        if owner is None:
            where = ""
        elif owner == LOCAL.name:
            where = "WHERE instr(t.session_id, ':') = 0"
        else:
            where, args = "WHERE substr(t.session_id, 1, ?) = ?", (len(owner) + 1, f"{owner}:")
        with self._lock:
            rows = self._db.execute(
                "SELECT t.session_id, c.turns, t.question, t.at FROM turns t JOIN "
                "(SELECT session_id, COUNT(*) AS turns, MAX(n) AS last FROM turns GROUP BY session_id) c "
                f"ON t.session_id = c.session_id AND t.n = c.last {where} ORDER BY t.at DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        strip = len(owner) + 1 if owner and owner != LOCAL.name else 0
        return [SessionInfo(sid[strip:], turns, q, at) for sid, turns, q, at in rows]

    def close(self) -> None:
        self._db.close()


# Follow-up rewriting, without an LLM: "what about X?" swaps the previous topic for X; a pronoun
# is replaced by the previous topic. The topic is the first name (capitalised words, or a code such
# as BM25) of the previous standalone question.
_NAME = re.compile(
    r"\b(?:[A-Z][\w'.&-]*|\w*\d\w*)(?:\s+(?:(?:of|the|de|da|von|van)\s+)?(?:[A-Z][\w'.&-]*|\w*\d\w*))*"
)
_OPENERS = {
    "what",
    "which",
    "who",
    "whom",
    "when",
    "where",
    "why",
    "how",
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "in",
    "and",
    "tell",
    "give",
    "list",
}
_ABOUT = re.compile(r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(.+?)\s*\??\s*$", re.IGNORECASE)
_PRONOUN = re.compile(r"\b(it|its|they|them|their|this|these|those|he|she|him|his|her)\b", re.IGNORECASE)
_POSSESSIVE = {"its", "their", "his"}


def topic(question: str) -> str | None:
    """The question's first capitalised name, else its first code with digits ("k1")."""
    found: list[str] = []
    for m in _NAME.finditer(question):
        words = m.group(0).split()
        while words and words[0].lower() in _OPENERS:  # "What", "How" open the sentence, not a name
            words = words[1:]
        if words and " ".join(words).lower() not in STOPWORDS:
            found.append(" ".join(words))
    return next((n for n in found if n[0].isupper()), found[0] if found else None)


def standalone(question: str, turns: list[Turn]) -> str:
    """The question as it would be asked on its own, given the session's earlier turns."""
    if not turns:
        return question
    previous = turns[-1].standalone
    subject = topic(previous)
    about = _ABOUT.match(question)
    if about:
        other = about.group(1).strip()
        return previous.replace(subject, other, 1) if subject else f"{previous} {other}"
    if subject is None or (topic(question) is not None and not _PRONOUN.search(question)):
        return question
    m = _PRONOUN.search(question)
    if m is None:
        return question
    word = m.group(1).lower()
    after = question[m.end() :].split()
    possessive = word in _POSSESSIVE or (
        word == "her"
        and bool(after)
        and after[0].isalpha()
        and after[0].islower()
        and after[0] not in STOPWORDS
    )
    replacement = f"{subject}'s" if possessive else subject
    return question[: m.start()] + replacement + question[m.end() :]
