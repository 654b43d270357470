"""Attacks on sources kept in sync (AddSource ... RetrySource, IngestRequest.source, /v1/sources),
written against the interface: the proto's comments, `SourceConfig` and the `ingest.source_*` settings.

One keyed stack for the module (services.token set, so gRPC callers name their principal as the
gateway does). On loopback: an "inside" host (127.0.0.1, and ::1 where there is IPv6) that no source
may ever reach, an allowed "outside" host (127.0.0.2, in `ingest.fetch_allow`) serving hostile sites
(redirects inwards, sitemaps, WebDAV and S3 listings with entities, bombs, never-ending walks, slow
bodies), and a port that never answers. Folders: an allowed root (`inbox`) holding symlinks, a FIFO,
a sparse file and loops, and an `outside` folder with a secret. Every test asserts the SAFE
behaviour: a failing test is a defect.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import grpc
import httpx
import pytest
import yaml

from ragstack.config import load_config
from ragstack.domain import SearchMode
from ragstack.redact import RedactingFilter
from ragstack.resources import Resources
from ragstack.rpc.clients import RetrieveClient, open_channel
from ragstack.serve import Stack
from ragstack.v1 import ingest_pb2, ingest_pb2_grpc
from tests.conftest import make_config, start_with
from tests.tools.hostile_sites import (
    Hits,
    Reply,
    Request,
    RssPeak,
    Silent,
    Site,
    billion_laughs,
    drip,
    endless,
    free_port,
    gzip_bomb,
    multistatus,
    s3_listing,
    sitemap_index,
    streamed_urlset,
    urlset,
)

TOKEN = "svc-token-3b7e1f0a9c2d4e68"
KEYS: dict[str, dict[str, Any]] = {
    "admin": {"key": "adm-7d2c9e4a1b3f5e60", "role": "admin", "libraries": ["*"]},
    "writer": {"key": "wrt-1f3e5a7c9b0d2e44", "role": "writer", "libraries": ["team"]},
    "reader": {"key": "rdr-6a8c0e2b4d6f8a12", "role": "reader", "libraries": ["team"]},
    "hr": {"key": "hrr-9e7c5a3b1d0f2e86", "role": "reader", "libraries": ["team"], "groups": ["hr"]},
    "outsider": {"key": "out-2b4d6f8a0c1e3a57", "role": "writer", "libraries": ["other"]},
}
H = {name: {"x-api-key": spec["key"]} for name, spec in KEYS.items()}

# Markers: one word each, so a lexical search finds them.
INSIDE_MARK = "armadilloinsidesecret"  # on the inside host: never fetched
OUTSIDE_MARK = "geckooutsidesecret"  # in a file outside ingest.allowed_roots: never ingested
TEAM_MARK, HR_MARK, VAULT_MARK = "heronteammark", "quokkahrmark", "pelicanvaultmark"
TIGHT_MARK, OK_MARK = "ocelottightmark", "wrenokpagemark"
CRED_PW = "credpwlynx9917zz"  # a password in a source's URL: never echoed
PASSWD_WORD = "nologin"  # in /etc/passwd

PAGE = "<html><head><title>{0}</title></head><body><main><h1>{0}</h1><p>{1}</p></main></body></html>"
RETRIES = 2  # ingest.source_retries
MAX_ITEMS = 500  # ingest.source_max_items
PAGE_TIMEOUT = 2.0  # ingest.crawl_page_timeout_s


# --- the world --------------------------------------------------------------------------------------


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(RedactingFilter())  # as ragstack's own handlers have it
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
        except Exception:
            pass


@dataclass
class World:
    stack: Stack
    http: httpx.AsyncClient
    channel: grpc.aio.Channel
    retrieve: RetrieveClient
    root: Path
    inbox: Path
    outside: Path
    hits: Hits
    inside: Site
    out: Site
    silent: Silent
    closed: int  # a closed port on the outside host
    logs: Capture
    inside_ports: dict[str, int] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)
    fifos: list[Path] = field(default_factory=list)
    live_version: list[int] = field(default_factory=lambda: [1])

    def i(self, template: str) -> str:
        """`template` with {p} (inside port), {p6} (inside ::1 port), {r} (outside port), {closed}."""
        return template.format(
            p=self.inside.port,
            p6=self.inside_ports.get("p6", self.inside.port),
            r=self.out.port,
            closed=self.closed,
            s=self.silent.port,
        )


def _page(title: str, text: str) -> bytes:
    return PAGE.format(title, text).encode()


def _inside_routes(site: Site) -> None:
    site.on("*", Reply(body=_page("Inside", f"The vault code is {INSIDE_MARK}.")))


_XXE_ENTITIES = '<!ENTITY xxe SYSTEM "file:///etc/passwd"><!ENTITY web SYSTEM "{}">'


def _outside_routes(w: World) -> None:  # noqa: C901 - one route table
    out, i = w.out, w.i
    ins = w.inside.url
    out.on("/page/ok", _page("Ok", f"A public page, {OK_MARK}."))
    out.on("/private", _page("Private", "Reached with credentials, fine."))
    # redirects inwards
    out.on("/redir/inside", Reply(302, {"location": ins("/secret")}))
    out.on("/redir/numeric", Reply(302, {"location": i("http://2130706433:{p}/secret")}))
    out.on("/redir/hex", Reply(302, {"location": i("http://0x7f.1:{p}/secret")}))
    out.on("/redir/metadata", Reply(302, {"location": "http://169.254.169.254/latest/meta-data/"}))
    out.on("/redir/file", Reply(302, {"location": "file:///etc/passwd"}))
    out.on("/redir/loop", Reply(302, {"location": "/redir/loop"}))
    out.on("/redir/relative-inside", Reply(302, {"location": i("//127.0.0.1:{p}/secret")}))
    # sitemaps leading inwards
    out.on("/sm/inside.xml", urlset([ins("/secret"), out.url("/page/ok"), out.url("/redir/inside")]))
    out.on("/sm/index-inside.xml", sitemap_index([ins("/sitemap.xml")]))
    out.on("/sm/redirect.xml", Reply(302, {"location": ins("/sitemap.xml")}))
    out.on("/sm/userinfo.xml", urlset([i("http://127.0.0.2:{r}@127.0.0.1:{p}/secret")]))

    def dav_inside(req: Request) -> Reply:
        if req.method == "PROPFIND":
            entries = [("/dav-inside/", True), (ins("/dav/secret.md"), False), ("/dav-inside/ok.md", False)]
            return Reply(207, {"content-type": "application/xml"}, multistatus(entries))
        return Reply(
            body=f"# Ok\n\n{OK_MARK} from webdav.\n".encode(), headers={"content-type": "text/markdown"}
        )

    out.on("/dav-inside/*", dav_inside)
    out.on("/dav-redirect/*", Reply(307, {"location": ins("/dav/")}))

    def s3_redirect(req: Request) -> Reply:
        return Reply(307, {"location": ins("/bucket/?list-type=2")})

    out.on("/s3redir*", s3_redirect)

    def s3_object_redirect(req: Request) -> Reply:
        if "list-type" in req.query:
            return Reply(200, {"content-type": "application/xml"}, s3_listing("s3objredir", ["docs/a.md"]))
        return Reply(302, {"location": ins("/secret.md")})

    out.on("/s3objredir*", s3_object_redirect)

    # entity attacks: XML bombs and external entities
    xxe_file = '<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    out.on("/xml/xxe-file.xml", urlset([out.url("/page/x?q=&xxe;")], prolog=xxe_file))
    xxe_http = f'<!DOCTYPE urlset [<!ENTITY xxe SYSTEM "{ins("/xxe")}">]>'
    out.on("/xml/xxe-http.xml", urlset([out.url("/page/x?q=&xxe;")], prolog=xxe_http))
    xxe_param = f'<!DOCTYPE urlset [<!ENTITY % ext SYSTEM "{ins("/dtd")}"> %ext;]>'
    out.on("/xml/xxe-param.xml", urlset([out.url("/page/ok")], prolog=xxe_param))
    out.on(
        "/xml/xxe-dtd.xml",
        urlset([out.url("/page/ok")], prolog=f'<!DOCTYPE urlset SYSTEM "{ins("/ext.dtd")}">'),
    )
    xinclude = (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:xi="http://www.w3.org/2001/XInclude"><url><loc>'
        + out.url("/page/x?q=")
        + '<xi:include href="file:///etc/passwd" parse="text"/></loc></url></urlset>'
    )
    out.on("/xml/xinclude.xml", xinclude.encode())
    out.on(
        "/xml/laughs.xml", billion_laughs(8, inside="<url><loc>" + out.url("/page/") + "&lol{n};</loc></url>")
    )

    def dav_xxe(req: Request) -> Reply:
        if req.method != "PROPFIND":
            return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})
        prolog = f"<!DOCTYPE d:multistatus [{_XXE_ENTITIES.format(ins('/xxe'))}]>"
        entries = [("/davxxe/", True), ("/davxxe/a&xxe;.md", False), ("/davxxe/b&web;.md", False)]
        return Reply(207, {"content-type": "application/xml"}, multistatus(entries, prolog=prolog))

    out.on("/davxxe/*", dav_xxe)

    def dav_bomb(req: Request) -> Reply:
        if req.method != "PROPFIND":
            return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})
        body = billion_laughs(
            8,
            root="d:multistatus",
            inside='<d:response xmlns:d="DAV:"><d:href>/davbomb/&lol{n};</d:href></d:response>',
        )
        return Reply(207, {"content-type": "application/xml"}, body)

    out.on("/davbomb/*", dav_bomb)

    def s3_xxe(req: Request) -> Reply:
        if "list-type" in req.query:
            prolog = f"<!DOCTYPE ListBucketResult [{_XXE_ENTITIES.format(ins('/xxe'))}]>"
            return Reply(
                200,
                {"content-type": "application/xml"},
                s3_listing("s3xxe", ["a&xxe;.md", "b&web;.md"], prolog=prolog),
            )
        return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})

    out.on("/s3xxe*", s3_xxe)

    # bombs and floods
    out.on(
        "/gz/encoded.xml",
        Reply(200, {"content-type": "application/xml", "content-encoding": "gzip"}, gzip_bomb()),
    )
    out.on("/gz/sitemap.xml.gz", Reply(200, {"content-type": "application/x-gzip"}, gzip_bomb()))
    children = [out.url(f"/million/child-{n}.xml") for n in range(200)]
    out.on("/million/index.xml", sitemap_index(children))

    def child(req: Request) -> Reply:
        tag = abs(hash(req.path)) % 997
        urls = streamed_urlset(5000, lambda k: out.url(f"/million/page{tag}-{k}"))
        return Reply(200, {"content-type": "application/xml"}, urls)

    out.on("/million/child-*", child)
    out.on(
        "/million/flat.xml",
        lambda req: Reply(
            200,
            {"content-type": "application/xml"},
            streamed_urlset(1_000_000, lambda k: out.url(f"/million/page-{k}")),
        ),
    )

    def nest(req: Request) -> Reply:
        n = int(req.path.rsplit("/", 1)[1].split(".")[0] or 0)
        return Reply(200, {"content-type": "application/xml"}, sitemap_index([out.url(f"/nest/{n + 1}.xml")]))

    out.on("/nest/*", nest)
    out.on("/selfloop.xml", sitemap_index([out.url("/selfloop.xml"), out.url("/selfloop.xml?again")]))

    page_no = [0]

    def s3_endless(req: Request) -> Reply:
        if "list-type" not in req.query:
            return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})
        page_no[0] += 1
        bucket = req.path.strip("/").split("/")[0]
        if bucket == "s3keys":
            keys = [f"k{page_no[0]}-{n}.md" for n in range(1000)]
            return Reply(
                200, {"content-type": "application/xml"}, s3_listing(bucket, keys, token=f"t{page_no[0]}")
            )
        if bucket == "s3same":
            return Reply(
                200, {"content-type": "application/xml"}, s3_listing(bucket, ["same.md"], token="same")
            )
        return Reply(200, {"content-type": "application/xml"}, s3_listing(bucket, [], token=f"t{page_no[0]}"))

    out.on("/s3keys*", s3_endless)
    out.on("/s3empty*", s3_endless)
    out.on("/s3same*", s3_endless)

    def dav_deep(req: Request) -> Reply:
        if req.method != "PROPFIND":
            return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})
        path = req.path if req.path.endswith("/") else req.path + "/"
        entries = [(path, True), (path + "d/", True), (path + "e/", True)]
        return Reply(207, {"content-type": "application/xml"}, multistatus(entries))

    out.on("/davdeep/*", dav_deep)

    def dav_slow(req: Request) -> Reply:  # the same tree, a folder every 50 ms: a walk that lasts
        time.sleep(0.05)
        return dav_deep(req)

    out.on("/davslow/*", dav_slow)

    def dav_tree(req: Request) -> Reply:  # 127 folders with a note each, a folder every 100 ms
        if req.method != "PROPFIND":
            return Reply(
                body=f"# Note\n\nFiled at {req.path}.\n".encode(), headers={"content-type": "text/markdown"}
            )
        time.sleep(0.1)
        path = req.path if req.path.endswith("/") else req.path + "/"
        entries = [(path, True), (path + "note.md", False)]
        if path.count("/") < 8:  # "/davtree/" and six levels below it
            entries += [(path + "a/", True), (path + "b/", True)]
        return Reply(207, {"content-type": "application/xml"}, multistatus(entries))

    out.on("/davtree/*", dav_tree)

    # slow and endless bodies
    out.on("/slow/drip", lambda req: Reply(body=drip()))
    header_drip: list[bytes | float] = [b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: "]
    header_drip += [0.5, b"a"] * 400
    out.on("/slow/headers", lambda req: Reply(raw=iter(header_drip)))
    out.on("/slow/endless", lambda req: Reply(body=endless()))
    out.on("/slow/line", Reply(200, {"content-type": "text/plain"}, b"w" * (12 << 20)))

    def slow_poll(req: Request) -> Reply:
        out.hang(1.5)
        return Reply(body=_page("Slow", "A slow but honest page."))

    out.on("/slowpoll/page", slow_poll)

    def live(req: Request) -> Reply:
        v = w.live_version[0]
        word = {1: "alphaversionmark", 2: "bravoversionmark"}.get(v, "othermark")
        headers = {"etag": f'"v{v}"', "last-modified": f"Mon, 0{v} Jan 2024 00:00:00 GMT"}
        return Reply(200, headers, _page("Live", f"The live page says {word}."))

    out.on("/live/page", live)
    out.on("/dl/ok", _page("Dead letters", f"The ok item, {OK_MARK}."))
    out.on("/dl/fail", Reply(500, body=b"<p>always broken</p>"))
    out.on("/dl/sitemap.xml", urlset([out.url("/dl/ok"), out.url("/dl/fail")]))


def _folders(root: Path) -> tuple[Path, Path]:
    inbox, outside = root / "inbox", root / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.md").write_text(f"# Secret\n\nThe outside code is {OUTSIDE_MARK}.\n")
    (outside / "secret2.md").write_text(f"# Secret two\n\nAgain {OUTSIDE_MARK}.\n")
    for name, text in (
        ("team/team.md", f"# Team\n\nThe team notes hold {TEAM_MARK}.\n"),
        ("hr/salaries.md", f"# Salaries\n\nThe salary code is {HR_MARK}.\n"),
        ("vault/vault.md", f"# Vault\n\nThe vault of the other library holds {VAULT_MARK}.\n"),
        ("tighten/tight.md", f"# Tight\n\nThe tightened note holds {TIGHT_MARK}.\n"),
    ):
        path = inbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return inbox, outside


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("source-attacks")
    inbox, outside = _folders(root)
    hits = Hits()
    inside = Site("127.0.0.1", "inside", hits)
    _inside_routes(inside)
    sites = [inside]
    inside_ports: dict[str, int] = {}
    try:
        inside6 = Site("::1", "inside", hits)
        _inside_routes(inside6)
        sites.append(inside6)
        inside_ports["p6"] = inside6.port
    except OSError:  # no IPv6 here: the port is closed, and must still never be tried
        inside_ports["p6"] = free_port("127.0.0.1")
    out = Site("127.0.0.2", "outside", hits)
    sites.append(out)
    silent = Silent("127.0.0.2")
    logs = Capture()
    root_logger = logging.getLogger()
    old_level = root_logger.level
    root_logger.setLevel(logging.INFO)
    root_logger.addHandler(logs)
    old_env = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")}
    os.environ.update(
        {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}
    )
    cfg = make_config(
        root / "data",
        gateway={"api_keys": [{"name": n, **spec} for n, spec in KEYS.items()]},
        services={"token": TOKEN},
        ingest={
            "graph": False,
            "allowed_roots": [str(inbox)],
            "fetch_allow": ["127.0.0.2"],
            "source_tick_s": 0.2,
            "source_retries": RETRIES,
            "source_backoff_s": 0.1,
            "source_backoff_max_s": 0.3,
            "source_breaker_failures": 3,
            "source_breaker_cooldown_s": 600,
            "source_max_items": MAX_ITEMS,
            "crawl_page_timeout_s": PAGE_TIMEOUT,
            "crawl_timeout_s": 6,
            "crawl_delay_s": 0,
        },
    )
    stack = await start_with(cfg, resources)
    channel = grpc.aio.insecure_channel(stack.peers["ingest"])
    rchannel = open_channel(stack.peers["retrieve"], token=TOKEN)
    http = httpx.AsyncClient(base_url=stack.gateway_url, timeout=60)
    w = World(
        stack,
        http,
        channel,
        RetrieveClient(rchannel, 30),
        root,
        inbox,
        outside,
        hits,
        inside,
        out,
        silent,
        free_port("127.0.0.2"),
        logs,
        inside_ports,
    )
    _outside_routes(w)
    try:
        for spec in (
            {"name": "team-notes", "kind": "folder", "url": str(inbox / "team"), "library": "team"},
            {
                "name": "team-hr",
                "kind": "folder",
                "url": str(inbox / "hr"),
                "library": "team",
                "groups": ["hr"],
            },
            {"name": "vault", "kind": "folder", "url": str(inbox / "vault"), "library": "other"},
        ):
            r = await http.post("/v1/sources", json={**spec, "interval_s": 3600}, headers=H["admin"])
            assert r.status_code == 201, r.text
        await until(lambda: has_docs(w, "team", {"team.md", "salaries.md"}))
        await until(lambda: has_docs(w, "other", {"vault.md"}))
        yield w
    finally:
        _unblock_fifos(w)
        for site in sites:  # first: a poll still talking to one of them ends
            site.close()
        silent.close()
        await http.aclose()
        await channel.close()
        await rchannel.close()
        await stack.stop()
        root_logger.removeHandler(logs)
        root_logger.setLevel(old_level)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(autouse=True)
async def forget_sources(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """Sources a test added are removed (with their documents) after it."""
    yield
    if "world" not in request.fixturenames:
        return
    w: World = request.getfixturevalue("world")
    names, w.added[:] = list(w.added), []
    _unblock_fifos(w)
    for name in names:
        await w.http.delete(
            f"/v1/sources/{_path(name)}", params={"remove_documents": "true"}, headers=H["admin"]
        )


def _unblock_fifos(w: World) -> None:
    """A reader blocked on a FIFO gets its end of file (so the stack can stop)."""
    for fifo in w.fifos:
        for _ in range(20):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                break  # nobody is reading it
            os.close(fd)
            time.sleep(0.01)


# --- helpers ----------------------------------------------------------------------------------------


async def until(check: Callable[[], Awaitable[Any]], timeout: float = 30.0, every: float = 0.2) -> Any:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(every)


async def within(check: Callable[[], Awaitable[Any]], timeout: float) -> Any:  # noqa: ASYNC109
    """`check`'s first truthy result within `timeout`, or its last (falsy) one."""
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(0.2)


