"""ragstack.redact: secrets masked in URLs, free text (DSNs, error messages) and every log record."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from ragstack.redact import (
    MASK,
    RedactingFilter,
    install_log_redaction,
    is_secret_name,
    redact_message,
    redact_text,
    redact_url,
    strip_userinfo,
)

# --- is_secret_name ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "PASSWORD",
        " Password ",
        "passwd",
        "pwd",
        "passphrase",
        "db_password",
        "sslpassword",
        "PGPASSWORD",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "refresh-token",
        "api_key",
        "api-key",
        "apikey",
        "x-api-key",
        "access_key",
        "private_key",
        "credentials",
        "credential",
        "sig",
        "signature",
        "X-Amz-Signature",
        "auth",
        "oauth",
        "key",
        "aws_key",
        "pin",
        "card_pin",
        "password_hash",
        "salt",
        "nonce",
        "otp",
        "mfa_code",
        "recovery_codes",
        "ssn",
        "social_security_number",
        "tax_id",
        "passport_number",
        "iban",
        "card_number",
        "cvv",
        "cvc",
        "session_id",
        "cookie",
    ],
)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "user",
        "username",
        "dbname",
        "host",
        "port",
        "page",
        "q",
        "sslmode",
        "monkey",
        "keyboard",
        "spin",
        "author",
        "design",
        "application_name",
        "id",
        "name",
        "email",
        "keys_count",
    ],
)
def test_non_secret_names(name: str) -> None:
    assert not is_secret_name(name)


# --- redact_url -------------------------------------------------------------------------------------------


def test_redact_url_masks_the_password_and_keeps_the_user() -> None:
    assert redact_url("https://ann:hunter2@example.com/x") == f"https://ann:{MASK}@example.com/x"


def test_redact_url_keeps_a_user_without_password() -> None:
    assert redact_url("https://ann@example.com/x") == "https://ann@example.com/x"


def test_redact_url_masks_a_password_holding_colons_and_encoded_at() -> None:
    shown = redact_url("postgresql://ann:pa:ss%40w0rd@db.example:5432/shop")
    assert shown == f"postgresql://ann:{MASK}@db.example:5432/shop"


def test_redact_url_masks_secret_parameters_and_keeps_the_others() -> None:
    shown = redact_url("https://example.com/p?token=abc&page=2&API_KEY=k1&q=hello")
    assert "abc" not in shown and "k1" not in shown
    assert shown == f"https://example.com/p?token={MASK}&page=2&API_KEY={MASK}&q=hello"


def test_redact_url_masks_a_secret_parameter_given_twice_and_an_empty_one() -> None:
    shown = redact_url("https://example.com/?token=a1&token=b2&secret=")
    assert "a1" not in shown and "b2" not in shown
    assert shown.count(MASK) == 3


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/p?page=2&q=a%20b",
        "https://example.com/",
        "postgresql://bob@db.example:5432/shop?sslmode=require",
        # database URLs are listed through redact_url (ragstack/stores/databases.py)
        "sqlite:///tmp/x.db",
        "sqlite:////tmp/x.db",
        "duckdb:///tmp/x.duckdb",
    ],
)
def test_redact_url_leaves_a_url_without_secrets_unchanged(url: str) -> None:
    assert redact_url(url) == url


def test_redact_url_masks_userinfo_and_parameters_together() -> None:
    shown = redact_url("https://ann:hunter2@example.com/x?sig=zz9&lang=en#frag")
    assert "hunter2" not in shown and "zz9" not in shown
    assert shown.startswith(f"https://ann:{MASK}@example.com/x?")
    assert "lang=en" in shown and shown.endswith("#frag")


def test_redact_url_of_something_unparseable_falls_back_to_text() -> None:
    shown = redact_url("http://[::1 password=hunter2")
    assert "hunter2" not in shown


# --- strip_userinfo ---------------------------------------------------------------------------------------


def test_strip_userinfo_drops_user_and_password_and_keeps_the_query() -> None:
    assert strip_userinfo("https://ann:hunter2@example.com:8443/x?token=abc") == (
        "https://example.com:8443/x?token=abc"
    )
    assert strip_userinfo("https://ann@example.com/x") == "https://example.com/x"
    assert strip_userinfo("https://:pw@example.com/") == "https://example.com/"


def test_strip_userinfo_leaves_other_urls_unchanged() -> None:
    for url in ("https://example.com/x?token=abc", "http://[::1]:80/a@b", "file:///etc/hosts"):
        assert strip_userinfo(url) == url


def test_strip_userinfo_of_an_unparseable_url_still_drops_it() -> None:
    stripped = strip_userinfo("http://ann:hunter2@[::1/x")
    assert "ann" not in stripped and "hunter2" not in stripped


# --- redact_text --------------------------------------------------------------------------------------------


def test_libpq_dsn_keywords() -> None:
    assert redact_text("host=x password=secret dbname=y") == f"host=x password={MASK} dbname=y"
    assert redact_text("host=db user=bob sslpassword=s1 sslmode=require") == (
        f"host=db user=bob sslpassword={MASK} sslmode=require"
    )


def test_quoted_dsn_values() -> None:
    assert redact_text("host=x password='s e c r e t' dbname=y") == f"host=x password={MASK} dbname=y"
    assert redact_text('host=x password="a b c" user=u') == f"host=x password={MASK} user=u"
    assert redact_text("password='' dbname=y") == f"password={MASK} dbname=y"


def test_quoted_dsn_value_with_an_escaped_quote() -> None:
    """libpq: a quote inside a quoted value is written \\'; the whole value is the secret."""
    text = redact_text(r"host=x password='it\'s a secret' dbname=y")
    assert "secret" not in text.replace("password", "")
    assert "s a" not in text
    assert text.startswith("host=x password=") and text.endswith(" dbname=y")


