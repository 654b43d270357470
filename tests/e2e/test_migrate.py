"""`ragstack migrate` on both backends: a new deployment's stores are created whole; a release that
changes a schema is refused by the services until `ragstack migrate` applied it, and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from ragstack.cli.main import cli
from ragstack.config import StateConfig
from ragstack.state import Migration, MigrationRequired, open_state
from ragstack.stores import catalog

STORES = ("catalog", "databases", "enrich", "feedback", "jobs", "sessions", "sources")


def config_file(tmp_path: Path, state: StateConfig) -> list[str]:
    path = tmp_path / "ragstack.yaml"
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "state": {"url": state.url}}))
    return ["--config", str(path)]


def test_migrate_creates_then_keeps_every_store_current(state_config: StateConfig, tmp_path: Path) -> None:
    args = config_file(tmp_path, state_config)
    fresh = CliRunner().invoke(cli, [*args, "migrate", "--check"])
    assert fresh.exit_code == 1, fresh.output
    assert [line.split(":")[0] for line in fresh.output.splitlines()] == list(STORES)
    assert all("pending 1:" in line for line in fresh.output.splitlines())

    done = CliRunner().invoke(cli, [*args, "migrate"])
    assert done.exit_code == 0, done.output
    assert "catalog: applied 1: documents and the batch journal" in done.output

    again = CliRunner().invoke(cli, [*args, "migrate", "--check"])
    assert again.exit_code == 0 and again.output.splitlines() == [f"{s}: current" for s in STORES]
    one = CliRunner().invoke(cli, [*args, "migrate", "--check", "--service", "agent"])
    assert one.output.splitlines() == ["feedback: current", "sessions: current"]


def test_a_schema_change_is_refused_until_migrated(
    state_config: StateConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = config_file(tmp_path, state_config)
    assert CliRunner().invoke(cli, [*args, "migrate"]).exit_code == 0
    catalog_db = open_state(state_config, tmp_path / "data", catalog.STORE, catalog.MIGRATIONS)
    catalog.Catalog(catalog_db).begin_batch("kept")
    catalog_db.close()

    # The next release adds a column to the catalog.
    now = len(catalog.MIGRATIONS)
    newer = (
        *catalog.MIGRATIONS,
        Migration(now + 1, "documents get a note", "ALTER TABLE documents ADD COLUMN note TEXT"),
    )
    monkeypatch.setattr(catalog, "MIGRATIONS", newer)
    with pytest.raises(
        MigrationRequired, match=rf"catalog.*version {now}.*{now + 1}: documents get a note.*ragstack migrate"
    ):
        open_state(state_config, tmp_path / "data", catalog.STORE, catalog.MIGRATIONS)
    check = CliRunner().invoke(cli, [*args, "migrate", "--check", "--service", "ingest"])
    assert check.exit_code == 1 and f"catalog: pending {now + 1}: documents get a note" in check.output

    assert CliRunner().invoke(cli, [*args, "migrate", "--service", "ingest"]).exit_code == 0
    db = open_state(state_config, tmp_path / "data", catalog.STORE, catalog.MIGRATIONS)
    assert catalog.Catalog(db).pending_batch() == "kept"  # the rows came through
    db.execute("UPDATE documents SET note = 'x'")  # and the column is there
    db.close()
