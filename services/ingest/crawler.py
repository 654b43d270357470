"""A polite crawler for web pages: robots.txt honoured, same host only, depth and page limits, a delay
between requests, its own user agent. Pages become source items like files (source = URL, revision =
ETag or Last-Modified); HTML is reduced to its main content by the HTML reader."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib import robotparser
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx

from ragstack.errors import InvalidArgument
from services.ingest.sources import SourceItem

USER_AGENT = "RAGStack-crawler/0.1"


@dataclass(frozen=True)
class CrawlLimits:
    max_pages: int = 50
    max_depth: int = 2
    delay_s: float = 0.5
    timeout_s: float = 10.0
    max_bytes: int = 10 * 1024 * 1024


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
    return [urldefrag(urljoin(base, href))[0] for href in parser.hrefs]


def crawl(
    start: str,
    limits: CrawlLimits = CrawlLimits(),
    client: httpx.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[SourceItem], list[tuple[str, str]]]:
    """Pages reachable from `start` on its host, breadth first: (items, [(url, why skipped)])."""
    origin = urlsplit(start)
    if origin.scheme not in ("http", "https") or not origin.netloc:
        raise InvalidArgument(f"not an http(s) URL: {start}")
    if client is None:
        headers = {"user-agent": USER_AGENT}
        with httpx.Client(timeout=limits.timeout_s, follow_redirects=True, headers=headers) as own:
            return crawl(start, limits, own, sleep)
    http = client
    robots = _robots(http, f"{origin.scheme}://{origin.netloc}/robots.txt")
    items: list[SourceItem] = []
    skipped: list[tuple[str, str]] = []
    queue = [(start, 0)]
    seen = {start}
    while queue and len(items) < limits.max_pages:
        url, depth = queue.pop(0)
        if not robots.can_fetch(USER_AGENT, url):
            skipped.append((url, "disallowed by robots.txt"))
            continue
        if items:
            sleep(limits.delay_s)
        try:
            resp = http.get(url)
        except httpx.HTTPError as err:
            skipped.append((url, f"{type(err).__name__}: {err}"))
            continue
        if resp.status_code != 200:
            skipped.append((url, f"HTTP {resp.status_code}"))
            continue
        if len(resp.content) > limits.max_bytes:
            skipped.append((url, f"over {limits.max_bytes} bytes"))
            continue
        kind = resp.headers.get("content-type", "").split(";")[0].strip()
        if kind not in ("text/html", "application/xhtml+xml"):
            skipped.append((url, f"not HTML ({kind or 'no content type'})"))
            continue
        body = resp.content
        revision = resp.headers.get("etag") or resp.headers.get("last-modified") or ""
        items.append(SourceItem(url, revision, functools.partial(bytes, body), len(body), kind="html"))
        if depth < limits.max_depth:
            for link in links(url, resp.text):
                parts = urlsplit(link)
                if parts.netloc == origin.netloc and parts.scheme in ("http", "https") and link not in seen:
                    seen.add(link)
                    queue.append((link, depth + 1))
    return items, skipped


def _robots(http: httpx.Client, url: str) -> robotparser.RobotFileParser:
    parser = robotparser.RobotFileParser(url)
    try:
        resp = http.get(url)
        parser.parse(resp.text.splitlines() if resp.status_code == 200 else [])
    except httpx.HTTPError:
        parser.parse([])
    return parser
