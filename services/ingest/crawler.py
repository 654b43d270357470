"""A polite crawler for web pages: robots.txt honoured, same host only, depth and page limits, a delay
between requests, its own user agent, a deadline per page and per crawl. Every request goes through the
guarded fetcher (ragstack.guard.urls): internal addresses refused unless allowed, redirects checked hop
by hop, bodies capped while they are read. Pages become source items like files (source = URL without
its userinfo and with secret parameters masked, revision = ETag or Last-Modified); HTML is reduced to
its main content by the HTML reader."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib import robotparser
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

from ragstack.config import IngestConfig
from ragstack.errors import InvalidArgument
from ragstack.guard.urls import Allowlist, Fetcher, FetchError, shown_url
from ragstack.redact import strip_userinfo
from services.ingest.sources import SourceItem

USER_AGENT = "RAGStack-crawler/0.1"


@dataclass(frozen=True)
class CrawlLimits:
    max_pages: int = 50
    max_depth: int = 2
    delay_s: float = 0.5
    page_timeout_s: float = 15.0  # connect, headers and body of one page, redirects included
    crawl_timeout_s: float = 120.0  # one start URL's whole crawl
    max_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 5
    fetch_allow: tuple[str, ...] = ()  # hosts and CIDR ranges allowed although internal

    def __post_init__(self) -> None:
        Allowlist.parse(self.fetch_allow)  # a bad entry fails when the limits are built, naming the key

    @classmethod
    def from_config(cls, ingest: IngestConfig) -> CrawlLimits:
        return cls(
            max_pages=ingest.crawl_max_pages,
            max_depth=ingest.crawl_max_depth,
            delay_s=ingest.crawl_delay_s,
            page_timeout_s=ingest.crawl_page_timeout_s,
            crawl_timeout_s=ingest.crawl_timeout_s,
            max_bytes=int(ingest.crawl_max_page_mb * 1024 * 1024),
            max_redirects=ingest.crawl_max_redirects,
            fetch_allow=tuple(ingest.fetch_allow),
        )


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def links(base: str, html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    found = []
    for href in parser.hrefs:
        try:
            found.append(urldefrag(urljoin(base, href))[0])
        except ValueError:  # a malformed href ("http://[oops") is no link
            continue
    return found


def fetcher_for(limits: CrawlLimits, clock: Callable[[], float] = time.monotonic) -> Fetcher:
    """The guarded fetcher a crawl with these limits uses (`cancel` it to stop the crawl)."""
    return Fetcher(
        limits.fetch_allow,
        max_redirects=limits.max_redirects,
        max_bytes=limits.max_bytes,
        timeout_s=limits.page_timeout_s,
        user_agent=USER_AGENT,
        clock=clock,
    )


def crawl(
    start: str,
    limits: CrawlLimits = CrawlLimits(),
    fetcher: Fetcher | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[SourceItem], list[tuple[str, str]]]:
    """Pages reachable from `start` on its host, breadth first: (items, [(url, why skipped)]). URLs are
    recorded and shown without userinfo (a start URL's user and password are sent to its host as
    basic auth) and with secret parameters masked. `fetcher` must use `clock`."""
    try:
        origin = urlsplit(start)
    except ValueError:
        origin = urlsplit("")
    if origin.scheme not in ("http", "https") or not origin.hostname:
        raise InvalidArgument(f"not an http(s) URL: {shown_url(start)}")
    if fetcher is None:
        with fetcher_for(limits, clock) as own:
            return crawl(start, limits, own, sleep, clock)
    deadline = clock() + limits.crawl_timeout_s
    auth = None if origin.username is None else (unquote(origin.username), unquote(origin.password or ""))
    home = strip_userinfo(urldefrag(start)[0])
    site = _site(home)
    robots = _robots(fetcher, f"{origin.scheme}://{site}/robots.txt", auth, deadline)
    items: list[SourceItem] = []
    skipped: list[tuple[str, str]] = []
    queue = [(home, 0)]
    seen = {home}
    while queue and len(items) < limits.max_pages:
        url, depth = queue.pop(0)
        if not robots.can_fetch(USER_AGENT, url):
            skipped.append((shown_url(url), "disallowed by robots.txt"))
            continue
        if items:
            sleep(limits.delay_s)
        if clock() >= deadline:
            why = f"not fetched: the crawl used its {limits.crawl_timeout_s:g} s (ingest.crawl_timeout_s)"
            skipped.append((shown_url(url), why))
            break
        try:
            page = fetcher.fetch(url, auth=auth, deadline=deadline)
        except (FetchError, InvalidArgument) as err:
            skipped.append((shown_url(url), str(err)))
            continue
        if page.status != 200:
            skipped.append((shown_url(url), f"HTTP {page.status}"))
            continue
        kind = page.content_type
        if kind not in ("text/html", "application/xhtml+xml"):
            skipped.append((shown_url(url), f"not HTML ({kind or 'no content type'})"))
            continue
        body = page.content
        revision = page.headers.get("etag") or page.headers.get("last-modified") or ""
        # Recorded (source, citations, traces) without secret parameters: fetching again starts
        # from the URL the ingest is given, never from the stored source.
        source = shown_url(url)
        items.append(SourceItem(source, revision, functools.partial(bytes, body), len(body), kind="html"))
        if depth < limits.max_depth:
            for found in links(page.url, page.text):
                link = strip_userinfo(found)
                if _site(link) == site and link not in seen:
                    seen.add(link)
                    queue.append((link, depth + 1))
    return items, skipped


def _site(url: str) -> str:
    """host[:port] of an http(s) URL, without userinfo, lower case ("" for other URLs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return parts.netloc.rsplit("@", 1)[-1].lower() if parts.scheme in ("http", "https") else ""


def _robots(
    fetcher: Fetcher, url: str, auth: tuple[str, str] | None, deadline: float
) -> robotparser.RobotFileParser:
    parser = robotparser.RobotFileParser(url)
    try:
        page = fetcher.fetch(url, auth=auth, deadline=deadline)
        parser.parse(page.text.splitlines() if page.status == 200 else [])
    except (FetchError, InvalidArgument):
        parser.parse([])
    return parser
