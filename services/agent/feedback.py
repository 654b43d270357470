"""Feedback on answers: one verdict per answer and person (the last one given), kept with the
answer's trace id, its question and library, in the shared state (ragstack/state). Each person's
newest `kept` verdicts are kept: answers are asked for ever, the state must not grow with them."""

from __future__ import annotations

from ragstack.domain import Feedback
from ragstack.errors import InvalidArgument
from ragstack.state import Migration, StateDB

RATINGS = ("up", "down")
MAX_COMMENT = 2_000

STORE = "feedback"
_TABLES = """
CREATE TABLE IF NOT EXISTS feedback (
  trace_id TEXT NOT NULL, principal TEXT NOT NULL, rating TEXT NOT NULL, comment TEXT NOT NULL,
  question TEXT NOT NULL, library TEXT NOT NULL, created_at TEXT NOT NULL,
  PRIMARY KEY (trace_id, principal)
);
CREATE INDEX IF NOT EXISTS feedback_created ON feedback (created_at);
"""
_COLUMNS = "trace_id, rating, comment, principal, question, library, created_at"
_BY_PRINCIPAL = "CREATE INDEX IF NOT EXISTS feedback_by_principal ON feedback (principal, created_at);"
MIGRATIONS = (
    Migration(1, "verdicts on answers", _TABLES),  # idempotent: adopts a file from before versions
    Migration(2, "each person's verdicts by age, for keeping the newest", _BY_PRINCIPAL),
)


def _check(rating: str, comment: str) -> None:
    if rating not in RATINGS:
        raise InvalidArgument(f"rating {rating[:20]!r} is not one of {', '.join(RATINGS)}")
    if len(comment) > MAX_COMMENT:
        raise InvalidArgument(f"comment is {len(comment)} characters, over the limit of {MAX_COMMENT}")


class FeedbackStore:
    def __init__(self, db: StateDB, kept: int = 1_000) -> None:
        self._db = db
        self._kept = kept

    def put(self, feedback: Feedback) -> Feedback:
        """Stores `feedback`, replacing what the same person said of the same answer, and forgets
        that person's verdicts past the newest `kept`."""
        _check(feedback.rating, feedback.comment)
        with self._db.transaction() as db:
            db.one_at_a_time(f"feedback.{feedback.principal}")  # its trim sees the person's other puts
            db.execute(
                f"INSERT INTO feedback ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (trace_id, principal) DO UPDATE SET rating = excluded.rating,"
                " comment = excluded.comment, question = excluded.question, library = excluded.library,"
                " created_at = excluded.created_at",
                (
                    feedback.trace_id,
                    feedback.rating,
                    feedback.comment,
                    feedback.principal,
                    feedback.question,
                    feedback.library,
                    feedback.created_at,
                ),
            )
            db.execute(
                "DELETE FROM feedback WHERE principal = ? AND trace_id IN (SELECT trace_id FROM feedback"
                f" WHERE principal = ? ORDER BY created_at DESC, trace_id {db.offset_only})",
                (feedback.principal, feedback.principal, self._kept),
            )
        return feedback

    def list(self, limit: int, library: str = "") -> list[Feedback]:
        """The newest `limit` (the service bounds it); only `library`'s when one is named."""
        where, args = ("WHERE library = ?", [library]) if library else ("", [])
        rows = self._db.all(
            f"SELECT {_COLUMNS} FROM feedback {where} ORDER BY created_at DESC, trace_id LIMIT ?",
            (*args, limit),
        )
        return [Feedback(*row) for row in rows]

    def close(self) -> None:
        self._db.close()