async def add(w: World, who: str = "admin", **spec: Any) -> httpx.Response:
    spec.setdefault("library", "probe")
    spec.setdefault("interval_s", 3600)
    r = await w.http.post("/v1/sources", json=spec, headers=H[who])
    if r.status_code == 201:
        w.added.append(spec["name"])
    return r


def _path(name: str) -> str:
    """A source's name in a URL path: dot segments percent-encoded (clients normalise `.` and `..`)."""
    return "".join("%2E" if ch == "." else quote(ch, safe="") for ch in name)


async def state(w: World, name: str, who: str = "admin") -> dict[str, Any]:
    r = await w.http.get(f"/v1/sources/{_path(name)}", headers=H[who])
    assert r.status_code == 200, r.text
    return dict(r.json())


async def job(w: World, job_id: str) -> dict[str, Any]:
    r = await w.http.get(f"/v1/ingest/jobs/{job_id}", headers=H["admin"])
    assert r.status_code == 200, r.text
    return dict(r.json())


TERMINAL = {"done", "failed", "cancelled"}


async def ended(
    w: World,
    name: str,
    timeout: float = 20.0,  # noqa: ASYNC109
) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """The source once something came of its first poll: the poll failed, an item is retrying or
    dead-lettered, or the job it queued has ended. Returns (state, job, every error said, joined)."""

    async def check() -> tuple[dict[str, Any], dict[str, Any] | None] | None:
        s = await state(w, name)
        if s["consecutive_failures"] > 0 or s["dead_letters"] or s["retrying"]:
            return s, None
        if s["last_job_id"]:
            j = await job(w, s["last_job_id"])
            if j["state"] in TERMINAL:
                return s, j
        elif s["last_success_at"]:
            return s, None  # nothing changed: no job
        return None

    s, j = await until(check, timeout)
    return s, j, said(s, j)


