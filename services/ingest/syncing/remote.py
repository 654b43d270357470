"""Sources on other machines: one page or file by URL (http), the pages a sitemap lists (sitemap), the
objects under an S3 prefix (s3) and a WebDAV folder, walked (webdav); and `open_backend`, which picks
a source's backend by its kind.

What comes back from these servers is treated as hostile. Every HTTP request goes through the guarded
fetcher (ragstack.guard.urls: internal addresses refused unless `ingest.fetch_allow` lets them
through, redirects checked hop by hop, bodies capped); an S3 endpoint's host passes the same rule
before the store is spoken to. XML is parsed by defusedxml (no entity expansion, no external
references); listings stop at `ingest.source_max_items`; links off the source's site or outside its
folder are ignored. Sources are recorded without userinfo and with secret parameters masked; the URL's
credentials go to its own origin only, and S3 credentials come from the service's environment only.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urldefrag, urljoin, urlsplit
from xml.etree.ElementTree import Element, ParseError

import defusedxml.ElementTree as safe_xml
import obstore
from defusedxml import DefusedXmlException, EntitiesForbidden
from obstore.exceptions import (
    BaseError,
    InvalidPathError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from ragstack.config import SourceConfig
from ragstack.errors import InvalidArgument
from ragstack.guard.paths import PathGuard
from ragstack.guard.urls import (
    Allowlist,
    Fetched,
    Fetcher,
    FetchError,
    FetchRefused,
    Resolver,
    resolve_checked,
    shown_url,
    system_resolver,
)
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

if TYPE_CHECKING:
    from obstore import ObjectMeta
    from obstore.store import ClientConfig, RetryConfig, S3Config

MAX_ITEMS_KEY = "ingest.source_max_items"
SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # a sitemap uncompressed: the sitemap protocol's own limit
DAV_MAX_DEPTH = 20  # folders below a WebDAV source's folder
_MAX_VALIDATOR = 256  # longer ETag or Last-Modified values are not kept as revisions
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_ETAG = re.compile(r'(W/)?"[^"\r\n]*"')
_DEFAULT_PORTS = {"http": 80, "https": 443}

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
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
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
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


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
    if _ETAG.fullmatch(known):
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


# --- XML -------------------------------------------------------------------------------------------


def _parse_xml(data: bytes, what: str) -> Element:
    try:
        root: Element = safe_xml.fromstring(data)
    except EntitiesForbidden:
        raise ScanError(f"{what} declares XML entities: refused (no entity expansion)") from None
    except DefusedXmlException:
        raise ScanError(f"{what} refers to an external DTD or entity: refused") from None
    except ParseError as err:
        raise ScanError(f"{what} is not well-formed XML ({err})") from None
    return root


def _local(tag: str) -> str:
    """An element's name without its namespace: servers differ in prefixes and namespaces."""
    return tag.rsplit("}", 1)[-1]


def _children(element: Element, name: str) -> list[Element]:
    return [child for child in element if _local(child.tag) == name]


def _text(element: Element | None, name: str) -> str:
    """The text of `element`'s first child called `name`, stripped ("" when there is none)."""
    found = None if element is None else next(iter(_children(element, name)), None)
    return (found.text or "").strip() if found is not None else ""


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
            for loc in _children(urlset, "url"):
                url = strip_userinfo(urldefrag(_text(loc, "loc"))[0])
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
        if _local(root.tag) == "urlset":
            yield root, origin
            return
        children: dict[str, None] = {}
        for entry in _children(root, "sitemap"):
            url = strip_userinfo(urldefrag(_text(entry, "loc"))[0])
            if _origin(url) == origin:
                children[url] = None
                self._check_count(len(children), "sitemaps")
        for url in children:
            child, _ = self._sitemap(url)
            if _local(child.tag) != "urlset":
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
        root = _parse_xml(data, what)
        if _local(root.tag) not in ("urlset", "sitemapindex"):
            raise ScanError(f"{what} is not a sitemap (its root element is <{_local(root.tag)[:40]}>)")
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
    for propstat in _children(response, "propstat"):
        status = _text(propstat, "status").split()
        if len(status) > 1 and status[1] == "200":
            for prop in _children(propstat, "prop"):
                props.update((_local(p.tag), p) for p in prop)
    return props