def test_dsn_keywords_with_spaces_around_the_equals_sign() -> None:
    """libpq allows whitespace around `=` in a keyword/value connection string."""
    text = redact_text("host=x password = hunter2 dbname=y")
    assert "hunter2" not in text
    assert "host=x" in text and "dbname=y" in text


def test_userinfo_in_free_text() -> None:
    text = redact_text("cannot connect to postgresql://bob:hunter2@db.example:5432/shop: refused")
    assert text == f"cannot connect to postgresql://bob:{MASK}@db.example:5432/shop: refused"


def test_user_without_password_is_kept_in_free_text() -> None:
    text = "fetched https://ann@example.com/x and ssh://git@github.com/r"
    assert redact_text(text) == text


def test_multiple_urls_in_one_message() -> None:
    text = redact_text(
        "GET https://u1:pw1@a.example/x?token=t1&page=2 then http://u2:pw2@b.example/?api_key=k2&q=z "
        "and https://c.example/?sig=s3"
    )
    for secret in ("pw1", "pw2", "t1", "k2", "s3"):
        assert secret not in text, text
    for kept in ("u1:", "u2:", "page=2", "q=z", "a.example/x", "b.example", "c.example"):
        assert kept in text, text


def test_a_url_as_the_value_of_a_pair_has_its_parameters_masked() -> None:
    text = redact_text("fetching url=https://example.com/p?token=abc123&page=2")
    assert "abc123" not in text
    assert "page=2" in text


def test_non_secret_pairs_and_plain_text_are_kept() -> None:
    text = "host=db port=5432 dbname=shop user=bob sslmode=require page=3 monkey=1 count: 5"
    assert redact_text(text) == text


def test_pairs_with_other_separators() -> None:
    assert redact_text("token=abc;other=1") == f"token={MASK};other=1"
    assert redact_text("a=1&secret=zz&b=2") == f"a=1&secret={MASK}&b=2"
    assert redact_text("PGPASSWORD=xyz psql") == f"PGPASSWORD={MASK} psql"


# --- logging ----------------------------------------------------------------------------------------------