def said(s: dict[str, Any], j: dict[str, Any] | None) -> str:
    parts = [s.get("last_error", "")]
    parts += [f"{d['item']}: {d['error']}" for d in s.get("dead_letters", [])]
    if j:
        parts += [j.get("error") or "", json.dumps(j.get("summary") or {})]
    return "\n".join(p for p in parts if p)


async def documents(w: World, library: str, who: str = "admin") -> list[dict[str, Any]]:
    r = await w.http.get("/v1/documents", params={"library": library}, headers=H[who])
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return list(r.json()["documents"])


async def names(w: World, library: str, who: str = "admin") -> set[str]:
    return {Path(d["source"]).name for d in await documents(w, library, who)}


async def has_docs(w: World, library: str, wanted: set[str]) -> bool:
    return wanted <= await names(w, library)


async def found(w: World, library: str, word: str) -> list[str]:
    """Sources of the chunks holding `word` (as the local admin: every ACL group)."""
    try:
        hits, _ = await w.retrieve.search(word, library, 10, SearchMode.LEXICAL)
    except Exception:
        return []
    return [h.chunk.source for h in hits if word in h.chunk.text.lower()]


def metadata(who: str) -> tuple[tuple[str, str], ...]:
    spec = KEYS[who]
    principal = {
        "name": who,
        "role": spec["role"],
        "libraries": spec["libraries"],
        "groups": spec.get("groups", []),
    }
    return (("authorization", f"Bearer {TOKEN}"), ("x-ragstack-principal", json.dumps(principal)))


async def rpc(
    w: World, method: str, request: Any, who: str = "admin"
) -> tuple[Any, grpc.StatusCode | None, str]:
    stub = ingest_pb2_grpc.IngestServiceStub(w.channel)
    try:
        if method == "Ingest":
            events = [e async for e in stub.Ingest(request, metadata=metadata(who), timeout=30)]
            return events, None, ""
        return await getattr(stub, method)(request, metadata=metadata(who), timeout=30), None, ""
    except grpc.aio.AioRpcError as err:
        return None, err.code(), err.details() or ""


def _error(r: httpx.Response, name: str) -> str:
    """The error's code and message, the name asked for blanked (what tells two answers apart)."""
    body = r.json().get("error", r.json())
    return f"{r.status_code} {body.get('code')} {str(body.get('message', body)).replace(name, '<name>')}"


def inside_hits(w: World) -> int:
    return w.hits.count("inside")


async def listing(w: World, who: str = "admin", **params: str) -> dict[str, dict[str, Any]]:
    r = await w.http.get("/v1/sources", params=params, headers=H[who])
    assert r.status_code == 200, r.text
    return {s["spec"]["name"]: s for s in r.json()["sources"]}


# --- authorization ------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["writer", "reader", "hr", "outsider"])
async def test_only_admins_manage_sources(world: World, who: str) -> None:
    w = world
    spec = {"name": f"by-{who}", "kind": "folder", "url": str(w.inbox / "team"), "library": "team"}
    r = await w.http.post("/v1/sources", json=spec, headers=H[who])
    assert r.status_code == 403, r.text
    r = await w.http.post(
        "/v1/sources", json={**spec, "name": "team-notes", "url": str(w.inbox / "hr")}, headers=H[who]
    )
    assert r.status_code == 403, r.text  # nor replace one's settings
    for action in ("pause", "resume", "retry"):
        r = await w.http.post(f"/v1/sources/team-notes/{action}", headers=H[who])
        assert r.status_code in (403, 404), (action, r.text)
    r = await w.http.delete("/v1/sources/team-notes", params={"remove_documents": "true"}, headers=H[who])
    assert r.status_code in (403, 404), r.text
    if KEYS[who]["role"] == "reader":
        r = await w.http.post("/v1/sources/team-notes/sync", headers=H[who])
        assert r.status_code in (403, 404), r.text
    s = await state(w, "team-notes")
    assert s["paused"] is False and s["spec"]["url"] == str(w.inbox / "team")
    assert f"by-{who}" not in await listing(w)
    assert "team.md" in await names(w, "team")


async def test_non_admins_cannot_manage_sources_over_grpc(world: World) -> None:
    w = world
    spec = ingest_pb2.SourceSpec(
        name="grpc-writer", kind=ingest_pb2.SOURCE_KIND_FOLDER, url=str(w.inbox / "team"), library="team"
    )
    calls = [
        ("AddSource", ingest_pb2.AddSourceRequest(spec=spec)),
        ("PauseSource", ingest_pb2.PauseSourceRequest(name="team-notes")),
        ("ResumeSource", ingest_pb2.ResumeSourceRequest(name="team-notes")),
        ("RetrySource", ingest_pb2.RetrySourceRequest(name="team-notes")),
        ("RemoveSource", ingest_pb2.RemoveSourceRequest(name="team-notes", remove_documents=True)),
    ]
    for who in ("writer", "reader"):
        for method, request in calls:
            _, code, details = await rpc(w, method, request, who)
            assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND), (
                who,
                method,
                code,
                details,
            )
    for who in ("reader", "hr"):
        sync = ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(source="team-notes"))
        _, code, details = await rpc(w, "SubmitIngest", sync, who)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (who, code, details)
    s = await state(w, "team-notes")
    assert s["paused"] is False and "grpc-writer" not in await listing(w)


async def test_a_source_of_another_library_is_invisible(world: World) -> None:
    w = world
    assert {"team-notes", "team-hr"}.isdisjoint(await listing(w, "outsider"))
    assert "vault" not in await listing(w, "reader") and "vault" in await listing(w, "outsider")
    r = await w.http.get("/v1/sources", params={"library": "team"}, headers=H["outsider"])
    assert r.status_code in (403, 404) or not r.json()["sources"], r.text
    _, code, _ = await rpc(w, "ListSources", ingest_pb2.ListSourcesRequest(library="team"), "outsider")
    if code is None:
        resp, _, _ = await rpc(w, "ListSources", ingest_pb2.ListSourcesRequest(library="team"), "outsider")
        assert not resp.sources
    for who, there in (("outsider", "team-notes"), ("reader", "vault"), ("writer", "vault")):
        for method, path in (
            ("GET", "/v1/sources/{}"),
            ("POST", "/v1/sources/{}/pause"),
            ("DELETE", "/v1/sources/{}"),
        ):
            a = await w.http.request(method, path.format(there), headers=H[who])
            b = await w.http.request(method, path.format("no-such-source"), headers=H[who])
            assert _error(a, there) == _error(b, "no-such-source"), (a.text, b.text)
    r = await w.http.get("/v1/sources/vault", headers=H["reader"])
    assert r.status_code == 404
    _, code, _ = await rpc(w, "GetSource", ingest_pb2.GetSourceRequest(name="vault"), "reader")
    assert code == grpc.StatusCode.NOT_FOUND
    # nor its job
    vault = await state(w, "vault")
    if vault["last_job_id"]:
        r = await w.http.get(f"/v1/ingest/jobs/{vault['last_job_id']}", headers=H["writer"])
        assert r.status_code == 404, r.text


async def test_syncing_a_source_of_another_library_answers_as_an_unknown_one(world: World) -> None:
    w = world
    for who, there in (("outsider", "team-notes"), ("writer", "vault")):
        a = await w.http.post(f"/v1/sources/{there}/sync", headers=H[who])
        b = await w.http.post("/v1/sources/no-such-source/sync", headers=H[who])
        assert _error(a, there) == _error(b, "no-such-source"), (a.text, b.text)
        for library in ("", "team", "other"):
            answers = []
            for name in (there, "no-such-source"):
                request = ingest_pb2.SubmitIngestRequest(
                    request=ingest_pb2.IngestRequest(source=name, library=library)
                )
                _, code, details = await rpc(w, "SubmitIngest", request, who)
                answers.append((code, details.replace(name, "<name>")))
            assert answers[0] == answers[1], answers
            assert "'other'" not in answers[0][1] and "'team'" not in answers[0][1], answers


async def test_a_writer_syncs_only_the_sources_of_its_libraries(world: World) -> None:
    w = world
    r = await w.http.post("/v1/sources/team-notes/sync", headers=H["writer"])
    assert r.status_code == 202, r.text  # its own library: fine
    jobs_before = {
        j["job_id"]
        for j in (await w.http.get("/v1/ingest/jobs", params={"limit": 500}, headers=H["admin"])).json()[
            "jobs"
        ]
    }
    r = await w.http.post("/v1/sources/vault/sync", headers=H["writer"])
    assert r.status_code in (403, 404), r.text
    for request in (
        ingest_pb2.IngestRequest(source="vault"),
        ingest_pb2.IngestRequest(source="vault", library="team"),  # the library it may use, named
    ):
        _, code, details = await rpc(
            w, "SubmitIngest", ingest_pb2.SubmitIngestRequest(request=request), "writer"
        )
        assert code in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT,
        ), (code, details)
        _, code, details = await rpc(w, "Ingest", request, "writer")
        assert code in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT,
        ), (code, details)
    await asyncio.sleep(1.5)
    jobs = (await w.http.get("/v1/ingest/jobs", params={"limit": 500}, headers=H["admin"])).json()["jobs"]
    new = [j for j in jobs if j["job_id"] not in jobs_before and j["library"] in ("team", "other")]
    assert not [j for j in new if j["principal"] == "writer" and j["library"] == "other"], new
    assert not await found(w, "team", VAULT_MARK)
    assert "vault.md" not in await names(w, "team")


