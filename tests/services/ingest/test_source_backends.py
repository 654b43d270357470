"""The remote sources' backends (services/ingest/syncing/remote.py and s3.py) against real servers on
loopback: a small http.server for pages and sitemaps, wsgidav for WebDAV, moto for S3."""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragstack.config import SourceConfig
from ragstack.errors import InvalidArgument, PermissionDenied
from ragstack.guard.paths import PathGuard
from services.ingest.crawler import CrawlLimits, fetcher_for
from services.ingest.syncing import listing_xml, remote
from services.ingest.syncing import s3 as remote_s3
from services.ingest.syncing.backends import (
    Checkpoint,
    Entry,
    Failed,
    FolderBackend,
    ScanError,
    ScanStopped,
    selector,
)
from services.ingest.syncing.remote import (
    HttpBackend,
    ReadFailed,
    SitemapBackend,
    WebDavBackend,
    open_backend,
)
from services.ingest.syncing.s3 import S3Backend
from tests.tools.webdav import webdav_server
from tests.tools.websites import Page, Web, serve_web

LOOPBACK = CrawlLimits(fetch_allow=("127.0.0.1",), page_timeout_s=5.0)
EVERYTHING = selector((), ())


def entries(results: list[Entry | Failed]) -> dict[str, Entry]:
    return {r.name: r for r in results if isinstance(r, Entry)}


@pytest.fixture
def web() -> Iterator[Web]:
    with serve_web() as site:
        yield site


def scan_all(backend: Any, known: dict[str, str] | None = None, wanted: Any = EVERYTHING) -> list[Any]:
    return list(backend.scan(known or {}, wanted))


# --- http: one page --------------------------------------------------------------------------------


def test_http_page_with_an_etag_is_asked_for_conditionally(web: Web) -> None:
    web.pages["/docs/guide.html"] = Page(b"<h1>v1</h1>", {"ETag": '"v1"', "Content-Type": "text/html"})
    backend = HttpBackend(f"{web.url}/docs/guide.html", fetcher_for(LOOPBACK))
    [first] = scan_all(backend)
    assert (first.name, first.revision, first.size, first.kind) == ("guide.html", '"v1"', 11, "html")
    assert first.source == f"{web.url}/docs/guide.html"
    assert first.read() == b"<h1>v1</h1>" and len(web.requests) == 1  # read from the scan's GET

    web.requests.clear()
    [again] = scan_all(backend, {first.source: '"v1"'})
    assert [(m, p, h.get("if-none-match")) for m, p, h in web.requests] == [
        ("GET", "/docs/guide.html", '"v1"')
    ]
    assert again.revision == '"v1"' and again.size == -1  # answered 304: nothing read

    web.pages["/docs/guide.html"] = Page(b"<h1>v2</h1>", {"ETag": 'W/"v2"', "Content-Type": "text/html"})
    [changed] = scan_all(backend, {first.source: '"v1"'})
    assert changed.revision == 'W/"v2"' and changed.read() == b"<h1>v2</h1>"
    backend.close()


def test_http_page_with_last_modified_only(web: Web) -> None:
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    web.pages["/notes.md"] = Page(b"# notes", {"Last-Modified": date, "Content-Type": "text/markdown"})
    backend = HttpBackend(f"{web.url}/notes.md", fetcher_for(LOOPBACK))
    [first] = scan_all(backend)
    assert (first.revision, first.kind, first.read()) == (date, "", b"# notes")
    web.requests.clear()
    [again] = scan_all(backend, {first.source: date})
    assert web.requests[0][2].get("if-modified-since") == date and "if-none-match" not in web.requests[0][2]
    assert again.revision == date and again.size == -1
    backend.close()


def test_http_page_without_validators_is_compared_by_content(web: Web) -> None:
    web.pages["/"] = Page(b"<p>home</p>", {"Content-Type": "text/html; charset=utf-8"})
    backend = HttpBackend(f"{web.url}/", fetcher_for(LOOPBACK))
    [first] = scan_all(backend)
    assert (
        first.name == "index.html"
        and first.revision == "sha256:" + hashlib.sha256(b"<p>home</p>").hexdigest()
    )
    web.requests.clear()
    [again] = scan_all(backend, {first.source: first.revision})
    assert "if-none-match" not in web.requests[0][2] and "if-modified-since" not in web.requests[0][2]
    assert again.revision == first.revision
    backend.close()


def test_http_failures_are_the_source_failing(web: Web) -> None:
    web.pages["/broken"] = Page(b"oops", status=500)
    with socket.socket() as closed:  # a port nothing listens on once it is closed
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}/x"
    for url, said in (
        (f"{web.url}/broken", "HTTP 500"),
        (down, "unreachable"),
    ):
        backend = HttpBackend(url, fetcher_for(LOOPBACK))
        with pytest.raises(ScanError, match=said):
            scan_all(backend)
        backend.close()


