"""Which databases a caller of the API may attach, and how every database is opened.

A database attached at run time (AttachDatabase: `ragstack db attach`, `POST /v1/databases`) is named
by a caller, so its URL is checked here when it is attached and again whenever it is opened (the
allowlists may have narrowed since, and a registry written by an older release is not trusted):

- SQLite and DuckDB files only under `sql.allowed_roots`, resolved with symlinks followed, and never
  RAGStack's own files under `data_dir`, whatever the roots hold. A path outside the roots is refused
  before the file system is asked anything, and a file inside them that is missing, unreadable or
  not a regular file gets one message, so a refusal says nothing about what exists.
- PostgreSQL only on a host in `sql.allowed_hosts`: exact names, or CIDR ranges for literal
  addresses (`*`: any). The URL is parsed here and the connection made from the parsed parts, passed to libpq
  as keywords, so the host checked is the host connected to. More than one host, a part given
  twice, and every parameter that could move the connection or make libpq read a file of this
  machine (`host`, `hostaddr`, `service`, `passfile`, `sslkey`, `options`, ...) are refused.
- `${NAME}` only in the password position, and only for a variable named in `sql.secret_env`;
  the value read for it is masked in every error.

Databases in ragstack.yaml (`sql.databases`, origin `config`) are written by the operator: they are
opened as written, `${NAME}` read from the environment anywhere in the URL.
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote

from ragstack.config import SqlConfig
from ragstack.errors import InvalidArgument, PermissionDenied
from ragstack.sql.sources import (
    VARIABLE,
    DuckDBSource,
    PostgresSource,
    Source,
    SqliteSource,
    expand,
    open_source,
    parse_url,
)

CONFIG = "config"  # the origin of a database in ragstack.yaml
ATTACHED = "attached"  # the origin of one attached through the API

ROOTS = "sql.allowed_roots"
HOSTS = "sql.allowed_hosts"
SECRET_ENV = "sql.secret_env"

# What the query of an attached PostgreSQL URL may set: nothing that can move the connection to
# another server, socket or service, change its session settings, or make libpq read a file here.
PG_PARAMETERS = frozenset(
    {
        "user",
        "password",
        "dbname",
        "port",
        "sslmode",
        "sslnegotiation",
        "sslsni",
        "sslcompression",
        "gssencmode",
        "channel_binding",
        "require_auth",
        "application_name",
        "client_encoding",
    }
)
_PLACEHOLDER = "${"
_ONLY_PASSWORD = (
    f"`${{NAME}}` is allowed only as the password of an attached database URL, for a variable "
    f"named in {SECRET_ENV}"
)
_PG_URL = re.compile(r"(?P<authority>[^/?]*)(?P<path>/[^?]*)?(?:\?(?P<query>.*))?", re.DOTALL)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class DatabaseGuard:
    """The allowlists of `sql.*` and the environment `${NAME}` is read from. With none given,
    nothing may be attached through the API."""

    def __init__(
        self,
        roots: Iterable[Path] = (),
        hosts: Iterable[str] = (),
        secret_env: Iterable[str] = (),
        data_dir: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._roots_given, self._roots = _places(roots)
        self._private_given, self._private = _places([data_dir] if data_dir is not None else [])
        self._names, self._networks = _hosts(hosts)
        self._secret_env = frozenset(secret_env)
        self._environ: Mapping[str, str] = environ if environ is not None else {}

    @classmethod
    def from_config(cls, sql: SqlConfig, data_dir: Path, environ: Mapping[str, str]) -> DatabaseGuard:
        return cls(sql.allowed_roots, sql.allowed_hosts, sql.secret_env, data_dir, environ)

    def open(self, url: str, origin: str = ATTACHED) -> Source:
        """The database `url` names, not yet connected to: as written for one from ragstack.yaml
        (origin `config`), through `check` for any other."""
        if origin == CONFIG:
            return open_source(url, self._environ)
        return self.check(url)

    def check(self, url: str) -> Source:
        """The database an attached URL names, when the allowlists allow it. PermissionDenied for a
        file outside `sql.allowed_roots` or in the data directory, or a host outside
        `sql.allowed_hosts`; InvalidArgument for a malformed URL, `${NAME}` anywhere but the
        password or for a variable not in `sql.secret_env`, and a file that cannot be read."""
        dialect, rest = parse_url(url)
        if dialect == "postgres":
            return self._postgres(rest)
        if _PLACEHOLDER in rest:
            raise InvalidArgument(_ONLY_PASSWORD)
        path = self._file(rest)
        return DuckDBSource(path) if dialect == "duckdb" else SqliteSource(path)

    # --- files ------------------------------------------------------------------------------------

    def _file(self, text: str) -> Path:
        """The file, resolved, when it lies under a root and outside the data directory."""
        if not self._roots:
            raise PermissionDenied(
                f"no SQLite or DuckDB file may be attached through the API: {ROOTS} is empty"
            )
        if not text.strip() or "\0" in text:
            raise InvalidArgument("the database URL names no file")
        shown = text[:300]
        outside = PermissionDenied(f"database file {shown!r} is not under {ROOTS}; refused")
        own = PermissionDenied(f"database file {shown!r} is RAGStack's own data (data_dir); refused")
        # `sqlite:////abs` gives `//abs`, which POSIX paths keep as a root of its own: one slash
        given = "/" + text.lstrip("/") if os.path.isabs(text) else os.path.join(os.getcwd(), text)
        lexical = Path(os.path.normpath(given))  # no file system access before the roots say yes
        if not _inside(lexical, self._roots_given + self._roots):
            raise outside
        if _inside(lexical, self._private_given + self._private):
            raise own
        real = Path(os.path.realpath(given))  # symlinks followed, `..` after them
        if not _inside(real, self._roots):
            raise outside
        if _inside(real, self._private):
            raise own
        try:
            st = os.stat(real)
            readable = stat.S_ISREG(st.st_mode) and os.access(real, os.R_OK)
        except (OSError, ValueError):
            readable = False
        if not readable:  # one message for missing, unreadable and not a file: no existence oracle
            raise InvalidArgument(
                f"cannot read a database file at {shown!r}: missing, unreadable or not a file"
            )
        if st.st_nlink > 1 and self._is_private_file(st):  # a hard link to one of ours
            raise own
        return real

    def _is_private_file(self, st: os.stat_result) -> bool:
        """Whether the file is one of the data directory's, at any depth (walked only for a file
        with more than one link, which ordinary database files do not have)."""
        for folder in self._private:
            for top, _, files in os.walk(folder):
                for name in files:
                    try:
                        other = os.stat(os.path.join(top, name), follow_symlinks=False)
                    except OSError:
                        continue
                    if (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                        return True
        return False

    # --- PostgreSQL -------------------------------------------------------------------------------

    def _postgres(self, url: str) -> PostgresSource:
        """The source connecting, by keywords, to exactly the host the URL names."""
        if "#" in url:
            raise InvalidArgument("an attached PostgreSQL URL may not hold `#`")
        m = _PG_URL.fullmatch(url.split("://", 1)[1])
        assert m is not None  # every string matches
        userinfo, at, hostport = m.group("authority").rpartition("@")
        user_raw, colon, password_raw = userinfo.partition(":") if at else ("", "", "")
        host_raw, port_raw = _split_port(hostport)
        path_raw = (m.group("path") or "/")[1:]
        for where, raw in (("user", user_raw), ("host", host_raw), ("port", port_raw), ("dbname", path_raw)):
            if _PLACEHOLDER in raw:
                raise InvalidArgument(f"{_ONLY_PASSWORD}; found in the {where}")

        given = {k for k, v in (("user", user_raw), ("port", port_raw), ("dbname", path_raw)) if v}
        if colon:
            given.add("password")
        query = _query_parameters(m.group("query") or "", given)
        has_password = "password" in given or "password" in query
        password_raw = query.pop("password", password_raw)
        params = {key: unquote(value) for key, value in query.items()}

        host = unquote(host_raw)
        self._check_host(host)
        params["host"] = host
        port = unquote(port_raw) or params.pop("port", "")
        if port:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise InvalidArgument(f"invalid port {port[:20]!r} in the database URL")
            params["port"] = port
        if user_raw:
            params["user"] = unquote(user_raw)
        if path_raw:
            params["dbname"] = unquote(path_raw)
        secrets: tuple[str, ...] = ()
        if has_password:
            password, secrets = self._password(password_raw)
            params["password"] = password
            secrets = (*secrets, password) if password else secrets
        return PostgresSource(url, params=params, secrets=secrets)

    def _check_host(self, host: str) -> None:
        if not self._names and not self._networks:
            raise PermissionDenied(
                f"no PostgreSQL database may be attached through the API: {HOSTS} is empty"
            )
        if not host:
            raise PermissionDenied(f"an attached PostgreSQL URL must name its host, one of {HOSTS}")
        if "," in host:
            raise InvalidArgument("an attached PostgreSQL URL may name one host only")
        if not self.allows_host(host):
            raise PermissionDenied(f"PostgreSQL host {host[:100]!r} is not in {HOSTS}; refused")

    def allows_host(self, host: str) -> bool:
        """An address in one of the CIDR ranges, or a name listed exactly (case aside); `*`: any."""
        if "*" in self._names:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host.lower().rstrip(".") in self._names
        return any(address.version == net.version and address in net for net in self._networks)

    def _password(self, raw: str) -> tuple[str, tuple[str, ...]]:
        """The password with `${NAME}` read from the environment, for listed variables only."""
        for name in VARIABLE.findall(raw):
            if name not in self._secret_env:
                raise InvalidArgument(
                    f"${{{name}}} is not in {SECRET_ENV}: an attached URL may read only the variables "
                    "listed there, and only as its password"
                )
        expanded, secrets = expand(raw, self._environ)
        return unquote(expanded), secrets


def _query_parameters(query: str, given: set[str]) -> dict[str, str]:
    """The parameters the query of an attached PostgreSQL URL sets, each checked, with its value as
    written (the password's `${NAME}` is read before it is unquoted); `given`: the parameters the
    rest of the URL sets, which the query may not set again."""
    found: dict[str, str] = {}
    for piece in query.split("&"):
        if not piece:
            continue
        key_raw, eq, value_raw = piece.partition("=")
        key = unquote(key_raw)
        if _PLACEHOLDER in key_raw or (_PLACEHOLDER in value_raw and key != "password"):
            raise InvalidArgument(f"{_ONLY_PASSWORD}; found in the parameter {key[:40]!r}")
        if not eq:
            raise InvalidArgument(f"URL parameter {key[:40]!r} has no value")
        if key not in PG_PARAMETERS:
            raise InvalidArgument(
                f"URL parameter {key[:40]!r} is not allowed in an attached PostgreSQL URL: it connects "
                f"only to its one host, with these parameters: {', '.join(sorted(PG_PARAMETERS))}"
            )
        if key in given or key in found:
            raise InvalidArgument(f"`{key}` is given twice in the database URL")
        found[key] = value_raw
    return found


def _split_port(hostport: str) -> tuple[str, str]:
    """(host, port) of `host:port` or `[v6]:port`."""
    if hostport.startswith("["):
        host, bracket, port = hostport[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            raise InvalidArgument("malformed IPv6 host in the database URL")
        return host, port[1:]
    host, _, port = hostport.partition(":")
    return host, port


def _places(paths: Iterable[Path]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """Each folder as written (absolute) and resolved."""
    given = tuple(Path(os.path.abspath(p)) for p in paths)
    return given, tuple(Path(os.path.realpath(p)) for p in given)


def _inside(path: Path, folders: Iterable[Path]) -> bool:
    return any(path == f or path.is_relative_to(f) for f in folders)


def _hosts(entries: Iterable[str]) -> tuple[frozenset[str], tuple[Network, ...]]:
    names: set[str] = set()
    networks: list[Network] = []
    for entry in entries:
        entry = entry.strip()
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            if entry:
                names.add(entry.lower().rstrip("."))
    return frozenset(names), tuple(networks)