async def test_a_source_job_takes_nothing_besides_the_source(world: World) -> None:
    w = world
    before = inside_hits(w)
    for extra in (
        {"paths": ["/etc/passwd"]},
        {"paths": [str(w.outside)]},
        {"urls": [w.inside.url("/secret")]},
        {"groups": ["someone"]},
        {"files": [ingest_pb2.FileUpload(filename="x.md", content=b"# x\n\nx\n")]},
        {"prune": True},
    ):
        request = ingest_pb2.IngestRequest(source="team-notes", **extra)
        for method, message in (
            ("SubmitIngest", ingest_pb2.SubmitIngestRequest(request=request)),
            ("Ingest", request),
        ):
            _, code, details = await rpc(w, method, message, "writer")
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (extra, method, code, details)
    # another library named beside the source: refused for a writer who may not use it ...
    request = ingest_pb2.IngestRequest(source="team-notes", library="other")
    _, code, details = await rpc(w, "SubmitIngest", ingest_pb2.SubmitIngestRequest(request=request), "writer")
    assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT), (code, details)
    # ... and even for an admin the source's documents never land in another library
    resp, code, details = await rpc(
        w, "SubmitIngest", ingest_pb2.SubmitIngestRequest(request=request), "admin"
    )
    if code is None:
        await until(lambda: _job_ended(w, resp.job.job_id), 30)
    assert "team.md" not in await names(w, "other") and not await found(w, "other", TEAM_MARK)
    assert inside_hits(w) == before
    assert not await found(w, "team", PASSWD_WORD) and not await found(w, "team", OUTSIDE_MARK)


async def _job_ended(w: World, job_id: str) -> bool:
    return (await job(w, job_id))["state"] in TERMINAL


async def _query(w: World, who: str, question: str) -> str:
    body = {"question": question, "library": "team", "mode": "lexical", "stream": False}
    r = await w.http.post("/v1/query", json=body, headers=H[who])
    assert r.status_code == 200, r.text
    return r.text.lower()


async def test_a_sources_groups_hide_its_documents(world: World) -> None:
    w = world
    assert "salaries.md" in await names(w, "team", "hr")  # the control
    assert HR_MARK in await _query(w, "hr", "What is the salary code?")
    assert "salaries.md" not in await names(w, "team", "reader")
    assert HR_MARK not in await _query(w, "reader", "What is the salary code?")
    hr_doc = next(d for d in await documents(w, "team") if d["source"].endswith("salaries.md"))
    r = await w.http.get(
        f"/v1/documents/{hr_doc['document_id']}", params={"library": "team"}, headers=H["reader"]
    )
    assert r.status_code == 404, r.text


async def test_tightening_a_sources_groups_hides_its_unchanged_documents(world: World) -> None:
    w = world
    spec = {"name": "tighten", "kind": "folder", "url": str(w.inbox / "tighten"), "library": "team"}
    assert (await add(w, **spec)).status_code == 201
    await until(lambda: _has(names(w, "team", "reader"), "tight.md"))
    assert TIGHT_MARK in await _query(w, "reader", "What does the tightened note hold?")
    r = await add(w, **spec, groups=["hr"])  # the same source, now for hr only
    assert r.status_code == 201, r.text
    r = await w.http.post("/v1/sources/tighten/sync", headers=H["admin"])
    assert r.status_code == 202, r.text
    await until(lambda: _job_ended(w, r.json()["job_id"]), 30)
    await asyncio.sleep(1)
    assert "tight.md" in await names(w, "team", "hr")
    assert "tight.md" not in await names(w, "team", "reader"), (
        "the unchanged document kept its old (public) ACL"
    )
    assert TIGHT_MARK not in await _query(w, "reader", "What does the tightened note hold?")


async def _has(coro: Awaitable[set[str]], name: str) -> bool:
    return name in await coro


# --- names and inputs ---------------------------------------------------------------------------------

BASE = {"kind": "http", "url": "http://127.0.0.2:9/page", "library": "probe"}
BAD_SPECS = [
    ("slash", {"name": "a/b"}),
    ("backslash", {"name": "a\\b"}),
    ("empty", {"name": ""}),
    ("unicode", {"name": "café"}),
    ("rtl", {"name": "a\u202eb"}),
    ("65 chars", {"name": "x" * 65}),
    ("space", {"name": "a b"}),
    ("newline", {"name": "ab\n"}),
    ("glob nul", {"name": "g1", "include": ["a\x00b"]}),
    ("glob newline", {"name": "g2", "include": ["*.md\n../*"]}),
    ("glob escape", {"name": "g3", "exclude": ["\x1b[31m*"]}),
    ("glob empty", {"name": "g4", "include": [""]}),
    ("interval 0", {"name": "i0", "interval_s": 0}),
    ("interval negative", {"name": "i1", "interval_s": -5}),
    ("interval tiny", {"name": "i2", "interval_s": 0.001}),
    ("interval huge", {"name": "i3", "interval_s": 1e300}),
    ("library dots", {"name": "l1", "library": ".."}),
    ("library slash", {"name": "l2", "library": "../etc"}),
    ("library star", {"name": "l3", "library": "*"}),
    ("library space", {"name": "l4", "library": "a b"}),
    ("group space", {"name": "gr1", "groups": ["bad group"]}),
    ("group empty", {"name": "gr2", "groups": [""]}),
    ("group star", {"name": "gr3", "groups": ["*"]}),
    ("group newline", {"name": "gr4", "groups": ["hr\n"]}),
    ("url empty", {"name": "u1", "url": ""}),
    ("url long", {"name": "u2", "url": "http://127.0.0.2:9/" + "a" * 2000}),
    ("url file", {"name": "u3", "url": "file:///etc/passwd"}),
    ("url gopher", {"name": "u4", "url": "gopher://127.0.0.2:9/_x"}),
    ("url no host", {"name": "u5", "url": "http:///x"}),
    ("kind unknown", {"name": "k1", "kind": "ftp"}),
    ("unknown field", {"name": "f1", "password": "x"}),
    ("endpoint on http", {"name": "e1", "endpoint": "http://127.0.0.2:9"}),
    ("region on http", {"name": "e2", "region": "us-east-1"}),
    ("s3 region injected", {"name": "e3", "kind": "s3", "url": "s3://bucket/x", "region": "x@127.0.0.1:1/#"}),
    ("s3 bucket injected", {"name": "e4", "kind": "s3", "url": "s3://a@127.0.0.1:1#/x"}),
    ("too many groups", {"name": "gr5", "groups": [f"g{n}" for n in range(40)]}),
]


@pytest.mark.parametrize("case", [pytest.param(c[1], id=c[0]) for c in BAD_SPECS])
async def test_a_bad_spec_is_refused_over_http(world: World, case: dict[str, Any]) -> None:
    w = world
    spec = {**BASE, **case}
    r = await add(w, **spec)
    assert r.status_code in (400, 403, 422), r.text
    assert "Traceback" not in r.text
    if spec["name"]:
        assert spec["name"] not in await listing(w)


async def test_a_source_with_bad_groups_never_indexes_its_documents_unprotected(world: World) -> None:
    w = world
    folder = w.inbox / "badgroups"
    folder.mkdir()
    (folder / "g.md").write_text("# Groups\n\nA file of a source with broken ACL groups, lynxbadgroupmark.\n")
    r = await add(
        w, name="badgroups", kind="folder", url=str(folder), library="team", groups=["hr", "bad group"]
    )
    if r.status_code != 201:
        assert r.status_code in (400, 422), r.text
        return
    await ended(w, "badgroups")
    await asyncio.sleep(0.5)
    assert "g.md" not in await names(w, "team", "reader")  # never public


async def test_a_64_char_name_is_fine(world: World) -> None:
    r = await add(world, **{**BASE, "name": "n" * 64})
    assert r.status_code == 201, r.text


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_a_non_finite_interval_is_refused(world: World, literal: str) -> None:
    body = '{"name": "nan-%d", "kind": "http", "url": "http://127.0.0.2:9/", "library": "probe", '
    body += '"interval_s": %s}'
    r = await world.http.post(
        "/v1/sources",
        content=body % (len(literal), literal),
        headers={**H["admin"], "content-type": "application/json"},
    )
    if r.status_code == 201:
        world.added.append(f"nan-{len(literal)}")
    assert r.status_code in (400, 422), r.text


GRPC_BAD = [
    ("name slash", {"name": "a/b"}),
    ("name empty", {"name": ""}),
    ("name 65", {"name": "x" * 65}),
    ("name unicode", {"name": "café"}),
    ("name nul", {"name": "a\x00b"}),
    ("kind unspecified", {"kind": ingest_pb2.SOURCE_KIND_UNSPECIFIED}),
    ("kind unknown", {"kind": 99}),
    ("interval nan", {"interval_s": math.nan}),
    ("interval inf", {"interval_s": math.inf}),
    ("interval negative", {"interval_s": -1.0}),
    ("interval tiny", {"interval_s": 0.001}),
    ("glob nul", {"include": ["a\x00"]}),
    ("glob newline", {"exclude": ["a\nb"]}),
    ("library dots", {"library": ".."}),
    ("library slash", {"library": "../x"}),
    ("group bad", {"groups": ["bad group"]}),
    ("url empty", {"url": ""}),
    ("url file", {"url": "file:///etc/passwd"}),
    ("endpoint on http", {"endpoint": "http://127.0.0.2:9"}),
]


@pytest.mark.parametrize(
    "case",
    [pytest.param(c[1], id=c[0]) for c in GRPC_BAD],
)
async def test_a_bad_spec_is_refused_over_grpc(world: World, case: dict[str, Any]) -> None:
    w = world
    fields: dict[str, Any] = {
        "name": "grpc-bad",
        "kind": ingest_pb2.SOURCE_KIND_HTTP,
        "url": "http://127.0.0.2:9/",
        "library": "probe",
        "interval_s": 3600,
    }
    fields.update(case)
    resp, code, details = await rpc(
        w, "AddSource", ingest_pb2.AddSourceRequest(spec=ingest_pb2.SourceSpec(**fields))
    )
    if code is None:
        w.added.append(fields["name"])
    assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED), (
        code,
        details,
        resp,
    )