def test_an_http_page_that_answers_404_or_410_is_gone(web: Web) -> None:
    web.pages["/withdrawn"] = Page(b"gone", status=410)
    for path in ("/missing", "/withdrawn"):
        backend = HttpBackend(f"{web.url}{path}", fetcher_for(LOOPBACK))
        assert scan_all(backend) == []  # an empty listing: its document goes if the policy prunes
        backend.close()


def test_http_loopback_is_refused_without_fetch_allow(web: Web) -> None:
    web.pages["/a.md"] = Page(b"a")
    backend = HttpBackend(f"{web.url}/a.md", fetcher_for(CrawlLimits()))
    with pytest.raises(ScanError, match=r"loopback.*ingest\.fetch_allow"):
        scan_all(backend)
    assert web.requests == []


def test_http_userinfo_is_sent_but_never_recorded(web: Web) -> None:
    web.pages["/private.md?token=abc"] = Page(b"secret text", {"ETag": '"p"'})
    url = f"{web.url.replace('http://', 'http://me:pw@')}/private.md?token=abc"
    backend = HttpBackend(url, fetcher_for(LOOPBACK))
    [entry] = scan_all(backend)
    assert web.requests[0][2]["authorization"].startswith("Basic ")
    assert "me" not in entry.source and "pw" not in entry.source and "abc" not in entry.source
    assert entry.name == "private.md"
    backend.close()


def test_http_unwanted_page_is_not_fetched(web: Web) -> None:
    web.pages["/draft.tmp"] = Page(b"x")
    backend = HttpBackend(f"{web.url}/draft.tmp", fetcher_for(LOOPBACK))
    assert scan_all(backend, wanted=selector((), ("*.tmp",))) == [] and web.requests == []
    backend.close()


# --- sitemaps --------------------------------------------------------------------------------------


def urlset(*locs: str) -> bytes:
    body = "".join(f"<url><loc>{loc}</loc><lastmod>2024-01-01</lastmod></url>" for loc in locs)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</urlset>'.encode()


def sitemap_index(*locs: str) -> bytes:
    body = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{body}</sitemapindex>'.encode()


def test_sitemap_index_gzip_same_site_and_a_failing_page(web: Web) -> None:
    html = {"Content-Type": "text/html"}
    web.pages["/sitemap.xml"] = Page(
        sitemap_index(f"{web.url}/pages.xml", f"{web.url}/more.xml.gz", "http://elsewhere.invalid/s.xml")
    )
    web.pages["/pages.xml"] = Page(
        urlset(f"{web.url}/", f"{web.url}/docs/a%20b.html", "https://other.invalid/x", f"{web.url}/broken")
    )
    web.pages["/more.xml.gz"] = Page(gzip.compress(urlset(f"{web.url}/c.html", f"{web.url}/draft.tmp")))
    web.pages["/"] = Page(b"<p>home</p>", {"ETag": '"h"', **html})
    web.pages["/docs/a%20b.html"] = Page(
        b"<p>a</p>", {"Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT", **html}
    )
    web.pages["/c.html"] = Page(b"<p>c</p>", html)
    web.pages["/broken"] = Page(b"no", status=500)
    web.pages["/draft.tmp"] = Page(b"tmp")
    backend = SitemapBackend(f"{web.url}/sitemap.xml", fetcher_for(LOOPBACK), max_items=10)

    results = scan_all(backend, wanted=selector((), ("*.tmp",)))
    found = entries(results)
    assert sorted(found) == ["c.html", "docs/a b.html", "index.html"]
    assert found["index.html"].revision == '"h"' and found["docs/a b.html"].read() == b"<p>a</p>"
    assert found["c.html"].kind == "html" and found["c.html"].source == f"{web.url}/c.html"
    [failed] = [r for r in results if isinstance(r, Failed)]
    assert (failed.name, failed.source) == ("broken", f"{web.url}/broken") and "HTTP 500" in failed.reason
    fetched = {path for _, path, _ in web.requests}
    assert "/draft.tmp" not in fetched and not any("invalid" in p for p in fetched)

    web.requests.clear()  # the next poll: the sitemaps again, and one conditional GET per page
    known = {e.source: e.revision for e in found.values()}
    again = entries(scan_all(backend, known, selector((), ("*.tmp",))))
    assert {n: e.revision for n, e in again.items()} == {n: e.revision for n, e in found.items()}
    assert again["index.html"].size == -1 and again["docs/a b.html"].size == -1  # both answered 304
    assert len(web.requests) == 3 + 4
    backend.close()


def test_sitemap_with_entities_is_refused(web: Web) -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
        b"<urlset><url><loc>&lol2;</loc></url></urlset>"
    )
    web.pages["/sitemap.xml"] = Page(bomb)
    backend = SitemapBackend(f"{web.url}/sitemap.xml", fetcher_for(LOOPBACK), max_items=10)
    with pytest.raises(ScanError, match="entit"):
        scan_all(backend)
    backend.close()


