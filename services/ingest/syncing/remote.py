"""Sources on other machines: one page or file by URL (http), the pages a sitemap lists (sitemap), the
objects under an S3 prefix (s3, services/ingest/syncing/s3.py) and a WebDAV folder, walked (webdav);
and `open_backend`, which picks a source's backend by its kind.

What comes back from these servers is treated as hostile. Every HTTP request goes through the guarded
fetcher (ragstack.guard.urls: internal addresses refused unless `ingest.fetch_allow` lets them
through, redirects checked hop by hop, bodies capped), S3's too. XML is parsed by defusedxml (no
entity expansion, no external references); listings stop at `ingest.source_max_items`; links off the
source's site or outside its folder are ignored. Sources are recorded without userinfo and with secret
parameters masked; the URL's credentials go to its own origin only, and S3 credentials come from the
service's environment only.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit
from xml.etree.ElementTree import Element

from ragstack.config import SourceConfig
from ragstack.errors import InvalidArgument
from ragstack.guard.paths import PathGuard
from ragstack.guard.urls import DEFAULT_PORTS, ETAG, Fetched, Fetcher, FetchError, shown_url
from ragstack.redact import strip_userinfo
from services.ingest.crawler import CrawlLimits, fetcher_for
from services.ingest.syncing.backends import (
    Backend,
    Checkpoint,
    Entry,
    Failed,
    FolderBackend,
    ReadFailed,
    ScanError,
    no_checkpoint,
)
from services.ingest.syncing.listing_xml import children, clean_name, local_name, parse_xml, text_of
from services.ingest.syncing.s3 import MAX_ITEMS_KEY, S3Backend

SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # a sitemap uncompressed: the sitemap protocol's own limit
DAV_MAX_DEPTH = 20  # folders below a WebDAV source's folder
_MAX_VALIDATOR = 256  # longer ETag or Last-Modified values are not kept as revisions
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

Origin = tuple[str, str, int]


_FAILURES = (FetchError, InvalidArgument, ReadFailed)  # one request that failed, whatever the cause


# --- URLs ------------------------------------------------------------------------------------------


def _web_url(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the URL without userinfo or fragment, the basic-auth credentials its userinfo carried)."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise InvalidArgument(f"not a valid URL: {shown_url(url)}") from None
    if parts.scheme.lower() not in DEFAULT_PORTS or not parts.hostname:
        raise InvalidArgument(f"not an http(s) URL: {shown_url(url)}")
    auth = None if parts.username is None else (unquote(parts.username), unquote(parts.password or ""))
    return strip_userinfo(urldefrag(url.strip())[0]), auth


def _origin(url: str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL; None for anything else."""
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if scheme not in DEFAULT_PORTS or not host:
        return None
    return scheme, host, port or DEFAULT_PORTS[scheme]


def _page_name(path: str) -> str:
    """A page's path relative to its site's root; a folder's page (`/`, `/docs/`) is its index.html."""
    name = unquote(path).lstrip("/")
    return name + "index.html" if name == "" or name.endswith("/") else name


# --- conditional GETs ------------------------------------------------------------------------------


def _is_http_date(text: str) -> bool:
    try:
        parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return False
    return True


def _validators(known: str | None) -> dict[str, str]:
    """The conditional header a known revision allows: an ETag is asked about with If-None-Match, an
    HTTP date with If-Modified-Since; a content hash (or nothing) cannot be asked about."""
    if not known:
        return {}
    if ETAG.fullmatch(known):
        return {"If-None-Match": known}
    if _is_http_date(known):
        return {"If-Modified-Since": known}
    return {}


def _revision(page: Fetched) -> str:
    """The ETag, else Last-Modified, else a hash of the body (a server that gives no validator is
    asked unconditionally, and its page compared by content)."""
    for header in ("etag", "last-modified"):
        value = page.headers.get(header, "").strip()
        if 0 < len(value) <= _MAX_VALIDATOR:
            return value
    return "sha256:" + hashlib.sha256(page.content).hexdigest()


def _kind(page: Fetched) -> str:
    return "html" if page.content_type in _HTML_TYPES else ""


class Gone(ReadFailed):
    """The URL answered 404 or 410: what it held is gone."""


def _expect(page: Fetched, status: int, url: str, what: str = "") -> None:
    if page.status in (404, 410) and status == 200:
        raise Gone(f"{shown_url(url)} answered HTTP {page.status}{what}")
    if page.status != status:
        hint = "; check the user and password in the source's URL" if page.status in (401, 403) else ""
        raise ReadFailed(f"{shown_url(url)} answered HTTP {page.status}{what}{hint}")