@pytest.fixture
def captured() -> Iterator[tuple[logging.Handler, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    yield handler, stream
    handler.close()


@pytest.fixture
def clean_loggers() -> Iterator[None]:
    """Leaves the root handlers and the libraries' loggers' filters as they were."""
    names = ("httpx", "httpcore", "urllib3")
    before = {n: list(logging.getLogger(n).filters) for n in names}
    root = logging.getLogger()
    handler_filters = {h: list(h.filters) for h in root.handlers}
    yield
    for n in names:
        logging.getLogger(n).filters[:] = before[n]
    for h, filters in handler_filters.items():
        h.filters[:] = filters


def test_filter_masks_an_httpx_style_record(captured: tuple[logging.Handler, io.StringIO]) -> None:
    handler, stream = captured
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("httpx")
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        logger.info(
            'HTTP Request: %s %s "%s %d %s"',
            "GET",
            "https://user:pw@example.com/p?token=abc&page=2",
            "HTTP/1.1",
            200,
            "OK",
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
    out = stream.getvalue()
    assert out == (
        f"httpx INFO HTTP Request: GET https://user:{MASK}@example.com/p?token={MASK}&page=2 "
        '"HTTP/1.1 200 OK"\n'
    )


def test_filter_leaves_clean_records_alone() -> None:
    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "fetched %s pages from %s", (3, "a.example"), None
    )
    assert RedactingFilter().filter(record)
    assert record.msg == "fetched %s pages from %s" and record.args == (3, "a.example")
    assert record.getMessage() == "fetched 3 pages from a.example"


def test_filter_lets_a_malformed_record_through() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s and %s", ("one",), None)
    assert RedactingFilter().filter(record) is True


def test_filter_masks_dsn_in_args() -> None:
    record = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, "connect %s failed", ("host=db password=hunter2",), None
    )
    RedactingFilter().filter(record)
    assert record.getMessage() == f"connect host=db password={MASK} failed"


def test_install_log_redaction_covers_root_handlers_and_library_loggers(
    captured: tuple[logging.Handler, io.StringIO], clean_loggers: None
) -> None:
    handler, stream = captured
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        install_log_redaction()
        install_log_redaction()  # twice: still one filter each
        assert sum(isinstance(f, RedactingFilter) for f in handler.filters) == 1
        for name in ("httpx", "httpcore", "urllib3"):
            assert sum(isinstance(f, RedactingFilter) for f in logging.getLogger(name).filters) == 1
        logging.getLogger("httpx").info("HTTP Request: GET %s", "https://u:pw9@h.example/?token=abc&x=1")
        logging.getLogger("ragstack.test").warning(
            "db %s", "postgresql://bob:hunter2@db/shop?sslmode=require"
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    out = stream.getvalue()
    for secret in ("pw9", "abc", "hunter2"):
        assert secret not in out, out
    assert f"https://u:{MASK}@h.example/?token={MASK}&x=1" in out
    assert f"postgresql://bob:{MASK}@db/shop?sslmode=require" in out


@pytest.mark.parametrize(
    "text",
    ["a" * 200_000, "a.b" * 70_000, "a= " * 70_000, "x://" * 50_000, "a=b" * 70_000, "a='" * 70_000],
    ids=["letters", "dotted", "empty pairs", "schemes", "nested pairs", "open quotes"],
)
def test_redaction_is_linear_and_never_recurses_without_end(text: str) -> None:
    """A caller's long value may reach an error message: no run of it may cost quadratic time (a
    16,000-letter trace id took 2.4 s) or overflow the stack (`a=ba=b...` nested one pair a level)."""
    import time

    start = time.process_time()
    redact_text(text)
    assert time.process_time() - start < 5  # about 0.1 s here; quadratic was minutes


def test_deeply_nested_pairs_are_masked_whole_and_messages_are_cut() -> None:
    assert redact_text("a=b=c=d=e=f=g token=1") == f"a=b=c=d=e={MASK} token={MASK}"
    assert redact_text("url=https://h/p?token=abc&x=1") == f"url=https://h/p?token={MASK}&x=1"
    long = "https://u:pw@h/ " + "x" * 10_000
    cut = redact_message(long)
    assert cut.startswith(f"https://u:{MASK}@h/ x") and cut.endswith("… (10016 characters, cut)")
    assert len(cut) < 2100 and redact_message("short password=1") == f"short password={MASK}"