def _dav_item(response: Element, base: str) -> _DavItem | None:
    href = _text(response, "href")
    if not href:
        return None
    try:
        url = strip_userinfo(urldefrag(urljoin(base, href))[0])
        path = unquote(urlsplit(url).path)
    except ValueError:
        return None
    props = _found_props(response)
    kind = props.get("resourcetype")
    folder = kind is not None and bool(_children(kind, "collection"))
    if folder and not path.endswith("/"):
        url, path = url + "/", path + "/"
    size = (props["getcontentlength"].text or "").strip() if "getcontentlength" in props else ""
    revision = (props["getetag"].text or "").strip() if "getetag" in props else ""
    if not revision and "getlastmodified" in props:
        revision = (props["getlastmodified"].text or "").strip()
    return _DavItem(url, path, folder, revision[:_MAX_VALIDATOR], int(size) if size.isdigit() else -1)


def _clean(rel: str) -> bool:
    """A relative path with no empty, dot or hidden segment (those of a hostile or odd listing, and the
    hidden files a folder source skips too)."""
    return all(part and not part.startswith(".") for part in rel.rstrip("/").split("/"))


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
                if _origin(item.url) != origin or not item.path.startswith(top) or not _clean(name):
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
        listing = _parse_xml(page.content, f"the listing of {shown_url(folder)}")
        items = [_dav_item(r, where) for r in _children(listing, "response")]
        return where, sorted((i for i in items if i is not None), key=lambda i: i.path)

    def _check_folder(self, count: int, depth: int, root: str) -> None:
        if depth > self._max_depth:
            raise ScanError(f"{shown_url(root)} nests folders more than {self._max_depth} deep")
        if count > self._max_items:
            raise ScanError(f"{shown_url(root)} holds more than {self._max_items} folders ({MAX_ITEMS_KEY})")

    def _entry(self, item: _DavItem, name: str) -> Entry:
        revision = item.revision or f"size:{item.size}"  # a server without validators: by size
        return Entry(shown_url(item.url), name, revision, item.size, lambda: self._site.body(item.url))


# --- S3 --------------------------------------------------------------------------------------------

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # it names the AWS host: nothing else may get in
_S3_STATUS = re.compile(r"status code: (\d{3})")
_S3_CODE = re.compile(r"<Code>([A-Za-z]{1,64})</Code>")
_S3_KEY = re.compile(r'Path "([^"\n]{1,200})"')
_CREDENTIALS = "credentials come from the ingest service's environment (AWS_ACCESS_KEY_ID, ...)"
# What obstore raises: its own errors, and built-in ones for a missing object or a bad path.
_OBSTORE_ERRORS = (BaseError, FileNotFoundError, ValueError)