class _Site:
    """Requests through one guarded fetcher for a source at `url`. Its userinfo is sent as basic auth
    to its own origin only: a redirect, a sitemap or a listing pointing elsewhere gets none. Every
    request passes the scan's checkpoint first."""

    def __init__(self, url: str, fetcher: Fetcher, checkpoint: Checkpoint) -> None:
        self.url, self._auth = _web_url(url)
        self.origin = _origin(self.url)
        self._fetcher = fetcher
        self._checkpoint = checkpoint

    def fetch(self, url: str, **request: Any) -> Fetched:
        self._checkpoint()
        auth = self._auth if _origin(url) == self.origin else None
        return self._fetcher.fetch(url, auth=auth, **request)

    def body(self, url: str) -> bytes:
        page = self.fetch(url)
        _expect(page, 200, url)
        return page.content

    def entry(self, url: str, name: str, known: str | None) -> Entry:
        """One conditional GET: a 304 gives the known revision (read only if asked, by a new GET); a
        200 the page, read already. Raises one of _FAILURES for a failure or another status."""
        source = shown_url(url)
        ask = _validators(known)
        page = self.fetch(url, headers=ask)
        if page.status == 304 and known and ask:
            return Entry(source, name, known, -1, lambda: self.body(url), _kind(page))
        _expect(page, 200, url)
        body = page.content
        return Entry(source, name, _revision(page), len(body), lambda: body, _kind(page))

    def close(self) -> None:
        self._fetcher.close()


# --- one page --------------------------------------------------------------------------------------


class HttpBackend:
    """One page or file at an http(s) URL: one conditional GET per scan. The backend owns `fetcher`
    and closes it. 404 and 410 say the page is gone (an empty listing: pruned, or kept, as the source's
    delete policy says); another failure (unreachable, refused, any other status but 200 and 304) is
    the source failing: ScanError."""

    def __init__(self, url: str, fetcher: Fetcher, checkpoint: Checkpoint = no_checkpoint) -> None:
        self._site = _Site(url, fetcher, checkpoint)
        self._source = shown_url(self._site.url)
        self._name = unquote(urlsplit(self._site.url).path).rsplit("/", 1)[-1] or "index.html"

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        if not wanted(self._name):
            return
        try:
            entry = self._site.entry(self._site.url, self._name, known.get(self._source))
        except Gone:
            return  # listed as empty: the delete policy says whether its document goes
        except _FAILURES as err:
            raise ScanError(str(err)) from None
        yield entry

    def close(self) -> None:
        self._site.close()


# --- sitemaps --------------------------------------------------------------------------------------


def _gunzip(data: bytes, what: str) -> bytes:
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, SITEMAP_MAX_BYTES + 1)
    except zlib.error:
        raise ScanError(f"{what} is not valid gzip") from None
    if len(out) > SITEMAP_MAX_BYTES or inflate.unconsumed_tail:
        raise ScanError(
            f"{what} is larger than {SITEMAP_MAX_BYTES // (1024 * 1024)} MiB uncompressed "
            "(the sitemap protocol's limit)"
        )
    return out


