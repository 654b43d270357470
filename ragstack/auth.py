"""Who is calling, and what they may do: principals, roles and library scopes.

Every request runs as a `Principal`. The gateway makes one from the caller's API key and sends it
to the services as `x-ragstack-principal` metadata; a service trusts that header only from a caller
that holds `services.token` (or from anyone on loopback when no token is set, who could act as the
local admin anyway). The current principal lives in a context variable, set once per call by the
server interceptor, like the request id.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from ragstack.errors import InvalidArgument, PermissionDenied

HEADER = "x-ragstack-principal"
ALL = "*"
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}\Z")


class Permission(enum.StrEnum):
    READ = "read"  # ask, search, read documents, traces and jobs of its own
    WRITE = "write"  # + ingest, delete documents
    ADMIN = "admin"  # + databases, snapshots, vacuum, everyone's traces and jobs


class Role(enum.StrEnum):
    READER = "reader"
    WRITER = "writer"
    ADMIN = "admin"


ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.READER: frozenset({Permission.READ}),
    Role.WRITER: frozenset({Permission.READ, Permission.WRITE}),
    Role.ADMIN: frozenset(Permission),
}


@dataclass(frozen=True)
class Principal:
    """A caller: its name, role, the libraries it may use (`*`: all) and its ACL groups."""

    name: str
    role: Role
    libraries: tuple[str, ...] = (ALL,)
    groups: tuple[str, ...] = ()

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def allows(self, permission: Permission) -> bool:
        return permission in ROLE_PERMISSIONS[self.role]

    def may_use(self, library: str) -> bool:
        return self.is_admin or ALL in self.libraries or library in self.libraries

    def require(self, permission: Permission, action: str) -> None:
        if not self.allows(permission):
            raise PermissionDenied(
                f"{action} needs the {permission} permission; {self.name!r} has role {self.role} "
                f"({', '.join(sorted(ROLE_PERMISSIONS[self.role]))})"
            )

    def require_library(self, library: str) -> None:
        if not self.may_use(library):
            raise PermissionDenied(
                f"{self.name!r} may not use library {library!r} (its libraries: {', '.join(self.libraries)})"
            )

    def owns(self, owner: str) -> bool:
        """Whether a trace, job or session recorded for `owner` is visible to this caller."""
        return self.is_admin or (bool(owner) and owner == self.name)

    @property
    def acl(self) -> tuple[str, ...] | None:
        """The ACL groups whose documents this caller sees besides public ones; None: all."""
        return None if self.is_admin or ALL in self.groups else self.groups

    def sees(self, groups: Sequence[str]) -> bool:
        acl = self.acl
        return acl is None or not groups or bool(set(groups) & set(acl))

    def to_header(self) -> str:
        return json.dumps(
            {"name": self.name, "role": str(self.role), "libraries": self.libraries, "groups": self.groups},
            separators=(",", ":"),
        )

    @classmethod
    def from_header(cls, value: str) -> Principal:
        try:
            raw = json.loads(value)
            return make_principal(raw["name"], raw["role"], raw.get("libraries", ()), raw.get("groups", ()))
        except (ValueError, KeyError, TypeError) as err:
            raise InvalidArgument(f"malformed {HEADER} metadata: {err}") from None


def make_principal(name: str, role: str, libraries: Iterable[str], groups: Iterable[str]) -> Principal:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidArgument(f"principal name {name!r}: 1-64 letters, digits, `_`, `.`, `@`, `-`")
    return Principal(name, Role(role), tuple(str(x) for x in libraries), tuple(str(x) for x in groups))


# The caller when nobody else is named: the one-process CLI, the embedded default without API keys,
# and gRPC clients holding the service token.
LOCAL = Principal("local", Role.ADMIN, (ALL,), (ALL,))

PRINCIPAL: ContextVar[Principal] = ContextVar("principal", default=LOCAL)


def current() -> Principal:
    return PRINCIPAL.get()


def key_digest(key: str) -> str:
    """How a key is stored at rest (`key_sha256`): API keys are long random strings, so one SHA-256
    is enough (a slow hash protects guessable passwords, which these are not)."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class KeyEntry:
    digest: bytes
    principal: Principal


def match_key(given: str, entries: Sequence[KeyEntry]) -> Principal | None:
    """The principal whose key is `given`; every entry is compared, in constant time each."""
    digest = key_digest(given).encode()
    found: Principal | None = None
    for entry in entries:  # no early exit: the time taken says nothing about which key matched
        if hmac.compare_digest(digest, entry.digest):
            found = entry.principal
    return found
