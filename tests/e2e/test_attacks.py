"""Attacks on the real stack (README, Security): a caller holding one ordinary API key, or none in the
default mode, tries to read what it should not, reach what it should not, or change what it may not.

One stack for the module: keys with roles, library scopes and ACL groups; a tiny corpus (public, HR-only
and board-only documents, one read from the inbox by path, one crawled); databases under
`sql.allowed_roots` (one hidden behind a group). On loopback: an "internal" HTTP server holding a secret
nothing may ever fetch, an allowed "outside" host (127.0.0.2, in `ingest.fetch_allow`) that redirects
inwards, a collector for leaked credentials, and ports that are closed, speak no HTTP or never answer.
Three more gateways (no keys; rate limited) front the same services. Every response and log line is
kept and scanned for secrets at the end, and the files outside the test's roots are checked unchanged.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import logging
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import threading
import uuid
import zipfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import docx
import duckdb
import grpc
import httpx
import openpyxl
import pytest

from ragstack.redact import RedactingFilter
from ragstack.resources import Resources
from ragstack.serve import Stack
from ragstack.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    common_pb2,
    ingest_pb2,
    ingest_pb2_grpc,
    retrieve_pb2,
    retrieve_pb2_grpc,
    verify_pb2,
    verify_pb2_grpc,
)
from tests.conftest import make_config, start_with

TOKEN = "svc-token-7f3e9a21c4b8d605e1"
KEYS: dict[str, dict[str, Any]] = {
    "admin": {"key": "adm-4c1e8f0a9b7d6e25c3", "role": "admin", "libraries": ["*"]},
    "writer": {"key": "wrt-9a3b5c7d1e2f4a60b8", "role": "writer", "libraries": ["team"]},
    "writer2": {"key": "wrt-0f1e2d3c4b5a6978aa", "role": "writer", "libraries": ["team"]},
    "reader": {"key": "rdr-5e6f7a8b9c0d1e2f33", "role": "reader", "libraries": ["team"]},
    "hr": {"key": "hrr-1a2b3c4d5e6f7a8b44", "role": "reader", "libraries": ["team"], "groups": ["hr"]},
    "outsider": {"key": "out-8b7a6f5e4d3c2b1a55", "role": "writer", "libraries": ["other"]},
}
H = {name: {"x-api-key": spec["key"]} for name, spec in KEYS.items()}

# Markers: what some callers may see, and secrets nobody may see, anywhere.
HR_MARK, BOARD_A, BOARD_B = "HRMARK-QUOKKA-5521", "BOARDMARK-ALPHA-1904", "BOARDMARK-BRAVO-2718"
OTHER_MARK, PAY_MARK, PAGE_MARK = "OTHERMARK-PELICAN-8812", "PAYMARK-NARWHAL-3390", "PUBLICPAGE-HERON-3307"
PRIVATE_MARK, SESSION_MARK, RECALL_MARK = "PRIVATEPAGE-OTTER-6620", "SESSIONMARK-PUFFIN", "NIGHTJAR"
INTERNAL_SECRET, OUTSIDE_SECRET = "INTERNAL-SECRET-ARMADILLO-4410", "OUTSIDE-FILE-SECRET-GECKO-5150"
CRAWL_PW, CRAWL_KEY_PARAM = "CRAWLPW-LYNX-9917", "APIKEYPARAM-MOTH-1185"
PG_SECRET, PG_LITERAL, CFG_PW = "PGSECRET-IBEX-2290", "PGLITERAL-KUDU-7341", "CFGPW-TAPIR-6044"
OTHER_ENV_SECRET, MINUTES_MARK = "OTHERENV-SECRET-DINGO-8123", "MINUTESMARK-EGRET-4477"
COLUMN_SECRETS = ("SAMPLEPW-WREN-4021", "SAMPLETOK-VOLE-3317", "SSNMARK-775-01", "CARDMARK-4111-9")
PG_ENV, OTHER_ENV = "RAGSTACK_ATTACK_PGPW", "RAGSTACK_ATTACK_OTHER"
NEVER = (TOKEN, INTERNAL_SECRET, OUTSIDE_SECRET, CRAWL_PW, PG_SECRET, PG_LITERAL, CFG_PW, OTHER_ENV_SECRET)
NEVER += tuple(spec["key"] for spec in KEYS.values())
SEEN: list[str] = []  # every response (status line, headers, body) and gRPC reply, scanned at the end

HANDBOOK = (
    "# Office handbook\n\n## Lunch\n\nThe cafeteria on the third floor of the Marlow building serves lunch "
    "from noon until two. Priya Raman runs the kitchen with Tomas Okafor.\n\n## Bicycles\n\nBicycle "
    "storage sits in the basement of the Marlow building, next to the showers.\n"
)
SALARIES = (
    "# Compensation review\n\n## Salary bands\n\nThe Marlow building salary review set the principal "
    f"engineer band at {HR_MARK} credits. Priya Raman approved the bands with Tomas Okafor.\n"
)
BOARD = "# Board {0}\n\nThe board minutes record {1} for the Marlow {2}.\n"
HR_QUESTION = "What salary band did the Marlow building review set for the principal engineer?"
PAGE = "<html><head><title>{0}</title></head><body><main><h1>{0}</h1><p>{1}</p>{2}</main></body></html>"
LOOP, MAPPED = "a loopback address", "a loopback address inside an IPv4-mapped IPv6 address"


def table(text: str) -> list[tuple[str, ...]]:
    """Rows of `a | b | c` lines (cases kept one to a line)."""
    return [tuple(c.strip() for c in line.split(" | ")) for line in text.strip().splitlines()]


# --- servers the crawler may or may not reach --------------------------------------------------------

Answer = Callable[[str, dict[str, str]], tuple[int, dict[str, str], str]]


class Hits:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    def add(self, server: str, path: str, headers: dict[str, str]) -> None:
        with self.lock:
            self.seen.append((server, path, headers))

    def of(self, server: str) -> list[tuple[str, str, dict[str, str]]]:
        with self.lock:
            return [h for h in self.seen if h[0] == server]


class _V6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def http_server(host: str, name: str, hits: Hits, answer: Answer) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            hits.add(name, self.path, headers)
            status, extra, body = answer(self.path, headers)
            data = body.encode()
            self.send_response(status)
            for key, value in {"content-type": "text/html; charset=utf-8", **extra}.items():
                self.send_header(key, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = (_V6 if ":" in host else ThreadingHTTPServer)((host, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class RawServer:
    """A TCP port that speaks no HTTP (`garbage`), never answers (`silent`) or stalls mid-headers (`slow`)."""

    def __init__(self, host: str, mode: str) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port, self.mode, self.held = self.sock.getsockname()[1], mode, list[socket.socket]()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.mode == "garbage":
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\x00\xff\xfe garbage\r\n")
                conn.close()
                continue
            if self.mode == "slow":
                conn.settimeout(1)
                try:
                    conn.recv(4096)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
                except OSError:
                    pass
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# --- files, databases and the stack -------------------------------------------------------------------


@dataclass
class World:
    stack: Stack
    nokey: Stack
    nokey_limited: Stack
    keyed_limited: Stack
    base: Path
    hits: Hits
    ports: dict[str, int]
    outside: Path
    ids: dict[str, str] = field(default_factory=dict)
    attached: dict[str, tuple[int, str]] = field(default_factory=dict)
    before: dict[str, Any] = field(default_factory=dict)
    tmp_entries: set[str] = field(default_factory=set)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def inbox(self) -> Path:
        return self.base / "inbox"

    @property
    def dbs(self) -> Path:
        return self.base / "dbs"

    def url(self, template: str) -> str:
        return template.format(**self.ports)

    def place(self, text: str) -> str:
        for name in ("dbs", "outside", "data", "inbox"):
            text = text.replace("{%s}" % name, str(getattr(self, name)))  # noqa: UP031 (URLs hold ${...})
        return text


def tree(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under `folder` (links not followed): kind, size and mtime."""
    out: dict[str, tuple[str, int, int]] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        kind = "link:" + os.readlink(path) if path.is_symlink() else ("dir" if path.is_dir() else "file")
        out[str(path.relative_to(folder))] = (kind, st.st_size if kind == "file" else 0, st.st_mtime_ns)
    return out