async def test_interval_zero_over_grpc_means_the_default(world: World) -> None:
    w = world
    spec = ingest_pb2.SourceSpec(
        name="grpc-zero", kind=ingest_pb2.SOURCE_KIND_HTTP, url=w.out.url("/page/ok"), library="probe"
    )
    resp, code, details = await rpc(w, "AddSource", ingest_pb2.AddSourceRequest(spec=spec))
    assert code is None, details
    w.added.append("grpc-zero")
    assert resp.source.spec.interval_s == 300


@pytest.mark.parametrize("name", [".", "..", "...", "-", "_"])
async def test_a_dotted_name_stays_in_its_place(world: World, name: str) -> None:
    w = world
    folder = w.inbox / "dotted"
    folder.mkdir(exist_ok=True)
    (folder / "d.md").write_text("# Dotted\n\nA dotted source.\n")
    before = _tree(w.root, skip=w.root / "data")
    r = await add(w, name=name, kind="folder", url=str(folder))
    assert r.status_code in (201, 400, 422), r.text
    if r.status_code != 201:
        return
    await ended(w, name)
    assert name in await listing(w)
    assert (await w.http.get(f"/v1/sources/{_path(name)}", headers=H["admin"])).status_code == 200
    assert _tree(w.root, skip=w.root / "data") == before  # nothing written beside the data dir
    r = await w.http.delete(f"/v1/sources/{_path(name)}", headers=H["admin"])
    w.added.remove(name)
    assert r.status_code == 200, r.text
    assert name not in await listing(w)


def _tree(root: Path, skip: Path) -> set[str]:
    out: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirnames[:] = []
            continue
        out.update(str(Path(dirpath) / f) for f in filenames)
    return out


def test_duplicate_source_names_in_the_config_are_refused(tmp_path: Path) -> None:
    for names_ in (["docs", "docs"], ["docs", "Docs"]):
        raw = {
            "data_dir": str(tmp_path / "data"),
            "sources": [{"name": n, "kind": "folder", "url": str(tmp_path / n)} for n in names_],
        }
        path = tmp_path / "ragstack.yaml"
        path.write_text(yaml.safe_dump(raw))
        if names_[0] == names_[1]:
            with pytest.raises(Exception, match="same name"):
                load_config(path, {})
        else:  # names are case sensitive: two sources, each its own
            assert [s.name for s in load_config(path, {}).sources] == names_


# --- credentials ------------------------------------------------------------------------------------


def _cred_specs(w: World) -> list[dict[str, Any]]:
    return [
        {
            "name": "cred-http",
            "kind": "http",
            "url": w.i(f"http://crawler:{CRED_PW}@127.0.0.2:{{r}}/private"),
        },
        {
            "name": "cred-dav",
            "kind": "webdav",
            "url": w.i(f"http://dav:{CRED_PW}@127.0.0.2:{{r}}/dav-inside/"),
        },
        {
            "name": "cred-closed",
            "kind": "http",
            "url": w.i(f"http://crawler:{CRED_PW}@127.0.0.2:{{closed}}/x"),
        },
        {
            "name": "cred-inside",
            "kind": "sitemap",
            "url": w.i(f"http://crawler:{CRED_PW}@127.0.0.1:{{p}}/sitemap.xml"),
        },
        {
            "name": "cred-param",
            "kind": "http",
            "url": w.i(f"http://127.0.0.2:{{r}}/private?api_key={CRED_PW}"),
        },
    ]


def _leaks(texts: list[str]) -> list[str]:
    return [t[max(0, t.find(CRED_PW) - 160) : t.find(CRED_PW) + 40] for t in texts if CRED_PW in t]


async def _added_with_credentials(w: World) -> list[str]:
    """Adds the sources whose URLs carry a password; returns the answers."""
    seen = []
    for spec in _cred_specs(w):
        r = await add(w, **spec, library="team")
        assert r.status_code in (201, 400), r.text
        seen.append(r.text)
    return seen


async def test_credentials_in_a_source_url_are_not_echoed_by_the_api(world: World) -> None:
    w = world
    seen = await _added_with_credentials(w)
    for who in ("admin", "reader", "writer"):
        seen.append((await w.http.get("/v1/sources", headers=H[who])).text)
        seen.append((await w.http.get("/v1/sources/cred-http", headers=H[who])).text)
    resp, _, _ = await rpc(w, "ListSources", ingest_pb2.ListSourcesRequest(), "reader")
    seen.append(str(resp))
    assert not _leaks(seen), _leaks(seen)


async def test_credentials_in_a_source_url_never_reach_errors_documents_jobs_metrics_or_logs(
    world: World,
) -> None:
    w = world
    await _added_with_credentials(w)
    seen: list[str] = []
    for spec in _cred_specs(w):
        if spec["name"] in w.added:
            s, j, text = await ended(w, spec["name"])
            seen += [s["last_error"], json.dumps(s["dead_letters"]), json.dumps(j), text]
    r = await w.http.post(
        "/v1/sources",
        json={**_cred_specs(w)[0], "name": "cred-bad", "endpoint": "http://x"},
        headers=H["admin"],
    )
    assert r.status_code == 422
    seen.append(r.text)
    seen.append(json.dumps(await documents(w, "team")))
    seen.append((await w.http.get("/v1/ingest/jobs", params={"limit": 500}, headers=H["admin"])).text)
    seen.append((await w.http.get("/metrics", headers=H["admin"])).text)
    assert not _leaks(seen), _leaks(seen)
    logged = [line for line in w.logs.lines if CRED_PW in line]
    assert not logged, logged[:3]


# --- SSRF ---------------------------------------------------------------------------------------------

INTERNAL = [
    ("http loopback", "http", "http://127.0.0.1:{p}/", None),
    ("http localhost", "http", "http://localhost:{p}/", None),
    ("http decimal", "http", "http://2130706433:{p}/", None),
    ("http hex", "http", "http://0x7f.1:{p}/", None),
    ("http octal", "http", "http://0177.0.0.1:{p}/", None),
    ("http short", "http", "http://127.1:{p}/", None),
    ("http zero", "http", "http://0.0.0.0:{p}/", None),
    ("http v6 loopback", "http", "http://[::1]:{p6}/", None),
    ("http v4-mapped", "http", "http://[::ffff:127.0.0.1]:{p}/", None),
    ("http userinfo", "http", "http://127.0.0.2:{r}@127.0.0.1:{p}/", None),
    ("http fragment", "http", "http://127.0.0.1:{p}#@127.0.0.2:{r}/", None),
    ("http metadata", "http", "http://169.254.169.254/latest/meta-data/", None),
    ("http private", "http", "http://10.0.0.1/", None),
    ("http ula", "http", "http://[fd00::1]/", None),
    ("sitemap loopback", "sitemap", "http://127.0.0.1:{p}/sitemap.xml", None),
    ("sitemap decimal", "sitemap", "http://2130706433:{p}/sitemap.xml", None),
    ("webdav loopback", "webdav", "http://127.0.0.1:{p}/dav/", None),
    ("webdav hex", "webdav", "http://0x7f.1:{p}/dav/", None),
    ("s3 endpoint loopback", "s3", "s3://bucket/docs/", "http://127.0.0.1:{p}"),
    ("s3 endpoint decimal", "s3", "s3://bucket/docs/", "http://2130706433:{p}"),
    ("s3 endpoint metadata", "s3", "s3://bucket/docs/", "http://169.254.169.254"),
]


@pytest.mark.parametrize(("kind", "url", "endpoint"), [c[1:] for c in INTERNAL], ids=[c[0] for c in INTERNAL])
async def test_a_source_on_an_internal_address_fails_naming_fetch_allow(
    world: World, kind: str, url: str, endpoint: str | None
) -> None:
    w = world
    before = inside_hits(w)
    spec: dict[str, Any] = {"name": "ssrf", "kind": kind, "url": w.i(url)}
    if endpoint:
        spec["endpoint"] = w.i(endpoint)
    r = await add(w, **spec)
    if r.status_code != 201:
        assert r.status_code in (400, 403, 422), r.text
    else:
        s, _, text = await ended(w, "ssrf", timeout=15)
        assert s["consecutive_failures"] >= 1 or s["dead_letters"], s
        assert "ingest.fetch_allow" in text, text
    assert inside_hits(w) == before, [h.target for h in w.hits.of("inside")]
    assert not await found(w, "probe", INSIDE_MARK)


LEADS = [
    ("redirect inside", "http", "/redir/inside", True),
    ("redirect decimal", "http", "/redir/numeric", True),
    ("redirect hex", "http", "/redir/hex", True),
    ("redirect metadata", "http", "/redir/metadata", True),
    ("redirect scheme-relative", "http", "/redir/relative-inside", True),
    ("redirect file", "http", "/redir/file", False),
    ("redirect loop", "http", "/redir/loop", False),
    ("sitemap lists inside", "sitemap", "/sm/inside.xml", False),
    ("sitemap index inside", "sitemap", "/sm/index-inside.xml", False),
    ("sitemap redirects inside", "sitemap", "/sm/redirect.xml", True),
    ("sitemap userinfo", "sitemap", "/sm/userinfo.xml", False),
    ("webdav href inside", "webdav", "/dav-inside/", False),
    ("webdav redirect inside", "webdav", "/dav-redirect/", True),
]


@pytest.mark.parametrize(("kind", "path", "names_rule"), [c[1:] for c in LEADS], ids=[c[0] for c in LEADS])
async def test_an_allowed_site_cannot_lead_a_source_inside(
    world: World, kind: str, path: str, names_rule: bool
) -> None:
    w = world
    before, outside_before = inside_hits(w), w.hits.count("outside", path.split("?")[0])
    r = await add(w, name="lead", kind=kind, url=w.out.url(path))
    assert r.status_code == 201, r.text
    _s, _j, text = await ended(w, "lead", timeout=20)
    await asyncio.sleep(0.5)
    assert w.hits.count("outside", path) > outside_before, "the source never reached the allowed site"
    assert inside_hits(w) == before, [h.target for h in w.hits.of("inside")]
    if names_rule:
        assert "ingest.fetch_allow" in text, text
    assert not await found(w, "probe", INSIDE_MARK) and not await found(w, "probe", PASSWD_WORD)


S3_LEADS = [("s3 listing redirects inside", "s3redir"), ("s3 object redirects inside", "s3objredir")]


