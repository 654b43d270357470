"""The feedback store on a real SQLite file: one verdict per answer and person, newest first."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragstack.domain import Feedback
from ragstack.errors import InvalidArgument
from services.agent.feedback import FeedbackStore


def test_the_last_verdict_counts_and_listing_is_newest_first(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite")
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
    # The file survives a restart.
    assert FeedbackStore(tmp_path / "feedback.sqlite").list(10) == listed


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
    with pytest.raises(InvalidArgument, match=message):
        FeedbackStore(tmp_path / "f.sqlite").put(Feedback("a" * 32, rating, comment))


def test_the_cli_lists_feedback_through_the_agent_service(tmp_path: Path) -> None:
    """`ragstack feedback list` reads through ListFeedback (here an embedded agent service)."""
    import json

    from click.testing import CliRunner

    from ragstack.cli.main import cli
    from tests.conftest import make_config

    make_config(tmp_path / "data")
    store = FeedbackStore(tmp_path / "data" / "feedback.sqlite")
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