def build_files(base: Path, outside: Path) -> None:
    inbox, dbs = base / "inbox", base / "dbs"
    for folder in (inbox, dbs, outside):
        folder.mkdir(parents=True)
    (outside / "secret.txt").write_text(f"# Secret\n\nThe outside file holds {OUTSIDE_SECRET}.\n")
    internal = f"The vault combination is {INTERNAL_SECRET}, kept in the Marlow building."
    (outside / "internal.html").write_text(PAGE.format("Vault", internal, ""))
    (inbox / "notes.md").write_text(
        "# Parking\n\nVisitor parking uses the north gate of the Marlow building.\n"
    )
    (inbox / "link-out.md").symlink_to(outside / "secret.txt")
    (inbox / "link-missing.md").symlink_to(outside / "missing.txt")
    (inbox / "outdir").symlink_to(outside, target_is_directory=True)
    with sqlite3.connect(dbs / "shop.sqlite") as db:
        db.execute(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, password TEXT, "
            "api_token TEXT, ssn TEXT, card_number TEXT)"
        )
        for n, city in enumerate(("Lisbon", "Quito", "Lisbon", "Tartu"), start=1):
            row = (n, f"customer {n}", city, *(f"{secret}{n}" for secret in COLUMN_SECRETS))
            db.execute("INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    with sqlite3.connect(dbs / "payroll.sqlite") as db:
        db.execute("CREATE TABLE salaries (employee TEXT, amount INTEGER, note TEXT)")
        db.execute("INSERT INTO salaries VALUES ('Priya Raman', 9100, ?)", (PAY_MARK,))
    with sqlite3.connect(outside / "real.sqlite") as db:
        db.execute("CREATE TABLE t (x TEXT)")
        db.execute("INSERT INTO t VALUES (?)", (OUTSIDE_SECRET,))
    with duckdb.connect(str(outside / "real.duckdb")) as duck:
        duck.execute("CREATE TABLE t (x VARCHAR)")
    with duckdb.connect(str(dbs / "views.duckdb")) as duck:  # inside the roots, reading outside them
        duck.execute(
            f"CREATE VIEW leak AS SELECT * FROM read_csv('{outside / 'secret.txt'}', header = false)"
        )
    (dbs / "escape.sqlite").symlink_to(outside / "real.sqlite")
    (dbs / "escape-missing.sqlite").symlink_to(outside / "missing.sqlite")
    (dbs / "own.sqlite").symlink_to(base / "data" / "catalog.sqlite")
    (dbs / "folder.sqlite").mkdir()


def outside_host(ports: dict[str, int]) -> Answer:
    """127.0.0.2, allowed by ingest.fetch_allow: pages, and redirects to where nothing may go."""
    auth = "Basic " + base64.b64encode(f"crawler:{CRAWL_PW}".encode()).decode()
    targets: dict[str, str] = {
        k: v
        for k, v in table("""
        loopback | http://127.0.0.1:{p}/
        metadata | http://169.254.169.254/latest/meta-data/iam/
        localhost | http://localhost:{p}/
        decimal | http://2130706433:{p}/
        mapped | http://[::ffff:7f00:1]:{p}/
        v6 | http://[::1]:{p6}/
        scheme-relative | //127.0.0.1:{p}/
        userinfo | http://127.0.0.2:{r}@127.0.0.1:{p}/
        file | file:///etc/passwd
        gopher | gopher://127.0.0.1:{p}/_GET
        chain | /to/loopback
        collector | http://127.0.0.3:{c}/collect
        """)
    }

    def answer(path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        route, _, query = path.partition("?")
        status = int(query.split("status=")[1][:3]) if "status=" in query else 302
        inside = "http://127.0.0.1:{p}/".format(**ports)
        if route.startswith("/to/") and route[4:] in targets:
            return status, {"location": targets[route[4:]].format(**ports)}, ""
        if route == "/loop":
            return 302, {"location": "/loop"}, ""
        if route.startswith("/private"):
            if headers.get("authorization") != auth:
                return 401, {"www-authenticate": 'Basic realm="x"'}, "no"
            if route == "/private-hop":
                return 302, {"location": targets["collector"].format(**ports)}, ""
            return 200, {}, PAGE.format("Private", f"The private page holds {PRIVATE_MARK}.", "")
        if route == "/meta":
            links = f'<a href="{inside}">in</a><a href="http://127.0.0.2:{ports["r"]}@{inside[7:]}">in2</a>'
            links += f'<img src="{inside}pic.png"><iframe src="{inside}frame"></iframe>'
            refresh = f'<meta http-equiv="refresh" content="0; url={inside}">'
            body = PAGE.format("Meta", "The Marlow pond has carp.", links).replace(
                "<head>", "<head>" + refresh
            )
            return 200, {"refresh": f"0; url={inside}"}, body
        if route == "/minutes":
            return 200, {}, PAGE.format("Minutes", f"The crawled board minutes record {MINUTES_MARK}.", "")
        if route in ("/ok", "/ok2"):
            garden = (
                f"The rooftop garden of the Marlow building grows basil and {PAGE_MARK} tomatoes ({route})."
            )
            return 200, {}, PAGE.format("Garden", garden, "")
        return 404, {}, "not here"

    return answer


def gateway_only(folder: Path, main: Stack, **gateway: Any) -> Any:
    ports = {name: {"port": int(address.rsplit(":", 1)[1])} for name, address in main.peers.items()}
    folder.mkdir()
    return make_config(folder / "data", services={**ports, "token": TOKEN}, gateway=gateway)


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RedactingFilter())  # as ragstack's own handlers have it (setup_logging)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


LOGS = Capture()


class Recorder(httpx.AsyncClient):
    """Keeps every response for the final scan for secrets."""

    async def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = await super().send(request, **kwargs)
        if not kwargs.get("stream"):
            SEEN.append(f"{request.method} {request.url.path} {response.status_code}\n")
            SEEN[-1] += f"{dict(response.headers)}\n{response.text}"
        return response


def client(stack: Stack) -> Recorder:
    return Recorder(base_url=stack.gateway_url, timeout=120)


def api_keys() -> list[dict[str, Any]]:
    keys: list[dict[str, Any]] = [{"name": n, **spec} for n, spec in KEYS.items()]
    for entry in keys:  # one key configured as its digest only
        if entry["name"] == "hr":
            entry["key_sha256"] = hashlib.sha256(entry.pop("key").encode()).hexdigest()
    return keys


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[World]:
    tmp = tmp_path_factory.mktemp("attacks")
    base, outside = tmp / "root", tmp / "outside"
    tmp_entries = set(os.listdir(tempfile.gettempdir()))
    build_files(base, outside)
    hits = Hits()

    def internal(path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        return 200, {}, (outside / "internal.html").read_text()

    servers = [http_server("127.0.0.1", "internal", hits, internal)]
    ports = {"p": servers[0].server_address[1]}
    try:
        servers.append(http_server("::1", "internal", hits, internal))
        ports["p6"] = servers[-1].server_address[1]
    except OSError:  # no IPv6 here: the port is closed, and must still never be tried
        ports["p6"] = free_port("127.0.0.1")
    servers.append(http_server("127.0.0.3", "collector", hits, lambda p, h: (200, {}, "<p>collected</p>")))
    ports["c"] = servers[-1].server_address[1]
    servers.append(http_server("127.0.0.2", "outside", hits, outside_host(ports)))
    ports["r"] = servers[-1].server_address[1]
    raws = {mode: RawServer("127.0.0.2", mode) for mode in ("garbage", "silent", "slow")}
    ports.update({mode: raw.port for mode, raw in raws.items()})
    ports["closed"] = free_port("127.0.0.2")

    os.environ[PG_ENV], os.environ[OTHER_ENV] = PG_SECRET, OTHER_ENV_SECRET
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(LOGS)
    warehouses = [
        {"name": "warehouse", "url": f"postgresql://ro:{CFG_PW}@127.0.0.1:1/wh", "library": "team"},
        {"name": "warehouse2", "url": f"postgresql://ro:${{{PG_ENV}}}@127.0.0.1:1/wh", "library": "team"},
    ]
    cfg = make_config(
        base / "data",
        gateway={"api_keys": api_keys(), "cors_origins": ["https://app.example.com"]},
        services={"token": TOKEN},
        ingest={
            "allowed_roots": [str(base / "inbox")],
            "fetch_allow": ["127.0.0.2/32", "127.0.0.3"],
            **{"crawl_delay_s": 0, "crawl_page_timeout_s": 1.5, "crawl_timeout_s": 10},
            **{"crawl_max_redirects": 3, "crawl_max_depth": 1, "crawl_max_pages": 3},
        },
        sql={
            "allowed_roots": [str(base)],  # holds data_dir too: its files must still be refused
            "allowed_hosts": ["127.0.0.1"],
            "secret_env": [PG_ENV],
            "databases": warehouses,
        },
    )
    stacks: list[Stack] = []
    try:
        stack = await start_with(cfg, resources)
        stacks.append(stack)
        for folder, gateway in (
            ("gw-nokey", {}),
            ("gw-limit", {"rate_limit_per_minute": 5}),
            ("gw-keyed", {"rate_limit_per_minute": 5, "api_keys": api_keys()}),
        ):
            stacks.append(
                await start_with(gateway_only(tmp / folder, stack, **gateway), resources, services=())
            )
        w = World(stacks[0], stacks[1], stacks[2], stacks[3], base, hits, ports, outside)
        w.tmp_entries = tmp_entries
        await seed(w)
        w.before = {"outside": tree(outside), "inbox": tree(w.inbox), "dbs": tree(w.dbs)}
        yield w
    finally:
        for s in reversed(stacks):
            await s.stop()
        for srv in servers:
            srv.shutdown()
            srv.server_close()
        for raw in raws.values():
            raw.close()
        root.removeHandler(LOGS)
        root.setLevel(old_level)
        os.environ.pop(PG_ENV, None)
        os.environ.pop(OTHER_ENV, None)


async def seed(w: World) -> None:
    async with client(w.stack) as http:
        for name, text, library, groups in (
            ("handbook.md", HANDBOOK, "team", ()),
            ("salaries.md", SALARIES, "team", ("hr",)),
            ("board-a.md", BOARD.format("A", BOARD_A, "sale"), "team", ("board",)),
            ("board-b.md", BOARD.format("B", BOARD_B, "lease"), "team", ("board",)),
            ("roadmap.md", f"# Roadmap\n\nThe Halden project ships {OTHER_MARK} in spring.\n", "other", ()),
        ):
            done = await ingest(http, "admin", files=[(name, text)], library=library, groups=groups)
            assert done.status == 200 and done.indexed == 1, done.text
        crawled = await ingest(http, "admin", urls=[w.url("http://127.0.0.2:{r}/ok")])
        assert crawled.indexed == 1, crawled.text
        crawled = await ingest(http, "admin", urls=[w.url("http://127.0.0.2:{r}/minutes")], groups=("board",))
        assert crawled.indexed == 1, crawled.text
        req = ingest_pb2.IngestRequest(paths=[str(w.inbox / "notes.md")], library="team")
        code, details, _ = await rpc(w, "ingest", "Ingest", req)
        assert code == grpc.StatusCode.OK, details
        for library in ("team", "other"):
            for doc in await documents(http, library):
                stem = doc["source"].rsplit("/", 1)[-1].removesuffix(".md").replace("-", "_")
                w.ids[stem] = doc["document_id"]
        for db, acl in (("shop", []), ("payroll", ["hr"])):
            body = {
                "name": db,
                "url": f"sqlite:///{w.dbs / (db + '.sqlite')}",
                "library": "team",
                "groups": acl,
            }
            r = await http.post("/v1/databases", json=body, headers=H["admin"])
            w.attached[db] = (r.status_code, r.text)
    os.link(w.data / "catalog.sqlite", w.dbs / "hard.sqlite")


# --- helpers ------------------------------------------------------------------------------------------


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    kind = ""
    for line in text.splitlines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:") and kind:
            events.append((kind, json.loads(line[5:].strip())))
            kind = ""
    return events


@dataclass
class Ingested:
    status: int
    text: str
    events: list[tuple[str, dict[str, Any]]]

    @property
    def summary(self) -> dict[str, Any]:
        return next((d for k, d in self.events if k == "summary"), {})

    @property
    def files(self) -> list[dict[str, Any]]:
        return [d for k, d in self.events if k == "file"]

    @property
    def indexed(self) -> int:
        return int(self.summary.get("indexed", 0))

    @property
    def why(self) -> str:
        """Every failure the stream reported: per file, in the summary, and error events."""
        parts = [f.get("reason", "") for f in self.files] + list(self.summary.get("failures", []))
        parts += [d.get("message", "") for k, d in self.events if k == "error"]
        return "\n".join(p for p in parts if p)


async def ingest(
    http: httpx.AsyncClient,
    who: str,
    *,
    files: list[tuple[str, str]] | None = None,
    urls: list[str] | None = None,
    library: str = "team",
    groups: tuple[str, ...] = (),
) -> Ingested:
    data: dict[str, Any] = {"library": library, "urls": urls or [], "groups": list(groups)}
    parts = [("files", (name, text.encode(), "text/markdown")) for name, text in files or []]
    r = await http.post("/v1/ingest", data=data, files=parts or None, headers=H[who])
    return Ingested(r.status_code, r.text, sse(r.text) if r.status_code == 200 else [])


async def ask(
    http: httpx.AsyncClient, who: str, question: str, *, mode: str = "auto", session: str = ""
) -> tuple[httpx.Response, dict[str, Any]]:
    body: dict[str, Any] = {"question": question, "library": "team", "mode": mode, "stream": True}
    body.update({"session_id": session} if session else {})
    r = await http.post("/v1/query", json=body, headers={**H[who], "accept": "text/event-stream"})
    done = next((d for k, d in sse(r.text) if k == "done"), {}) if r.status_code == 200 else {}
    return r, done


async def documents(
    http: httpx.AsyncClient, library: str = "team", who: str = "admin"
) -> list[dict[str, Any]]:
    r = await http.get("/v1/documents", params={"library": library}, headers=H[who])
    assert r.status_code == 200, r.text
    return list(r.json()["documents"])


async def document(http: httpx.AsyncClient, doc_id: str) -> dict[str, Any]:
    r = await http.get(f"/v1/documents/{doc_id}", params={"library": "team"}, headers=H["admin"])
    assert r.status_code == 200, r.text
    return dict(r.json())


def error_of(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"} and body["error"]["request_id"] == r.headers["x-request-id"], r.text
    return dict(body["error"])


def principal(who: str) -> tuple[tuple[str, str], ...]:
    """The metadata the gateway sends for `who`: the token and its principal."""
    spec = KEYS[who]
    found = {
        "name": who,
        "role": spec["role"],
        "libraries": spec["libraries"],
        "groups": spec.get("groups", []),
    }
    return (("authorization", f"Bearer {TOKEN}"), ("x-ragstack-principal", json.dumps(found)))


STUBS: dict[str, Any] = {
    "ingest": ingest_pb2_grpc.IngestServiceStub,
    "retrieve": retrieve_pb2_grpc.RetrieveServiceStub,
    "agent": agent_pb2_grpc.AgentServiceStub,
    "verify": verify_pb2_grpc.VerifyServiceStub,
}


async def rpc(
    w: World, service: str, method: str, request: Any, metadata: tuple[tuple[str, str], ...] | None = None
) -> tuple[grpc.StatusCode, str, list[Any]]:
    """(status, details, messages) of one call; with the token and no principal unless told otherwise."""
    md = (("authorization", f"Bearer {TOKEN}"),) if metadata is None else metadata
    async with grpc.aio.insecure_channel(w.stack.peers[service]) as channel:
        call = getattr(STUBS[service](channel), method)(request, metadata=md, timeout=60)
        try:
            items = [m async for m in call] if hasattr(call, "__aiter__") else [await call]
        except grpc.aio.AioRpcError as err:
            SEEN.append(f"grpc {method}: {err.details()}")
            return err.code(), err.details() or "", []
    SEEN.append(f"grpc {method}: {items}")
    return grpc.StatusCode.OK, "", items


@pytest.fixture
async def http(world: World) -> AsyncIterator[Recorder]:
    async with client(world.stack) as c:
        yield c


async def assert_nothing_internal(w: World, http: httpx.AsyncClient) -> None:
    """The internal server was never asked anything, and nothing it holds is indexed or cited."""
    assert w.hits.of("internal") == []
    for doc in await documents(http):
        assert not re.search(r"127\.0\.0\.1|\[|169\.254|localhost|2130706433", doc["source"]), doc
    r, done = await ask(http, "admin", "What is the vault combination?", mode="lexical")
    assert r.status_code == 200 and INTERNAL_SECRET not in r.text, r.text
    assert all(INTERNAL_SECRET not in json.dumps(c) for c in done.get("citations", []))


# --- 1. authentication ----------------------------------------------------------------------------------

UPLOAD = [("files", ("evil.md", b"# evil\n\nAn upload nobody may make.", "text/markdown"))]
BODIES: dict[str, dict[str, Any]] = {
    "/v1/query": {"json": {"question": HR_QUESTION, "library": "team", "stream": False}},
    "/v1/ingest": {"files": UPLOAD, "data": {"library": "team"}},
    "/v1/ingest/jobs": {"files": UPLOAD, "data": {"library": "team"}},
    "/v1/databases": {"json": {"name": "evil", "url": "sqlite:///etc/passwd", "library": "team"}},
    "/v1/sql": {"json": {"library": "team", "database": "payroll", "sql": "SELECT note FROM salaries"}},
}
ROUTES = table("""
GET | /v1/documents?library=team
GET | /v1/documents/0123456789abcdef0123?library=team
DELETE | /v1/documents/0123456789abcdef0123?library=team
POST | /v1/query
POST | /v1/ingest
POST | /v1/ingest/jobs
GET | /v1/ingest/jobs
GET | /v1/ingest/jobs/0123456789abcdef0123456789abcdef
GET | /v1/libraries
GET | /v1/traces/0123456789abcdef0123456789abcdef
GET | /v1/databases?library=team
POST | /v1/databases
DELETE | /v1/databases/shop?library=team
POST | /v1/sql
GET | /metrics
GET | /openapi.json
""")
READER_KEY = KEYS["reader"]["key"]
CREDENTIALS: dict[str, dict[str, str]] = {
    "none": {},
    "wrong": {"x-api-key": "not-a-key-at-all-0000"},
    "empty": {"x-api-key": ""},
    "service-token": {"authorization": f"Bearer {TOKEN}"},
    "prefix": {"x-api-key": READER_KEY[:-1]},
    "suffix": {"x-api-key": READER_KEY + "0"},
    "upper": {"x-api-key": READER_KEY.upper()},
    "sha256-as-key": {"x-api-key": hashlib.sha256(KEYS["hr"]["key"].encode()).hexdigest()},
    "basic": {"authorization": "Basic " + base64.b64encode(f"reader:{READER_KEY}".encode()).decode()},
    "bearer-two-words": {"authorization": f"Bearer wrong {READER_KEY}"},
    "bearer-tab": {"authorization": f"Bearer\t{READER_KEY}"},
    "bearer-glued": {"authorization": f"Bearer{READER_KEY}"},
    "cookie": {"cookie": f"x-api-key={READER_KEY}; api_key={READER_KEY}"},
    "forged-principal": {
        "x-ragstack-principal": '{"name":"x","role":"admin","libraries":["*"],"groups":["*"]}'
    },
}


@pytest.mark.parametrize("method,path", ROUTES, ids=[f"{m} {p.split('?')[0]}" for m, p in ROUTES])
async def test_every_route_needs_a_key(world: World, http: Recorder, method: str, path: str) -> None:
    r = await http.request(method, path, **BODIES.get(path.split("?")[0], {}))
    assert r.status_code == 401, r.text
    assert error_of(r)["code"] == "UNAUTHENTICATED" and r.headers["www-authenticate"].startswith("Bearer")
    assert "evil.md" not in {d["source"].rsplit("/")[-1] for d in await documents(http)}


@pytest.mark.parametrize("cred", list(CREDENTIALS))
async def test_bad_credentials_are_401(world: World, http: Recorder, cred: str) -> None:
    for path in ("/v1/documents?library=team", "/v1/libraries", f"/v1/documents/{world.ids['salaries']}"):
        r = await http.get(path, headers=CREDENTIALS[cred])
        assert r.status_code == 401 and error_of(r)["code"] == "UNAUTHENTICATED", (path, r.text)
    r = await http.get("/v1/documents", params={"library": "team", "api_key": READER_KEY})
    assert r.status_code == 401  # never from the URL (it would land in access logs)


AMBIGUOUS = {
    "wrong-then-valid": [("x-api-key", "not-a-key-at-all-0000"), ("x-api-key", READER_KEY)],
    "valid-then-wrong": [("x-api-key", READER_KEY), ("x-api-key", "not-a-key-at-all-0000")],
    "two-valid": [("x-api-key", READER_KEY), ("x-api-key", KEYS["writer"]["key"])],
    "comma-joined": [("x-api-key", f"{READER_KEY}, {KEYS['writer']['key']}")],
    "key-and-other-bearer": [("x-api-key", READER_KEY), ("authorization", f"Bearer {KEYS['writer']['key']}")],
}


@pytest.mark.parametrize("case", list(AMBIGUOUS))
async def test_ambiguous_credentials_name_nobody(world: World, http: Recorder, case: str) -> None:
    """Two credentials in one request (a proxy adding its own, a smuggled second header): 401."""
    r = await http.get("/v1/documents", params={"library": "team"}, headers=httpx.Headers(AMBIGUOUS[case]))
    assert r.status_code == 401, r.text


async def test_bearer_works_and_scopes_listings(world: World, http: Recorder) -> None:
    ok = await http.get("/v1/libraries", headers={"authorization": f"Bearer {READER_KEY}"})
    assert ok.status_code == 200 and {x["name"] for x in ok.json()["libraries"]} == {"team"}, ok.text


async def test_principal_header_from_http_is_ignored(world: World, http: Recorder) -> None:
    forged = {**H["reader"], "x-ragstack-principal": CREDENTIALS["forged-principal"]["x-ragstack-principal"]}
    r = await http.get("/v1/documents", params={"library": "team"}, headers=forged)
    assert r.status_code == 200 and world.ids["salaries"] not in r.text
    r = await http.get("/v1/documents", params={"library": "other"}, headers=forged)
    assert r.status_code == 403 and OTHER_MARK not in r.text


# --- 2. roles -------------------------------------------------------------------------------------------

ROLES = table("""
reader | POST | /v1/ingest | write
reader | POST | /v1/ingest/jobs | write
reader | DELETE | /v1/documents/{handbook}?library=team | write
reader | POST | /v1/databases | admin
reader | DELETE | /v1/databases/shop?library=team | admin
writer | POST | /v1/databases | admin
writer | DELETE | /v1/databases/shop?library=team | admin
hr | DELETE | /v1/documents/{salaries}?library=team | write
""")


@pytest.mark.parametrize("who,method,path,needs", ROLES, ids=[f"{r[0]}-{r[1]}-{r[2][:16]}" for r in ROLES])
async def test_roles_are_enforced(
    world: World, http: Recorder, who: str, method: str, path: str, needs: str
) -> None:
    body = dict(BODIES.get(path.split("?")[0], {}))
    if path == "/v1/databases":
        body = {"json": {"name": "evil", "url": f"sqlite:///{world.dbs / 'shop.sqlite'}", "library": "team"}}
    r = await http.request(method, path.format(**world.ids), headers=H[who], **body)
    assert r.status_code == 403, r.text
    error = error_of(r)
    assert error["code"] == "PERMISSION_DENIED" and f"needs the {needs} permission" in error["message"]
    sources = {d["source"] for d in await documents(http)}
    assert "upload://team/evil.md" not in sources and "upload://team/handbook.md" in sources
    assert "upload://team/salaries.md" in sources
    listed = await http.get("/v1/databases", params={"library": "team"}, headers=H["admin"])
    assert "evil" not in {d["name"] for d in listed.json()["databases"]}


# --- 3. library scopes ----------------------------------------------------------------------------------

SCOPES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("reader", "POST", "/v1/query", {"json": {"question": "When does Halden ship?", "stream": False}}),
    (
        "reader",
        "POST",
        "/v1/query",
        {"json": {"question": "Halden?", "mode": "graph-global", "stream": False}},
    ),
    ("reader", "POST", "/v1/query", {"json": {"question": "How many rows?", "mode": "sql", "stream": False}}),
    ("reader", "GET", "/v1/documents", {}),
    ("reader", "GET", "/v1/documents/{roadmap}", {}),
    ("writer", "DELETE", "/v1/documents/{roadmap}", {}),
    ("reader", "GET", "/v1/databases", {}),
    ("reader", "GET", "/v1/graph", {}),
    ("reader", "POST", "/v1/sql", {"json": {"database": "", "sql": "SELECT 1"}}),
    ("writer", "POST", "/v1/ingest", {"files": True}),
    ("writer", "POST", "/v1/ingest", {"data": {"urls": "http://127.0.0.2:{r}/ok2"}}),
    ("writer", "POST", "/v1/ingest/jobs", {"files": True}),
]


@pytest.mark.parametrize("lib", ["other", "", "TEAM", "team.", "default"])
@pytest.mark.parametrize(
    "who,method,path,body", SCOPES, ids=[f"{s[1]}-{s[2][4:18]}-{i}" for i, s in enumerate(SCOPES)]
)
async def test_scoped_key_stays_in_its_library(
    world: World, http: Recorder, lib: str, who: str, method: str, path: str, body: dict[str, Any]
) -> None:
    kw: dict[str, Any] = {"params": {"library": lib}} if method != "POST" else {}
    if "json" in body:
        kw["json"] = {**body["json"], "library": lib}
    elif method == "POST":
        kw["data"] = {"library": lib, **{k: world.url(v) for k, v in body.get("data", {}).items()}}
    if body.get("files"):
        kw["files"] = [("files", ("scope-escape.md", f"# Escape\n\nInto {lib!r}.".encode(), "text/plain"))]
    r = await http.request(method, path.format(**world.ids), headers=H[who], **kw)
    assert r.status_code == 403, r.text
    error = error_of(r)
    assert (
        error["code"] == "PERMISSION_DENIED"
        and f"may not use library {lib or 'default'!r}" in error["message"]
    )
    assert OTHER_MARK not in r.text and PAGE_MARK not in r.text
    assert [d["source"] for d in await documents(http, "other")] == ["upload://other/roadmap.md"]
    if lib:
        listed = await http.get("/v1/documents", params={"library": lib}, headers=H["admin"])
        assert listed.status_code != 200 or "scope-escape" not in listed.text


BAD_NAMES = ["../team", "team/../other", "*", "team%", "te am", "t" * 65, "t" * 5000, "téam", "ｔｅａｍ"]
BAD_NAMES += ["team\u200b", "team\x00", "team'", "team\n", ".", ".."]


@pytest.mark.parametrize("lib", BAD_NAMES, ids=[repr(n[:12]) for n in BAD_NAMES])
async def test_malformed_library_names_are_invalid(world: World, http: Recorder, lib: str) -> None:
    for who in ("reader", "admin"):
        listed = await http.get("/v1/documents", params={"library": lib}, headers=H[who])
        query = {"question": "When does Halden ship?", "library": lib, "stream": False}
        asked = await http.post("/v1/query", json=query, headers=H[who])
        sql = await http.post("/v1/sql", json={"library": lib, "sql": "SELECT 1"}, headers=H[who])
        for r in (listed, asked, sql):
            assert r.status_code in (400, 422) and error_of(r)["code"] == "INVALID_ARGUMENT", (who, r.text)
            assert OTHER_MARK not in r.text and "Traceback" not in r.text


# --- 4. document ACLs -----------------------------------------------------------------------------------


async def test_hidden_documents_are_not_listed(world: World, http: Recorder) -> None:
    hidden = {world.ids["salaries"], world.ids["board_a"], world.ids["board_b"]}
    for who in ("reader", "writer", "writer2"):
        listed = {d["document_id"] for d in await documents(http, who=who)}
        assert listed and not listed & hidden, who
    hr = {d["document_id"] for d in await documents(http, who="hr")}
    assert world.ids["salaries"] in hr and world.ids["board_a"] not in hr


async def test_library_sizes_count_only_what_the_caller_sees(world: World, http: Recorder) -> None:
    for who in ("reader", "writer", "hr"):
        libraries = (await http.get("/v1/libraries", headers=H[who])).json()["libraries"]
        team = next(x for x in libraries if x["name"] == "team")
        listed = await http.get("/v1/databases", params={"library": "team"}, headers=H[who])
        attached = [d for d in listed.json()["databases"] if d["origin"] == "attached"]
        assert (team["documents"], team["databases"]) == (
            len(await documents(http, who=who)),
            len(attached),
        ), who


@pytest.mark.parametrize(
    "who,method", [("reader", "GET"), ("writer", "GET"), ("writer", "DELETE"), ("writer2", "DELETE")]
)
async def test_hidden_document_reads_as_unknown(world: World, http: Recorder, who: str, method: str) -> None:
    hidden, unknown_id = world.ids["salaries"], "f" * 20
    r = await http.request(method, f"/v1/documents/{hidden}", params={"library": "team"}, headers=H[who])
    unknown = await http.request(
        method, f"/v1/documents/{unknown_id}", params={"library": "team"}, headers=H[who]
    )
    assert r.status_code == 404 and unknown.status_code == 404, r.text
    assert error_of(r)["code"] == "NOT_FOUND" and HR_MARK not in r.text and "Compensation" not in r.text
    assert error_of(r)["message"].replace(hidden, "ID") == error_of(unknown)["message"].replace(
        unknown_id, "ID"
    )
    kept = await document(http, hidden)
    assert kept["groups"] == ["hr"] and kept["chunk_count"] >= 1


@pytest.mark.parametrize(
    "doc_id", ["' OR ''='", "%", "*", "../salaries", "x' OR 1=1 --", "\\", "' OR groups IS NULL --"]
)
async def test_document_id_injection(world: World, http: Recorder, doc_id: str) -> None:
    before = {d["document_id"] for d in await documents(http)}
    for method in ("GET", "DELETE"):
        path = "/v1/documents/" + quote(doc_id, safe="")
        r = await http.request(method, path, params={"library": "team"}, headers=H["writer"])
        assert r.status_code == 404 and HR_MARK not in r.text and BOARD_A not in r.text, r.text
    assert {d["document_id"] for d in await documents(http)} == before


async def test_hr_reader_finds_its_document(world: World, http: Recorder) -> None:
    """The control for the ACL tests below: the question does reach the HR document."""
    r, done = await ask(http, "hr", HR_QUESTION, mode="lexical")
    assert r.status_code == 200 and HR_MARK in json.dumps(done["citations"]), r.text


@pytest.mark.parametrize("mode", ["auto", "lexical", "dense", "hybrid", "graph", "graph-global", "sql"])
@pytest.mark.parametrize("who", ["reader", "writer"])
async def test_hidden_documents_never_reach_answers(
    world: World, http: Recorder, mode: str, who: str
) -> None:
    hidden = [BOARD_A, BOARD_B, world.ids["salaries"], world.ids["board_a"], "Compensation review"]
    hidden.append("approved the bands")
    for question in (
        HR_QUESTION,
        f"Who approved salary bands with Tomas Okafor? {HR_MARK}",
        "What do the board minutes record?",
    ):
        r, done = await ask(http, who, question, mode=mode)
        assert r.status_code == 200, r.text
        trace = await http.get(f"/v1/traces/{done['trace_id']}", headers=H[who])
        assert trace.status_code == 200
        leaks = hidden if HR_MARK in question else [*hidden, HR_MARK]  # a question's own words come back
        for text in (r.text, trace.text):
            assert not [leak for leak in leaks if leak in text], (mode, question)
        assert HR_MARK not in json.dumps(done.get("citations", [])) + done.get("answer", "")


async def test_search_filters_cannot_name_hidden_documents(world: World) -> None:
    graph = {"mode": common_pb2.SEARCH_MODE_GRAPH_GLOBAL, "top_k": 50}
    cases: list[dict[str, Any]] = [
        {"query": HR_QUESTION, "top_k": 20, "document_ids": [world.ids["salaries"]]},
        {"query": "salary", "top_k": 20, "heading_prefix": ["Compensation review"]},
        {"query": HR_QUESTION, "top_k": 50, "expand_context": True},
        {"query": "board minutes", **graph},
        {"query": "Priya Raman", "top_k": 50, "mode": common_pb2.SEARCH_MODE_GRAPH_LOCAL},
    ]
    for kw in cases:
        req = retrieve_pb2.SearchRequest(library="team", **kw)
        code, details, out = await rpc(world, "retrieve", "Search", req, principal("reader"))
        assert code == grpc.StatusCode.OK, details
        assert HR_MARK not in str(out) and BOARD_A not in str(out) and world.ids["salaries"] not in str(out)


SYNTAX = [
    "group:hr",
    "groups:hr OR *",
    f"text:{HR_MARK}",
    "* OR 1=1",
    "') OR (1=1",
    "group:~public OR group:hr",
]
SYNTAX += [f'"{HR_MARK}"', "salar*", "Compensation^100 review"]


@pytest.mark.parametrize("query", SYNTAX)
async def test_query_syntax_cannot_widen_the_acl(world: World, query: str) -> None:
    for mode in (common_pb2.SEARCH_MODE_LEXICAL, common_pb2.SEARCH_MODE_HYBRID):
        req = retrieve_pb2.SearchRequest(query=query, library="team", top_k=50, mode=mode)
        code, details, out = await rpc(world, "retrieve", "Search", req, principal("reader"))
        assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT), details
        assert HR_MARK not in str(out) and world.ids["salaries"] not in str(out)


# --- 5. traces, jobs and sessions of others ---------------------------------------------------------------


async def test_traces_of_others_read_as_unknown(world: World, http: Recorder) -> None:
    _, done = await ask(http, "reader", "When does the cafeteria serve lunch?")
    trace_id, unknown_id = done["trace_id"], uuid.uuid4().hex
    for who in ("reader", "admin"):
        assert (await http.get(f"/v1/traces/{trace_id}", headers=H[who])).status_code == 200
    for who in ("hr", "writer", "outsider"):
        other = await http.get(f"/v1/traces/{trace_id}", headers=H[who])
        unknown = await http.get(f"/v1/traces/{unknown_id}", headers=H[who])
        assert other.status_code == 404 and unknown.status_code == 404 and "cafeteria" not in other.text
        assert error_of(other)["message"].replace(trace_id, "I") == error_of(unknown)["message"].replace(
            unknown_id, "I"
        )
    async with client(world.nokey) as local:  # the local admin's trace is no reader's either
        question = {"question": "Where is visitor parking?", "library": "team", "stream": False}
        mine = await local.post("/v1/query", json=question)
        assert mine.status_code == 200, mine.text
    theirs = await http.get(f"/v1/traces/{mine.json()['trace_id']}", headers=H["reader"])
    assert theirs.status_code == 404 and "parking" not in theirs.text


async def test_feedback_goes_on_ones_own_answers_and_only_admins_list_it(
    world: World, http: Recorder
) -> None:
    _, done = await ask(http, "reader", "When does the cafeteria open on Fridays?")
    trace_id = done["trace_id"]
    given = await http.post(
        "/v1/feedback",
        json={"trace_id": trace_id, "rating": "down", "comment": "Wrong day."},
        headers=H["reader"],
    )
    assert given.status_code == 201, given.text
    assert given.json()["principal"] == "reader" and "cafeteria" in given.json()["question"]
    again = {"trace_id": trace_id, "rating": "up", "comment": "Right after all."}
    assert (await http.post("/v1/feedback", json=again, headers=H["reader"])).status_code == 201
    for who in ("hr", "writer", "outsider"):  # another's answer reads as unknown
        other = await http.post("/v1/feedback", json={"trace_id": trace_id, "rating": "down"}, headers=H[who])
        assert other.status_code == 404 and "cafeteria" not in other.text
    for bad in (
        {"trace_id": trace_id, "rating": "sideways"},
        {"trace_id": trace_id, "rating": "up", "comment": "x" * 2001},
        {"trace_id": "../../sessions.sqlite", "rating": "up"},
        {"trace_id": trace_id, "rating": "up", "extra": 1},
    ):
        r = await http.post("/v1/feedback", json=bad, headers=H["reader"])
        assert r.status_code == 422 and error_of(r)["code"] == "INVALID_ARGUMENT", r.text
    too_many = await http.get("/v1/feedback", params={"limit": 10**12}, headers=H["admin"])
    assert too_many.status_code == 422 and "1000" in error_of(too_many)["message"]
    listed = await http.get("/v1/feedback", params={"library": "team"}, headers=H["reader"])
    assert listed.status_code == 403 and "admin" in error_of(listed)["message"]
    mine = [
        f
        for f in (await http.get("/v1/feedback", headers=H["admin"])).json()["feedback"]
        if f["trace_id"] == trace_id
    ]
    assert [(f["rating"], f["comment"], f["library"]) for f in mine] == [("up", "Right after all.", "team")]


@pytest.mark.parametrize(
    "trace_id", ["..%2F..%2Fsessions.sqlite", "%2e%2e", "*", "0" * 31 + "G", "A" * 32, "0" * 500]
)
async def test_trace_ids_are_checked(world: World, http: Recorder, trace_id: str) -> None:
    r = await http.get(f"/v1/traces/{trace_id}", headers=H["reader"])
    assert r.status_code in (400, 404) and error_of(r)["code"] in ("INVALID_ARGUMENT", "NOT_FOUND"), r.text
    assert "SQLite" not in r.text and "Traceback" not in r.text


async def submit(
    http: httpx.AsyncClient, who: str, *, urls: tuple[str, ...] = (), library: str = "team"
) -> httpx.Response:
    files = [
        ("files", ("queued-note.md", b"# Lifts\n\nA queued note about the Marlow lifts.", "text/markdown"))
    ]
    data = {"library": library, "urls": list(urls)}
    return await http.post("/v1/ingest/jobs", data=data, files=None if urls else files, headers=H[who])


async def finished(http: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    for _ in range(300):
        job = (await http.get(f"/v1/ingest/jobs/{job_id}", headers=H["admin"])).json()
        if job["state"] in ("done", "failed"):
            return dict(job)
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


async def test_jobs_of_others_read_as_unknown(world: World, http: Recorder) -> None:
    submitted = await submit(http, "writer")
    assert submitted.status_code == 202 and submitted.json()["principal"] == "writer", submitted.text
    job_id = submitted.json()["job_id"]
    assert (await http.get(f"/v1/ingest/jobs/{job_id}", headers=H["writer"])).status_code == 200
    for who in ("writer2", "reader", "hr", "outsider"):
        other = await http.get(f"/v1/ingest/jobs/{job_id}", headers=H[who])
        assert other.status_code == 404 and error_of(other)["code"] == "NOT_FOUND", other.text
        listed = await http.get("/v1/ingest/jobs", params={"limit": 500}, headers=H[who])
        assert listed.status_code == 200 and job_id not in listed.text
    assert job_id in (await http.get("/v1/ingest/jobs", params={"limit": 500}, headers=H["admin"])).text
    await finished(http, job_id)


async def test_sessions_are_per_principal(world: World, http: Recorder) -> None:
    first, _ = await ask(
        http, "reader", f"When does the cafeteria serve lunch for {SESSION_MARK}?", session="s-1"
    )
    assert first.status_code == 200
    follow, done = await ask(http, "hr", "And who runs it?", session="s-1")
    assert follow.status_code == 200 and SESSION_MARK not in follow.text
    trace = (await http.get(f"/v1/traces/{done['trace_id']}", headers=H["hr"])).json()
    assert trace["standalone_question"] == "And who runs it?" and SESSION_MARK not in json.dumps(trace)
    code, details, out = await rpc(
        world, "agent", "ListSessions", agent_pb2.ListSessionsRequest(limit=100), principal("hr")
    )
    assert code == grpc.StatusCode.OK and SESSION_MARK not in str(out) and "cafeteria" not in str(out), (
        details
    )


async def test_recall_memory_keeps_questions_private(world: World, http: Recorder) -> None:
    """An answered question is recalled for its own principal only: another's never shows, nor steers."""
    r, done = await ask(
        http, "admin", f"Where is the bicycle storage in the Marlow building, asks {RECALL_MARK}?"
    )
    assert r.status_code == 200 and not done["abstained"], done
    question = "Where is the bicycle storage in the Marlow building?"
    for _turn in range(2):  # the second time, the reader's own first answer may be recalled
        r, done = await ask(http, "reader", question)
        trace = (await http.get(f"/v1/traces/{done['trace_id']}", headers=H["reader"])).json()
        assert r.status_code == 200 and RECALL_MARK not in r.text and RECALL_MARK not in json.dumps(trace)
    assert any(t.get("tool") == "recall_memory" for t in trace.get("tool_calls", [])), (
        "the control: no recall"
    )


# --- 6. SSRF through URL ingest ---------------------------------------------------------------------------

SSRF = table(f"""
http://127.0.0.1:{{p}}/ | {LOOP}
http://127.8.9.10:{{p}}/ | {LOOP}
http://2130706433:{{p}}/ | {LOOP}
http://0x7f.1:{{p}}/ | {LOOP}
http://0x7f000001:{{p}}/ | {LOOP}
http://0177.0.0.1:{{p}}/ | {LOOP}
http://017700000001:{{p}}/ | {LOOP}
http://127.1:{{p}}/ | {LOOP}
http://127.0.1:{{p}}/ | {LOOP}
http://127.000.000.001:{{p}}/ | {LOOP}
http://127。0。0。1:{{p}}/ | {LOOP}
HTTP://127.0.0.1:{{p}}/ | {LOOP}
http://localhost:{{p}}/ | localhost resolves to {LOOP}
http://LocalHost:{{p}}/ | resolves to {LOOP}
http://127.0.0.2:{{r}}@127.0.0.1:{{p}}/ | {LOOP}
http://crawler:hunter2@127.0.0.1:{{p}}/ | {LOOP}
http://127.0.0.1:{{p}}#@127.0.0.2:{{r}}/ | {LOOP}
http://127.0.0.2:{{r}}\\@127.0.0.1:{{p}}/ | {LOOP}
http://[::1]:{{p6}}/ | {LOOP}
http://[0:0:0:0:0:0:0:1]:{{p6}}/ | {LOOP}
http://[::1%25lo]:{{p6}}/ | {LOOP}
http://[::ffff:127.0.0.1]:{{p}}/ | {MAPPED}
http://[0:0:0:0:0:ffff:7f00:1]:{{p}}/ | {MAPPED}
http://[::ffff:7f00:1]:{{p}}/ | {MAPPED}
http://[::127.0.0.1]:{{p}}/ | inside an IPv4-compatible IPv6 address
http://[64:ff9b::7f00:1]:{{p}}/ | inside a NAT64 address
http://[2002:7f00:1::1]:{{p}}/ | inside a 6to4 address
http://[::ffff:169.254.169.254]/ | a cloud metadata address inside
http://0.0.0.0:{{p}}/ | an unspecified address
http://0:{{p}}/ | an unspecified address
http://[::]:{{p6}}/ | an unspecified address
http://10.0.0.1/ | a private address
http://172.16.0.1/ | a private address
http://192.168.0.1/ | a private address
http://100.64.0.1/ | a shared (CGNAT) address
http://169.254.169.254/latest/meta-data/ | a cloud metadata address
http://2852039166/latest/meta-data/ | a cloud metadata address
http://0xa9fea9fe/latest/meta-data/ | a cloud metadata address
http://100.100.100.200/latest/meta-data/ | a cloud metadata address
http://[fd00:ec2::254]/latest/meta-data/ | a cloud metadata address
http://169.254.1.1/ | a link-local address
http://[fd00::1]/ | a private address
http://[fe80::1]/ | a link-local address
http://[fe80::1%25eth0]/ | a link-local address
http://[ff02::1]/ | a multicast address
http://224.0.0.1/ | a multicast address
http://255.255.255.255/ | a broadcast address
http://240.0.0.1/ | a reserved address
http://198.18.0.1/ | a benchmarking address
""")


@pytest.mark.parametrize("template,rule", SSRF, ids=[t for t, _ in SSRF])
async def test_ssrf_internal_addresses_are_refused(
    world: World, http: Recorder, template: str, rule: str
) -> None:
    done = await ingest(http, "writer", urls=[world.url(template)])
    assert done.status == 200 and done.indexed == 0, done.text
    assert rule in done.why and "ingest.fetch_allow" in done.why, done.why
    assert "hunter2" not in done.text and INTERNAL_SECRET not in done.text
    await assert_nothing_internal(world, http)


@pytest.mark.parametrize(
    "template", ["http://LOCALHOST.:{p}/", "http://x.localhost:{p}/", "http://127.0.0.1.:{p}/"]
)
async def test_ssrf_loopback_names_the_resolver_may_not_know(
    world: World, http: Recorder, template: str
) -> None:
    """Not resolvable on every machine; where they resolve it is to loopback, and they are never fetched."""
    done = await ingest(http, "writer", urls=[world.url(template)])
    assert done.status == 200 and done.indexed == 0, done.text
    assert LOOP in done.why or "unreachable, refused or timed out" in done.why, done.why
    await assert_nothing_internal(world, http)


SCHEMES = [
    "file:///etc/passwd",
    "file://{outside}/secret.txt",
    "gopher://127.0.0.1:{p}/_GET%20/",
    "ftp://127.0.0.1:{p}/",
]
SCHEMES += ["dict://127.0.0.1:{p}/info", "data:text/html,<p>x</p>", "javascript:alert(1)", "//127.0.0.1:{p}/"]
SCHEMES += ["127.0.0.1:{p}", "http:///127.0.0.1:{p}/"]


@pytest.mark.parametrize("template", SCHEMES)
async def test_ssrf_other_schemes_are_refused(world: World, http: Recorder, template: str) -> None:
    done = await ingest(
        http, "writer", urls=[world.place(world.url(template.replace("{outside}", "{{outside}}")))]
    )
    assert done.status in (200, 400) and done.indexed == 0 and (done.status == 400 or done.why), done.text
    assert OUTSIDE_SECRET not in done.text and "root:" not in done.text
    await assert_nothing_internal(world, http)


REDIRECTS = table(f"""
/to/loopback | {LOOP}
/to/loopback?status=301 | {LOOP}
/to/loopback?status=303 | {LOOP}
/to/loopback?status=307 | {LOOP}
/to/loopback?status=308 | {LOOP}
/to/metadata | a cloud metadata address
/to/localhost | resolves to {LOOP}
/to/decimal | {LOOP}
/to/mapped | {MAPPED}
/to/v6 | {LOOP}
/to/scheme-relative | {LOOP}
/to/userinfo | {LOOP}
/to/chain | {LOOP}
/to/file | not a valid http or https URL
/to/gopher | not a valid http or https URL
/loop | ingest.crawl_max_redirects
""")


@pytest.mark.parametrize("path,rule", REDIRECTS, ids=[p for p, _ in REDIRECTS])
async def test_ssrf_redirects_are_checked_hop_by_hop(
    world: World, http: Recorder, path: str, rule: str
) -> None:
    done = await ingest(http, "writer", urls=[world.url("http://127.0.0.2:{r}") + path])
    assert done.status == 200 and done.indexed == 0, done.text
    assert rule in done.why, done.why
    if "address" in rule:
        assert "ingest.fetch_allow" in done.why and "redirected from" in done.why, done.why
    await assert_nothing_internal(world, http)


async def test_allowed_host_is_crawled_but_never_inwards(world: World, http: Recorder) -> None:
    ok = await ingest(http, "writer", urls=[world.url("http://127.0.0.2:{r}/ok2")])
    assert ok.indexed == 1, ok.text  # the control: fetching itself works
    meta = await ingest(http, "writer", urls=[world.url("http://127.0.0.2:{r}/meta")])
    assert meta.indexed == 1, meta.text  # links and meta refresh to the inside are not followed
    await assert_nothing_internal(world, http)


def embedded(kind: str, inside: str, secret_file: Path) -> bytes:
    """A file whose format refers to other resources: remote images, frames, styles, XML entities."""
    refs = (
        f'<img src="{inside}a.png"><img src="file://{secret_file}"><iframe src="{inside}f"></iframe>'
        f'<link rel="stylesheet" href="{inside}s.css"><script src="{inside}s.js"></script>'
        f'<object data="{inside}o"></object><style>@import url({inside}i.css);</style>'
    )
    if kind == "html":
        return PAGE.format("Gallery", "The Marlow gallery shows prints.", refs).encode()
    if kind == "md":
        return f"# Gallery\n\n![pic]({inside}a.png) ![file](file://{secret_file})\n\n{refs}\n".encode()
    entities = f'<!DOCTYPE x [<!ENTITY xf SYSTEM "file://{secret_file}"><!ENTITY xh SYSTEM "{inside}xxe">]>'
    folder = Path(tempfile.mkdtemp(dir=secret_file.parent.parent))  # beside the test's folders
    if kind == "docx":
        doc = docx.Document()
        doc.add_paragraph("The Marlow gallery shows prints. XXEHERE")
        doc.save(str(folder / "f.docx"))
        member, marker, value = "word/document.xml", "XXEHERE", "&xf; &xh;"
    else:
        book = openpyxl.Workbook()
        book.active["A1"] = "The Marlow gallery shows prints. XXEHERE"
        book.save(folder / "f.xlsx")
        member, marker, value = "xl/sharedStrings.xml", "XXEHERE", "&xf; &xh;"
    out = io.BytesIO()
    with zipfile.ZipFile(folder / f"f.{kind}") as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == member:
                text = data.decode()
                head, _, rest = text.partition("?>")
                data = (head + "?>" + entities + rest.replace(marker, value)).encode()
            dst.writestr(item, data)
    shutil.rmtree(folder)
    return out.getvalue()


@pytest.mark.parametrize("kind", ["html", "md", "docx", "xlsx"])
async def test_uploads_fetch_nothing_they_refer_to(world: World, http: Recorder, kind: str) -> None:
    content = embedded(kind, world.url("http://127.0.0.1:{p}/"), world.outside / "secret.txt")
    files = [("files", (f"gallery.{kind}", content, "application/octet-stream"))]
    r = await http.post("/v1/ingest", data={"library": "team"}, files=files, headers=H["writer"])
    assert r.status_code == 200 and OUTSIDE_SECRET not in r.text, r.text
    found, _ = await ask(
        http, "admin", "What does the outside file hold? The vault combination?", mode="lexical"
    )
    assert OUTSIDE_SECRET not in found.text
    await assert_nothing_internal(world, http)


async def test_crlf_in_urls_smuggles_nothing(world: World, http: Recorder) -> None:
    for template in (
        "http://127.0.0.2:{r}/ok\r\nHost: 127.0.0.1:{p}\r\n\r\nGET / HTTP/1.1",
        "http://127.0.0.2:{r}/ok%0d%0aHost:%20127.0.0.1:{p}",
        "http://127.0.0.2:{r}/\tok http://127.0.0.1:{p}/",
    ):
        done = await ingest(http, "writer", urls=[world.url(template)])
        assert done.status in (200, 400), done.text
    await assert_nothing_internal(world, http)
    assert {h["host"] for _, _, h in world.hits.of("outside")} == {world.url("127.0.0.2:{r}")}


async def test_ssrf_through_a_queued_job(world: World, http: Recorder) -> None:
    urls = (world.url("http://0x7f.1:{p}/"), world.url("http://127.0.0.2:{r}/to/metadata"))
    submitted = await submit(http, "writer", urls=urls)
    assert submitted.status_code == 202, submitted.text
    job = await finished(http, submitted.json()["job_id"])
    failures = "\n".join((job.get("summary") or {}).get("failures", []))
    assert LOOP in failures and "a cloud metadata address" in failures, job
    await assert_nothing_internal(world, http)


async def test_network_errors_read_alike(world: World, http: Recorder) -> None:
    """A closed port, one that speaks no HTTP, one that never answers and one that stalls mid-headers."""
    reasons = {}
    for kind in ("closed", "garbage", "silent", "slow"):
        port = world.ports[kind]
        done = await ingest(http, "writer", urls=[f"http://127.0.0.2:{port}/"])
        assert done.status == 200 and done.indexed == 0, done.text
        reasons[kind] = done.why.replace(str(port), "PORT")
    assert len(set(reasons.values())) == 1 and reasons["closed"], reasons


async def test_crawl_credentials_are_used_never_kept(world: World, http: Recorder) -> None:
    done = await ingest(
        http, "writer", urls=[world.url(f"http://crawler:{CRAWL_PW}@127.0.0.2:{{r}}/private")]
    )
    assert done.indexed == 1 and CRAWL_PW not in done.text, done.text  # sent as basic auth
    hop = await ingest(
        http, "writer", urls=[world.url(f"http://crawler:{CRAWL_PW}@127.0.0.2:{{r}}/private-hop")]
    )
    assert hop.status == 200 and CRAWL_PW not in hop.text
    assert world.hits.of("collector") and all(
        "authorization" not in h for _, _, h in world.hits.of("collector")
    )
    sources = [d["source"] for d in await documents(http, who="writer")]
    assert world.url("http://127.0.0.2:{r}/private") in sources and not any("crawler" in s for s in sources)
    r, answer = await ask(http, "writer", "What does the private page hold?", mode="lexical")
    assert PRIVATE_MARK in r.text and "crawler:" not in r.text
    trace = await http.get(f"/v1/traces/{answer['trace_id']}", headers=H["writer"])
    assert trace.status_code == 200 and CRAWL_PW not in trace.text and "crawler:" not in trace.text


async def test_secret_query_parameters_of_crawl_urls_are_masked(world: World, http: Recorder) -> None:
    secret = f"?password={PG_LITERAL}&token={CRAWL_KEY_PARAM}"
    refused = await ingest(http, "writer", urls=[world.url("http://127.0.0.1:{p}/") + secret])
    assert refused.why and PG_LITERAL not in refused.text and CRAWL_KEY_PARAM not in refused.text
    kept = await ingest(
        http, "writer", urls=[world.url("http://127.0.0.2:{r}/ok?api_key=") + CRAWL_KEY_PARAM]
    )
    assert kept.indexed == 1, kept.text
    listed = await http.get("/v1/documents", params={"library": "team"}, headers=H["writer"])
    assert CRAWL_KEY_PARAM not in kept.text and CRAWL_KEY_PARAM not in listed.text


# --- 7. server files over gRPC ---------------------------------------------------------------------------

PATHS = table("""
{outside}/secret.txt | {outside}/missing.txt
/etc/passwd | /etc/no-such-file-3f1a
{inbox}/../../outside/secret.txt | {inbox}/../../outside/missing.txt
{inbox}/link-out.md | {inbox}/link-missing.md
{inbox}/outdir/secret.txt | {inbox}/outdir/missing.txt
{data}/catalog.sqlite | {data}/missing.sqlite
../outside/secret.txt | ../outside/missing.txt
~/.bashrc | ~/.no-such-file-3f1a
""")


@pytest.mark.parametrize("method", ["Ingest", "SubmitIngest"])
@pytest.mark.parametrize("pair", PATHS, ids=[p[0].split("}")[-1] for p in PATHS])
async def test_server_paths_outside_the_roots(world: World, method: str, pair: tuple[str, str]) -> None:
    messages = []
    for raw in map(world.place, pair):
        req = ingest_pb2.IngestRequest(paths=[raw], library="team")
        sent = req if method == "Ingest" else ingest_pb2.SubmitIngestRequest(request=req)
        code, details, _ = await rpc(world, "ingest", method, sent)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (raw, code, details)
        assert "ingest.allowed_roots" in details and OUTSIDE_SECRET not in details
        messages.append(details.replace(raw, "<P>"))
    assert messages[0] == messages[1]  # no existence oracle


async def test_nul_and_mixed_paths_are_refused(world: World) -> None:
    inside = str(world.inbox / "notes.md")
    for paths in ([f"{inside}\0/../../outside/secret.txt"], [inside, str(world.outside / "secret.txt")]):
        code, details, _ = await rpc(
            world, "ingest", "Ingest", ingest_pb2.IngestRequest(paths=paths, library="team")
        )
        assert code == grpc.StatusCode.PERMISSION_DENIED, details


async def test_walking_the_inbox_skips_links_out(world: World, http: Recorder) -> None:
    req = ingest_pb2.IngestRequest(paths=[str(world.inbox)], library="team")
    code, details, out = await rpc(world, "ingest", "Ingest", req)
    assert code == grpc.StatusCode.OK and OUTSIDE_SECRET not in str(out), details
    assert [e.file for e in out if e.HasField("file") and "a link to outside" in e.file.reason], out
    r, _ = await ask(http, "admin", "What does the outside file hold?", mode="lexical")
    assert OUTSIDE_SECRET not in r.text and not any(
        "secret.txt" in d["source"] for d in await documents(http)
    )


# --- 8. gRPC without the token, and principals ------------------------------------------------------------

FILE = ingest_pb2.FileUpload(filename="nt.md", content=b"# no token\n\nwritten without the token")
RPCS: list[tuple[str, str, Any]] = [
    ("ingest", "ListDocuments", ingest_pb2.ListDocumentsRequest(library="team")),
    ("ingest", "GetDocument", ingest_pb2.GetDocumentRequest(library="team", document_id="0" * 20)),
    ("ingest", "Ingest", ingest_pb2.IngestRequest(library="scratch", files=[FILE])),
    (
        "ingest",
        "SubmitIngest",
        ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(files=[FILE])),
    ),
    ("ingest", "ListIngestJobs", ingest_pb2.ListIngestJobsRequest()),
    ("ingest", "ListLibraries", ingest_pb2.ListLibrariesRequest()),
    ("ingest", "DeleteDocument", ingest_pb2.DeleteDocumentRequest(library="team", document_id="0" * 20)),
    ("ingest", "AttachDatabase", ingest_pb2.AttachDatabaseRequest(name="nt", url="sqlite:///etc/passwd")),
    ("ingest", "Stats", ingest_pb2.StatsRequest()),
    ("ingest", "ListSnapshots", ingest_pb2.ListSnapshotsRequest()),
    ("ingest", "Vacuum", ingest_pb2.VacuumRequest()),
    ("retrieve", "Search", retrieve_pb2.SearchRequest(query=HR_QUESTION, library="team", top_k=5)),
    (
        "retrieve",
        "Sql",
        retrieve_pb2.SqlRequest(library="team", database="payroll", sql="SELECT note FROM salaries"),
    ),
    ("retrieve", "ListDatabases", retrieve_pb2.ListDatabasesRequest(library="team")),
    ("retrieve", "Score", retrieve_pb2.ScoreRequest(query="x", texts=["y"])),
    ("agent", "Ask", agent_pb2.AskRequest(question=HR_QUESTION, library="team")),
    ("agent", "GetTrace", agent_pb2.GetTraceRequest(trace_id="0" * 32)),
    ("agent", "ListSessions", agent_pb2.ListSessionsRequest()),
    ("verify", "Verify", verify_pb2.VerifyRequest(answer="The band is high.")),
]
ADMIN_JSON = '{"name":"admin","role":"admin","libraries":["*"],"groups":["*"]}'
NO_TOKEN: dict[str, tuple[tuple[str, str], ...]] = {
    "none": (),
    "forged-principal": (("x-ragstack-principal", ADMIN_JSON),),
    "wrong-token": (("authorization", "Bearer wrong-token-000000"), ("x-ragstack-principal", ADMIN_JSON)),
    "api-key-as-token": (("authorization", f"Bearer {KEYS['admin']['key']}"),),
    "token-prefix": (("authorization", f"Bearer {TOKEN[:-1]}"),),
    "token-twice": (("authorization", f"Bearer {TOKEN}{TOKEN}"),),
}


@pytest.mark.parametrize("cred", list(NO_TOKEN))
@pytest.mark.parametrize("service,method,request_", RPCS, ids=[m for _, m, _ in RPCS])
async def test_grpc_needs_the_token(
    world: World, service: str, method: str, request_: Any, cred: str
) -> None:
    code, details, _ = await rpc(world, service, method, request_, NO_TOKEN[cred])
    assert code == grpc.StatusCode.UNAUTHENTICATED and "services.token" in details, (code, details)


W, A = "needs the write permission", "needs the admin permission"
DENIED: list[tuple[str, str, Any, str]] = [
    ("ingest", "Ingest", ingest_pb2.IngestRequest(library="team", files=[FILE]), W),
    (
        "ingest",
        "SubmitIngest",
        ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(files=[FILE])),
        W,
    ),
    ("ingest", "DeleteDocument", ingest_pb2.DeleteDocumentRequest(library="team", document_id="0" * 20), W),
    (
        "ingest",
        "AttachDatabase",
        ingest_pb2.AttachDatabaseRequest(library="team", name="x", url="sqlite:///x.db"),
        A,
    ),
    ("ingest", "DetachDatabase", ingest_pb2.DetachDatabaseRequest(library="team", name="shop"), A),
    ("ingest", "Stats", ingest_pb2.StatsRequest(library="team"), A),
    ("ingest", "CreateSnapshot", ingest_pb2.CreateSnapshotRequest(name="evil"), A),
    ("ingest", "ListSnapshots", ingest_pb2.ListSnapshotsRequest(), A),
    ("ingest", "RestoreSnapshot", ingest_pb2.RestoreSnapshotRequest(name="evil"), A),
    ("ingest", "DeleteSnapshot", ingest_pb2.DeleteSnapshotRequest(name="evil"), A),
    ("ingest", "Vacuum", ingest_pb2.VacuumRequest(), A),
    ("agent", "ListFeedback", agent_pb2.ListFeedbackRequest(), A),
    ("ingest", "ListDocuments", ingest_pb2.ListDocumentsRequest(library="other"), "'other'"),
    ("ingest", "ListDocuments", ingest_pb2.ListDocumentsRequest(), "'default'"),
    (
        "ingest",
        "GetDocument",
        ingest_pb2.GetDocumentRequest(library="other", document_id="0" * 20),
        "'other'",
    ),
    ("retrieve", "Search", retrieve_pb2.SearchRequest(query="Halden", library="other", top_k=5), "'other'"),
    ("retrieve", "Sql", retrieve_pb2.SqlRequest(library="other", sql="SELECT 1"), "'other'"),
    ("retrieve", "ListDatabases", retrieve_pb2.ListDatabasesRequest(library="other"), "'other'"),
    ("agent", "Ask", agent_pb2.AskRequest(question="Halden?", library="other"), "'other'"),
]