@pytest.mark.parametrize("bucket", [c[1] for c in S3_LEADS], ids=[c[0] for c in S3_LEADS])
async def test_an_allowed_s3_endpoint_cannot_lead_inside(world: World, bucket: str) -> None:
    w = world
    before = inside_hits(w)
    r = await add(
        w,
        name="s3lead",
        kind="s3",
        url=f"s3://{bucket}/docs/",
        endpoint=w.out.url("").rstrip("/"),
        region="us-east-1",
    )
    assert r.status_code == 201, r.text
    _s, _j, _text = await ended(w, "s3lead", timeout=20)
    await asyncio.sleep(0.5)
    assert w.hits.count("outside", f"/{bucket}") > 0, "the source never reached the allowed endpoint"
    assert inside_hits(w) == before, [h.target for h in w.hits.of("inside")]
    assert not await found(w, "probe", INSIDE_MARK)


# --- paths --------------------------------------------------------------------------------------------


def _path_cases(inbox: Path, outside: Path) -> list[str]:
    return [
        "/etc",
        "/",
        str(outside),
        f"{inbox}/../outside",
        f"{inbox}/team/../../outside",
        "../outside",
        "outside",
        "inbox",
        ".",
        f"{inbox}/\x00/x",
        "~/",
        f"file://{inbox}/team",
        f"{inbox}/linkdir",  # a symlink inside the root, to outside
    ]


@pytest.mark.parametrize("n", range(13))
async def test_a_folder_outside_the_roots_is_refused(world: World, n: int) -> None:
    w = world
    link = w.inbox / "linkdir"
    if not link.is_symlink():
        link.symlink_to(w.outside)
    url = _path_cases(w.inbox, w.outside)[n]
    r = await add(w, name="escape", kind="folder", url=url)
    if r.status_code == 201:
        _s, _j, _text = await ended(w, "escape")
        await asyncio.sleep(0.5)
    else:
        assert r.status_code in (400, 403, 422), r.text
        assert "Traceback" not in r.text
    assert not await found(w, "probe", OUTSIDE_MARK) and not await found(w, "probe", PASSWD_WORD)
    assert not {"secret.md", "secret2.md"} & await names(w, "probe")


async def test_symlinks_inside_a_folder_do_not_lead_outside(world: World) -> None:
    w = world
    folder = w.inbox / "links"
    folder.mkdir()
    (folder / "ok.md").write_text(f"# Ok\n\nThe folder is fine, {OK_MARK}.\n")
    (folder / "passwd.md").symlink_to("/etc/passwd")
    (folder / "shadow.md").symlink_to("/etc/shadow")
    (folder / "secret.md").symlink_to(w.outside / "secret.md")
    (folder / "up.md").symlink_to(Path("../../outside/secret2.md"))
    (folder / "sub").symlink_to(w.outside, target_is_directory=True)
    (folder / "inbox-escape").symlink_to(w.root, target_is_directory=True)
    r = await add(w, name="links", kind="folder", url=str(folder), library="links")
    assert r.status_code == 201, r.text
    await until(lambda: _has(names(w, "links"), "ok.md"))
    await ended(w, "links")
    await asyncio.sleep(1)
    assert await names(w, "links") == {"ok.md"}
    for word in (OUTSIDE_MARK, PASSWD_WORD, "root"):
        assert not await found(w, "links", word), word


async def test_a_folder_swapped_for_a_symlink_after_it_was_added(world: World) -> None:
    w = world
    folder = w.inbox / "swap"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe first file of the swapped folder.\n")
    r = await add(w, name="swap", kind="folder", url=str(folder), library="swap")
    assert r.status_code == 201, r.text
    await until(lambda: _has(names(w, "swap"), "a.md"))
    folder.rename(w.inbox / "swap-old")
    folder.symlink_to(w.outside, target_is_directory=True)
    r = await w.http.post("/v1/sources/swap/sync", headers=H["admin"])
    assert r.status_code in (202, 400, 403), r.text
    if r.status_code == 202:
        await until(lambda: _job_ended(w, r.json()["job_id"]), 30)
    await asyncio.sleep(1.5)  # and a poll or file-system event
    assert not await found(w, "swap", OUTSIDE_MARK)
    assert not {"secret.md", "secret2.md"} & await names(w, "swap")


async def test_a_file_swapped_for_a_symlink_while_its_job_runs_is_not_read_outside(world: World) -> None:
    """The job checks each path when it scans and reads the bytes later: a file replaced by a link to
    outside the roots in between must not be read through the link."""
    w = world
    folder = w.inbox / "race"
    folder.mkdir()
    for n in range(40):
        words = " ".join(f"race{n}w{k}" for k in range(400))
        (folder / f"doc{n:03}.md").write_text(f"# Race {n}\n\n{words}\n")
    (folder / "zzz.md").write_text("# Last\n\nThe last file, harmless when it was scanned.\n")
    r = await add(w, name="race", kind="folder", url=str(folder), library="race")
    assert r.status_code == 201, r.text

    async def running() -> str:
        s = await state(w, "race")
        if s["last_job_id"] and (await job(w, s["last_job_id"]))["state"] == "running":
            return str(s["last_job_id"])
        return ""

    job_id = await until(running, 20, every=0.05)
    link = folder / ".zzz.tmp"
    link.symlink_to(w.outside / "secret.md")
    link.replace(folder / "zzz.md")  # atomically: the scanned file is now a link to outside
    swapped_while = (await job(w, job_id))["state"]
    await until(lambda: _job_ended(w, job_id), 90)
    await asyncio.sleep(1)
    assert swapped_while == "running"
    assert not await found(w, "race", OUTSIDE_MARK), (
        "a file outside ingest.allowed_roots was read through a link"
    )


async def test_a_symlink_loop_in_a_folder_ends(world: World) -> None:
    w = world
    folder = w.inbox / "loop"
    (folder / "deeper").mkdir(parents=True)
    (folder / "deeper" / "ok.md").write_text("# Loop\n\nThe one real file of the loop.\n")
    (folder / "deeper" / "again").symlink_to(folder, target_is_directory=True)
    (folder / "self").symlink_to(Path("."), target_is_directory=True)
    r = await add(w, name="loop", kind="folder", url=str(folder), library="loop")
    assert r.status_code == 201, r.text
    _s, _j, _text = await ended(w, "loop", timeout=20)
    await until(lambda: _has(names(w, "loop"), "ok.md"), 20)
    assert len([d for d in await documents(w, "loop") if d["source"].endswith("ok.md")]) == 1


async def test_a_fifo_in_a_folder_does_not_hang_the_sync(world: World) -> None:
    w = world
    folder = w.inbox / "fifo"
    folder.mkdir()
    (folder / "ok.md").write_text("# Fifo\n\nThe file beside the pipe.\n")
    os.mkfifo(folder / "pipe.md")
    w.fifos.append(folder / "pipe.md")
    r = await add(w, name="fifo", kind="folder", url=str(folder), library="fifo")
    assert r.status_code == 201, r.text
    _s, _j, _text = await ended(w, "fifo", timeout=20)  # the job ended: it did not block on the pipe
    assert "ok.md" in await names(w, "fifo")
    start = time.monotonic()
    assert (await w.http.get("/v1/sources", headers=H["admin"])).status_code == 200
    assert time.monotonic() - start < 2


async def test_a_huge_sparse_file_is_refused_by_size_without_reading_it(world: World) -> None:
    w = world
    folder = w.inbox / "sparse"
    folder.mkdir()
    (folder / "ok.md").write_text("# Sparse\n\nThe small file beside the huge one.\n")
    (folder / "big.md").touch()
    os.truncate(folder / "big.md", 3 << 30)  # 3 GiB of nothing
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="sparse", kind="folder", url=str(folder), library="sparse")
        assert r.status_code == 201, r.text
        await until(lambda: _has(names(w, "sparse"), "ok.md"), 30)
        await until(lambda: _said_any(w, "sparse", ("max_file_mb",)), 30)
    assert time.monotonic() - start < 30
    assert rss.grew_mb < 800, rss.grew_mb
    assert "big.md" not in await names(w, "sparse")


async def _said_any(w: World, name: str, words: tuple[str, ...]) -> dict[str, Any] | None:
    s = await state(w, name)
    j = await job(w, s["last_job_id"]) if s["last_job_id"] else None
    text = said(s, j)
    return s if any(word in text for word in words) else None


async def test_a_huge_single_line_fails_alone_within_its_budget(world: World) -> None:
    w = world
    folder = w.inbox / "huge"
    folder.mkdir()
    (folder / "ok.md").write_text("# Huge\n\nThe small file beside the long line.\n")
    (folder / "line.md").write_bytes(b"z" * (25 << 20))  # 25 MB, no newline: over ingest.max_chars
    with RssPeak() as rss:
        r = await add(w, name="huge", kind="folder", url=str(folder), library="huge")
        assert r.status_code == 201, r.text
        await until(lambda: _has(names(w, "huge"), "ok.md"), 30)
        await until(lambda: _said_any(w, "huge", ("max_chars",)), 30)
    assert rss.grew_mb < 1200, rss.grew_mb
    assert "line.md" not in await names(w, "huge")


# --- hostile content ----------------------------------------------------------------------------------

XML_ATTACKS = [
    ("billion laughs", "/xml/laughs.xml"),
    ("xxe file", "/xml/xxe-file.xml"),
    ("xxe http", "/xml/xxe-http.xml"),
    ("xxe parameter entity", "/xml/xxe-param.xml"),
    ("external dtd", "/xml/xxe-dtd.xml"),
    ("xinclude", "/xml/xinclude.xml"),
]


def _no_passwd_in_requests(w: World) -> None:
    leaked = [
        r.target for r in w.hits.all() if "root:" in unquote(r.target) or "nologin" in unquote(r.target)
    ]
    assert not leaked, leaked[:3]
    lols = [r.target[:80] for r in w.hits.all() if "lollollol" in r.target]
    assert not lols, lols[:3]