def _s3_location(url: str) -> tuple[str, str]:
    """(bucket, prefix without slashes at either end) of s3://bucket/prefix."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        raise InvalidArgument("an s3 source's URL is s3://bucket/prefix") from None
    if parts.scheme.lower() != "s3":
        raise InvalidArgument("an s3 source's URL is s3://bucket/prefix")
    if "@" in parts.netloc:
        raise InvalidArgument(f"an s3 URL carries no credentials: {_CREDENTIALS}")
    if not _BUCKET.fullmatch(parts.netloc):
        raise InvalidArgument(f"not a valid S3 bucket name: {parts.netloc[:80]!r}")
    prefix = parts.path.strip("/")
    if parts.query or parts.fragment or (prefix and any(s in ("", ".", "..") for s in prefix.split("/"))):
        raise InvalidArgument(
            "an s3 source's prefix is a plain key prefix (no query, no empty or dot segments)"
        )
    return parts.netloc, prefix


def _s3_endpoint(endpoint: str | None) -> str | None:
    """An S3-compatible server's endpoint: http(s)://host[:port], nothing more."""
    if not endpoint:
        return None
    try:
        parts = urlsplit(endpoint.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise InvalidArgument(f"not a valid S3 endpoint: {shown_url(endpoint)}") from None
    plain = parts.scheme.lower() in _DEFAULT_PORTS and parts.hostname and parts.path in ("", "/")
    if not plain or "@" in parts.netloc or parts.query or parts.fragment:
        raise InvalidArgument(f"an S3 endpoint is http(s)://host[:port]: {shown_url(endpoint)}")
    return f"{parts.scheme.lower()}://{parts.netloc}"


def _s3_reason(err: Exception) -> str:
    """What went wrong, in a few words: obstore's own messages carry the server's body and URLs."""
    text = str(err)
    if isinstance(err, FileNotFoundError):
        return "not found"
    if isinstance(err, PermissionDeniedError | UnauthenticatedError):
        return f"access denied; {_CREDENTIALS}"
    if isinstance(err, InvalidPathError | ValueError):
        # obstore stops the whole listing at a key with an empty, "." or ".." segment
        key = _S3_KEY.search(text)
        return (
            f"the key {key.group(1)!r} has an empty, '.' or '..' segment"
            if key
            else "a key is not a plain path"
        )
    status, code = _S3_STATUS.search(text), _S3_CODE.search(text)
    if status is None:
        return "unreachable, refused, timed out or not an S3 server"
    said = f"HTTP {status.group(1)}" + (f" ({code.group(1)})" if code else "")
    return f"{said}; {_CREDENTIALS}" if status.group(1) in ("401", "403") else said


class S3Backend:
    """The objects under s3://bucket/prefix (or on an S3-compatible server at `endpoint`), listed with
    obstore: revision = ETag (else the modification time), name = the key relative to the prefix;
    keys with hidden or dot segments are skipped. Credentials come from the environment only. The
    endpoint's host passes the fetcher's address rule (`allow`: ingest.fetch_allow) before every
    listing and read. `read` asks for the listed ETag (If-Match) and stops past the listed size."""

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        max_items: int,
        allow: Allowlist | tuple[str, ...] = (),
        timeout_s: float = 15.0,
        resolver: Resolver = system_resolver,
        checkpoint: Checkpoint = no_checkpoint,
    ) -> None:
        self._bucket, self._prefix = _s3_location(url)
        self._endpoint = _s3_endpoint(endpoint)
        if region is not None and not _REGION.fullmatch(region):
            raise InvalidArgument(f"not a valid S3 region: {region[:80]!r}")
        self._region = region
        self._allow = allow if isinstance(allow, Allowlist) else Allowlist.parse(allow)
        self._max_items = max_items
        self._timeout_s = timeout_s
        self._resolver = resolver
        self._checkpoint = checkpoint
        self._store: S3Store | None = None

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry | Failed]:
        store = self._open()
        where = f"s3://{self._bucket}/{self._prefix}"
        count = 0
        try:
            pages = 0
            self._checkpoint()
            for batch in obstore.list(store, self._prefix or None, chunk_size=1000):
                # Keys are counted below; pages too, for a server that answers pages of nothing
                # (or of the same keys) with a fresh continuation token forever.
                pages += 1
                if pages > self._max_items // 1000 + 2:
                    raise ScanError(
                        f"{where}: the listing goes on past {self._max_items} objects ({MAX_ITEMS_KEY})"
                    )
                for meta in batch:
                    entry = self._entry(meta)
                    if entry is None or not wanted(entry.name):
                        continue
                    count += 1
                    if count > self._max_items:
                        raise ScanError(
                            f"{where} holds more than {self._max_items} objects ({MAX_ITEMS_KEY})"
                        )
                    yield entry
                self._checkpoint()  # before the next page is asked for
        except _OBSTORE_ERRORS as err:
            raise ScanError(f"could not list {where}: {_s3_reason(err)}") from None

    def close(self) -> None:
        self._store = None

    def _entry(self, meta: ObjectMeta) -> Entry | None:
        key, size = meta["path"], meta["size"]
        name = key[len(self._prefix) + 1 :] if self._prefix else key
        # A folder marker ("docs/") comes back as "docs", size 0, and reads as missing; an empty
        # object holds nothing to index either.
        if not name or not _clean(name) or size == 0:
            return None
        etag = meta["e_tag"] or ""
        revision = etag or meta["last_modified"].isoformat()
        return Entry(f"s3://{self._bucket}/{key}", name, revision, size, lambda: self._read(key, etag, size))

    def _open(self) -> S3Store:
        """The store, once its endpoint's host is allowed (checked again every time: DNS may change)."""
        if self._endpoint is not None:
            host = urlsplit(self._endpoint).hostname or ""
            try:
                resolve_checked(host, self._allow, self._resolver)
            except FetchRefused as err:
                raise ScanError(f"S3 endpoint {self._endpoint}: {err}") from None
            except (OSError, UnicodeError, ValueError):
                raise ScanError(f"S3 endpoint {self._endpoint}: its host does not resolve") from None
        if self._store is None:
            try:
                self._store = S3Store(
                    self._bucket,
                    config=self._config(),
                    client_options=self._client(),
                    retry_config=self._retry(),
                )
            except _OBSTORE_ERRORS as err:
                raise ScanError(f"could not set up S3 for s3://{self._bucket}: {_s3_reason(err)}") from None
        return self._store

    def _config(self) -> S3Config:
        config: S3Config = {}
        if self._region:
            config["region"] = self._region
        if self._endpoint is not None:
            # Path-style requests to the checked host; the environment's endpoint must not win.
            config["endpoint"] = self._endpoint
            config["aws_endpoint_url_s3"] = self._endpoint
            config["virtual_hosted_style_request"] = False
        return config

    def _client(self) -> ClientConfig:
        # A stalled connection fails within timeout_s; a whole request (a large object's body) within
        # ten times that.
        step = timedelta(seconds=self._timeout_s)
        return {
            "allow_http": bool(self._endpoint and self._endpoint.startswith("http://")),
            "connect_timeout": step,
            "read_timeout": step,
            "timeout": 10 * step,
        }

    def _retry(self) -> RetryConfig:
        return {"max_retries": 2, "retry_timeout": timedelta(seconds=2 * self._timeout_s)}

    def _read(self, key: str, etag: str, size: int) -> bytes:
        where = f"s3://{self._bucket}/{key}"
        try:
            store = self._open()
        except ScanError as err:
            raise ReadFailed(str(err)) from None
        try:
            result = obstore.get(store, key, options={"if_match": etag} if etag else None)
            return _capped(result.stream(min_chunk_size=1 << 20), size, where)
        except PreconditionError:
            raise ReadFailed(f"{where} changed since it was listed; the next poll lists it again") from None
        except FileNotFoundError:
            raise ReadFailed(f"{where} is gone since it was listed") from None
        except _OBSTORE_ERRORS as err:
            raise ReadFailed(f"could not read {where}: {_s3_reason(err)}") from None


