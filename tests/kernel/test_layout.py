"""The data dir's layout marker: a new dir is marked, stores of another layout are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstack.stores.layout import LAYOUT_VERSION, LayoutMismatch, check_layout


def test_a_new_data_dir_is_marked_and_accepted_again(tmp_path: Path) -> None:
    check_layout(tmp_path / "data")
    assert json.loads((tmp_path / "data" / "layout.json").read_text()) == {"version": LAYOUT_VERSION}
    check_layout(tmp_path / "data")


def test_empty_store_folders_made_for_disks_of_their_own_are_not_an_old_layout(tmp_path: Path) -> None:
    for name in ("tantivy", "lancedb"):  # mount points, made before the first start
        (tmp_path / name).mkdir()
    check_layout(tmp_path)
    assert (tmp_path / "layout.json").exists()


@pytest.mark.parametrize("old", ["tantivy/meta.json", "lancedb/chunks.lance", "catalog.sqlite"])
def test_stores_without_a_marker_are_refused_as_layout_1(tmp_path: Path, old: str) -> None:
    (tmp_path / old).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / old).write_text("")
    with pytest.raises(LayoutMismatch, match=f"use layout 1, this RAGStack uses {LAYOUT_VERSION}"):
        check_layout(tmp_path)
    assert not (tmp_path / "layout.json").exists()


def test_another_layouts_marker_is_refused(tmp_path: Path) -> None:
    (tmp_path / "layout.json").write_text(json.dumps({"version": LAYOUT_VERSION - 1}))
    with pytest.raises(LayoutMismatch, match=f"use layout {LAYOUT_VERSION - 1}.*move that folder away"):
        check_layout(tmp_path)
