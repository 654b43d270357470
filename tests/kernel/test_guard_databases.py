"""ragstack.guard.databases: which SQLite/DuckDB files and PostgreSQL hosts an attached URL may name, and
that a `${NAME}` secret never shows in an error. PostgreSQL is checked without a server, except for a
fake one on loopback that records what libpq sends it."""

from __future__ import annotations

import os
import socket
import sqlite3
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragstack.errors import InvalidArgument, PermissionDenied, RagstackError, Unavailable
from ragstack.guard.databases import CONFIG, DatabaseGuard
from ragstack.sql.sources import DuckDBSource, PostgresSource, SqliteSource

SECRET = "Tr0ub4dor&3-zq7x"  # the value of ${PGPASS}; must never show in an error
OTHER = "never-shown-9k2m"  # the value of a variable not in sql.secret_env
HOST_VALUE = "host-value-77.example"
PORT_VALUE = "54329"


def make_sqlite(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO items (name) VALUES ('apple'), ('pear')")
        conn.commit()
    finally:
        conn.close()
    return path


@dataclass
class Layout:
    root: Path
    outside: Path
    data: Path
    guard: DatabaseGuard


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    root, outside, data = tmp_path / "root", tmp_path / "outside", tmp_path / "data"
    for folder in (root, outside, data):
        folder.mkdir()
    return Layout(root, outside, data, DatabaseGuard(roots=[root], data_dir=data))


def refusal(guard: DatabaseGuard, url: str) -> str:
    with pytest.raises(PermissionDenied) as info:
        guard.check(url)
    return str(info.value)


# --- files -------------------------------------------------------------------------------------------


def test_sqlite_file_under_a_root_is_allowed(layout: Layout) -> None:
    db = make_sqlite(layout.root / "shop.db")
    source = layout.guard.check(f"sqlite:///{db}")
    assert isinstance(source, SqliteSource)
    assert source.path == db.resolve()
    assert [t.name for t in source.schema()] == ["items"]
    assert source.run("SELECT count(*) FROM items", 10, 5.0).rows == ((2,),)


def test_a_bare_path_and_a_nested_folder_are_allowed(layout: Layout) -> None:
    db = make_sqlite(layout.root / "a" / "b" / "nested.sqlite")
    source = layout.guard.check(str(db))
    assert isinstance(source, SqliteSource) and source.path == db.resolve()


def test_four_slashes_name_an_absolute_path(layout: Layout) -> None:
    db = make_sqlite(layout.root / "shop.db")
    assert str(db).startswith("/")
    source = layout.guard.check(f"sqlite:///{db}")  # sqlite:////abs/path
    assert f"sqlite:///{db}".startswith("sqlite:////")
    assert isinstance(source, SqliteSource) and source.path == db.resolve()
    assert str(source.path).startswith("/") and not str(source.path).startswith("//")


def test_duckdb_file_under_a_root_is_allowed(layout: Layout) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = layout.root / "facts.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE facts (k VARCHAR, v INTEGER)")
    conn.execute("INSERT INTO facts VALUES ('a', 1)")
    conn.close()
    source = layout.guard.check(f"duckdb://{path}")
    assert isinstance(source, DuckDBSource) and source.path == path.resolve()
    assert [t.name for t in source.schema()] == ["facts"]


def test_outside_the_roots_refused_the_same_whether_the_file_exists_or_not(layout: Layout) -> None:
    path = layout.outside / "x.db"
    make_sqlite(path)
    existing = refusal(layout.guard, f"sqlite:///{path}")
    path.unlink()
    missing = refusal(layout.guard, f"sqlite:///{path}")
    assert existing == missing
    assert "sql.allowed_roots" in existing
    # and a folder that does not exist at all reads the same, apart from its name
    nowhere = refusal(layout.guard, f"sqlite:///{layout.outside}/no/such/y.db")
    assert nowhere.replace(f"{layout.outside}/no/such/y.db", "P") == existing.replace(str(path), "P")


def test_refusal_outside_the_roots_does_not_touch_the_file_system(layout: Layout) -> None:
    os.mkfifo(layout.outside / "fifo.db")  # opening a FIFO would block: the guard must not look
    assert "sql.allowed_roots" in refusal(layout.guard, f"sqlite:///{layout.outside}/fifo.db")


