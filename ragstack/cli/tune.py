"""`ragstack tune embedder`: a library's own embedder, through IngestService.TuneEmbedder."""

from __future__ import annotations

import json

import click
from google.protobuf.json_format import MessageToDict

from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.rpc.clients import IngestClient


async def tune_embedder(
    cfg: Config,
    library: str,
    epochs: float,
    max_pairs: int,
    pairs: str,
    revert: bool,
    as_json: bool,
    reembed: bool = False,
) -> None:
    async with connect(cfg, needed=("ingest",), start=("ingest",)) as session:
        client = IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s)
        last = ""
        async for event in client.tune_embedder(library, epochs, max_pairs, revert, pairs, reembed):
            if event.stage == "done":
                if as_json:
                    print(
                        json.dumps(MessageToDict(event, always_print_fields_with_no_presence=True), indent=2)
                    )
                    return
                now = event.embedder or "the configured embedder"
                before = event.previous_embedder or "the configured embedder"
                click.echo(
                    f"library {library or cfg.library!r}: {event.chunks} chunks re-embedded with {now} "
                    f"(before: {before}); {event.pairs} training pairs; {event.seconds:.0f} s"
                )
                return
            line = _describe(event.stage, event.done, event.total, event.loss, event.message)
            if line != last:
                click.echo(line, err=True)
                last = line


def _describe(stage: str, done: int, total: int, loss: float, message: str) -> str:
    if stage == "export":
        return f"export: {message}"
    if stage == "training":
        return f"training: step {done}/{total}, loss {loss:.3f}"
    return f"{stage}: {done}/{total}"