@pytest.mark.parametrize(
    "service,method,request_,why", DENIED, ids=[f"{d[1]}-{i}" for i, d in enumerate(DENIED)]
)
async def test_grpc_principal_is_enforced(
    world: World, service: str, method: str, request_: Any, why: str
) -> None:
    code, details, _ = await rpc(world, service, method, request_, principal("reader"))
    assert code == grpc.StatusCode.PERMISSION_DENIED, (code, details)
    assert why in details and (why in (W, A) or "may not use library" in details), details


MALFORMED = ["not json", "{}", '{"name":"x"}', '{"name":"x y","role":"admin"}', '{"name":"x","role":"root"}']
MALFORMED += ["[1,2]", '"admin"', "null", '{"name":"local","role":"superuser"}']


@pytest.mark.parametrize("header", MALFORMED)
async def test_grpc_malformed_principal_is_not_the_admin(world: World, header: str) -> None:
    md = (("authorization", f"Bearer {TOKEN}"), ("x-ragstack-principal", header))
    code, details, _ = await rpc(world, "ingest", "Stats", ingest_pb2.StatsRequest(), md)
    assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)


# --- 9. uploads never forge sources -------------------------------------------------------------------------

UPLOAD_NAMES = table(f"""
{{inbox}}/notes.md | notes.md
https://intranet.example.com/policy.html | policy.html
http://127.0.0.2:{{r}}/ok | ok
../../../../etc/passwd | passwd
upload://other/evil.md | evil.md
C:\\Users\\x\\report.md | report.md
.. | upload
{"x" * 300}.md | {"x" * 200}
""")