@pytest.mark.parametrize(
    "tail", ["../outside/x.db", "sub/../../outside/x.db", "./../outside/x.db", "../root2/x.db"]
)
def test_dot_dot_escapes_are_refused(layout: Layout, tail: str) -> None:
    make_sqlite(layout.outside / "x.db")
    make_sqlite(layout.root.parent / "root2" / "x.db")  # a sibling sharing the root's name as a prefix
    (layout.root / "sub").mkdir()
    assert "sql.allowed_roots" in refusal(layout.guard, f"sqlite:///{layout.root}/{tail}")


def test_a_relative_path_escaping_the_roots_is_refused(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_sqlite(layout.outside / "x.db")
    monkeypatch.chdir(layout.root)
    assert "sql.allowed_roots" in refusal(layout.guard, "../outside/x.db")
    make_sqlite(layout.root / "in.db")
    assert isinstance(layout.guard.check("in.db"), SqliteSource)


def test_a_symlink_inside_a_root_pointing_outside_is_refused(layout: Layout) -> None:
    target = make_sqlite(layout.outside / "x.db")
    (layout.root / "link.db").symlink_to(target)
    assert "sql.allowed_roots" in refusal(layout.guard, f"sqlite:///{layout.root}/link.db")
    (layout.root / "dirlink").symlink_to(layout.outside, target_is_directory=True)
    assert "sql.allowed_roots" in refusal(layout.guard, f"sqlite:///{layout.root}/dirlink/x.db")


def test_a_symlink_inside_a_root_pointing_into_data_dir_is_refused(layout: Layout) -> None:
    target = make_sqlite(layout.data / "catalog.sqlite")
    (layout.root / "link.db").symlink_to(target)
    refusal(layout.guard, f"sqlite:///{layout.root}/link.db")  # data_dir lies outside the root here


def test_a_symlink_into_data_dir_inside_a_root_is_refused_as_own_data(tmp_path: Path) -> None:
    data = tmp_path / "data"
    guard = DatabaseGuard(roots=[tmp_path], data_dir=data)
    target = make_sqlite(data / "snapshots" / "s1" / "catalog.sqlite")
    (tmp_path / "link.db").symlink_to(target)
    (tmp_path / "dirlink").symlink_to(data, target_is_directory=True)
    assert "data_dir" in refusal(guard, f"sqlite:///{tmp_path}/link.db")
    assert "data_dir" in refusal(guard, f"sqlite:///{tmp_path}/dirlink/snapshots/s1/catalog.sqlite")


def test_a_symlink_inside_a_root_to_another_place_in_it_is_allowed(layout: Layout) -> None:
    target = make_sqlite(layout.root / "real.db")
    (layout.root / "alias.db").symlink_to(target)
    source = layout.guard.check(f"sqlite:///{layout.root}/alias.db")
    assert isinstance(source, SqliteSource) and source.path == target.resolve()


def test_a_hard_link_inside_a_root_to_a_data_dir_file_is_refused(layout: Layout) -> None:
    own = make_sqlite(layout.data / "catalog.sqlite")
    os.link(own, layout.root / "copy.db")
    assert "data_dir" in refusal(layout.guard, f"sqlite:///{layout.root}/copy.db")


def test_a_hard_link_to_a_nested_data_dir_file_is_refused(layout: Layout) -> None:
    """RAGStack keeps databases below the data directory too (snapshots/<id>/catalog.sqlite)."""
    own = make_sqlite(layout.data / "snapshots" / "s1" / "catalog.sqlite")
    os.link(own, layout.root / "copy.db")
    assert "data_dir" in refusal(layout.guard, f"sqlite:///{layout.root}/copy.db")


def test_data_dir_inside_a_root_keeps_its_files_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    guard = DatabaseGuard(roots=[tmp_path], data_dir=data)
    make_sqlite(data / "catalog.sqlite")
    make_sqlite(data / "snapshots" / "s1" / "catalog.sqlite")
    make_sqlite(tmp_path / "mine.db")
    for path in (data / "catalog.sqlite", data / "snapshots" / "s1" / "catalog.sqlite"):
        assert "data_dir" in refusal(guard, f"sqlite:///{path}")
    assert "data_dir" in refusal(guard, f"sqlite:///{tmp_path}/x/../data/catalog.sqlite")
    assert isinstance(guard.check(f"sqlite:///{tmp_path}/mine.db"), SqliteSource)


def test_data_dir_reached_through_a_symlinked_root_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_sqlite(data / "catalog.sqlite")
    (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)
    guard = DatabaseGuard(roots=[tmp_path / "alias"], data_dir=data)
    assert "data_dir" in refusal(guard, f"sqlite:///{tmp_path}/alias/data/catalog.sqlite")


def test_missing_unreadable_and_non_file_read_the_same(layout: Layout) -> None:
    (layout.root / "folder.db").mkdir()
    os.mkfifo(layout.root / "fifo.db")
    (layout.root / "dangling.db").symlink_to(layout.root / "gone.db")
    names = ["missing.db", "folder.db", "fifo.db", "dangling.db"]
    if os.geteuid() != 0:  # root reads any file: no unreadable one can be made
        unreadable = make_sqlite(layout.root / "locked.db")
        unreadable.chmod(0)
        names.append("locked.db")
    messages = set()
    for name in names:
        with pytest.raises(InvalidArgument) as info:
            layout.guard.check(f"sqlite:///{layout.root}/{name}")
        assert not isinstance(info.value, PermissionDenied)
        messages.add(str(info.value).replace(name, "NAME"))
    assert len(messages) == 1, messages


def test_no_roots_refuses_every_file_naming_the_setting(tmp_path: Path) -> None:
    db = make_sqlite(tmp_path / "x.db")
    guard = DatabaseGuard()
    for url in (f"sqlite:///{db}", f"duckdb://{db}", str(db)):
        assert "sql.allowed_roots" in refusal(guard, url)


def test_placeholders_are_refused_in_a_file_url(layout: Layout) -> None:
    guard = DatabaseGuard(roots=[layout.root], secret_env=["PGPASS"], environ={"PGPASS": SECRET})
    with pytest.raises(InvalidArgument) as info:
        guard.check(f"sqlite:///{layout.root}/${{PGPASS}}.db")
    assert SECRET not in str(info.value)


def test_config_origin_opens_as_written(layout: Layout) -> None:
    db = make_sqlite(layout.outside / "ops.db")
    url = f"sqlite:///{db}"
    refusal(layout.guard, url)
    with pytest.raises(PermissionDenied):
        layout.guard.open(url)  # attached by default
    source = layout.guard.open(url, CONFIG)
    assert isinstance(source, SqliteSource) and source.path == db.resolve()
    assert source.run("SELECT name FROM items ORDER BY id", 10, 5.0).rows == (("apple",), ("pear",))


def test_config_origin_reads_placeholders_anywhere_in_a_postgres_url() -> None:
    guard = DatabaseGuard(environ={"PGHOST": "db.example", "PGPASS": SECRET})
    source = guard.open("postgresql://app:${PGPASS}@${PGHOST}/app?options=-csearch_path%3Dx", CONFIG)
    assert isinstance(source, PostgresSource)
    with pytest.raises(PermissionDenied):  # the same URL attached: no hosts allowed
        guard.open("postgresql://app@db.example/app")


# --- PostgreSQL ----------------------------------------------------------------------------------------


def pg_guard(*hosts: str) -> DatabaseGuard:
    return DatabaseGuard(
        hosts=hosts or ("db.internal", "10.0.0.0/8", "::1"),
        secret_env=["PGPASS"],
        environ={"PGPASS": SECRET, "OTHER": OTHER, "PGHOST": HOST_VALUE, "PGPORT": PORT_VALUE},
    )


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@db.internal/shop",
        "postgres://app@DB.Internal:5432/shop",
        "postgresql://app@db.internal./shop?sslmode=require&application_name=rag",
        "postgresql://db.internal",
        "postgresql://app@10.1.2.3:6543/shop",
        "postgresql://app@[::1]:5432/shop",
        "postgresql://app:${PGPASS}@db.internal/shop",
        "postgresql://app@db.internal/shop?password=${PGPASS}",
        "postgresql://app:literal@db.internal/shop",
    ],
)
def test_allowed_hosts_are_accepted(url: str) -> None:
    source = pg_guard().check(url)
    assert isinstance(source, PostgresSource)
    assert source.url == url
    assert SECRET not in source.url


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@evil.example/shop",
        "postgresql://app@db.internal.evil.example/shop",
        "postgresql://app@11.0.0.1/shop",
        "postgresql://app@127.0.0.1/shop",
        "postgresql://app@[::2]/shop",
        "postgresql://app@%2Ftmp/shop",  # a Unix socket folder as the host
        "postgresql://app:${PGPASS}@evil.example/shop",
        "postgresql://app:literalpw@evil.example/shop",
    ],
)
def test_hosts_outside_the_allowlist_are_refused(url: str) -> None:
    with pytest.raises(PermissionDenied) as info:
        pg_guard().check(url)
    assert "sql.allowed_hosts" in str(info.value)
    assert SECRET not in str(info.value) and "literalpw" not in str(info.value)