class SitemapBackend:
    """The pages a sitemap lists (or the sitemaps a sitemap index lists, one level), on the sitemap's
    own site (scheme, host and port; others are skipped): one conditional GET per wanted page. A page
    that fails is a `Failed` item; a sitemap that fails is the source failing. Names are the pages'
    paths relative to the site's root. The backend owns `fetcher` and closes it."""

    def __init__(
        self, url: str, fetcher: Fetcher, max_items: int, checkpoint: Checkpoint = no_checkpoint
    ) -> None:
        self._site = _Site(url, fetcher, checkpoint)
        self._max_items = max_items

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        for url, name in self._listing(wanted):
            source = shown_url(url)
            try:
                yield self._site.entry(url, name, known.get(source))
            except _FAILURES as err:
                yield Failed(source, name, str(err))

    def close(self) -> None:
        self._site.close()

    def _listing(self, wanted: Callable[[str], bool]) -> list[tuple[str, str]]:
        """(URL, name) of every wanted page, each once, in the sitemaps' order; read in full before
        any page is asked for, so that a listing over the limit costs no page."""
        pages: dict[str, tuple[str, str]] = {}  # by source: URLs that differ in masked secrets only
        for urlset, origin in self._urlsets():
            for loc in children(urlset, "url"):
                url = strip_userinfo(urldefrag(text_of(loc, "loc"))[0])
                if _origin(url) != origin:
                    continue  # another site's page: a sitemap speaks for its own site only
                name = _page_name(urlsplit(url).path)
                if wanted(name) and shown_url(url) not in pages:
                    pages[shown_url(url)] = (url, name)
                    self._check_count(len(pages), "pages")
        return list(pages.values())

    def _urlsets(self) -> Iterator[tuple[Element, Origin | None]]:
        """Each <urlset> with the site its pages must be on: the sitemap's own, or those its index
        lists on the same site, read one at a time."""
        root, origin = self._sitemap(self._site.url)
        if local_name(root.tag) == "urlset":
            yield root, origin
            return
        listed: dict[str, None] = {}
        for entry in children(root, "sitemap"):
            url = strip_userinfo(urldefrag(text_of(entry, "loc"))[0])
            if _origin(url) == origin:
                listed[url] = None
                self._check_count(len(listed), "sitemaps")
        for url in listed:
            child, _ = self._sitemap(url)
            if local_name(child.tag) != "urlset":
                raise ScanError(
                    f"sitemap {shown_url(url)} is not a <urlset>: a sitemap index is read one level deep"
                )
            yield child, origin

    def _sitemap(self, url: str) -> tuple[Element, Origin | None]:
        """The root element of a sitemap or index (gzip'ed or not) and the site it was found on."""
        what = f"sitemap {shown_url(url)}"
        try:
            page = self._site.fetch(url)
            _expect(page, 200, url)
        except _FAILURES as err:
            raise ScanError(f"a sitemap could not be read: {err}") from None
        data = _gunzip(page.content, what) if page.content[:2] == b"\x1f\x8b" else page.content
        root = parse_xml(data, what)
        if local_name(root.tag) not in ("urlset", "sitemapindex"):
            raise ScanError(f"{what} is not a sitemap (its root element is <{local_name(root.tag)[:40]}>)")
        return root, _origin(page.url)

    def _check_count(self, count: int, what: str) -> None:
        if count > self._max_items:
            raise ScanError(
                f"sitemap {shown_url(self._site.url)} lists more than {self._max_items} {what} "
                f"({MAX_ITEMS_KEY})"
            )


# --- WebDAV ----------------------------------------------------------------------------------------

_PROPFIND = (
    b'<?xml version="1.0" encoding="utf-8"?><propfind xmlns="DAV:"><prop>'
    b"<resourcetype/><getetag/><getlastmodified/><getcontentlength/></prop></propfind>"
)
_PROPFIND_HEADERS = {"Depth": "1", "Content-Type": 'application/xml; charset="utf-8"'}


@dataclass(frozen=True)
class _DavItem:
    url: str  # absolute, without userinfo; a folder's ends with "/"
    path: str  # the URL's path, percent-decoded
    folder: bool
    revision: str  # getetag, else getlastmodified ("" when the server gives neither)
    size: int


def _found_props(response: Element) -> dict[str, Element]:
    """The properties a <response> gives with status 200 (those it lacks come in other propstats)."""
    props: dict[str, Element] = {}
    for propstat in children(response, "propstat"):
        status = text_of(propstat, "status").split()
        if len(status) > 1 and status[1] == "200":
            for prop in children(propstat, "prop"):
                props.update((local_name(p.tag), p) for p in prop)
    return props


def _dav_item(response: Element, base: str) -> _DavItem | None:
    href = text_of(response, "href")
    if not href:
        return None
    try:
        url = strip_userinfo(urldefrag(urljoin(base, href))[0])
        path = unquote(urlsplit(url).path)
    except ValueError:
        return None
    props = _found_props(response)
    kind = props.get("resourcetype")
    folder = kind is not None and bool(children(kind, "collection"))
    if folder and not path.endswith("/"):
        url, path = url + "/", path + "/"
    size = (props["getcontentlength"].text or "").strip() if "getcontentlength" in props else ""
    revision = (props["getetag"].text or "").strip() if "getetag" in props else ""
    if not revision and "getlastmodified" in props:
        revision = (props["getlastmodified"].text or "").strip()
    return _DavItem(url, path, folder, revision[:_MAX_VALIDATOR], int(size) if size.isdigit() else -1)