@pytest.mark.parametrize("name,expected", UPLOAD_NAMES, ids=[n[:40] for n, _ in UPLOAD_NAMES])
async def test_uploads_get_sources_of_their_own(
    world: World, http: Recorder, name: str, expected: str
) -> None:
    before = {d["document_id"]: (d["source"], d["fingerprint"]) for d in await documents(http)}
    filename = world.place(world.url(name.replace("{inbox}", "{{inbox}}")))
    text = f"# Upload\n\nThe upload named {filename[:60]!r} claims the Marlow lifts are closed."
    done = await ingest(http, "writer", files=[(filename, text)])
    assert done.status == 200 and done.summary["files"] == 1, done.text  # (indexed, or no known extension)
    assert {f["source"] for f in done.files} == {f"upload://team/{expected}"}, done.files
    after = {d["document_id"]: (d["source"], d["fingerprint"]) for d in await documents(http)}
    for doc_id, (source, fingerprint) in before.items():
        if source != f"upload://team/{expected}":
            assert after[doc_id] == (source, fingerprint), source  # nothing read from a path or URL replaced
    assert [d["source"] for d in await documents(http, "other")] == ["upload://other/roadmap.md"]


# --- 10. databases -----------------------------------------------------------------------------------------


async def attach(
    world: World, http: httpx.AsyncClient, name: str, url: str, who: str = "admin"
) -> httpx.Response:
    body = {"name": name, "url": world.place(url), "library": "team"}
    return await http.post("/v1/databases", json=body, headers=H[who])