def _capped(chunks: Iterator[Any], size: int, where: str) -> bytes:
    """The body, refused once it grows past the size the listing gave."""
    out: list[bytes] = []
    total = 0
    for chunk in chunks:
        out.append(bytes(chunk))
        total += len(out[-1])
        if total > size:
            raise ReadFailed(
                f"{where} grew past the {size} bytes it was listed with; the next poll lists it again"
            )
    return b"".join(out)


# --- choosing a backend ----------------------------------------------------------------------------


def open_backend(
    spec: SourceConfig,
    paths: PathGuard,
    limits: CrawlLimits,
    max_items: int,
    checkpoint: Checkpoint = no_checkpoint,
) -> Backend:
    """The backend for a source, by its kind, for one scan that passes `checkpoint` before each
    request or item. Web sources get a fetcher with the crawler's limits (ingest.fetch_allow, the page
    cap and timeout), which the backend closes; an S3 endpoint is checked against ingest.fetch_allow
    too."""
    if spec.kind == "folder":
        return FolderBackend(spec.url, paths, max_items, checkpoint)
    if spec.kind == "s3":
        return S3Backend(
            spec.url,
            endpoint=spec.endpoint,
            region=spec.region,
            max_items=max_items,
            allow=limits.fetch_allow,
            timeout_s=limits.page_timeout_s,
            checkpoint=checkpoint,
        )
    fetcher = fetcher_for(limits)
    try:
        if spec.kind == "http":
            return HttpBackend(spec.url, fetcher, checkpoint)
        if spec.kind == "sitemap":
            return SitemapBackend(spec.url, fetcher, max_items, checkpoint)
        return WebDavBackend(spec.url, fetcher, max_items, checkpoint=checkpoint)
    except BaseException:
        fetcher.close()
        raise
