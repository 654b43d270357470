"""`ragstack source ...`: sources the ingest service keeps in sync (services/ingest/syncing)."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.table import Table

from ragstack import convert
from ragstack.cli.session import connect
from ragstack.config import Config, SourceConfig
from ragstack.rpc.clients import IngestClient
from ragstack.v1 import ingest_pb2


async def call(cfg: Config, action: str, *args: Any) -> Any:
    """`IngestClient.<action>(*args)` on the ingest service (started here when none answers:
    then its poller runs only while the command does)."""
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        client = IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s)
        return await getattr(client, action)(*args)


def as_json(source: ingest_pb2.Source) -> dict[str, Any]:
    return MessageToDict(source, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def show(sources: list[ingest_pb2.Source], json_out: bool) -> None:
    if json_out:
        print(json.dumps({"sources": [as_json(s) for s in sources]}, indent=2))
        return
    if not sources:
        Console().print("no sources (ragstack source add, or `sources:` in ragstack.yaml)")
        return
    table = Table("name", "kind", "url", "library", "state", "next poll", "retrying", "dead", "last error")
    for s in sources:
        state = "paused" if s.paused else convert.breaker_name(s.breaker).replace("_", "-")
        table.add_row(
            s.spec.name,
            convert.source_kind_name(s.spec.kind),
            s.spec.url,
            s.spec.library or "(default)",
            state,
            s.next_poll_at[:19] or "-",
            str(s.retrying),
            str(len(s.dead_letters)),
            s.last_error[:80],
        )
    Console().print(table)
    for s in sources:
        for dead in s.dead_letters:
            Console().print(
                f"dead letter of {s.spec.name}: {dead.item} ({dead.attempts} attempts): {dead.error}",
                highlight=False,
                markup=False,
            )


def spec_of(name: str, kind: str, url: str, **options: Any) -> SourceConfig:
    """The spec from the command's options (validated as the config's `sources:` entries are)."""
    given = {k: v for k, v in options.items() if v not in (None, (), [])}
    for key in ("groups", "include", "exclude"):
        if key in given:
            given[key] = list(given[key])
    return SourceConfig.model_validate({"name": name, "kind": kind, "url": url, **given})