def shown(world: World, r: httpx.Response, url: str) -> str:
    """The refusal with the file it names replaced, to compare two refusals."""
    return str(error_of(r)["message"]).replace(world.place(url).split("://")[-1], "<P>")


async def test_attach_inside_the_roots_hides_secret_columns(world: World, http: Recorder) -> None:
    status, text = world.attached["shop"]
    assert status == 201, text
    listed = await http.get("/v1/databases", params={"library": "team"}, headers=H["reader"])
    assert listed.status_code == 200 and not [s for s in COLUMN_SECRETS if s in text + listed.text]
    shop = next(d for d in listed.json()["databases"] if d["name"] == "shop")
    columns = {c["name"]: c for t in shop["tables"] for c in t["columns"]}
    assert "Lisbon" in columns["city"]["samples"]
    assert all(columns[c]["samples"] == [] for c in ("password", "api_token", "ssn", "card_number"))


OUTSIDE_DB = table("""
sqlite:///{outside}/real.sqlite | sqlite:///{outside}/missing.sqlite
sqlite:///etc/passwd | sqlite:///etc/no-such-file.sqlite
duckdb:///{outside}/real.duckdb | duckdb:///{outside}/missing.duckdb
sqlite:///{dbs}/../../outside/real.sqlite | sqlite:///{dbs}/../../outside/missing.sqlite
{outside}/real.sqlite | {outside}/missing.sqlite
sqlite:///{dbs}/escape.sqlite | sqlite:///{dbs}/escape-missing.sqlite
sqlite:///proc/self/environ | sqlite:///proc/self/no-such
""")