@pytest.mark.parametrize("path", [c[1] for c in XML_ATTACKS], ids=[c[0] for c in XML_ATTACKS])
async def test_a_hostile_sitemap_is_parsed_safely(world: World, path: str) -> None:
    w = world
    before = inside_hits(w)
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="xml", kind="sitemap", url=w.out.url(path))
        assert r.status_code == 201, r.text
        await ended(w, "xml", timeout=20)
        await asyncio.sleep(0.5)
    assert time.monotonic() - start < 20
    assert rss.grew_mb < 200, rss.grew_mb
    assert inside_hits(w) == before, [h.target for h in w.hits.of("inside")]
    _no_passwd_in_requests(w)
    assert not await found(w, "probe", PASSWD_WORD) and not await found(w, "probe", INSIDE_MARK)


@pytest.mark.parametrize(
    ("kind", "where"),
    [("webdav", "/davxxe/"), ("webdav", "/davbomb/"), ("s3", "s3xxe")],
    ids=["webdav xxe", "webdav billion laughs", "s3 listing xxe"],
)
async def test_a_hostile_listing_is_parsed_safely(world: World, kind: str, where: str) -> None:
    w = world
    before = inside_hits(w)
    with RssPeak() as rss:
        if kind == "s3":
            r = await add(
                w,
                name="listing",
                kind="s3",
                url=f"s3://{where}/",
                endpoint=w.out.url("").rstrip("/"),
                region="us-east-1",
            )
        else:
            r = await add(w, name="listing", kind=kind, url=w.out.url(where))
        assert r.status_code == 201, r.text
        await ended(w, "listing", timeout=20)
        await asyncio.sleep(0.5)
    assert rss.grew_mb < 200, rss.grew_mb
    assert inside_hits(w) == before, [h.target for h in w.hits.of("inside")]
    _no_passwd_in_requests(w)
    assert not await found(w, "probe", PASSWD_WORD)


@pytest.mark.parametrize(
    "path", ["/gz/encoded.xml", "/gz/sitemap.xml.gz"], ids=["content-encoding", "xml.gz"]
)
async def test_a_gzip_bomb_sitemap_is_bounded(world: World, path: str) -> None:
    w = world
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="gzbomb", kind="sitemap", url=w.out.url(path))
        assert r.status_code == 201, r.text
        _s, _, _text = await ended(w, "gzbomb", timeout=30)
    assert time.monotonic() - start < 30
    assert rss.grew_mb < 200, rss.grew_mb


async def test_a_million_urls_through_an_index_are_refused_by_source_max_items(world: World) -> None:
    w = world
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="million", kind="sitemap", url=w.out.url("/million/index.xml"))
        assert r.status_code == 201, r.text
        _s, _, text = await ended(w, "million", timeout=30)
    assert time.monotonic() - start < 20
    assert "source_max_items" in text, text
    assert w.hits.count("outside", "/million/child-") <= 3  # stopped once past the limit
    assert w.hits.count("outside", "/million/page") == 0
    assert rss.grew_mb < 300, rss.grew_mb


async def test_a_flat_million_url_sitemap_is_refused_quickly(world: World) -> None:
    w = world
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="flat", kind="sitemap", url=w.out.url("/million/flat.xml"))
        assert r.status_code == 201, r.text
        s, _, text = await ended(w, "flat", timeout=30)
    assert time.monotonic() - start < 20
    assert s["consecutive_failures"] >= 1, s
    assert "source_max_items" in text or "crawl_max_page_mb" in text, text
    assert w.hits.count("outside", "/million/page") == 0
    assert rss.grew_mb < 300, rss.grew_mb


@pytest.mark.parametrize(
    ("path", "prefix", "bound"),
    [("/nest/0.xml", "/nest/", 50), ("/selfloop.xml", "/selfloop", 12)],
    ids=["nests forever", "loops"],
)
async def test_a_sitemap_index_that_never_ends_ends(world: World, path: str, prefix: str, bound: int) -> None:
    w = world
    r = await add(w, name="nest", kind="sitemap", url=w.out.url(path))
    assert r.status_code == 201, r.text
    await ended(w, "nest", timeout=20)
    await asyncio.sleep(1)  # the breaker opens after 3 failed polls of a few sitemaps each
    assert w.hits.count("outside", prefix) <= bound, w.hits.count("outside", prefix)


async def test_an_s3_listing_of_new_keys_forever_stops_at_source_max_items(world: World) -> None:
    w = world
    bucket = "s3keys"
    start = time.monotonic()
    r = await add(
        w,
        name="s3loop",
        kind="s3",
        url=f"s3://{bucket}/",
        endpoint=w.out.url("").rstrip("/"),
        region="us-east-1",
    )
    assert r.status_code == 201, r.text
    _s, _, text = await ended(w, "s3loop", timeout=25)
    assert time.monotonic() - start < 25
    assert "source_max_items" in text, text
    await stops_once_paused(w, "s3loop", f"/{bucket}")


async def test_a_webdav_tree_that_never_ends_ends(world: World) -> None:
    w = world
    start = time.monotonic()
    r = await add(w, name="davdeep", kind="webdav", url=w.out.url("/davdeep/"))
    assert r.status_code == 201, r.text
    await ended(w, "davdeep", timeout=25)
    assert time.monotonic() - start < 25
    await stops_once_paused(w, "davdeep", "/davdeep/")


async def test_pausing_a_source_stops_its_walk_under_way(world: World) -> None:
    """A WebDAV tree walked slowly: paused in the middle, the poll stops at its next folder, before
    ingest.source_max_items, and a stopped poll is no failure of the source."""
    w = world
    r = await add(w, name="davslow", kind="webdav", url=w.out.url("/davslow/"))
    assert r.status_code == 201, r.text

    async def walking() -> bool:
        return w.hits.count("outside", "/davslow/") >= 10

    assert await within(walking, 20), "the walk did not start"
    await stops_once_paused(w, "davslow", "/davslow/")
    assert w.hits.count("outside", "/davslow/") < MAX_ITEMS / 2
    s = await state(w, "davslow")
    assert s["consecutive_failures"] == 0 and not s["last_error"], s


async def stops_once_paused(w: World, name: str, prefix: str) -> None:
    """Pauses the source, then its requests must stop within seconds and stay stopped: a poll under
    way (a retry falls due a second after the failure) ends at its next request once paused."""
    await w.http.post(f"/v1/sources/{name}/pause", headers=H["admin"])

    async def quiet() -> bool:
        n = w.hits.count("outside", prefix)
        await asyncio.sleep(1.0)
        return w.hits.count("outside", prefix) == n

    assert await within(quiet, 8), "still walking after the pause"
    n = w.hits.count("outside", prefix)
    await asyncio.sleep(1.5)
    assert w.hits.count("outside", prefix) == n, "still walking after the pause"


SLOW = [
    ("body drips", "http", "/slow/drip"),
    ("headers drip", "http", "/slow/headers"),
    ("body never ends", "http", "/slow/endless"),
    ("12 MB line", "http", "/slow/line"),
    ("sitemap drips", "sitemap", "/slow/drip"),
    ("webdav drips", "webdav", "/slow/drip"),
]


@pytest.mark.parametrize(("kind", "path"), [c[1:] for c in SLOW], ids=[c[0] for c in SLOW])
async def test_slow_and_endless_answers_are_bounded(world: World, kind: str, path: str) -> None:
    w = world
    start = time.monotonic()
    with RssPeak() as rss:
        r = await add(w, name="slow", kind=kind, url=w.out.url(path))
        assert r.status_code == 201, r.text
        s, j, text = await ended(w, "slow", timeout=25)
    assert time.monotonic() - start < 5 * PAGE_TIMEOUT + 5
    assert text, (s, j)  # it failed, saying why
    assert rss.grew_mb < 300, rss.grew_mb


async def test_a_silent_port_is_bounded(world: World) -> None:
    w = world
    start = time.monotonic()
    r = await add(w, name="silent", kind="http", url=w.i("http://127.0.0.2:{s}/"))
    assert r.status_code == 201, r.text
    _s, _j, text = await ended(w, "silent", timeout=25)
    assert time.monotonic() - start < 5 * PAGE_TIMEOUT + 5
    assert text


# --- robustness -----------------------------------------------------------------------------------------


async def test_hanging_sources_do_not_stall_the_others(world: World) -> None:
    w = world
    w.live_version[0] = 1
    r = await add(w, name="live", kind="http", url=w.out.url("/live/page"), library="live", interval_s=1)
    assert r.status_code == 201, r.text
    await until(lambda: found(w, "live", "alphaversionmark"), 20)
    for n in range(10):
        assert (
            await add(
                w, name=f"hang-{n}", kind="http", url=w.i("http://127.0.0.2:{s}/") + str(n), interval_s=1
            )
        ).status_code == 201
        assert (
            await add(
                w, name=f"down-{n}", kind="http", url=w.i("http://127.0.0.2:{closed}/") + str(n), interval_s=1
            )
        ).status_code == 201
    await asyncio.sleep(1)  # the hanging polls are under way
    w.live_version[0] = 2
    start = time.monotonic()
    picked = await within(lambda: found(w, "live", "bravoversionmark"), 12)
    assert picked, (
        f"the live source's change was not picked up in {time.monotonic() - start:.0f} s "
        "beside 10 hanging sources"
    )


async def test_removing_a_source_while_its_job_runs(world: World) -> None:
    w = world
    folder = w.inbox / "bulk"
    folder.mkdir()
    for n in range(60):
        words = " ".join(f"word{n}x{k}" for k in range(300))
        (folder / f"doc{n:03}.md").write_text(f"# Doc {n}\n\n{words}\n")
    r = await add(w, name="bulk", kind="folder", url=str(folder), library="bulk")
    assert r.status_code == 201, r.text

    async def running() -> str:
        s = await state(w, "bulk")
        if s["last_job_id"] and (await job(w, s["last_job_id"]))["state"] in ("queued", "running"):
            return str(s["last_job_id"])
        return ""

    job_id = await until(running, 20, every=0.05)
    r = await w.http.delete("/v1/sources/bulk", params={"remove_documents": "true"}, headers=H["admin"])
    assert r.status_code == 200, r.text
    w.added.remove("bulk")
    await until(lambda: _job_ended(w, job_id), 60)
    await asyncio.sleep(1.5)
    assert (await w.http.get("/v1/sources/bulk", headers=H["admin"])).status_code == 404
    left = await names(w, "bulk")
    assert not left, f"{len(left)} documents of the removed source were left (or added back) by its job"
    (folder / "late.md").write_text("# Late\n\nA file written after the source was removed.\n")
    await asyncio.sleep(1.5)
    assert not await names(w, "bulk")


