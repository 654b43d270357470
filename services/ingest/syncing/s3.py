"""S3 sources: the objects under s3://bucket/prefix, on AWS or an S3-compatible server, listed and
read through the guarded fetcher (ragstack.guard.urls) like every other remote source, so the same
rules hold: the host is checked against `ingest.fetch_allow` on every request and the request goes
to the checked address, bodies are capped, each request has a deadline. Requests are signed (AWS
signature version 4, by botocore) for one URL, so no redirect is followed: an S3 server that answers
one is refused, whatever it points to. Credentials come from the ingest service's environment
(botocore's chain: AWS_ACCESS_KEY_ID and the rest, AWS_PROFILE and the shared files, a container's
or an instance's role), never from a source, and they sign only requests to AWS or to the endpoint
the environment names (AWS_ENDPOINT_URL_S3): a source's own endpoint, which whoever adds the source
chooses, gets unsigned requests (public buckets), never the service's key id or session token. The
buckets that hold the service's own stores are refused as sources.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote_plus, urlencode, urlsplit
from xml.etree.ElementTree import Element

from ragstack.errors import InvalidArgument, PermissionDenied
from ragstack.guard.urls import (
    DEFAULT_PORTS,
    ETAG,
    REDIRECTS,
    Fetched,
    Fetcher,
    FetchError,
    FetchRefused,
    FetchTooLarge,
    shown_url,
)
from services.ingest.syncing.backends import (
    Checkpoint,
    Entry,
    ReadFailed,
    ScanError,
    no_checkpoint,
)
from services.ingest.syncing.listing_xml import children, clean_name, local_name, parse_xml, text_of

MAX_ITEMS_KEY = "ingest.source_max_items"
PAGE_KEYS = 1000  # keys a listing page asks for (S3's own maximum)
# A page's XML elements: each listed object has about 12 (Key, ETag, Size, Owner and the rest).
PAGE_ELEMENTS = PAGE_KEYS * 32
LISTED_PER_ITEM = 10  # keys a listing may hold for each one a source may keep
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # it names the AWS host: nothing else may get in
_CREDENTIALS = "credentials come from the ingest service's environment (AWS_ACCESS_KEY_ID, ...)"
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_CREDENTIAL_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"})
_SIZE = re.compile(r"[0-9]{1,15}")  # bytes: S3's largest object has 13 digits
_MAX_KEY_BYTES = 1024  # S3's own limit


def s3_location(url: str) -> tuple[str, str]:
    """(bucket, prefix without slashes at either end) of s3://bucket/prefix."""
    if _unprintable(url):
        raise InvalidArgument("an s3 source's URL holds control or format characters")
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


def s3_endpoint(endpoint: str | None) -> str | None:
    """An S3-compatible server's endpoint as http(s)://host[:port], the port left out when it is the
    scheme's own (the Host header a request is signed with is written so)."""
    if not endpoint:
        return None
    try:
        parts = urlsplit(endpoint.strip())
        port = parts.port
    except ValueError:
        raise InvalidArgument(f"not a valid S3 endpoint: {shown_url(endpoint)}") from None
    scheme = parts.scheme.lower()
    plain = scheme in DEFAULT_PORTS and parts.hostname and parts.path in ("", "/")
    if not plain or "@" in parts.netloc or parts.query or parts.fragment:
        raise InvalidArgument(f"an S3 endpoint is http(s)://host[:port]: {shown_url(endpoint)}")
    host = (parts.hostname or "").lower()
    if not host.isascii():
        raise InvalidArgument(
            f"an S3 endpoint's host is written in ASCII (a name in its xn-- form): {shown_url(endpoint)}"
        )
    name = f"[{host}]" if ":" in host else host
    return f"{scheme}://{name}" + ("" if port in (None, DEFAULT_PORTS[scheme]) else f":{port}")


@functools.cache
def found_credentials() -> Any:
    """botocore's credentials, looked for once a process (None: there are none): its chain may ask an
    instance's metadata service, which a process without a role should not wait for on every request;
    what it finds there, it refreshes by itself."""
    from botocore.session import Session

    return Session().get_credentials()


_credentials_lock = threading.Lock()


def _credentials() -> Any:
    """The credentials to sign a request with now (None: send it unsigned)."""
    from botocore.exceptions import BotoCoreError

    try:
        with _credentials_lock:
            found = found_credentials()
        return None if found is None else found.get_frozen_credentials()
    except BotoCoreError as err:
        raise ScanError(f"no usable AWS credentials ({type(err).__name__}); {_CREDENTIALS}") from None