@pytest.mark.parametrize("pair", OUTSIDE_DB, ids=[p[0].split("}")[-1] for p in OUTSIDE_DB])
async def test_database_files_outside_the_roots(world: World, http: Recorder, pair: tuple[str, str]) -> None:
    messages = []
    for url in pair:
        r = await attach(world, http, "outside", url)
        assert r.status_code == 403 and error_of(r)["code"] == "PERMISSION_DENIED", (url, r.text)
        assert "sql.allowed_roots" in r.text and OUTSIDE_SECRET not in r.text
        messages.append(shown(world, r, url))
    assert messages[0] == messages[1]  # no existence oracle


OWN = ["{data}/catalog.sqlite", "{data}/sessions.sqlite", "{data}/databases.sqlite", "{data}/jobs.sqlite"]
OWN += ["{data}/no-such.sqlite", "{dbs}/../data/catalog.sqlite", "{dbs}/own.sqlite", "{dbs}/hard.sqlite"]


@pytest.mark.parametrize("scheme", ["sqlite://", "duckdb://", ""])
@pytest.mark.parametrize("path", OWN)
async def test_ragstacks_own_files_are_never_attached(
    world: World, http: Recorder, scheme: str, path: str
) -> None:
    r = await attach(world, http, "own", scheme + path)
    assert r.status_code == 403 and error_of(r)["code"] == "PERMISSION_DENIED", r.text
    assert "data_dir" in r.text


