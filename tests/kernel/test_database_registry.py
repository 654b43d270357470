"""The database registry on both state backends (SQLite and PostgreSQL): attached databases with
their ACL groups beside the configured ones, replaced, detached and counted; a registry file from
before versions is adopted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ragstack.config import DatabaseConfig, StateConfig
from ragstack.errors import InvalidArgument, NotFound
from ragstack.guard.databases import ATTACHED, CONFIG, DatabaseGuard
from ragstack.stores import databases
from ragstack.stores.databases import DatabaseRegistry, Entry
from tests.kernel.test_guard_databases import make_sqlite
from tests.tools import state as state_tools


def registry(cfg: StateConfig, tmp_path: Path) -> DatabaseRegistry:
    configured = [DatabaseConfig(name="main", library="lib", url=f"sqlite:///{tmp_path}/main.db")]
    guard = DatabaseGuard(roots=[tmp_path / "dbs"], data_dir=tmp_path / "data")
    return DatabaseRegistry(state_tools.store(cfg, tmp_path / "data", databases), configured, guard)


def test_attached_databases_are_kept_with_their_groups(state_config: StateConfig, tmp_path: Path) -> None:
    shop = make_sqlite(tmp_path / "dbs" / "shop.db")
    pay = make_sqlite(tmp_path / "dbs" / "pay.db")
    reg = registry(state_config, tmp_path)
    found = reg.attach("lib", "shop", str(shop))
    assert found.dialect == "sqlite" and [t.name for t in found.tables] == ["items"]
    reg.attach("lib", "pay", f"sqlite:///{pay}", groups=["hr"])
    reg.attach("other", "shop", str(shop))
    assert [(e.name, e.origin, e.groups) for e in reg.entries("lib")] == [
        ("main", CONFIG, ()),
        ("pay", ATTACHED, ("hr",)),
        ("shop", ATTACHED, ()),
    ]
    assert [e.name for e in reg.entries("lib", visible=lambda groups: not groups)] == ["main", "shop"]
    with pytest.raises(InvalidArgument, match=r"configured in ragstack\.yaml"):
        reg.attach("lib", "main", str(shop))
    reg.attach("lib", "shop", str(pay), groups=["ops"])  # attached again: replaced
    assert reg.entry("lib", "shop") == Entry("shop", "lib", str(pay), ATTACHED, ("ops",))
    assert reg.attached_counts() == {"lib": 2, "other": 1}
    reg.close()

    again = registry(state_config, tmp_path)  # a restart keeps them
    again.detach("lib", "pay")
    with pytest.raises(NotFound, match="not attached"):
        again.detach("lib", "pay")
    with pytest.raises(NotFound, match=r"configured in ragstack\.yaml"):
        again.detach("lib", "main")
    assert [e.name for e in again.entries("lib")] == ["main", "shop"]
    assert again.attached_counts() == {"lib": 1, "other": 1}
    again.close()


def test_a_registry_from_before_versions_is_adopted_with_its_rows(tmp_path: Path) -> None:
    """databases.sqlite from before database ACLs: its databases stay, open to the whole library."""
    shop = make_sqlite(tmp_path / "dbs" / "shop.db")
    (tmp_path / "data").mkdir()
    with sqlite3.connect(tmp_path / "data" / "databases.sqlite") as old:
        old.execute(
            "CREATE TABLE databases (library TEXT NOT NULL, name TEXT NOT NULL, url TEXT NOT NULL,"
            " attached_at TEXT NOT NULL, PRIMARY KEY (library, name))"
        )
        old.execute("INSERT INTO databases VALUES ('lib', 'shop', ?, '2026-11-01')", (str(shop),))
    old.close()
    reg = registry(StateConfig(), tmp_path)
    assert reg.entry("lib", "shop") == Entry("shop", "lib", str(shop), ATTACHED, ())
    reg.attach("lib", "shop", str(shop), groups=["hr"])
    assert reg.entry("lib", "shop").groups == ("hr",)
    reg.close()
