"""What `ragstack ingest` and `ragstack ask` print."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragstack import domain as d
from ragstack.cli.session import connect
from ragstack.config import Config
from ragstack.errors import RpcError
from ragstack.guard.paths import SETTING
from ragstack.rpc.clients import AgentClient, IngestClient

_T = TypeVar("_T")

_DONE_STAGES = {d.FileStage.INDEXED, d.FileStage.UNCHANGED, d.FileStage.FAILED}


async def _with_server_hint(events: AsyncIterator[_T], embedded: bool, cfg: Config) -> AsyncIterator[_T]:
    """The events; a running server's refusal of a path outside its roots says what to do."""
    try:
        async for event in events:
            yield event
    except RpcError as err:
        if embedded or err.code != "PERMISSION_DENIED" or SETTING not in err.message:
            raise
        raise RpcError(
            err.code,
            f"{err.message}. The server running at {cfg.services.ingest.address} reads files only under "
            f"its {SETTING} (default: <data_dir>/inbox): add the folder there and restart it, copy the "
            "files into a root, or stop the server to ingest in this process",
        ) from None


async def ingest_progress(
    cfg: Config,
    paths: list[str],
    library: str,
    prune: bool = False,
    urls: Sequence[str] = (),
    enrich: bool = False,
    groups: Sequence[str] = (),
) -> d.IngestSummary:
    console = Console(stderr=True)
    summary = d.IngestSummary()
    async with connect(cfg, needed=("ingest",), start=("ingest",), allow_paths=paths) as session:
        client = IngestClient(session.channels["ingest"], cfg.deadlines.ingest_s)
        with Progress(
            TextColumn("[bold]ingest"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=False,
        ) as bar:
            task = bar.add_task("", total=None)
            events = client.ingest(
                paths=paths, library=library, prune=prune, urls=urls, enrich=enrich, groups=groups
            )
            async for event in _with_server_hint(events, session.embedded, cfg):
                if isinstance(event, d.IngestSummary):
                    summary = event
                    continue
                bar.update(
                    task, total=event.total, description=f"{event.stage.value}: {_short(event.source)}"
                )
                if event.stage in _DONE_STAGES:
                    bar.advance(task)
                if event.stage == d.FileStage.FAILED:
                    bar.console.print(f"[red]failed[/red] {escape(event.source)}: {escape(event.reason)}")
                elif event.stage == d.FileStage.REMOVED:
                    bar.console.print(f"removed {escape(event.source)} (its source is gone)")
    console.print(
        f"{summary.files} files: {summary.indexed} indexed, {summary.unchanged} unchanged, "
        f"{summary.failed} failed, {summary.removed} removed; "
        f"{summary.chunks} chunks in {summary.seconds:.1f}s"
        + (" (embedded services)" if session.embedded else "")
    )
    for note in summary.notes:
        console.print(f"[yellow]note[/yellow]: {escape(note)}")
    if summary.entities:
        console.print(
            f"knowledge graph: {summary.entities} entities, {summary.relations} relations, "
            f"{summary.communities} communities ({summary.communities_summarized} summarised now)"
        )
    return summary


def _short(source: str, width: int = 48) -> str:
    return source if len(source) <= width else "…" + source[-(width - 1) :]


async def ask_and_print(
    cfg: Config,
    question: str,
    library: str,
    mode: str,
    top_k: int,
    as_json: bool,
    session_id: str = "",
    query_mode: d.QueryMode = d.QueryMode.AUTO,
) -> None:
    console = Console()
    done: d.DoneEvent | None = None
    async with connect(cfg, needed=("agent",), start=("retrieve", "verify", "agent")) as session:
        client = AgentClient(session.channels["agent"], cfg.deadlines.agent_s)
        async for event in client.ask(
            question, library, d.SearchMode(mode), top_k, session_id, query_mode=query_mode
        ):
            if isinstance(event, d.DoneEvent):
                done = event
    if done is None:
        raise RuntimeError("the agent ended the stream without an answer")
    if as_json:
        print(json.dumps(asdict(done), indent=2, ensure_ascii=False, default=str))
        return
    _print_answer(console, done)


def _print_answer(console: Console, done: d.DoneEvent) -> None:
    console.print()
    console.print(done.answer, highlight=False, markup=False)  # a document's text, never markup
    console.print()
    console.print("[bold]Sources[/bold]")
    for c in done.citations:
        if c.sql is not None:
            more = ", more matched" if c.sql.truncated else ""
            console.print(
                f"  [{c.ref}] database {c.sql.database}: {c.sql.query}  ({c.sql.row_count} rows{more})",
                highlight=False,
                markup=False,
            )
            continue
        where = " > ".join(c.chunk.heading_path)
        pages = f", p. {','.join(map(str, c.chunk.pages))}" if c.chunk.pages else ""
        console.print(
            f"  [{c.ref}] {where}{pages}  ({c.chunk.source}; chunk {c.chunk.chunk_id})",
            highlight=False,
            markup=False,
        )
    m = done.manifest
    console.print()
    if not m.verified:
        console.print(f"[bold]Verification[/bold]: not run ({m.method})")
    else:
        table = Table(
            title=f"Verification ({m.method}): supported ratio {m.supported_ratio:.2f}", title_justify="left"
        )
        for col in ("id", "claim", "refs", "verdict", "conf.", "reason"):
            table.add_column(col, overflow="fold")
        for claim in m.claims:
            table.add_row(
                escape(claim.claim_id),
                escape(claim.claim),
                ",".join(claim.refs),
                claim.verdict.value,
                f"{claim.confidence:.2f}",
                escape(claim.reason),
            )
        console.print(table)
    status = "withheld (not enough support)" if done.abstained else "delivered"
    if done.cut_by:
        status += f", the LLM's draft cut at {done.cut_by}"
    console.print(
        f"answer {status}; confidence {done.confidence:.2f}; generator {done.generator}; "
        f"trace {done.trace_id}",
        highlight=False,
    )


@contextlib.contextmanager
def progress_reporter() -> Iterator[Callable[[str, int, int], None]]:
    """A callback (stage, done, total) that draws one bar per stage on stderr."""
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield report


def print_report(title: str, report: dict[str, Any]) -> None:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in _flat(report):
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) and value < 1.5 else str(value))
    Console().print(table)


def _flat(report: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested figures (by task, by position) as `by_task.email.utility` rows."""
    out: list[tuple[str, Any]] = []
    for key, value in report.items():
        if isinstance(value, dict) and value:
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def print_rows(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    table = Table()
    for key in rows[0]:
        table.add_column(key, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    Console().print(table)
