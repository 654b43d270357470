"""A throwaway real PostgreSQL server for tests: a fresh cluster in a temporary directory, on a free
loopback port, with a database `shop` and a login role `ragstack_ro` that may only connect and read.

The binaries come from the distribution's package (/usr/lib/postgresql/<version>/bin, installed by
scripts/install_postgres.sh). initdb and postgres refuse to run as root, so when the tests run as
root the server runs as the `postgres` system user (runuser) in a directory handed to it. Durability
is switched off (fsync, synchronous_commit, full_page_writes): a start takes a second or two.

    with PostgresServer() as pg:
        pg.execute_admin("CREATE TABLE t (x int)")
        psycopg.connect(pg.url())   # as ragstack_ro: SELECT on tables of schema public, nothing else
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

ADMIN_USER = "postgres"
ADMIN_PASSWORD = "admin-pw-3f9c"
RO_ROLE = "ragstack_ro"
RO_PASSWORD = "ro-pw-81d2"
DATABASE = "shop"
SYSTEM_USER = "postgres"  # the system account the server runs as when we are root
_ROLE_PASSWORDS = {ADMIN_USER: ADMIN_PASSWORD, RO_ROLE: RO_PASSWORD}


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
    """One PostgreSQL cluster of our own. `start()` (or `with`) starts it, `stop()` removes it all."""

    def __init__(self, max_connections: int = 40) -> None:
        self.max_connections = max_connections
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
                f"{' '.join(args[:1])} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
                + self._log_tail()
            )

    def _log_tail(self) -> str:
        try:
            return "\n--- server log ---\n" + self.log_file.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise PostgresError(reason)
        self._bin = bin_dir()
        assert self._bin is not None
        # Not under pytest's tmp_path: its parents are private to root, and the server runs as postgres.
        self.root = Path(tempfile.mkdtemp(prefix="ragstack-pg-"))
        try:
            pwfile = self.root / "pwfile"
            pwfile.write_text(ADMIN_PASSWORD + "\n")
            if _is_root():
                entry = pwd.getpwnam(SYSTEM_USER)
                os.chown(self.root, entry.pw_uid, entry.pw_gid)
                os.chown(pwfile, entry.pw_uid, entry.pw_gid)
            self._run(
                str(self._bin / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                ADMIN_USER,
                f"--pwfile={pwfile}",
                "--auth-local=scram-sha-256",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            )
            pwfile.unlink()
            self._start_server()
            self._create_database()
        except BaseException:
            self.stop()
            raise

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
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_file),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "30",
                    "start",
                )
                return
            except PostgresError as exc:
                last = str(exc)
                if "could not bind" not in last and "in use" not in last:
                    raise
                time.sleep(0.2)
        raise PostgresError(f"PostgreSQL did not start on a free port: {last}")

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self._dsn(ADMIN_USER, "postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
            conn.execute(f"CREATE ROLE {RO_ROLE} LOGIN PASSWORD '{RO_PASSWORD}'")
            conn.execute(f"REVOKE ALL ON DATABASE {DATABASE} FROM PUBLIC")  # no CONNECT, no TEMP
            conn.execute(f"GRANT CONNECT ON DATABASE {DATABASE} TO {RO_ROLE}")
        self.execute_admin(
            "REVOKE ALL ON SCHEMA public FROM PUBLIC",
            "ALTER SCHEMA public OWNER TO postgres",
            f"GRANT USAGE ON SCHEMA public TO {RO_ROLE}",
            # Tables the superuser creates later in public are readable by the role, and only readable.
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {ADMIN_USER} IN SCHEMA public"
            f" GRANT SELECT ON TABLES TO {RO_ROLE}",
        )

    def stop(self) -> None:
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

    def _dsn(self, role: str, database: str = DATABASE) -> str:
        assert self.port, "server not started"
        return f"postgresql://{role}:{_ROLE_PASSWORDS[role]}@127.0.0.1:{self.port}/{database}"

    def url(self, role: str = RO_ROLE) -> str:
        """postgresql://ragstack_ro:pw@127.0.0.1:PORT/shop (or the superuser's with role="postgres")."""
        return self._dsn(role)

    @property
    def admin_url(self) -> str:
        return self._dsn(ADMIN_USER)

    def execute_admin(self, *statements: str) -> list[tuple[Any, ...]]:
        """Run statements in `shop` as the superuser (autocommit); the rows of the last one, if any."""
        import psycopg

        rows: list[tuple[Any, ...]] = []
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for sql in statements:
                cur = conn.execute(sql)
                rows = list(cur.fetchall()) if cur.description else []
        return rows
