"""A throwaway real PostgreSQL server for tests: the kernel's (ragstack/bench/postgres.py: a fresh
cluster in a temporary directory, on a free loopback port, as the `postgres` system user when we are
root) with a database `shop` and a login role `ragstack_ro` that may only connect and read.

    with PostgresServer() as pg:
        pg.execute_admin("CREATE TABLE t (x int)")   # in `shop`, as the superuser
        psycopg.connect(pg.url())   # as ragstack_ro: SELECT on tables of schema public, nothing else
"""

from __future__ import annotations

from ragstack.bench import postgres
from ragstack.bench.postgres import ADMIN_USER, SYSTEM_USER, PostgresError, bin_dir, unavailable_reason

__all__ = [
    "ADMIN_PASSWORD",
    "ADMIN_USER",
    "DATABASE",
    "RO_PASSWORD",
    "RO_ROLE",
    "SYSTEM_USER",
    "PostgresError",
    "PostgresServer",
    "bin_dir",
    "unavailable_reason",
]

ADMIN_PASSWORD = "admin-pw-3f9c"
RO_ROLE = "ragstack_ro"
RO_PASSWORD = "ro-pw-81d2"
DATABASE = "shop"
_ROLE_PASSWORDS = {ADMIN_USER: ADMIN_PASSWORD, RO_ROLE: RO_PASSWORD}


class PostgresServer(postgres.PostgresServer):
    """The kernel's server, with `shop` and `ragstack_ro`; `admin_url` and `execute_admin` reach
    `shop`."""

    admin_database = DATABASE

    def __init__(self, max_connections: int = 40) -> None:
        super().__init__(max_connections, admin_password=ADMIN_PASSWORD)

    def _prepare(self) -> None:
        self.execute_admin(
            f"CREATE DATABASE {DATABASE}",
            f"CREATE ROLE {RO_ROLE} LOGIN PASSWORD '{RO_PASSWORD}'",
            f"REVOKE ALL ON DATABASE {DATABASE} FROM PUBLIC",  # no CONNECT, no TEMP
            f"GRANT CONNECT ON DATABASE {DATABASE} TO {RO_ROLE}",
            database="postgres",
        )
        self.execute_admin(
            "REVOKE ALL ON SCHEMA public FROM PUBLIC",
            "ALTER SCHEMA public OWNER TO postgres",
            f"GRANT USAGE ON SCHEMA public TO {RO_ROLE}",
            # Tables the superuser creates later in public are readable by the role, and only readable.
            f"ALTER DEFAULT PRIVILEGES FOR ROLE {ADMIN_USER} IN SCHEMA public"
            f" GRANT SELECT ON TABLES TO {RO_ROLE}",
        )

    def url(self, role: str = RO_ROLE) -> str:
        """postgresql://ragstack_ro:pw@127.0.0.1:PORT/shop (or the superuser's with role="postgres")."""
        return self.role_url(role, _ROLE_PASSWORDS[role], DATABASE)
