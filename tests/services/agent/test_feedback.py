"""The feedback store on both state backends (SQLite and PostgreSQL): one verdict per answer and
person, newest first."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragstack.config import StateConfig
from ragstack.domain import Feedback
from ragstack.errors import InvalidArgument
from ragstack.state.migrations import MigrationRequired
from services.agent import feedback
from services.agent.feedback import FeedbackStore
from tests.tools import state as state_tools


def test_the_last_verdict_counts_and_listing_is_newest_first(
    state_config: StateConfig, tmp_path: Path
) -> None:
    store = FeedbackStore(state_tools.store(state_config, tmp_path, feedback))
    store.put(Feedback("a" * 32, "down", "stale", "ana", "Q1", "team", "2026-12-01T10:00:00"))
    store.put(Feedback("b" * 32, "up", "", "ana", "Q2", "other", "2026-12-01T11:00:00"))
    store.put(Feedback("a" * 32, "up", "fine now", "ana", "Q1", "team", "2026-12-01T12:00:00"))
    store.put(Feedback("a" * 32, "down", "", "ben", "Q1", "team", "2026-12-01T09:00:00"))
    listed = store.list(10)
    assert [(f.principal, f.rating, f.comment) for f in listed] == [
        ("ana", "up", "fine now"),
        ("ana", "up", ""),
        ("ben", "down", ""),
    ]
    assert [f.question for f in store.list(10, "other")] == ["Q2"]
    assert len(store.list(1)) == 1
    store.close()
    # The verdicts survive a restart.
    again = FeedbackStore(state_tools.store(state_config, tmp_path, feedback))
    assert again.list(10) == listed
    again.close()


def test_each_caller_keeps_its_newest_verdicts(state_config: StateConfig, tmp_path: Path) -> None:
    """Past `kept`, a caller's oldest verdict is forgotten; another caller's are not touched, and a
    verdict given again counts as new."""
    store = FeedbackStore(state_tools.store(state_config, tmp_path, feedback), kept=3)
    store.put(Feedback("z" * 32, "up", "", "ben", "Qb", "team", "2026-12-01T08:00:00"))
    for hour in range(10, 14):
        store.put(Feedback(f"{hour:032d}", "down", "", "ana", f"Q{hour}", "team", f"2026-12-01T{hour}:00:00"))
    assert [f.question for f in store.list(10)] == ["Q13", "Q12", "Q11", "Qb"]
    store.put(Feedback(f"{11:032d}", "up", "", "ana", "Q11", "team", "2026-12-01T15:00:00"))
    store.put(Feedback("y" * 32, "up", "", "ana", "Q16", "team", "2026-12-01T16:00:00"))
    assert [(f.principal, f.question) for f in store.list(10)] == [
        ("ana", "Q16"),
        ("ana", "Q11"),
        ("ana", "Q13"),
        ("ben", "Qb"),
    ]
    store.close()


def test_a_file_from_before_versions_is_adopted_with_its_rows(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "feedback.sqlite") as old:
        old.executescript(
            "CREATE TABLE feedback (trace_id TEXT NOT NULL, principal TEXT NOT NULL, rating TEXT NOT NULL,"
            " comment TEXT NOT NULL, question TEXT NOT NULL, library TEXT NOT NULL, created_at TEXT NOT NULL,"
            " PRIMARY KEY (trace_id, principal));"
            "INSERT INTO feedback VALUES ('aaaa', 'ana', 'down', 'old', 'Q', 'team', '2026-11-01');"
        )
    old.close()
    with pytest.raises(MigrationRequired, match="2: each person's verdicts by age"):
        state_tools.store(StateConfig(), tmp_path, feedback)
    store = FeedbackStore(state_tools.store(StateConfig(auto_migrate=True), tmp_path, feedback))
    assert store.list(10) == [Feedback("aaaa", "down", "old", "ana", "Q", "team", "2026-11-01")]
    store.put(Feedback("aaaa", "up", "", "ana", "Q", "team", "2026-11-02"))
    assert [f.rating for f in store.list(10)] == ["up"]
    store.close()


@pytest.mark.parametrize(
    "rating, comment, message",
    [
        ("sideways", "", "is not one of up, down"),
        ("", "", "is not one of"),
        ("up", "x" * 2001, "over the limit of 2000"),
    ],
)
def test_a_bad_verdict_is_refused_with_the_rule(
    tmp_path: Path, rating: str, comment: str, message: str
) -> None:
    store = FeedbackStore(state_tools.store(StateConfig(), tmp_path, feedback))
    with pytest.raises(InvalidArgument, match=message):
        store.put(Feedback("a" * 32, rating, comment))
    store.close()


def test_the_cli_lists_feedback_through_the_agent_service(tmp_path: Path) -> None:
    """`ragstack feedback list` reads through ListFeedback (here an embedded agent service)."""
    import json

    from click.testing import CliRunner

    from ragstack.cli.main import cli
    from tests.conftest import make_config

    make_config(tmp_path / "data")
    store = FeedbackStore(state_tools.store(StateConfig(), tmp_path / "data", feedback))
    store.put(
        Feedback(
            "c" * 32,
            "down",
            "Cites the wrong page.",
            "ana",
            "Where is BM25 defined?",
            "default",
            "2026-12-02",
        )
    )
    config = ["--config", str(tmp_path / "data.yaml")]
    shown = CliRunner().invoke(cli, [*config, "feedback", "list"])
    assert shown.exit_code == 0, shown.output
    assert "down" in shown.output and "Cites the wrong page." in shown.output and "c" * 32 in shown.output
    as_json = CliRunner().invoke(cli, [*config, "feedback", "list", "--json", "--library", "other"])
    assert as_json.exit_code == 0 and as_json.output == ""
    everything = CliRunner().invoke(cli, [*config, "feedback", "list", "--json"])
    assert json.loads(everything.output)["principal"] == "ana"