def test_an_empty_host_list_refuses_every_host() -> None:
    with pytest.raises(PermissionDenied) as info:
        DatabaseGuard().check("postgresql://app@db.internal/shop")
    assert "sql.allowed_hosts" in str(info.value)


def test_a_url_without_a_host_is_refused() -> None:
    with pytest.raises(PermissionDenied):
        pg_guard().check("postgresql:///shop")


def test_cidr_ranges() -> None:
    guard = DatabaseGuard(hosts=["10.0.0.0/8", "192.168.1.0/24", "fd00::/8"])
    assert guard.allows_host("10.255.0.1") and guard.allows_host("192.168.1.77")
    assert guard.allows_host("fd12::5")
    assert not guard.allows_host("192.168.2.1") and not guard.allows_host("11.0.0.1")
    assert not guard.allows_host("fe80::1") and not guard.allows_host("10.0.0.1.example")
    assert isinstance(guard.check("postgresql://app@192.168.1.9/shop"), PostgresSource)
    with pytest.raises(PermissionDenied):
        guard.check("postgresql://app@192.168.2.9/shop")


def test_host_names_match_exactly_case_aside() -> None:
    guard = DatabaseGuard(hosts=["DB.Internal."])
    assert guard.allows_host("db.internal") and guard.allows_host("DB.INTERNAL.")
    assert not guard.allows_host("xdb.internal") and not guard.allows_host("db.internal.evil")
    assert not guard.allows_host("10.0.0.1")