async def test_pausing_a_source_stops_the_sync_its_poll_queued(world: World) -> None:
    """A WebDAV tree that takes seconds to list: paused while the job its poll queued lists it
    again, the job is cancelled and stops at its next request (the pause does not wait for it),
    nothing is ingested; a sync asked for by hand then runs whole, paused or not."""
    w = world
    r = await add(w, name="davtree", kind="webdav", url=w.out.url("/davtree/"), library="davtree")
    assert r.status_code == 201, r.text

    async def listing() -> str:  # the poll's job is running, and listing
        s = await state(w, "davtree")
        if s["last_job_id"] and (await job(w, s["last_job_id"]))["state"] == "running":
            return str(s["last_job_id"])
        return ""

    job_id = await until(listing, 60, every=0.05)
    r = await w.http.post("/v1/sources/davtree/pause", headers=H["admin"])
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    assert (await job(w, job_id))["state"] == "cancelled"
    await stops_once_paused(w, "davtree", "/davtree/")  # a whole listing takes 12.7 s
    assert not await names(w, "davtree")

    r = await w.http.post("/v1/sources/davtree/sync", headers=H["admin"])
    assert r.status_code == 202, r.text
    by_hand = r.json()["job_id"]
    await until(lambda: _job_ended(w, by_hand), 120)
    assert (await job(w, by_hand))["state"] == "done"
    assert len(await documents(w, "davtree")) == 127


async def test_pausing_during_a_poll(world: World) -> None:
    w = world
    r = await add(w, name="slowpoll", kind="http", url=w.out.url("/slowpoll/page"), interval_s=1)
    assert r.status_code == 201, r.text
    await until(lambda: _count_above(w, "/slowpoll/", 0), 10, every=0.05)  # a poll in flight
    r = await w.http.post("/v1/sources/slowpoll/pause", headers=H["admin"])
    assert r.status_code == 200 and r.json()["paused"] is True, r.text
    await asyncio.sleep(4)  # what was in flight ends
    n = w.hits.count("outside", "/slowpoll/")
    await asyncio.sleep(3)  # three intervals
    assert w.hits.count("outside", "/slowpoll/") == n, "polled while paused"
    assert (await state(w, "slowpoll"))["paused"] is True


async def _count_above(w: World, prefix: str, n: int) -> bool:
    return w.hits.count("outside", prefix) > n


async def test_two_hundred_sources_keep_the_service_responsive(world: World) -> None:
    w = world
    gate = asyncio.Semaphore(16)
    slowest = [0.0]

    async def one(n: int) -> int:
        async with gate:
            start = time.monotonic()
            r = await add(w, name=f"many-{n:03}", kind="http", url=w.out.url(f"/many/{n}"), library="many")
            slowest[0] = max(slowest[0], time.monotonic() - start)
            return r.status_code

    start = time.monotonic()
    codes = await asyncio.gather(*(one(n) for n in range(200)))
    took = time.monotonic() - start
    assert codes.count(201) == 200, sorted(set(codes))
    assert took < 60, took
    assert slowest[0] < 10, slowest[0]
    start = time.monotonic()
    listed = await listing(w)
    assert time.monotonic() - start < 2, time.monotonic() - start
    assert len([n for n in listed if n.startswith("many-")]) == 200
    start = time.monotonic()
    assert (await w.http.get("/v1/sources/many-199", headers=H["admin"])).status_code == 200
    assert (await w.http.get("/health/live")).status_code == 200
    assert time.monotonic() - start < 2


# --- dead letters -------------------------------------------------------------------------------------


async def _dead(w: World, name: str, suffix: str) -> dict[str, Any] | None:
    s = await state(w, name)
    letter = next((d for d in s["dead_letters"] if d["item"].endswith(suffix)), None)
    return letter


async def test_an_item_that_always_fails_is_dead_lettered_then_retried(world: World) -> None:
    w = world
    r = await add(
        w, name="deadl", kind="sitemap", url=w.out.url("/dl/sitemap.xml"), library="dl", interval_s=1
    )
    assert r.status_code == 201, r.text
    letter = await within(lambda: _dead(w, "deadl", "/dl/fail"), 20)
    assert letter, json.dumps(await state(w, "deadl"))
    assert letter["attempts"] == RETRIES and "500" in letter["error"] and letter["failed_at"], letter
    assert await until(lambda: found(w, "dl", OK_MARK), 20)  # the other item is indexed
    job_id = (await state(w, "deadl"))["last_job_id"]
    await asyncio.sleep(3)  # three more polls: the dead letter is not tried again, and queues no job
    s = await state(w, "deadl")
    assert s["retrying"] == 0 and s["last_job_id"] == job_id, s
    again = await _dead(w, "deadl", "/dl/fail")
    assert again and again["attempts"] == RETRIES, again
    r = await w.http.post("/v1/sources/deadl/retry", headers=H["admin"])
    assert r.status_code == 200 and r.json()["requeued"] == 1, r.text
    await until(lambda: _new_job(w, "deadl", job_id), 10)
    letter = await within(lambda: _dead(w, "deadl", "/dl/fail"), 20)
    assert letter and letter["attempts"] == RETRIES, letter


async def _new_job(w: World, name: str, old: str) -> bool:
    return (await state(w, name))["last_job_id"] != old


async def test_a_failed_item_is_retried_after_its_backoff_not_the_interval(world: World) -> None:
    w = world
    r = await add(
        w, name="backoff", kind="sitemap", url=w.out.url("/dl/sitemap.xml"), library="dl2", interval_s=3600
    )
    assert r.status_code == 201, r.text
    letter = await within(lambda: _dead(w, "backoff", "/dl/fail"), 10)  # backoff: 0.1 s, then 0.2 s
    assert letter, json.dumps(await state(w, "backoff"))


async def test_a_folder_item_that_always_fails_is_dead_lettered(world: World) -> None:
    w = world
    folder = w.inbox / "dlf"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThe good file of the dead-letter folder.\n")
    (folder / "bad.md").write_bytes(b"\x00\x01\x02 binary in a text file")
    r = await add(w, name="deadf", kind="folder", url=str(folder), library="dlf", interval_s=1)
    assert r.status_code == 201, r.text
    letter = await within(lambda: _dead(w, "deadf", "bad.md"), 20)
    assert letter, json.dumps(await state(w, "deadf"))
    assert letter["attempts"] == RETRIES and "binary" in letter["error"], letter
    listed = await listing(w, "admin", library="dlf")
    assert any(d["item"].endswith("bad.md") for d in listed["deadf"]["dead_letters"])
    assert "good.md" in await names(w, "dlf")


# --- sources that stall the poller (last: each has a site of its own, closed at its end) --------------


def _wedge_site(w: World, kind: str) -> Site:
    site = Site("127.0.0.2", f"wedge-{kind}-{len(w.hits.all())}", w.hits)
    token = [0]

    def s3(req: Request) -> Reply:
        token[0] += 1
        if "list-type" not in req.query:
            return Reply(404)
        bucket = req.path.strip("/").split("/")[0]
        if kind == "s3same":
            return Reply(
                200, {"content-type": "application/xml"}, s3_listing(bucket, ["same.md"], token="same")
            )
        return Reply(200, {"content-type": "application/xml"}, s3_listing(bucket, [], token=f"t{token[0]}"))

    def slow_dav(req: Request) -> Reply:
        if req.method != "PROPFIND":
            return Reply(body=b"# x\n\nx\n", headers={"content-type": "text/markdown"})
        site.hang(1.0)  # under the page timeout: every answer is in time
        path = req.path if req.path.endswith("/") else req.path + "/"
        entries = [(path, True), (path + "a/", True), (path + "b/", True)]
        return Reply(207, {"content-type": "application/xml"}, multistatus(entries))

    site.on("*", slow_dav if kind == "slowdav" else s3)
    return site


async def _add_wedge(w: World, name: str, kind: str, site: Site) -> None:
    if kind == "slowdav":
        r = await add(w, name=name, kind="webdav", url=site.url("/tree/"))
    else:
        r = await add(
            w,
            name=name,
            kind="s3",
            url=f"s3://{kind}/",
            endpoint=site.url("").rstrip("/"),
            region="us-east-1",
        )
    assert r.status_code == 201, r.text


async def _unwedge(w: World, name: str, site: Site) -> None:
    """Closes the wedge's site, so that its poll fails, and waits for that (the poller is free again)."""
    site.close()

    async def done() -> bool:
        s = await state(w, name)
        return bool(s["consecutive_failures"] or s["last_success_at"])

    await within(done, 40)


async def test_an_endless_s3_listing_ends(world: World) -> None:
    w = world
    kind = "s3empty"
    site = _wedge_site(w, kind)
    try:
        await _add_wedge(w, "s3endless", kind, site)
        _s, _, _text = await ended(w, "s3endless", timeout=15)
    finally:
        listed = w.hits.count(site.name)
        await _unwedge(w, "s3endless", site)
    assert listed < 1000, listed


@pytest.mark.parametrize("kind", ["slowdav", "s3empty"], ids=["slow webdav tree", "endless s3 listing"])
async def test_one_slow_source_does_not_stall_every_other(world: World, kind: str) -> None:
    w = world
    w.live_version[0] = 1
    r = await add(w, name="live2", kind="http", url=w.out.url("/live/page"), library="live2", interval_s=1)
    assert r.status_code == 201, r.text
    await until(lambda: found(w, "live2", "alphaversionmark"), 20)
    site = _wedge_site(w, kind)
    try:
        await _add_wedge(w, "staller", kind, site)
        await asyncio.sleep(2)  # its poll is under way
        w.live_version[0] = 2
        picked = await within(lambda: found(w, "live2", "bravoversionmark"), 12)
    finally:
        await _unwedge(w, "staller", site)
    assert picked, "the live source was not polled while another source's poll was under way"


# --- last ---------------------------------------------------------------------------------------------


async def test_zz_nothing_ever_reached_the_inside_host_nor_leaked_to_the_logs(world: World) -> None:
    w = world
    assert inside_hits(w) == 0, [h.target for h in w.hits.of("inside")][:10]
    logged = [line for line in w.logs.lines if CRED_PW in line or INSIDE_MARK in line or OUTSIDE_MARK in line]
    assert not logged, logged[:3]
    for library in ("probe", "team", "other"):
        assert not await found(w, library, INSIDE_MARK)
        assert not await found(w, library, OUTSIDE_MARK)