class S3Backend:
    """The objects under s3://bucket/prefix (or on an S3-compatible server at `endpoint`), listed with
    ListObjectsV2: revision = ETag (else the modification time), name = the key relative to the prefix;
    keys with empty, dot or hidden segments are skipped. Every listing page and read goes through
    `fetcher` (its address rule, body cap and deadline); the listing ends at `max_items` wanted
    keys, and at the pages ten times as many keys fill, so a server answering pages of nothing ends
    too. `read` asks for
    the listed ETag (If-Match) and stops past the listed size."""

    def __init__(
        self,
        url: str,
        fetcher: Fetcher,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        max_items: int,
        checkpoint: Checkpoint = no_checkpoint,
        own_buckets: frozenset[str] = frozenset(),
        environ: Mapping[str, str] = os.environ,
        credentials: Callable[[], Any] = _credentials,
    ) -> None:
        self._bucket, self._prefix = s3_location(url)
        if self._bucket in own_buckets:
            raise PermissionDenied(
                f"refused: s3://{self._bucket} holds this service's own stores (storage.lancedb_uri, "
                "storage.lexical_snapshots); no source may read it"
            )
        if region is not None and not _REGION.fullmatch(region):
            raise InvalidArgument(f"not a valid S3 region: {region[:80]!r}")
        trusted = _environment_endpoint(environ)
        self._endpoint = s3_endpoint(endpoint) or trusted
        # The service's credentials go to AWS or to the endpoint its environment names, only.
        self._signed = self._endpoint is None or self._endpoint == trusted
        self._region = region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        if not _REGION.fullmatch(self._region):
            raise InvalidArgument(f"not a valid S3 region: {self._region[:80]!r} (from the environment)")
        # Path-style requests: a bucket name with dots still matches the endpoint's certificate.
        self._base = f"{self._endpoint or f'https://s3.{self._region}.amazonaws.com'}/{self._bucket}"
        self._fetcher = fetcher
        self._max_items = max_items
        self._checkpoint = checkpoint
        self._credentials = credentials

    def scan(self, known: Mapping[str, str], wanted: Callable[[str], bool]) -> Iterator[Entry]:
        where = f"s3://{self._bucket}/{self._prefix}"
        count, pages, token = 0, 0, ""
        while True:
            # Wanted keys are counted below; pages too, for a server that answers pages of nothing
            # (or of the same keys) with a fresh continuation token forever. S3 cannot filter by the
            # source's globs, so the pages may list unwanted keys too: up to LISTED_PER_ITEM times
            # as many.
            pages += 1
            if pages > self._max_items * LISTED_PER_ITEM // PAGE_KEYS + 2:
                raise ScanError(
                    f"{where}: the listing goes on past {self._max_items * LISTED_PER_ITEM} keys "
                    f"({LISTED_PER_ITEM} times {MAX_ITEMS_KEY})"
                )
            self._checkpoint()
            root = self._list_page(where, token)
            items = children(root, "Contents")
            if len(items) > PAGE_KEYS:
                raise ScanError(f"the listing of {where} has a page of more than {PAGE_KEYS} keys: refused")
            encoded = text_of(root, "EncodingType").lower() == "url"
            for item in items:
                entry = self._entry(item, encoded)
                if entry is None or not wanted(entry.name):
                    continue
                count += 1
                if count > self._max_items:
                    raise ScanError(f"{where} holds more than {self._max_items} objects ({MAX_ITEMS_KEY})")
                yield entry
            if text_of(root, "IsTruncated").lower() != "true":
                return
            token = text_of(root, "NextContinuationToken")
            if not token:  # taking it for the end would prune what the next pages hold
                raise ScanError(f"the listing of {where} says it goes on but gives no continuation token")

    def close(self) -> None:
        self._fetcher.close()

    def _list_page(self, where: str, token: str) -> Element:
        query = {"list-type": "2", "max-keys": str(PAGE_KEYS), "encoding-type": "url"}
        if self._prefix:
            query["prefix"] = self._prefix + "/"
        if token:
            query["continuation-token"] = token
        try:
            page = self._get(f"{self._base}?{urlencode(sorted(query.items()), quote_via=quote, safe='-_.~')}")
        except FetchError as err:
            raise ScanError(f"could not list {where}: {_fetch_reason(err)}") from None
        if page.status != 200:
            raise ScanError(f"could not list {where}: {_status_reason(page)}")
        root = parse_xml(page.content, f"the listing of {where}", PAGE_ELEMENTS)
        if local_name(root.tag) != "ListBucketResult":  # an error, or a page that is no listing
            raise ScanError(
                f"could not list {where}: the answer is not a listing (<{local_name(root.tag)[:40]}>)"
            )
        return root

    def _entry(self, item: Element, encoded: bool) -> Entry | None:
        """The listed object, or None for one to skip: outside the prefix, a key that is no plain
        path (empty, dot, hidden, control or format characters, backslashes, longer than S3 allows),
        a folder marker ("docs/"), an empty object, a size that is no number."""
        key, size = text_of(item, "Key"), text_of(item, "Size")
        if encoded:
            try:
                key = unquote_plus(key, errors="strict")
            except UnicodeDecodeError:
                return None
        inside = key.startswith(self._prefix + "/") if self._prefix else bool(key)
        if not inside or not _plain_key(key) or not _SIZE.fullmatch(size) or int(size) == 0:
            return None
        name = key[len(self._prefix) + 1 :] if self._prefix else key
        if not name or not clean_name(name):
            return None
        etag = text_of(item, "ETag")
        if not ETAG.fullmatch(etag):  # neither sent back (If-Match) nor kept: the time is the revision
            etag = ""
        revision = etag or _printable(text_of(item, "LastModified"))[:64]
        read = functools.partial(self._read, key, etag, int(size))
        return Entry(f"s3://{self._bucket}/{key}", name, revision, int(size), read)

    def _read(self, key: str, etag: str, size: int) -> bytes:
        where = f"s3://{self._bucket}/{key}"
        try:
            found = self._get(f"{self._base}/{quote(key, safe='/-_.~')}", {"if-match": etag} if etag else {})
        except ScanError as err:
            raise ReadFailed(str(err)) from None
        except FetchError as err:
            raise ReadFailed(f"could not read {where}: {_fetch_reason(err)}") from None
        if found.status == 412:
            raise ReadFailed(f"{where} changed since it was listed; the next poll lists it again")
        if found.status == 404:
            raise ReadFailed(f"{where} is gone since it was listed")
        if found.status != 200:
            raise ReadFailed(f"could not read {where}: {_status_reason(found)}")
        # (An object stored with a Content-Encoding comes decoded, of another size than listed.)
        if found.headers.get("content-encoding", "identity").strip().lower() == "identity":
            if len(found.content) > size:
                raise ReadFailed(
                    f"{where} grew past the {size} bytes it was listed with; the next poll lists it again"
                )
            if len(found.content) < size:
                raise ReadFailed(
                    f"{where} came with {len(found.content)} of the {size} bytes it was listed with"
                )
        return found.content

    def _get(self, url: str, headers: Mapping[str, str] | None = None) -> Fetched:
        """GET `url`, signed when there are credentials; a redirect comes back as it is."""
        signed = dict(headers or {})
        credentials = self._credentials() if self._signed else None
        if credentials is not None:
            from botocore.auth import S3SigV4Auth
            from botocore.awsrequest import AWSRequest

            request = AWSRequest("GET", url, headers=signed)
            S3SigV4Auth(credentials, "s3", self._region).add_auth(request)
            signed = {k.lower(): v for k, v in request.headers.items()}
        return self._fetcher.fetch(url, headers=signed, redirects=False)


