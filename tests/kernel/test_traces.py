from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragstack.errors import InvalidArgument, TraceNotFound
from ragstack.traces import TraceStore


def _id(n: int) -> str:
    return f"{n:032x}"


def test_write_read_and_retention(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=3)
    for n in range(5):
        path = store.write(_id(n), {"n": n})
        assert path is not None
        os.utime(path, ns=(n * 10**9, n * 10**9))  # distinct mtimes, oldest first
    store.write(_id(5), {"n": 5})
    kept = {p.stem for p in store.list()}
    assert len(kept) == 3 and _id(5) in kept and _id(0) not in kept
    assert store.read(_id(5)) == {"n": 5}
    with pytest.raises(TraceNotFound):
        store.read(_id(0))


def test_each_caller_keeps_its_own_newest_traces(tmp_path: Path) -> None:
    """One caller's questions never push out another's traces; the local admin's stay where every
    trace was before callers had folders."""
    store = TraceStore(tmp_path, retention=2)
    mine = store.write(_id(1), {"who": "local"})
    assert mine == tmp_path / f"{_id(1)}.json"
    ana = store.write(_id(2), {"who": "ana"}, owner="ana")
    assert ana is not None and ana.parent.parent == tmp_path / "by" and "ana" not in str(ana)
    for n in range(10, 20):  # ben asks ten questions
        path = store.write(_id(n), {"who": "ben"}, owner="ben")
        assert path is not None
        os.utime(path, ns=(n * 10**9, n * 10**9))
    assert store.read(_id(1)) == {"who": "local"} and store.read(_id(2)) == {"who": "ana"}
    assert store.read(_id(19)) == {"who": "ben"}
    with pytest.raises(TraceNotFound):
        store.read(_id(17))
    assert {p.stem for p in store.list()} == {_id(1), _id(2), _id(18), _id(19)}
    bens = [p.stem for p in store.list() if p.parent not in (tmp_path, ana.parent)]
    assert bens == [_id(19), _id(18)]  # newest first


def test_ids_are_checked(tmp_path: Path) -> None:
    store = TraceStore(tmp_path, retention=3)
    with pytest.raises(InvalidArgument):
        store.read("../secret")
    with pytest.raises(InvalidArgument):
        store.write("x" * 32, {})


def test_disabled_writes_nothing(tmp_path: Path) -> None:
    assert TraceStore(tmp_path / "t", retention=3, enabled=False).write(_id(1), {}) is None
    assert not (tmp_path / "t").exists()
