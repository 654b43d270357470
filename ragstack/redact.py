"""Secrets out of everything that leaves the process: URL userinfo passwords, secret-looking query
parameters and DSN keywords, in listings, citations, traces, error messages and every log line."""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
MAX_MESSAGE_CHARS = 2000
_MAX_NESTING = 4  # pairs within values within values...
# Query parameters, DSN keywords and database columns whose value is a secret (matched as whole names
# or suffixes): credentials, and what must not be shown even as a sample (hashes, salts, one-time
# codes, national identifiers, card numbers).
_SECRET_NAME = re.compile(
    r"(pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?|sig(nature)?|"
    r"sslpassword|auth|hash(ed)?|salt|nonce|otp|mfa[_-]?(code|seed)|recovery[_-]?codes?|ssn|"
    r"social[_-]?security([_-]?(number|no))?|tax[_-]?id|passport([_-]?(number|no))?|iban|"
    r"card[_-]?(number|num|no)|cvv2?|cvc|session[_-]?(id|key)|cookie|(^|[_-])(key|pin))$",
    re.IGNORECASE,
)
# userinfo in any URL-looking text: scheme://user:password@host
# (Names start where no name character precedes them and are taken whole, so a long run of them costs
# one pass, not one a position.)
_USERINFO = re.compile(
    r"(?P<scheme>(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://)(?P<user>[^\s/@:]*+)(:(?P<pw>[^\s/@]*+))?@"
)
# key=value pairs (query strings and libpq DSNs, which allow spaces around `=` and `\'` in quotes)
_PAIR = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]++)\s*=\s*"
    r"(?P<value>'(?:[^'\\]|\\.)*+'|\"(?:[^\"\\]|\\.)*+\"|[^\s&;,'\"]*+)"
)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.strip().lower()))


def redact_url(url: str) -> str:
    """The URL with its userinfo password and secret query parameters masked (user names kept)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" not in netloc and not any(is_secret_name(k) for k, _ in parse_qsl(parts.query)):
            return url  # nothing to mask (rebuilding would drop the `//` of `sqlite:///path`)
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{user}@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(is_secret_name(k) for k, _ in pairs):
                query = urlencode([(k, MASK if is_secret_name(k) else v) for k, v in pairs], safe="*")
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:  # not parseable as a URL: mask what looks like secrets in the text
        return redact_text(url)


def strip_userinfo(url: str) -> str:
    """The URL with its userinfo (user name and password) removed entirely: the form to record as a
    source. Secret query parameters are kept (they may be needed to fetch again); show `redact_url` of it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(lambda m: m.group("scheme"), url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def redact_text(text: str) -> str:
    """Masks secrets wherever they appear in free text (log messages, error messages)."""

    def userinfo(m: re.Match[str]) -> str:
        if m.group("pw") is None:
            return m.group(0)
        return f"{m.group('scheme')}{m.group('user')}:{MASK}@"

    def pairs(text: str, depth: int) -> str:
        def pair(m: re.Match[str]) -> str:
            if is_secret_name(m.group("key")):
                return f"{m.group('key')}={MASK}"
            value = m.group("value")  # may hold pairs of its own: `url=https://h/p?token=...`
            if "=" in value:  # deeper than any real URL or DSN nests: masked whole, to be safe
                value = pairs(value, depth + 1) if depth < _MAX_NESTING else MASK
            return m.group(0)[: m.start("value") - m.start()] + value

        return _PAIR.sub(pair, text)

    return pairs(_USERINFO.sub(userinfo, text), 0)


def redact_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """An error message fit to send: secrets masked, and cut at `limit` characters (a message may
    quote what the caller sent, and gRPC refuses status details past 8 KB). What is cut is cut before
    masking too, far enough past `limit` that no secret straddles what is kept."""
    if len(text) <= limit:
        return redact_text(text)
    clean = redact_text(text[: limit * 4])
    return f"{clean[:limit]}… ({len(text)} characters, cut)" if len(clean) > limit else clean


class RedactingFilter(logging.Filter):
    """Rewrites every record's message with its secrets masked (httpx logs full URLs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler to report
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install_log_redaction() -> None:
    """Adds the filter to every handler of the root logger (present and future records alike pass
    through a handler) and to the chatty libraries' loggers, which may log before handlers exist."""
    flt = RedactingFilter()
    root = logging.getLogger()
    for handler in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(flt)
    for name in ("httpx", "httpcore", "urllib3"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in lg.filters):
            lg.addFilter(flt)