def own_buckets(lancedb_uri: object, lexical_snapshots: str) -> frozenset[str]:
    """The buckets of the service's own stores (storage.lancedb_uri, storage.lexical_snapshots)."""
    found = set()
    for uri in (str(lancedb_uri), lexical_snapshots):
        parts = urlsplit(uri)
        if parts.scheme.lower() in ("s3", "s3a") and parts.netloc:
            found.add(parts.netloc.lower())
    return frozenset(found)


def _environment_endpoint(environ: Mapping[str, str]) -> str | None:
    """The endpoint the service's environment names for S3 (the AWS SDKs' variables), if any."""
    for name in _ENDPOINT_VARIABLES:
        if environ.get(name):
            try:
                return s3_endpoint(environ[name])
            except InvalidArgument as err:
                raise InvalidArgument(f"{name}: {err}") from None
    return None


def _unprintable(text: str) -> bool:
    """Holds control or format characters (line breaks, NUL, escapes, a right-to-left override)."""
    return any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def _plain_key(key: str) -> bool:
    return len(key.encode()) <= _MAX_KEY_BYTES and "\\" not in key and not _unprintable(key)


def _printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable())


def _fetch_reason(err: FetchError) -> str:
    """A refusal says its rule (and the key that lifts it); a network failure reads the same whatever
    the port did."""
    if isinstance(err, FetchRefused | FetchTooLarge):
        return str(err)
    return "unreachable, refused, timed out or not an S3 server"


def _status_reason(page: Fetched) -> str:
    """An S3 error answer in a few words: the status and the error's code, never its message (which
    may echo the request)."""
    code = ""
    if page.content.lstrip().startswith(b"<"):
        try:
            code = text_of(parse_xml(page.content[:65536], "an S3 error"), "Code")
        except ScanError:
            code = ""
    code = code if re.fullmatch(r"[A-Za-z]{1,64}", code) else ""
    said = f"HTTP {page.status}" + (f" ({code})" if code else "")
    if page.status in REDIRECTS:
        return (
            f"{said}: the server redirects, and S3 requests are signed for one address and never "
            "follow a redirect (set the source's region, or its endpoint)"
        )
    return f"{said}; {_CREDENTIALS}" if page.status in (401, 403) or code in _CREDENTIAL_CODES else said