def test_star_allows_any_host() -> None:
    guard = DatabaseGuard(hosts=["*"])
    assert guard.allows_host("anything.example") and guard.allows_host("8.8.8.8")
    assert isinstance(guard.check("postgresql://app@anything.example/shop"), PostgresSource)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@db.internal,evil.example/shop",
        "postgresql://app@db.internal:5432,evil.example:5432/shop",
        "postgresql://app@db.internal,db.internal/shop",
        "postgresql://app@db.internal%2Cevil.example/shop",
    ],
)
def test_more_than_one_host_is_refused(url: str) -> None:
    with pytest.raises((InvalidArgument, PermissionDenied)):
        pg_guard("*").check(url)


@pytest.mark.parametrize(
    "param",
    [
        "host=evil.example",
        "hostaddr=10.9.9.9",
        "service=prod",
        "passfile=/etc/passwd",
        "sslkey=/root/.ssh/id_rsa",
        "sslcert=/etc/ssl/cert.pem",
        "sslrootcert=/etc/ssl/root.pem",
        "sslcrl=/etc/ssl/crl.pem",
        "options=-c%20log_statement%3Dall",
        "target_session_attrs=any",
        "krbsrvname=x",
        "HOST=evil.example",
        "%68ost=evil.example",
        "host",
    ],
)
def test_parameters_that_move_the_connection_or_read_files_are_refused(param: str) -> None:
    with pytest.raises(InvalidArgument):
        pg_guard("*").check(f"postgresql://app@db.internal/shop?{param}")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app@db.internal/shop?sslmode=require&sslmode=disable",
        "postgresql://app@db.internal/shop?user=other",
        "postgresql://app@db.internal:5432/shop?port=6543",
        "postgresql://app@db.internal/shop?dbname=other",
        "postgresql://app:pw@db.internal/shop?password=pw2",
        "postgresql://app@db.internal/shop?password=a&password=b",
        "postgresql://db.internal?user=a&user=b",
    ],
)
def test_a_parameter_given_twice_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgument):
        pg_guard().check(url)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://${PGPASS}@db.internal/shop",
        "postgresql://${PGPASS}:x@db.internal/shop",
        "postgresql://app@${PGHOST}/shop",
        "postgresql://app@db.internal:${PGPORT}/shop",
        "postgresql://app@db.internal/${PGPASS}",
        "postgresql://app@db.internal/shop?application_name=${PGPASS}",
        "postgresql://app@db.internal/shop?sslmode=${PGPASS}",
        "postgresql://app@db.internal/shop?user=${PGPASS}",
        "postgresql://app@db.internal/shop?${PGPASS}=x",
        "postgresql://app:${PGPASS}@db.internal/shop?application_name=${PGPASS}",
    ],
)
def test_placeholders_outside_the_password_are_refused(url: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        pg_guard().check(url)
    text = str(info.value)
    assert "sql.secret_env" in text
    for value in (SECRET, HOST_VALUE, PORT_VALUE, OTHER):
        assert value not in text


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:${OTHER}@db.internal/shop",
        "postgresql://app@db.internal/shop?password=${OTHER}",
        "postgresql://app:${PGPASS}${OTHER}@db.internal/shop",
    ],
)
def test_a_password_variable_not_in_secret_env_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        pg_guard().check(url)
    assert OTHER not in str(info.value) and SECRET not in str(info.value)
    assert "sql.secret_env" in str(info.value)