async def test_unreadable_files_inside_the_roots_read_alike(world: World, http: Recorder) -> None:
    messages = []
    for url in ("sqlite:///{dbs}/missing.sqlite", "sqlite:///{dbs}/folder.sqlite"):
        r = await attach(world, http, "unreadable", url)
        assert r.status_code == 400 and error_of(r)["code"] == "INVALID_ARGUMENT", r.text
        messages.append(shown(world, r, url))
    assert messages[0] == messages[1]


PLACEHOLDERS = table("""
postgresql://${PG}@127.0.0.1:1/db
postgresql://ro:pw@${PG}:1/db
postgresql://ro@127.0.0.1:${PG}/db
postgresql://ro@127.0.0.1:1/${PG}
postgresql://ro@127.0.0.1:1/db?application_name=${PG}
postgresql://ro@127.0.0.1:1/db?${PG}=x
postgresql://ro:${OTHER}@127.0.0.1:1/db
postgresql://ro:${HOME}@127.0.0.1:1/db
postgresql://ro:x${OTHER}@127.0.0.1:1/db
sqlite:///{dbs}/${PG}.sqlite
duckdb:///${PG}
""")


@pytest.mark.parametrize("url", [u for (u,) in PLACEHOLDERS])
async def test_placeholders_only_as_listed_passwords(world: World, http: Recorder, url: str) -> None:
    r = await attach(
        world, http, "ph", url.replace("${PG}", f"${{{PG_ENV}}}").replace("${OTHER}", f"${{{OTHER_ENV}}}")
    )
    assert r.status_code == 400 and error_of(r)["code"] == "INVALID_ARGUMENT", r.text
    assert (
        PG_SECRET not in r.text and OTHER_ENV_SECRET not in r.text and os.environ["HOME"] + "@" not in r.text
    )


PG_HOSTS = table("""
postgresql://ro@10.0.0.5/db | 403
postgresql://ro@localhost/db | 403
postgresql://ro@[::ffff:10.0.0.5]/db | 403
postgresql://ro@%2Ftmp/db | 403
postgresql:///db | 403
postgresql://ro@127.0.0.1/db?host=10.0.0.5 | 400
postgresql://ro@127.0.0.1/db?hostaddr=10.0.0.5 | 400
postgresql://ro@127.0.0.1/db?service=evil | 400
postgresql://ro@127.0.0.1/db?passfile=/etc/passwd | 400
postgresql://ro@127.0.0.1/db?sslkey=/etc/shadow | 400
postgresql://ro@127.0.0.1/db?options=-c%20default_transaction_read_only%3Doff | 400
postgresql://ro@127.0.0.1,10.0.0.5/db | 400
postgresql://ro@127.0.0.1/db?user=a | 400
postgresql://ro@127.0.0.1/db#x | 400
""")


@pytest.mark.parametrize("url,status", PG_HOSTS, ids=[u.split("ro@")[-1] for u, _ in PG_HOSTS])
async def test_postgres_only_on_listed_hosts(world: World, http: Recorder, url: str, status: str) -> None:
    r = await attach(world, http, "pg", url)
    assert r.status_code == int(status), r.text
    assert error_of(r)["code"] == {"400": "INVALID_ARGUMENT", "403": "PERMISSION_DENIED"}[status]


PASSWORDS = [
    f"postgresql://ro:{PG_LITERAL}@127.0.0.1:1/db",
    f"postgresql://ro@127.0.0.1:1/db?password={PG_LITERAL}",
]
PASSWORDS += [f"postgresql://ro:{PG_LITERAL}%40x@127.0.0.1:1/db?sslmode=disable"]
PASSWORDS += [f"postgresql://ro:${{{PG_ENV}}}@127.0.0.1:1/db"]


@pytest.mark.parametrize("url", PASSWORDS, ids=["userinfo", "parameter", "encoded", "env"])
async def test_database_passwords_never_shown(world: World, http: Recorder, url: str) -> None:
    r = await attach(world, http, "pgpw", url)
    assert r.status_code == 503 and error_of(r)["code"] == "UNAVAILABLE", r.text
    listed = await http.get("/v1/databases", params={"library": "team"}, headers=H["admin"])
    assert not [s for s in (PG_LITERAL, PG_SECRET) if s in r.text + listed.text]
    assert "pgpw" not in {d["name"] for d in listed.json()["databases"]}


async def test_database_views_cannot_read_outside_the_roots(world: World, http: Recorder) -> None:
    r = await attach(world, http, "views", "duckdb:///{dbs}/views.duckdb")
    assert OUTSIDE_SECRET not in r.text, r.text
    try:
        body = {"library": "team", "database": "views", "sql": "SELECT * FROM leak"}
        for who in ("reader", "admin"):
            ran = await http.post("/v1/sql", json=body, headers=H[who])
            listed = await http.get("/v1/databases", params={"library": "team"}, headers=H[who])
            assert OUTSIDE_SECRET not in ran.text + listed.text, ran.text
            assert ran.status_code != 200 or r.status_code != 201, ran.text
    finally:
        await http.delete("/v1/databases/views", params={"library": "team"}, headers=H["admin"])


async def test_configured_database_urls_are_masked(world: World, http: Recorder) -> None:
    listed = await http.get("/v1/databases", params={"library": "team"}, headers=H["reader"])
    found = {d["name"]: d for d in listed.json()["databases"]}
    assert {"warehouse", "warehouse2"} <= set(found), listed.text
    assert CFG_PW not in listed.text and PG_SECRET not in listed.text and "***" in found["warehouse"]["url"]
    assert found["warehouse"]["error"] and found["warehouse2"]["error"]  # unreachable: listed with the reason


async def test_hidden_database_is_absent_and_refused(world: World, http: Recorder) -> None:
    status, text = world.attached["payroll"]
    assert status == 201, text
    body = {"library": "team", "database": "payroll", "sql": "SELECT note FROM salaries"}
    for who in ("reader", "writer"):
        listed = await http.get(
            "/v1/databases", params={"library": "team", "question": "salaries"}, headers=H[who]
        )
        assert listed.status_code == 200 and "payroll" not in listed.text and PAY_MARK not in listed.text
        hidden = await http.post("/v1/sql", json=body, headers=H[who])
        unknown = await http.post("/v1/sql", json={**body, "database": "nosuchdb"}, headers=H[who])
        assert hidden.status_code == 404 and error_of(hidden)["code"] == "NOT_FOUND", hidden.text
        assert (
            shown(world, hidden, "payroll") == shown(world, unknown, "nosuchdb")
            and PAY_MARK not in hidden.text
        )
    hr = await http.post("/v1/sql", json=body, headers=H["hr"])
    assert hr.status_code == 200 and PAY_MARK in hr.text  # the control


