"""Principals, roles and the access table; the path guard; redaction; upload sources; Host names."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.guards import _host_allowed, _host_name, key_entries
from ragstack import auth
from ragstack.auth import Permission, Principal, Role, key_digest, match_key
from ragstack.config import ApiKey
from ragstack.errors import InvalidArgument, PermissionDenied
from ragstack.guard.paths import PathGuard
from ragstack.redact import RedactingFilter, redact_text, redact_url
from ragstack.rpc.access import RULES, authorize
from ragstack.v1 import agent_pb2, ingest_pb2, retrieve_pb2, verify_pb2
from services.ingest.sources import upload_source

READER = Principal("ann", Role.READER, ("team",), ("hr",))
WRITER = Principal("bob", Role.WRITER, ("team", "ops"))
ADMIN = Principal("cat", Role.ADMIN, ("team",))


def test_every_rpc_in_the_protos_has_a_rule() -> None:
    methods = {
        f"/{service.full_name}/{method.name}"
        for module in (agent_pb2, ingest_pb2, retrieve_pb2, verify_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert methods == set(RULES)


def test_roles_grow_by_permission() -> None:
    assert READER.allows(Permission.READ) and not READER.allows(Permission.WRITE)
    assert WRITER.allows(Permission.WRITE) and not WRITER.allows(Permission.ADMIN)
    assert all(ADMIN.allows(p) for p in Permission)


def test_authorize_names_the_missing_permission_and_library() -> None:
    ingest = "/ragstack.v1.IngestService/Ingest"
    with pytest.raises(PermissionDenied, match="write permission"):
        authorize(ingest, ingest_pb2.IngestRequest(library="team"), READER, "default")
    authorize(ingest, ingest_pb2.IngestRequest(library="ops"), WRITER, "default")
    with pytest.raises(PermissionDenied, match="library 'default'"):
        authorize(ingest, ingest_pb2.IngestRequest(), WRITER, "default")  # empty is the default library
    submit = ingest_pb2.SubmitIngestRequest(request=ingest_pb2.IngestRequest(library="elsewhere"))
    with pytest.raises(PermissionDenied, match="library 'elsewhere'"):
        authorize("/ragstack.v1.IngestService/SubmitIngest", submit, WRITER, "default")
    with pytest.raises(PermissionDenied, match="admin permission"):
        authorize(
            "/ragstack.v1.IngestService/AttachDatabase", ingest_pb2.AttachDatabaseRequest(), WRITER, "x"
        )
    authorize("/ragstack.v1.IngestService/Vacuum", ingest_pb2.VacuumRequest(), ADMIN, "default")
    authorize("/ragstack.v1.RetrieveService/Search", retrieve_pb2.SearchRequest(library="zzz"), ADMIN, "d")
    with pytest.raises(InvalidArgument):  # a library name that is no name is refused, not matched
        authorize("/ragstack.v1.AgentService/Ask", agent_pb2.AskRequest(library="team/.."), READER, "d")
    with pytest.raises(PermissionDenied, match="no access rule"):
        authorize("/ragstack.v1.IngestService/Unknown", None, ADMIN, "default")


def test_library_scope_is_exact() -> None:
    assert READER.may_use("team") and not READER.may_use("Team") and not READER.may_use("*")
    assert Principal("any", Role.READER, ("*",)).may_use("whatever")


def test_acl_groups_and_ownership() -> None:
    assert READER.acl == ("hr",) and ADMIN.acl is None
    assert READER.sees(()) and READER.sees(("hr", "x")) and not READER.sees(("finance",))
    assert WRITER.acl == () and not WRITER.sees(("hr",))
    assert READER.owns("ann") and not READER.owns("bob") and not READER.owns("")
    assert ADMIN.owns("ann") and ADMIN.owns("")


def test_principal_header_round_trip_and_refusals() -> None:
    assert Principal.from_header(READER.to_header()) == READER
    for bad in ("{", '{"name": "x"}', '{"name": "a b", "role": "reader"}', '{"name": "x", "role": "root"}'):
        with pytest.raises(InvalidArgument):
            Principal.from_header(bad)


def test_keys_match_by_digest_and_plain_keys_are_admins() -> None:
    entries = key_entries(
        [
            ApiKey(name="ann", key="a-key-of-16-chars+", role="reader", libraries=["team"]),
            ApiKey(name="bob", key_sha256=key_digest("bobs-key-of-16-chars"), role="writer"),
            "legacy-plain-key",
        ]
    )
    ann = match_key("a-key-of-16-chars+", entries)
    assert ann is not None and ann.name == "ann" and ann.role is Role.READER and ann.libraries == ("team",)
    bob = match_key("bobs-key-of-16-chars", entries)
    assert bob is not None and bob.role is Role.WRITER
    legacy = match_key("legacy-plain-key", entries)
    assert legacy is not None and legacy.name == "key3" and legacy.is_admin
    assert match_key("nope", entries) is None and match_key("", entries) is None


def test_the_default_principal_is_the_local_admin() -> None:
    assert auth.current() is auth.LOCAL and auth.LOCAL.is_admin


def test_paths_outside_the_roots_are_refused_alike(tmp_path: Path) -> None:
    root = tmp_path / "inbox"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.md").write_text("# A")
    outside = tmp_path / "secret.md"
    outside.write_text("# secret")
    (root / "link.md").symlink_to(outside)
    guard = PathGuard([root])
    assert guard.check(str(root / "sub" / "a.md")) == (root / "sub" / "a.md").resolve()
    messages = []
    for raw in (
        str(outside),
        str(tmp_path / "missing.md"),
        str(root / ".." / "secret.md"),
        str(root / "link.md"),
    ):
        with pytest.raises(PermissionDenied) as err:
            guard.check(raw)
        messages.append(str(err.value).replace(raw, "P"))
    assert len(set(messages)) == 1 and "ingest.allowed_roots" in messages[0]
    assert not guard.allows(root / "link.md") and guard.allows(root / "missing-but-inside.md")


def test_secrets_are_redacted_in_urls_text_and_logs() -> None:
    assert redact_url("postgresql://app:hunter2@db:5432/x?sslmode=require") == (
        "postgresql://app:***@db:5432/x?sslmode=require"
    )
    assert "hunter2" not in redact_url("https://h/x?token=hunter2&page=2")
    assert "page=2" in redact_url("https://h/x?token=hunter2&page=2")
    text = "failed: host=db password=hunter2 user=app; url http://u:hunter2@h/p?api_key=hunter2"
    assert "hunter2" not in redact_text(text) and "user=app" in redact_text(text)
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "GET %s", ("http://u:pw-9x@h/",), None)
    RedactingFilter().filter(record)
    assert "pw-9x" not in record.getMessage()


def test_upload_sources_live_in_their_own_namespace() -> None:
    assert upload_source("team", "report.pdf") == "upload://team/report.pdf"
    assert upload_source("team", "https://intranet.example.com/policy.html") == "upload://team/policy.html"
    assert upload_source("team", "../../etc/passwd") == "upload://team/passwd"
    assert upload_source("team", "C:\\docs\\a.md") == "upload://team/a.md"
    assert upload_source("team", "..") == "upload://team/upload"


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        ("localhost:8080", True),
        ("127.0.0.1", True),
        ("[::1]:8080", True),
        ("LOCALHOST", True),
        ("evil.example.com", False),
        ("localhost.evil.com", False),
        ("127.0.0.1.nip.io:8080", False),
        ("", False),
    ],
)
def test_trusted_host_names(header: str, allowed: bool) -> None:
    assert _host_allowed(_host_name(header), ["localhost", "127.0.0.1", "::1"]) is allowed


def test_trusted_host_wildcards() -> None:
    assert _host_allowed("rag.example.com", ["*.example.com"])
    assert not _host_allowed("example.com", ["*.example.com"])
    assert not _host_allowed("rag.example.com.evil", ["*.example.com"])