class WebDavBackend:
    """The files of a WebDAV folder and of its folders (at most DAV_MAX_DEPTH deep), walked breadth
    first with one PROPFIND (Depth: 1) per folder: revision = getetag, else getlastmodified; size =
    getcontentlength. Entries outside the folder or on another origin are ignored, and so are hidden
    ones. A folder that cannot be listed is the source failing. The backend owns `fetcher`."""

    def __init__(
        self,
        url: str,
        fetcher: Fetcher,
        max_items: int,
        max_depth: int = DAV_MAX_DEPTH,
        checkpoint: Checkpoint = no_checkpoint,
    ) -> None:
        self._site = _Site(url, fetcher, checkpoint)
        if urlsplit(self._site.url).query:
            raise InvalidArgument(f"a WebDAV folder's URL has no query: {shown_url(self._site.url)}")
        self._start = self._site.url if self._site.url.endswith("/") else self._site.url + "/"
        self._max_items = max_items
        self._max_depth = max_depth

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        files = 0
        for item, name in self._walk():
            if wanted(name):
                files += 1
                if files > self._max_items:
                    raise ScanError(
                        f"{shown_url(self._start)} holds more than {self._max_items} files ({MAX_ITEMS_KEY})"
                    )
                yield self._entry(item, name)

    def _walk(self) -> Iterator[tuple[_DavItem, str]]:
        """Every file under the folder with its name, breadth first, one folder listed at a time."""
        root, items = self._list(self._start)  # where the server answered: redirects followed
        top, origin = unquote(urlsplit(root).path), _origin(root)
        folders, queue, depth = {top}, deque[tuple[str, int]](), 0
        while True:
            for item in items:
                name = item.path[len(top) :]
                if _origin(item.url) != origin or not item.path.startswith(top) or not clean_name(name):
                    continue  # outside the folder, on another server, or hidden
                if not item.folder:
                    yield item, name
                elif item.path not in folders:  # not the folder itself, nor one seen already
                    folders.add(item.path)
                    self._check_folder(len(folders) - 1, depth + 1, root)  # below the top one
                    queue.append((item.url, depth + 1))
            if not queue:
                return
            url, depth = queue.popleft()
            items = self._list(url)[1]

    def close(self) -> None:
        self._site.close()

    def _list(self, folder: str) -> tuple[str, list[_DavItem]]:
        """(where the folder was found, its members as the server lists them, in name order)."""
        try:
            page = self._site.fetch(folder, method="PROPFIND", headers=_PROPFIND_HEADERS, content=_PROPFIND)
            _expect(page, 207, folder, " to PROPFIND")
        except _FAILURES as err:
            raise ScanError(f"a WebDAV folder could not be listed: {err}") from None
        where = page.url if page.url.endswith("/") else page.url + "/"
        listing = parse_xml(page.content, f"the listing of {shown_url(folder)}")
        items = [_dav_item(r, where) for r in children(listing, "response")]
        return where, sorted((i for i in items if i is not None), key=lambda i: i.path)

    def _check_folder(self, count: int, depth: int, root: str) -> None:
        if depth > self._max_depth:
            raise ScanError(f"{shown_url(root)} nests folders more than {self._max_depth} deep")
        if count > self._max_items:
            raise ScanError(f"{shown_url(root)} holds more than {self._max_items} folders ({MAX_ITEMS_KEY})")

    def _entry(self, item: _DavItem, name: str) -> Entry:
        revision = item.revision or f"size:{item.size}"  # a server without validators: by size
        return Entry(shown_url(item.url), name, revision, item.size, lambda: self._site.body(item.url))


# --- choosing a backend ----------------------------------------------------------------------------


def open_backend(
    spec: SourceConfig,
    paths: PathGuard,
    limits: CrawlLimits,
    max_items: int,
    checkpoint: Checkpoint = no_checkpoint,
    own_buckets: frozenset[str] = frozenset(),
) -> Backend:
    """The backend for a source, by its kind, for one scan that passes `checkpoint` before each
    request or item. Remote sources, S3's included, get a fetcher with the crawler's limits
    (ingest.fetch_allow, the page cap and timeout), which the backend closes; `own_buckets`, those of
    the service's own stores, are refused as S3 sources."""
    if spec.kind == "folder":
        return FolderBackend(spec.url, paths, max_items, checkpoint)
    fetcher = fetcher_for(limits)
    try:
        if spec.kind == "s3":
            return S3Backend(
                spec.url,
                fetcher,
                endpoint=spec.endpoint,
                region=spec.region,
                max_items=max_items,
                checkpoint=checkpoint,
                own_buckets=own_buckets,
            )
        if spec.kind == "http":
            return HttpBackend(spec.url, fetcher, checkpoint)
        if spec.kind == "sitemap":
            return SitemapBackend(spec.url, fetcher, max_items, checkpoint)
        return WebDavBackend(spec.url, fetcher, max_items, checkpoint=checkpoint)
    except BaseException:
        fetcher.close()
        raise
