"""A throwaway PostgreSQL server: a fresh cluster in a temporary directory, on a free loopback port,
removed whole by `stop()`. Used by `ragstack bench scale` (ragstack/bench/scale.py) and, with a
database and a read-only role of their own on top, by the tests (tests/tools/postgres.py).

The binaries come from the distribution's package (/usr/lib/postgresql/<version>/bin, installed by
scripts/install_postgres.sh). initdb and postgres refuse to run as root, so when we run as root the
server runs as the `postgres` system user (runuser) in a directory handed to it. Durability is
switched off (fsync, synchronous_commit, full_page_writes): a start takes a second or two.

    with PostgresServer(max_connections=200) as pg:
        url = pg.database("state")          # a new empty database: its URL, as the superuser
        pg.execute_admin("SELECT 1")        # in `pg.admin_url`'s database
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ADMIN_USER = "postgres"
SYSTEM_USER = "postgres"  # the system account the server runs as when we are root


def bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb, pg_ctl and postgres."""

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", Path(path).parent.name))

    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if all(os.access(Path(candidate) / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres")):
            return Path(candidate)
    return None


def _is_root() -> bool:
    return os.geteuid() == 0


def unavailable_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None when everything it needs is present."""
    if bin_dir() is None:
        return "no PostgreSQL under /usr/lib/postgresql/*/bin (run scripts/install_postgres.sh as root)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the psycopg package is not installed in this environment"
    if _is_root():
        if shutil.which("runuser") is None:
            return "running as root and no `runuser` to start PostgreSQL as another user"
        try:
            pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            return f"running as root and no {SYSTEM_USER!r} system user to run PostgreSQL as"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresError(RuntimeError):
    pass


class PostgresServer:
    """One PostgreSQL cluster of our own. `start()` (or `with`) starts it, `stop()` removes it all.
    The superuser `postgres` logs in with `admin_password` (a random one unless given)."""

    admin_database = "postgres"  # the database `admin_url` and `execute_admin` reach

    def __init__(self, max_connections: int = 40, admin_password: str | None = None) -> None:
        self.max_connections = max_connections
        self.admin_password = admin_password or secrets.token_hex(12)
        self.port = 0
        self.root: Path | None = None
        self._bin: Path | None = None

    # -- life cycle --------------------------------------------------------------------------------

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def data_dir(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root

    @property
    def log_file(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root / "server.log"

    def _cmd(self, *args: str) -> list[str]:
        return ["runuser", "-u", SYSTEM_USER, "--", *args] if _is_root() else list(args)

    def _run(self, *args: str, timeout: float = 60) -> None:
        assert self.root is not None
        done = subprocess.run(
            self._cmd(*args), cwd=self.root, capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise PostgresError(
                f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
                + self._log_tail()
            )

    def _log_tail(self) -> str:
        try:
            return "\n--- server log ---\n" + self.log_file.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def start(self) -> None:
        """initdb and start; on any failure everything is removed again and the error raised."""
        reason = unavailable_reason()
        if reason:
            raise PostgresError(reason)
        self._bin = bin_dir()
        assert self._bin is not None
        # Not under a private temporary folder (pytest's tmp_path: its parents are private to root):
        # the server may run as another user.
        self.root = Path(tempfile.mkdtemp(prefix="ragstack-pg-"))
        try:
            pwfile = self.root / "pwfile"
            pwfile.write_text(self.admin_password + "\n")
            if _is_root():
                entry = pwd.getpwnam(SYSTEM_USER)
                for path in (self.root, pwfile):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            self._run(
                str(self._bin / "initdb"),
                *("-D", str(self.data_dir), "-U", ADMIN_USER, f"--pwfile={pwfile}"),
                *("--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--encoding=UTF8"),
                *("--locale=C", "--no-sync", "--no-instructions"),
            )
            pwfile.unlink()
            self._start_server()
            self._prepare()
        except BaseException:
            self.stop()
            raise

    def _prepare(self) -> None:
        """What a subclass sets up once the server runs (databases, roles); nothing here."""

    def _start_server(self) -> None:
        assert self._bin is not None
        last = ""
        for _ in range(3):  # another process may take the free port before the server binds it
            self.port = _free_port()
            options = " ".join(
                [
                    "-c listen_addresses=127.0.0.1",
                    f"-p {self.port}",
                    f"-c unix_socket_directories={self.socket_dir}",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    f"-c max_connections={self.max_connections}",
                    "-c shared_buffers=32MB",
                    "-c log_min_messages=warning",
                    "-c log_statement=none",
                ]
            )
            try:
                self._run(
                    str(self._bin / "pg_ctl"),
                    *("-D", str(self.data_dir), "-l", str(self.log_file), "-o", options),
                    *("-w", "-t", "30", "start"),
                )
                return
            except PostgresError as exc:
                last = str(exc)
                if "could not bind" not in last and "in use" not in last:
                    raise
                time.sleep(0.2)
        raise PostgresError(f"PostgreSQL did not start on a free port: {last}")

    def stop(self) -> None:
        """Stops the server (immediate; SIGKILL when pg_ctl fails) and removes its directory."""
        if self.root is None:
            return
        if self._bin is not None and (self.data_dir / "postmaster.pid").exists():
            try:
                self._run(
                    str(self._bin / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"
                )
            except (PostgresError, subprocess.TimeoutExpired):
                pid = self._postmaster_pid()
                if pid:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    # -- access ------------------------------------------------------------------------------------

    def role_url(self, role: str, password: str, database: str) -> str:
        """postgresql://<role>:<password>@127.0.0.1:PORT/<database>."""
        assert self.port, "server not started"
        return f"postgresql://{role}:{password}@127.0.0.1:{self.port}/{database}"

    def database_url(self, database: str) -> str:
        """postgresql://postgres:pw@127.0.0.1:PORT/<database>: the superuser's URL of `database`."""
        return self.role_url(ADMIN_USER, self.admin_password, database)

    @property
    def admin_url(self) -> str:
        return self.database_url(self.admin_database)

    def execute_admin(self, *statements: str, database: str | None = None) -> list[tuple[Any, ...]]:
        """Run statements as the superuser (autocommit) in `database` (by default `admin_url`'s);
        the rows of the last one, if any."""
        import psycopg

        url = self.database_url(database) if database else self.admin_url
        rows: list[tuple[Any, ...]] = []
        with psycopg.connect(url, autocommit=True) as conn:
            for sql in statements:
                cur = conn.execute(sql)
                rows = list(cur.fetchall()) if cur.description else []
        return rows

    def database(self, name: str) -> str:
        """A new empty database `name`: its URL, as the superuser."""
        self.execute_admin(f'CREATE DATABASE "{name}"')
        return self.database_url(name)