def test_sitemap_over_max_items_fails_naming_the_setting(web: Web) -> None:
    web.pages["/sitemap.xml"] = Page(urlset(*(f"{web.url}/p{i}.html" for i in range(5))))
    backend = SitemapBackend(f"{web.url}/sitemap.xml", fetcher_for(LOOPBACK), max_items=4)
    with pytest.raises(ScanError, match=r"more than 4 pages \(ingest\.source_max_items\)"):
        scan_all(backend)
    assert len(web.requests) == 1  # no page asked for
    assert len(scan_all(backend, wanted=selector(("p[0-3].html",), ()))) == 4  # wanted ones count
    backend.close()


def test_sitemap_gzip_bomb_and_odd_sitemaps_are_refused(web: Web, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "SITEMAP_MAX_BYTES", 1024 * 1024)
    monkeypatch.setattr(listing_xml, "MAX_ELEMENTS", 1000)  # the default is the protocol's (1.6 M)
    web.pages["/bomb.xml.gz"] = Page(gzip.compress(b"<urlset>" + b" " * 2 * 1024 * 1024 + b"</urlset>"))
    web.pages["/nested.xml"] = Page(sitemap_index(f"{web.url}/index2.xml"))
    web.pages["/index2.xml"] = Page(sitemap_index(f"{web.url}/pages.xml"))
    web.pages["/html.xml"] = Page(b"<html><body>hi</body></html>")
    web.pages["/bad.xml"] = Page(b"<urlset><url>")
    web.pages["/tiny.xml"] = Page(b"<urlset>" + b"<a/>" * 1001 + b"</urlset>")  # gigabytes of tree at 50 MB
    cases = {
        "/bomb.xml.gz": r"larger than 1 MiB uncompressed",
        "/nested.xml": "one level deep",
        "/html.xml": "not a sitemap",
        "/bad.xml": "not well-formed XML",
        "/tiny.xml": "more than 1000 XML elements",
        "/gone.xml": "HTTP 404",
    }
    for path, said in cases.items():
        backend = SitemapBackend(f"{web.url}{path}", fetcher_for(LOOPBACK), max_items=10)
        with pytest.raises(ScanError, match=said):
            scan_all(backend)
        backend.close()


# --- WebDAV ----------------------------------------------------------------------------------------


@pytest.fixture
def dav_folder(tmp_path: Path) -> Path:
    root = tmp_path / "share"
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / ".hidden").mkdir()
    (root / "readme.md").write_text("# readme")
    (root / "docs" / "guide.md").write_text("guide text")
    (root / "docs" / "deep" / "odd name é.txt").write_text("deep")
    (root / "docs" / "scratch.tmp").write_text("tmp")
    (root / ".hidden" / "secret.md").write_text("hidden")
    return root


def dav_url(url: str) -> str:
    return url.replace("http://", "http://dav:secret@")


def test_webdav_walks_nested_folders(dav_folder: Path) -> None:
    with webdav_server(dav_folder) as url:
        backend = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), max_items=10)
        found = entries(scan_all(backend, wanted=selector((), ("*.tmp",))))
        assert sorted(found) == ["docs/deep/odd name é.txt", "docs/guide.md", "readme.md"]
        guide = found["docs/guide.md"]
        assert guide.size == len("guide text") and guide.revision and guide.source == f"{url}docs/guide.md"
        assert guide.read() == b"guide text" and found["docs/deep/odd name é.txt"].read() == b"deep"
        assert all("secret" not in e.source and "dav@" not in e.source for e in found.values())
        backend.close()


def test_webdav_sees_changes_and_removals(dav_folder: Path) -> None:
    with webdav_server(dav_folder) as url:
        backend = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), max_items=10)
        before = entries(scan_all(backend))
        (dav_folder / "docs" / "guide.md").write_text("a longer guide text")
        os.utime(dav_folder / "docs" / "guide.md", (1_000_000_000, 1_000_000_000))
        (dav_folder / "readme.md").unlink()
        after = entries(scan_all(backend))
        assert "readme.md" not in after and "readme.md" in before
        assert after["docs/guide.md"].revision != before["docs/guide.md"].revision
        assert after["docs/guide.md"].read() == b"a longer guide text"
        assert after["docs/scratch.tmp"].revision == before["docs/scratch.tmp"].revision
        backend.close()