def test_a_listed_password_variable_that_is_not_set_is_refused() -> None:
    guard = DatabaseGuard(hosts=["db.internal"], secret_env=["PGPASS"], environ={})
    with pytest.raises(InvalidArgument):
        guard.check("postgresql://app:${PGPASS}@db.internal/shop")


# --- what libpq is given: a fake server on loopback -------------------------------------------------------


@dataclass
class FakePostgres:
    """Answers one startup with a cleartext password request, records the password and fails the
    login with an error message that (maliciously) repeats the password."""

    port: int = 0
    startup: dict[str, str] = field(default_factory=dict)
    password: str | None = None
    connections: int = 0
    done: threading.Event = field(default_factory=threading.Event)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _serve(listener: socket.socket, fake: FakePostgres) -> None:
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    with conn:
        conn.settimeout(5)
        fake.connections += 1
        try:
            while True:
                (length,) = struct.unpack("!I", _recv_exact(conn, 4))
                body = _recv_exact(conn, length - 4)
                (code,) = struct.unpack("!I", body[:4])
                if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: no
                    conn.sendall(b"N")
                    continue
                parts = body[4:].split(b"\0")
                fake.startup = {
                    parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2) if parts[i]
                }
                break
            conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
            kind = _recv_exact(conn, 1)
            (length,) = struct.unpack("!I", _recv_exact(conn, 4))
            payload = _recv_exact(conn, length - 4)
            if kind == b"p":
                fake.password = payload.rstrip(b"\0").decode()
            fields = b"SFATAL\0VFATAL\0C28P01\0M" + (
                f"password authentication failed: got {fake.password}".encode() + b"\0\0"
            )
            conn.sendall(b"E" + struct.pack("!I", len(fields) + 4) + fields)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            fake.done.set()


@pytest.fixture
def fake_postgres() -> Iterator[FakePostgres]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(10)
    fake = FakePostgres(port=listener.getsockname()[1])
    thread = threading.Thread(target=_serve, args=(listener, fake), daemon=True)
    thread.start()
    yield fake
    listener.close()
    thread.join(11)


def test_the_checked_host_is_the_host_connected_to_and_the_secret_never_shows(
    fake_postgres: FakePostgres,
) -> None:
    guard = DatabaseGuard(hosts=["127.0.0.1"], secret_env=["PGPASS"], environ={"PGPASS": SECRET})
    url = (
        f"postgresql://app%40team:${{PGPASS}}@127.0.0.1:{fake_postgres.port}/shop%20db"
        "?sslmode=disable&gssencmode=disable&application_name=rag"
    )
    source = guard.check(url)
    assert isinstance(source, PostgresSource)
    with pytest.raises(RagstackError) as info:
        source.schema()
    assert fake_postgres.done.wait(5)
    assert fake_postgres.connections == 1
    assert fake_postgres.startup["user"] == "app@team"
    assert fake_postgres.startup["database"] == "shop db"
    assert fake_postgres.startup["application_name"] == "rag"
    assert fake_postgres.password == SECRET  # ${PGPASS} read from the environment, as the password
    assert isinstance(info.value, Unavailable)
    assert SECRET not in str(info.value)
    assert SECRET not in repr(info.value)
    for arg in info.value.args:
        assert SECRET not in str(arg)


def test_a_password_with_url_special_characters_reaches_libpq_intact(fake_postgres: FakePostgres) -> None:
    value = "p@ss w/rd?&=%41#"
    guard = DatabaseGuard(hosts=["127.0.0.1"], secret_env=["PGPASS"], environ={"PGPASS": value})
    source = guard.check(
        f"postgresql://app:${{PGPASS}}@127.0.0.1:{fake_postgres.port}/shop?sslmode=disable&gssencmode=disable"
    )
    with pytest.raises(RagstackError) as info:
        source.schema()
    assert fake_postgres.done.wait(5)
    assert fake_postgres.password == value
    assert value not in str(info.value)
