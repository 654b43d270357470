"""Attached databases and read-only SQL through the fence."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from gateway.deps import Clients
from gateway.encoding import pb_json
from ragstack import convert

router = APIRouter(tags=["databases"])


class AttachRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        ..., pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="The database's name in the library."
    )
    url: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="sqlite:///abs/path.db, postgresql://role@host:port/db or duckdb:///abs/path.duckdb, "
        "as the services see it. Files only under sql.allowed_roots, hosts only from sql.allowed_hosts; "
        "${NAME} only as the password, for variables in sql.secret_env. Use a role that can only SELECT.",
    )
    library: str = Field("", max_length=64, description="The library; empty means the default.")
    groups: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="ACL groups that may query it; empty: everyone who may use the library.",
    )


class SqlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(
        ..., min_length=1, max_length=20_000, description="One SELECT in the database's dialect."
    )
    database: str = Field("", max_length=64, description="The database; empty when the library has one.")
    library: str = Field("", max_length=64, description="The library; empty means the default.")
    max_rows: int = Field(0, ge=0, le=10_000, description="Row cap; 0 means sql.max_rows.")


@router.get("/v1/databases")
async def list_databases(upstreams: Clients, library: str = "", question: str = "") -> dict[str, Any]:
    """The databases attached to a library, with their schema; with `question`, tables ranked."""
    found = await upstreams.retrieve.databases(library, question)
    return {"databases": [pb_json(convert.database_to_pb(db)) for db in found]}


@router.post("/v1/databases", status_code=201)
async def attach_database(body: AttachRequest, upstreams: Clients) -> dict[str, Any]:
    """Attaches a database (opened read-only, its schema read first)."""
    db = await upstreams.ingest.attach_database(body.name, body.url, body.library, body.groups)
    return pb_json(convert.database_to_pb(db))


@router.delete("/v1/databases/{name}")
async def detach_database(name: str, upstreams: Clients, library: str = "") -> dict[str, Any]:
    await upstreams.ingest.detach_database(name, library)
    return {"name": name, "detached": True}


@router.post("/v1/sql")
async def run_sql(body: SqlRequest, upstreams: Clients) -> dict[str, Any]:
    """Runs one read-only SELECT through the fence; a refused statement is a 400 with the reason."""
    result = await upstreams.retrieve.sql(body.library, body.database, body.sql, body.max_rows)
    return pb_json(convert.sql_result_to_pb(result))