def test_webdav_refusals(dav_folder: Path) -> None:
    with webdav_server(dav_folder) as url:
        refused = WebDavBackend(dav_url(url), fetcher_for(CrawlLimits()), max_items=10)
        with pytest.raises(ScanError, match=r"ingest\.fetch_allow"):
            scan_all(refused)
        wrong = WebDavBackend(
            url.replace("http://", "http://dav:wrong@"), fetcher_for(LOOPBACK), max_items=10
        )
        with pytest.raises(ScanError, match="HTTP 401 to PROPFIND"):
            scan_all(wrong)
        small = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), max_items=3)  # 3 folders, 4 files
        with pytest.raises(ScanError, match=r"more than 3 files \(ingest\.source_max_items\)"):
            scan_all(small)
        smaller = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), max_items=2)
        with pytest.raises(ScanError, match=r"more than 2 folders \(ingest\.source_max_items\)"):
            scan_all(smaller)
        shallow = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), max_items=10, max_depth=1)
        with pytest.raises(ScanError, match="more than 1 deep"):
            scan_all(shallow)
        for backend in (refused, wrong, small, smaller, shallow):
            backend.close()


def multistatus(*responses: tuple[str, bool]) -> bytes:
    def one(href: str, folder: bool) -> str:
        kind = "<D:collection/>" if folder else ""
        return (
            f"<D:response><D:href>{href}</D:href><D:propstat><D:prop><D:resourcetype>{kind}</D:resourcetype>"
            '<D:getetag>"e"</D:getetag><D:getcontentlength>3</D:getcontentlength></D:prop>'
            "<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
        )

    return (
        '<D:multistatus xmlns:D="DAV:">' + "".join(one(h, f) for h, f in responses) + "</D:multistatus>"
    ).encode()


def test_webdav_hostile_listing_is_contained(web: Web) -> None:
    web.pages["/dav/"] = Page(
        multistatus(
            ("/dav/", True),
            ("/dav/ok.md", False),
            ("/dav/../etc/passwd", False),
            ("/dav/%2e%2e/etc/shadow", False),
            ("/other/x.md", False),
            ("http://elsewhere.invalid/dav/y.md", False),
            (f"{web.url}/dav/sub/", True),
            ("/dav/loop/", True),
        ),
        status=207,
    )
    web.pages["/dav/sub/"] = Page(
        multistatus(("/dav/sub/", True), ("/dav/", True), ("sub.md", False)), status=207
    )
    web.pages["/dav/loop/"] = Page(multistatus(("/dav/loop/", True), ("/dav/sub/", True)), status=207)
    backend = WebDavBackend(f"{web.url}/dav", fetcher_for(LOOPBACK), max_items=10)
    found = entries(scan_all(backend))
    assert sorted(found) == ["ok.md", "sub/sub.md"] and found["ok.md"].revision == '"e"'
    assert [p for m, p, _ in web.requests if m == "PROPFIND"] == ["/dav/", "/dav/loop/", "/dav/sub/"]

    web.pages["/dav/"] = Page(
        b'<?xml version="1.0"?><!DOCTYPE m [<!ENTITY a "aaaa">]>'
        b'<D:multistatus xmlns:D="DAV:">&a;</D:multistatus>',
        status=207,
    )
    with pytest.raises(ScanError, match="entit"):
        scan_all(backend)
    backend.close()


# --- S3 --------------------------------------------------------------------------------------------


@dataclass
class Bucket:
    name: str
    endpoint: str
    client: Any
    prefix: str