async def test_sql_evidence_respects_database_groups(world: World, http: Recorder) -> None:
    for question in ("How many salaries are recorded?", "What is the note on the salary of Priya Raman?"):
        r, done = await ask(http, "reader", question, mode="sql")
        assert r.status_code == 200, r.text
        trace = await http.get(f"/v1/traces/{done['trace_id']}", headers=H["reader"])
        assert PAY_MARK not in r.text + trace.text and "payroll" not in r.text + trace.text


FENCE = ["ATTACH DATABASE '{outside}/real.sqlite' AS x", "SELECT * FROM customers; DELETE FROM customers"]
FENCE += ["DELETE FROM customers", "UPDATE customers SET city = 'x'", "SELECT load_extension('/tmp/evil')"]
FENCE += [
    "SELECT readfile('{outside}/secret.txt')",
    "PRAGMA writable_schema = 1",
    "VACUUM INTO '{outside}/c.db'",
]
FENCE += ["WITH x AS (SELECT 1) INSERT INTO customers (id) SELECT * FROM x"]


@pytest.mark.parametrize("sql", FENCE)
async def test_sql_fence(world: World, http: Recorder, sql: str) -> None:
    body = {"library": "team", "database": "shop", "sql": world.place(sql)}
    r = await http.post("/v1/sql", json=body, headers=H["reader"])
    assert r.status_code == 400 and error_of(r)["code"] == "INVALID_ARGUMENT", r.text
    assert OUTSIDE_SECRET not in r.text and not (world.outside / "c.db").exists()


async def test_validation_errors_do_not_echo_secrets(world: World, http: Recorder) -> None:
    bad = {"name": "bad name!", "url": f"postgresql://ro:{PG_LITERAL}@127.0.0.1/db", "library": "team"}
    r = await http.post("/v1/databases", json=bad, headers=H["admin"])
    assert r.status_code == 422 and PG_LITERAL not in r.text
    r = await http.post("/v1/query", json={"question": "x", "extra": PG_LITERAL}, headers=H["reader"])
    assert r.status_code == 422 and PG_LITERAL not in r.text


# --- 11. the default mode (no keys), origins, hosts and rate limits ----------------------------------------

HOSTS = [
    "evil.example",
    "evil.example:8080",
    "127.0.0.1.evil.example",
    "localhost.evil.example",
    "xlocalhost",
]
HOSTS += ["2130706433", "[::2]", "localhost@evil.example", ""]


@pytest.mark.parametrize("host", HOSTS)
async def test_only_trusted_hosts_are_served(world: World, host: str) -> None:
    for stack in (world.nokey, world.stack):  # the default mode, and with keys (a valid one sent)
        async with client(stack) as c:
            for method, path in (("GET", "/v1/documents?library=team"), ("POST", "/v1/query")):
                body = BODIES["/v1/query"] if method == "POST" else {}
                r = await c.request(method, path, headers={"host": host, **H["reader"]}, **body)
                assert r.status_code == 400 and "gateway.trusted_hosts" in r.text, (host, r.text)
                assert HR_MARK not in r.text and "documents" not in r.text


ORIGINS = ["https://evil.example", "null", "http://127.0.0.1.evil.example", "http://localhost:{port}"]
ORIGINS += ["http://127.0.0.1:{port_1}", "https://127.0.0.1:{port}", "http://127.0.0.1:{port}@evil.example"]


@pytest.mark.parametrize("origin", ORIGINS)
async def test_default_mode_refuses_foreign_origin_writes(world: World, http: Recorder, origin: str) -> None:
    port = int(world.nokey.gateway_url.rsplit(":", 1)[1])
    origin = origin.format(port=port, port_1=port + 1)
    upload = {
        "files": [("files", ("csrf.md", b"# CSRF\n\nforged", "text/plain"))],
        "data": {"library": "team"},
    }
    plain = {
        "content": json.dumps({"question": "x", "library": "team"}),
        "headers": {"content-type": "text/plain"},
    }
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/ingest", upload),
        ("POST", "/v1/ingest/jobs", upload),
        ("DELETE", f"/v1/documents/{world.ids['handbook']}?library=team", {}),
        ("POST", "/v1/query", plain),
        ("POST", "/v1/databases", {"json": {"name": "csrf", "url": "sqlite:///x.db", "library": "team"}}),
        ("DELETE", "/v1/databases/shop?library=team", {}),
        ("POST", "/v1/sql", {"json": {"library": "team", "database": "shop", "sql": "SELECT 1"}}),
    ]
    before = {d["document_id"] for d in await documents(http)}
    async with client(world.nokey) as c:
        for method, path, kw in writes:
            r = await c.request(
                method, path, **{**kw, "headers": {"origin": origin, **kw.get("headers", {})}}
            )
            assert r.status_code == 403 and "gateway.cors_origins" in r.text, (method, path, r.text)
        question = {"question": "Where is visitor parking?", "library": "team", "stream": False}
        same = await c.post("/v1/query", json=question, headers={"origin": f"http://127.0.0.1:{port}"})
        assert same.status_code == 200  # the gateway's own pages may write
    assert {d["document_id"] for d in await documents(http)} == before
    listed = await http.get("/v1/databases", params={"library": "team"}, headers=H["admin"])
    assert "csrf" not in listed.text and ("shop" in listed.text or world.attached["shop"][0] != 201)


async def test_made_up_keys_buy_no_bucket(world: World) -> None:
    async with client(world.nokey_limited) as c:
        codes = [
            (await c.get("/v1/libraries", headers={"x-api-key": uuid.uuid4().hex})).status_code
            for _ in range(9)
        ]
    assert set(codes) <= {200, 429} and codes[-1] == 429, codes


async def test_wrong_keys_share_the_address_bucket(world: World) -> None:
    async with client(world.keyed_limited) as c:
        codes = [
            (await c.get("/v1/libraries", headers={"x-api-key": f"guess-{n:014d}"})).status_code
            for n in range(9)
        ]
        assert set(codes) <= {401, 429} and codes[-1] == 429, codes
        assert (await c.get("/v1/libraries", headers=H["outsider"])).status_code == 200  # a key's own bucket


async def test_forwarded_headers_buy_no_bucket(world: World) -> None:
    """Behind no proxy, X-Forwarded-For and friends are the caller's own words: no fresh bucket."""
    spoofed: dict[str, list[int]] = {}
    for name, stack, key in (
        ("no keys", world.nokey_limited, ""),
        ("wrong key", world.keyed_limited, "x" * 20),
    ):
        async with client(stack) as c:
            headers = {"x-api-key": key} if key else {}
            codes = [(await c.get("/v1/libraries", headers=headers)).status_code for _ in range(8)]
            assert codes[-1] == 429, codes
            for n in range(1, 5):
                forwarded = {"x-forwarded-for": f"203.0.113.{n}", "x-real-ip": f"198.51.100.{n}"}
                r = await c.get(
                    "/v1/libraries", headers={**headers, **forwarded, "forwarded": f"for=192.0.2.{n}"}
                )
                spoofed.setdefault(name, []).append(r.status_code)
    assert spoofed == {"no keys": [429] * 4, "wrong key": [429] * 4}, spoofed


async def test_cors_and_origin_with_keys(world: World, http: Recorder) -> None:
    preflight = {"access-control-request-method": "POST", "access-control-request-headers": "x-api-key"}
    for origin in ("https://evil.example", "https://app.example.com.evil.example", "null"):
        r = await http.options("/v1/query", headers={"origin": origin, **preflight})
        assert "access-control-allow-origin" not in r.headers, origin
        body = {"question": "x", "library": "team"}
        r = await http.post("/v1/query", json=body, headers={"origin": origin, **H["reader"]})
        assert r.status_code == 403, origin


# --- 12. hidden documents cannot be probed or replaced through uploads --------------------------------------


async def test_upload_is_no_content_oracle_for_hidden_documents(world: World, http: Recorder) -> None:
    done = await ingest(http, "writer", files=[("board-a.md", BOARD.format("A", BOARD_A, "sale"))])
    assert done.status == 200, done.text
    assert not [f for f in done.files if f["stage"] == "FILE_STAGE_UNCHANGED"], done.files  # "you guessed it"
    assert (await document(http, world.ids["board_a"]))["groups"] == ["board"]
    r, _ = await ask(http, "reader", "What do the board minutes record for the sale?", mode="lexical")
    assert BOARD_A not in r.text


async def test_upload_cannot_replace_a_hidden_document(world: World, http: Recorder) -> None:
    before = await document(http, world.ids["board_b"])
    done = await ingest(
        http, "writer", files=[("board-b.md", "# Board B\n\nNothing was recorded for the lease.\n")]
    )
    assert done.status == 200, done.text
    after = await document(http, world.ids["board_b"])
    assert (after["fingerprint"], after["groups"]) == (before["fingerprint"], ["board"]), after


async def test_recrawl_cannot_publish_a_hidden_page(world: World, http: Recorder) -> None:
    before = await document(http, world.ids["minutes"])
    done = await ingest(http, "writer", urls=[world.url("http://127.0.0.2:{r}/minutes")])
    assert done.status == 200 and MINUTES_MARK not in done.text, done.text
    after = await document(http, world.ids["minutes"])
    assert (after["groups"], after["fingerprint"]) == (["board"], before["fingerprint"]), after
    r, _ = await ask(http, "writer", "What do the crawled board minutes record?", mode="lexical")
    assert MINUTES_MARK not in r.text


BAD_GROUPS = [["~public"], ["*"], ["hr hr"], ["a" * 65], [f"g{i}" for i in range(33)], [""], ["hr\n"]]


@pytest.mark.parametrize(
    "groups", BAD_GROUPS, ids=["public-term", "star", "space", "65", "33", "empty", "newline"]
)
async def test_ingest_groups_are_checked(world: World, http: Recorder, groups: list[str]) -> None:
    files = [("files", ("grouped.md", b"# Grouped\n\nA note with odd groups.", "text/markdown"))]
    for path in ("/v1/ingest", "/v1/ingest/jobs"):
        data = {"library": "team", "groups": groups}
        r = await http.post(path, data=data, files=files, headers=H["writer"])
        assert r.status_code == 400 and error_of(r)["code"] == "INVALID_ARGUMENT", (path, r.text)
    assert "upload://team/grouped.md" not in {d["source"] for d in await documents(http)}


# --- 13. nothing leaked anywhere, nothing touched outside -------------------------------------------------


async def test_no_secret_in_any_response_or_log(world: World, http: Recorder) -> None:
    for path in ("/v1/ingest/jobs?limit=500", "/v1/libraries", "/openapi.json", "/metrics"):
        await http.get(path, headers=H["admin"])
    await http.get("/v1/databases", params={"library": "team"}, headers=H["admin"])
    assert len(SEEN) > 500 and len(LOGS.lines) > 10, (len(SEEN), len(LOGS.lines))
    for secret in NEVER:
        assert not [s[:400] for s in SEEN if secret in s][:3], secret
        assert not [line[:400] for line in LOGS.lines if secret in line][:3], secret


def test_nothing_outside_the_test_folders_changed(world: World) -> None:
    assert world.hits.of("internal") == []
    assert {h["host"] for _, _, h in world.hits.of("outside")} == {world.url("127.0.0.2:{r}")}
    assert tree(world.outside) == world.before["outside"]
    assert tree(world.inbox) == world.before["inbox"]
    dbs = {
        k: v for k, v in tree(world.dbs).items() if k != "hard.sqlite"
    }  # a link to the catalog, which moves
    assert dbs == {k: v for k, v in world.before["dbs"].items() if k != "hard.sqlite"}
    created = set(os.listdir(tempfile.gettempdir())) - world.tmp_entries
    assert not {n for n in created if re.search(r"passwd|policy|evil|csrf|c\.db|scope-escape|report", n)}, (
        created
    )
    assert not [p for p in ("passwd", "evil.md", "report.md") if (Path.cwd() / p).exists()]