@pytest.fixture(scope="module")
def moto() -> Iterator[tuple[str, str, Any]]:
    import boto3

    from tests.tools.s3 import s3_bucket

    with s3_bucket() as (url, options):
        client = boto3.client(
            "s3",
            endpoint_url=options["aws_endpoint"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        yield url.removeprefix("s3://"), options["aws_endpoint"], client


@pytest.fixture
def bucket(moto: tuple[str, str, Any], monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    for key in (
        "AWS_ENDPOINT",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    remote_s3.found_credentials.cache_clear()  # the credentials are read once a process: read these
    name, endpoint, client = moto
    yield Bucket(name, endpoint, client, f"p{uuid.uuid4().hex[:8]}")
    remote_s3.found_credentials.cache_clear()


def s3_backend(b: Bucket, prefix: str = "", allow: tuple[str, ...] = ("127.0.0.1",), **kw: Any) -> S3Backend:
    # The environment names moto's endpoint, so the service's credentials sign requests to it.
    options: dict[str, Any] = {"endpoint": b.endpoint, "region": "us-east-1", "max_items": 10}
    options.update(environ={"AWS_ENDPOINT_URL_S3": b.endpoint}, **kw)
    fetcher = fetcher_for(CrawlLimits(fetch_allow=allow, page_timeout_s=5.0))
    return S3Backend(f"s3://{b.name}/{prefix or b.prefix}", fetcher, **options)


def test_s3_lists_objects_under_the_prefix(bucket: Bucket) -> None:
    put = bucket.client.put_object
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/a.md", Body=b"alpha")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/sub/b c+d%.txt", Body=b"beta!")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/sub/x.tmp", Body=b"tmp")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/.git/config", Body=b"hidden")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/../odd.md", Body=b"odd")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}x/outside.md", Body=b"not under the prefix")
    put(Bucket=bucket.name, Key=f"{bucket.prefix}/sub/", Body=b"")  # a folder marker
    backend = s3_backend(bucket)
    found = entries(scan_all(backend, wanted=selector((), ("*.tmp",))))
    assert sorted(found) == ["a.md", "sub/b c+d%.txt"]  # hidden and dot segments skipped
    a = found["a.md"]
    assert a.source == f"s3://{bucket.name}/{bucket.prefix}/a.md" and a.size == 5
    assert a.revision == '"' + hashlib.md5(b"alpha").hexdigest() + '"'
    assert a.read() == b"alpha" and found["sub/b c+d%.txt"].read() == b"beta!"

    put(Bucket=bucket.name, Key=f"{bucket.prefix}/a.md", Body=b"alpha, changed")
    with pytest.raises(ReadFailed, match="changed since it was listed"):
        a.read()  # the listed version is gone: never read as if it were
    changed = entries(scan_all(backend))["a.md"]
    assert changed.revision != a.revision and changed.read() == b"alpha, changed"
    listed = found["sub/b c+d%.txt"]
    bucket.client.delete_object(Bucket=bucket.name, Key=f"{bucket.prefix}/sub/b c+d%.txt")
    assert "sub/b c+d%.txt" not in entries(scan_all(backend))
    with pytest.raises(ReadFailed, match="gone since it was listed"):
        listed.read()
    with pytest.raises(ScanError, match=r"more than 1 objects \(ingest\.source_max_items\)"):
        scan_all(s3_backend(bucket, max_items=1))
    backend.close()


def test_s3_lists_page_after_page(bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_s3, "PAGE_KEYS", 2)  # pages of two keys: five objects take three pages
    for n in range(5):
        bucket.client.put_object(Bucket=bucket.name, Key=f"{bucket.prefix}/n{n}.md", Body=b"x")
    assert sorted(entries(scan_all(s3_backend(bucket)))) == [f"n{n}.md" for n in range(5)]
    # Unwanted keys are listed too (S3 knows no globs): up to ten for each one the source may keep.
    unwanted = selector(("none",), ())
    assert scan_all(s3_backend(bucket, max_items=1, checkpoint=lambda: None), wanted=unwanted) == []
    for n in range(5, 25):
        bucket.client.put_object(Bucket=bucket.name, Key=f"{bucket.prefix}/n{n}.md", Body=b"x")
    with pytest.raises(ScanError, match=r"goes on past 10 keys \(10 times ingest.source_max_items\)"):
        scan_all(s3_backend(bucket, max_items=1, checkpoint=lambda: None), wanted=unwanted)


def test_s3_requests_are_signed_as_aws_checks_them(
    moto: tuple[str, str, Any], bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto, asked to authenticate every request, verifies each signature (botocore's own check) and
    answers 403 SignatureDoesNotMatch to a wrong one; a session token is signed too."""
    import boto3
    from moto import settings

    _, endpoint, _ = moto
    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    user = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = (
        '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}'
    )
    iam.put_user_policy(UserName=user, PolicyName="read", PolicyDocument=policy)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    bucket.client.put_object(Bucket=bucket.name, Key=f"{bucket.prefix}/signed me.md", Body=b"signed")
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    remote_s3.found_credentials.cache_clear()  # reads the environment again
    [entry] = scan_all(s3_backend(bucket))
    assert entry.read() == b"signed"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    remote_s3.found_credentials.cache_clear()  # reads the environment again
    with pytest.raises(ScanError, match=r"HTTP 403 \(SignatureDoesNotMatch\); credentials come from") as err:
        scan_all(s3_backend(bucket))
    assert "not-the-secret" not in str(err.value)


def test_s3_never_follows_a_redirect(web: Web) -> None:
    """A signed request is for one address: an S3 server that redirects is refused, never followed,
    wherever it points (here, to a page the same server holds)."""
    web.pages["/secret.md"] = Page(b"# secret")
    listing = "/bkt?encoding-type=url&list-type=2&max-keys=1000&prefix=docs%2F"
    web.pages[listing] = Page(b"", {"Location": f"{web.url}/secret.md"}, status=307)
    backend = S3Backend(
        "s3://bkt/docs", fetcher_for(LOOPBACK), endpoint=web.url, region="us-east-1", max_items=5
    )
    with pytest.raises(ScanError, match=r"HTTP 307: the server redirects.*never follow a redirect"):
        scan_all(backend)
    assert [p for _, p, _ in web.requests] == [listing]
    body = (
        b"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>docs/a.md</Key>"
        b"<ETag>&quot;e&quot;</ETag><Size>9</Size></Contents></ListBucketResult>"
    )
    web.pages[listing] = Page(body, {"Content-Type": "application/xml"})
    web.pages["/bkt/docs/a.md"] = Page(b"", {"Location": f"{web.url}/secret.md"}, status=302)
    [entry] = scan_all(backend)
    with pytest.raises(ReadFailed, match="HTTP 302: the server redirects"):
        entry.read()
    assert "/secret.md" not in [p for _, p, _ in web.requests]
    backend.close()


def test_s3_endpoint_on_loopback_is_refused_without_fetch_allow(bucket: Bucket) -> None:
    backend = s3_backend(bucket, allow=())
    with pytest.raises(ScanError, match=r"loopback.*ingest\.fetch_allow"):
        scan_all(backend)


def test_s3_errors_are_clear_and_hold_no_credentials(bucket: Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-key")
    remote_s3.found_credentials.cache_clear()  # reads the environment again
    missing = S3Backend(
        "s3://no-such-bucket-here/docs",
        fetcher_for(LOOPBACK),
        endpoint=bucket.endpoint,
        region="us-east-1",
        max_items=10,
    )
    with pytest.raises(ScanError) as err:
        scan_all(missing)
    assert "NoSuchBucket" in str(err.value) and "very-secret-key" not in str(err.value)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(ScanError, match="unreachable, refused, timed out or not an S3 server"):
        scan_all(S3Backend("s3://bucket/p", fetcher_for(LOOPBACK), endpoint=down, max_items=1))
    fetcher = fetcher_for(LOOPBACK)
    for url, said in (
        ("s3://key:secret@bucket/p", "no credentials"),
        ("s3://Bad_Bucket/p", "bucket name"),
        ("s3://bucket/a/../b", "prefix"),
        ("http://bucket/p", "s3://bucket/prefix"),
    ):
        with pytest.raises(InvalidArgument, match=said) as refused:
            S3Backend(url, fetcher, max_items=1)
        assert "secret" not in str(refused.value)
    with pytest.raises(InvalidArgument, match="region"):
        S3Backend("s3://bucket/p", fetcher, region="evil.example.com/", max_items=1)
    with pytest.raises(InvalidArgument, match="endpoint"):
        S3Backend("s3://bucket/p", fetcher, endpoint="http://u:p@host:9000/path", max_items=1)
    with pytest.raises(InvalidArgument, match="AWS_ENDPOINT_URL_S3: an S3 endpoint is"):
        S3Backend("s3://bucket/p", fetcher, max_items=1, environ={"AWS_ENDPOINT_URL_S3": "ftp://x/y"})


def test_s3_endpoint_and_region_from_the_environment(web: Web) -> None:
    """Without an endpoint of its own, a source goes where the service's environment says (the AWS
    SDKs' AWS_ENDPOINT_URL_S3), else to AWS in its region; the service's credentials sign requests
    to those only, never to an endpoint a source names; a default port is left out of the Host
    header a request is signed with."""
    listing = "/bkt?encoding-type=url&list-type=2&max-keys=1000"
    web.pages[listing] = Page(b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")
    env = {"AWS_ENDPOINT_URL_S3": web.url, "AWS_DEFAULT_REGION": "eu-north-1"}
    fetcher = fetcher_for(LOOPBACK)
    from botocore.credentials import ReadOnlyCredentials

    def keys() -> ReadOnlyCredentials:
        return ReadOnlyCredentials("AKIDSERVICE", "service-secret", "service-session-token")

    trusted = S3Backend("s3://bkt", fetcher, max_items=5, environ=env, credentials=keys)
    assert scan_all(trusted) == [] and web.requests[-1][1] == listing
    signature = web.requests[-1][2]
    assert signature["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDSERVICE/")
    assert "/eu-north-1/s3/aws4_request" in signature["authorization"]
    assert signature["x-amz-security-token"] == "service-session-token"
    chosen = S3Backend("s3://bkt", fetcher, endpoint=web.url, max_items=5, environ={}, credentials=keys)
    assert scan_all(chosen) == []
    sent = {k.lower() for k in web.requests[-1][2]}
    assert not sent & {"authorization", "x-amz-security-token"}, sent  # a source's own endpoint
    aws = S3Backend("s3://bkt/p", fetcher, max_items=5, environ={"AWS_REGION": "eu-west-3"})
    assert aws._base == "https://s3.eu-west-3.amazonaws.com/bkt"
    assert remote_s3.s3_endpoint("HTTP://Minio.Example:80/") == "http://minio.example"
    assert remote_s3.s3_endpoint("https://[::1]:9000") == "https://[::1]:9000"
    with pytest.raises(InvalidArgument, match="ASCII"):
        remote_s3.s3_endpoint("http://b\u00fccher.example:9000")


def test_the_buckets_of_the_services_own_stores_are_no_source() -> None:
    own = remote_s3.own_buckets("s3://Stores/lancedb", "s3://snapshots/lexical")
    assert own == {"stores", "snapshots"} and remote_s3.own_buckets(Path("/data/lancedb"), "") == set()
    with pytest.raises(PermissionDenied, match=r"s3://stores holds this service's own stores"):
        S3Backend("s3://stores/other-library", fetcher_for(LOOPBACK), max_items=5, own_buckets=own)


LISTED = "/bkt?encoding-type=url&list-type=2&max-keys=1000&prefix=docs%2F"
MODIFIED = "2026-01-02T03:04:05Z"


def listing(*contents: str, more: str = "<IsTruncated>false</IsTruncated>", encoded: bool = True) -> Page:
    kind = "<EncodingType>url</EncodingType>" if encoded else ""
    return Page(f"<ListBucketResult>{kind}{more}{''.join(contents)}</ListBucketResult>".encode())


def item(
    key: str, size: str = "4", etag: str = "&quot;e1&quot;", modified: str = "2026-01-02T03:04:05Z"
) -> str:
    fields = f"<Key>{key}</Key><Size>{size}</Size><ETag>{etag}</ETag><LastModified>{modified}</LastModified>"
    return f"<Contents>{fields}</Contents>"


def hostile_s3(web: Web) -> S3Backend:
    return S3Backend("s3://bkt/docs", fetcher_for(LOOPBACK), endpoint=web.url, max_items=50, environ={})


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (Page(b"<Error><Code>SlowDown</Code></Error>"), r"not a listing \(<Error>\)"),
        (Page(b"<html><body>maintenance</body></html>"), r"not a listing \(<html>\)"),
        (listing(item("docs/a.md"), more="<IsTruncated>true</IsTruncated>"), "no continuation token"),
        (listing(*[item(f"docs/k{n}.md") for n in range(1001)]), "more than 1000 keys"),
        (listing(item("docs/a.md"), "<x/>" * 40_000), "more than 32000 XML elements"),
    ],
    ids=["error with 200", "html with 200", "truncated without a token", "page too long", "padded page"],
)
def test_an_s3_answer_that_is_no_whole_listing_fails_the_scan(web: Web, answer: Page, said: str) -> None:
    """Taken for a short listing, any of these would prune every document the source holds."""
    web.pages[LISTED] = answer
    with pytest.raises(ScanError, match=said):
        scan_all(hostile_s3(web))


def test_odd_s3_keys_are_skipped_and_odd_values_never_sent_back(web: Web) -> None:
    web.pages[LISTED] = listing(
        item("docs/ok.md"),
        item("docsX/outside.md"),  # not under docs/
        item("elsewhere/secret.md"),
        item("docs/a%0D%0Ab.md"),  # control characters
        item("docs/%E2%80%AEdm.exe"),  # a right-to-left override
        item("docs/a%5C..%5Cb.md"),  # backslashes
        item("docs/%FF.md"),  # not UTF-8
        item("docs/" + "k" * 1100 + ".md"),  # longer than S3 allows
        item("docs/super.md", size="\u00b2"),
        item("docs/huge.md", size="9" * 5000),
        item("docs/c%2B%2B.md"),  # c++.md
        item("docs/crlf.md", etag="&quot;a&#13;&#10;If-None-Match: *&quot;"),
        item("docs/accent.md", etag="&quot;caf\u00e9&quot;", modified="2026-02-03T04:05:06Z"),
    )
    found = entries(scan_all(hostile_s3(web)))
    assert sorted(found) == ["accent.md", "c++.md", "crlf.md", "ok.md"], sorted(found)
    assert found["crlf.md"].revision == MODIFIED  # an ETag unfit for If-Match: the time
    assert found["accent.md"].revision == "2026-02-03T04:05:06Z"
    web.pages["/bkt/docs/crlf.md"] = Page(b"body")
    assert found["crlf.md"].read() == b"body" and "if-match" not in web.requests[-1][2]
    web.pages["/bkt/docs/c%2B%2B.md"] = Page(b"c++!")
    assert found["c++.md"].read() == b"c++!"  # the key as listed, encoded once for the path


def test_s3_keys_are_decoded_only_when_the_listing_says_so(web: Web) -> None:
    web.pages[LISTED] = listing(item("docs/c++ 100%.md"), encoded=False)
    [entry] = scan_all(hostile_s3(web))
    assert entry.name == "c++ 100%.md"


def test_an_s3_body_of_another_size_than_listed_is_no_read(web: Web) -> None:
    web.pages[LISTED] = listing(item("docs/short.md", size="10"), item("docs/long.md", size="2"))
    found = entries(scan_all(hostile_s3(web)))
    web.pages["/bkt/docs/short.md"] = Page(b"four")
    web.pages["/bkt/docs/long.md"] = Page(b"four", {"Content-Encoding": "identity"})
    with pytest.raises(ReadFailed, match="came with 4 of the 10 bytes"):
        found["short.md"].read()
    with pytest.raises(ReadFailed, match="grew past the 2 bytes"):
        found["long.md"].read()


# --- the factory and the fetcher -------------------------------------------------------------------


def test_open_backend_picks_by_kind(tmp_path: Path, web: Web) -> None:
    def spec(kind: str, url: str, **kw: Any) -> SourceConfig:
        return SourceConfig(name="s", kind=kind, url=url, **kw)

    paths = PathGuard([tmp_path])
    cases = [
        (spec("folder", str(tmp_path)), FolderBackend),
        (spec("http", f"{web.url}/a.md"), HttpBackend),
        (spec("sitemap", f"{web.url}/sitemap.xml"), SitemapBackend),
        (spec("webdav", f"{web.url}/dav/"), WebDavBackend),
        (spec("s3", "s3://bucket/docs", endpoint="http://127.0.0.1:9", region="eu-west-1"), S3Backend),
    ]
    for source, kind in cases:
        backend = open_backend(source, paths, LOOPBACK, max_items=5)
        assert isinstance(backend, kind)
        backend.close()
    web.pages["/a.md"] = Page(b"# a", {"ETag": '"a"'})
    page = open_backend(spec("http", f"{web.url}/a.md"), paths, LOOPBACK, max_items=5)
    assert [e.revision for e in scan_all(page)] == ['"a"']
    with pytest.raises(InvalidArgument):
        open_backend(spec("webdav", "ftp://host/x"), paths, LOOPBACK, max_items=5)


def stops_after(calls: int) -> Checkpoint:
    """A checkpoint that lets `calls` requests or items through, then stops the scan."""
    seen = [0]

    def checkpoint() -> None:
        seen[0] += 1
        if seen[0] > calls:
            raise ScanStopped("source 's' was paused during its scan")

    return checkpoint


def stopped_scan(backend: Any) -> list[str]:
    """The names a scan yielded before it stopped; it must stop."""
    names: list[str] = []
    with pytest.raises(ScanStopped, match="paused during its scan"):
        for item in backend.scan({}, EVERYTHING):
            names.append(item.name)
    backend.close()
    return names


def test_a_scan_stops_at_its_next_request_or_item(tmp_path: Path, web: Web, dav_folder: Path) -> None:
    """A paused or removed source's scan (the checkpoint raises) ends before its next request,
    file or listing page, and a page it stops is not taken for a failed item."""
    web.pages["/sitemap.xml"] = Page(urlset(*(f"{web.url}/p{i}.html" for i in range(4))))
    for i in range(4):
        web.pages[f"/p{i}.html"] = Page(b"<p>page</p>", {"Content-Type": "text/html"})
    sitemap = SitemapBackend(f"{web.url}/sitemap.xml", fetcher_for(LOOPBACK), 10, stops_after(2))
    assert stopped_scan(sitemap) == ["p0.html"]  # the sitemap, one page, then no request
    assert [path for _, path, _ in web.requests] == ["/sitemap.xml", "/p0.html"]

    with webdav_server(dav_folder) as url:  # the top folder listed, its subfolders not
        dav = WebDavBackend(dav_url(url), fetcher_for(LOOPBACK), 10, checkpoint=stops_after(1))
        assert stopped_scan(dav) == ["readme.md"]

    folder = tmp_path / "files"
    folder.mkdir()
    for i in range(5):
        (folder / f"{i}.md").write_text("text")
    paths = PathGuard([tmp_path])
    assert stopped_scan(FolderBackend(str(folder), paths, 10, stops_after(2))) == ["0.md", "1.md"]

    s3 = SourceConfig(name="s", kind="s3", url="s3://bucket/docs", endpoint="http://127.0.0.1:9")
    assert stopped_scan(open_backend(s3, paths, LOOPBACK, 5, stops_after(0))) == []  # no listing call


def test_fetcher_sends_only_what_it_allows(web: Web) -> None:
    web.pages["/x"] = Page(b"<D:multistatus xmlns:D='DAV:'/>", status=207)
    with fetcher_for(LOOPBACK) as fetcher:
        page = fetcher.fetch(f"{web.url}/x", method="PROPFIND", headers={"Depth": "1"}, content=b"<a/>")
        assert page.status == 207 and web.requests[-1][:2] == ("PROPFIND", "/x")
        assert web.requests[-1][2]["depth"] == "1" and web.requests[-1][2]["content-length"] == "4"
        with pytest.raises(ValueError, match="method"):
            fetcher.fetch(f"{web.url}/x", method="DELETE")
        with pytest.raises(ValueError, match="headers"):
            fetcher.fetch(f"{web.url}/x", headers={"Host": "evil"})
        with pytest.raises(ValueError, match="line break"):
            fetcher.fetch(f"{web.url}/x", headers={"Depth": "1\r\nX-Evil: 1"})
