"""Databases as sources, end to end on real gRPC servers: a SQLite database configured in ragstack.yaml,
a DuckDB one and the real PostgreSQL server attached at run time; schemas listed and ranked; the Sql
RPC's error codes; aggregate questions answered from the database with the statement and row count
in the citation and the trace, offline and through the real `ollama` client against a scripted
server (whose first statement is refused and rephrased)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ragstack import domain as d
from ragstack.errors import RpcError
from ragstack.resources import Resources
from ragstack.rpc.clients import AgentClient, IngestClient, RetrieveClient, open_channel
from ragstack.serve import Stack
from services.agent.text_to_sql import NEEDS_LLM
from tests.conftest import make_config, start_with
from tests.tools import postgres, shop
from tests.tools.ollama_server import OllamaServer

QUESTION = "How many orders shipped late in March?"


async def _start(folder: Path, resources: Resources, **sections: dict[str, Any]) -> Stack:
    return await start_with(make_config(folder / "data", **sections), resources, gateway=False)


@pytest.fixture(scope="module")
async def sql_stack(tmp_path_factory: pytest.TempPathFactory, resources: Resources) -> AsyncIterator[Stack]:
    folder = tmp_path_factory.mktemp("sql")
    shop.build_sqlite(folder / "shop.db")
    shop.build_duckdb(folder / "shop.duckdb")
    stack = await _start(
        folder,
        resources,
        sql={
            "databases": [{"name": "shop", "url": str(folder / "shop.db")}],
            "timeout_s": 1.0,
            "allowed_roots": [tempfile.gettempdir()],
            "allowed_hosts": ["127.0.0.1"],
            "secret_env": ["SHOP_RO_PASSWORD"],
        },
    )
    yield stack
    await stack.stop()


def _clients(stack: Stack) -> tuple[IngestClient, RetrieveClient, AgentClient]:
    return (
        IngestClient(open_channel(stack.peers["ingest"]), 60),
        RetrieveClient(open_channel(stack.peers["retrieve"]), 30),
        AgentClient(open_channel(stack.peers["agent"]), 60),
    )


async def _done(agent: AgentClient, question: str, **kw: Any) -> tuple[list[d.AskEvent], d.DoneEvent]:
    events = [e async for e in agent.ask(question, **kw)]
    assert isinstance(events[-1], d.DoneEvent)
    return events, events[-1]


async def test_attach_list_and_detach(sql_stack: Stack, tmp_path: Path) -> None:
    ingest, retrieve, _ = _clients(sql_stack)
    duck = tmp_path / "analytics.duckdb"
    shop.build_duckdb(duck)
    attached = await ingest.attach_database("analytics", f"duckdb:///{duck}", library="default")
    assert attached.dialect == "duckdb" and {t.name for t in attached.tables} == set(shop.TABLES)

    found = {db.name: db for db in await retrieve.databases("default", "How many orders were late?")}
    assert found["shop"].origin == "config" and found["analytics"].origin == "attached"
    orders = found["shop"].tables[0]  # ranked: the table the question names comes first
    assert orders.name == "orders" and found["shop"].scores[0] > found["shop"].scores[1]
    status = next(c for c in orders.columns if c.name == "status")
    assert set(status.samples) == set(shop.STATUSES)  # a categorical column lists every value
    assert ("customer_id", "customers", "id") in orders.foreign_keys

    with pytest.raises(RpcError) as err:
        await ingest.attach_database("shop", f"duckdb:///{duck}")
    assert err.value.code == "INVALID_ARGUMENT" and "ragstack.yaml" in err.value.message
    with pytest.raises(RpcError) as err:
        await ingest.attach_database("bad", "mysql://somewhere/db")
    assert err.value.code == "INVALID_ARGUMENT" and "unsupported database URL" in err.value.message
    with pytest.raises(RpcError) as err:
        await ingest.attach_database("gone", str(tmp_path / "missing.db"))
    assert err.value.code == "INVALID_ARGUMENT" and "missing, unreadable or not a file" in err.value.message

    await ingest.detach_database("analytics")
    assert [db.name for db in await retrieve.databases("default")] == ["shop"]
    with pytest.raises(RpcError) as err:
        await ingest.detach_database("analytics")
    assert err.value.code == "NOT_FOUND"


async def test_the_sql_rpc_fences_caps_and_names_its_errors(sql_stack: Stack) -> None:
    _, retrieve, _ = _clients(sql_stack)
    result = await retrieve.sql(
        "default",
        "shop",
        "SELECT c.country, count(*) AS n, rank() OVER (ORDER BY count(*) DESC) AS r "
        "FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.country",
    )
    assert result.columns == ("country", "n", "r") and sum(r[1] for r in result.rows) == len(shop.ORDERS)
    capped = await retrieve.sql("default", "", "SELECT id FROM orders", max_rows=5)  # its only database
    assert len(capped.rows) == 5 and capped.truncated and "LIMIT 6" in capped.sql

    cases = [
        ("DELETE FROM orders", "INVALID_ARGUMENT", "only SELECT"),
        ("SELECT 1; DROP TABLE orders", "INVALID_ARGUMENT", "exactly one statement"),
        ("SELECT * FROM sqlite_master", "INVALID_ARGUMENT", "not one of the attached tables"),
        (
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
            "FAILED_PRECONDITION",
            "over its 1 s limit",
        ),
    ]
    for sql, code, message in cases:
        with pytest.raises(RpcError) as err:
            await retrieve.sql("default", "shop", sql)
        assert err.value.code == code and message in err.value.message, sql
    with pytest.raises(RpcError) as err:
        await retrieve.sql("default", "nope", "SELECT 1")
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(RpcError) as err:
        await retrieve.sql("default", "shop", "SELECT id FROM orders", max_rows=100_000)
    assert err.value.code == "INVALID_ARGUMENT" and "sql.max_rows" in err.value.message
    with pytest.raises(RpcError) as err:
        await retrieve.search("How many orders?", "default", 5, d.SearchMode.SQL)
    assert err.value.code == "INVALID_ARGUMENT"


async def test_an_aggregate_question_is_answered_from_the_database(sql_stack: Stack) -> None:
    _, _, agent = _clients(sql_stack)
    events, done = await _done(agent, QUESTION)
    route = next(e for e in events if isinstance(e, d.RouteEvent))
    assert route.mode == d.SearchMode.SQL and route.classifier == "heuristic"
    call = next(e for e in events if isinstance(e, d.ToolCallEvent))
    assert call.tool == "sql" and call.result_count == 1
    assert not done.abstained and f" is {shop.LATE_IN_MARCH} [1]" in done.answer
    assert done.generator == "sql" and done.manifest.claims[0].verdict == d.Verdict.SUPPORTED
    [cited] = done.citations
    assert cited.sql is not None and cited.sql.database == "shop" and cited.sql.row_count == 1
    assert "'late'" in cited.sql.query and cited.chunk.chunk_id.startswith("sql:shop:")

    trace = await agent.get_trace(done.trace_id)
    [sql_call] = trace["tool_calls"]
    assert sql_call["tool"] == "sql" and sql_call["arguments"]["planner"] == "offline"
    assert sql_call["result_count"] == 1 and sql_call["ran"] == cited.sql.query
    assert trace["citations"][0]["sql"]["row_count"] == 1


async def test_what_the_offline_planner_cannot_write_is_said_not_guessed(sql_stack: Stack) -> None:
    _, _, agent = _clients(sql_stack)
    _, done = await _done(agent, "How many orders did French customers place?", mode=d.SearchMode.SQL)
    assert done.abstained and done.answer == NEEDS_LLM and done.confidence <= 0.25
    _, done = await _done(agent, QUESTION, library="empty", mode=d.SearchMode.SQL)
    assert done.abstained and "No readable database" in done.answer


async def test_the_llm_writes_the_statement_and_rephrases_a_refused_one(
    tmp_path: Path, resources: Resources
) -> None:
    shop.build_sqlite(tmp_path / "shop.db")
    statements = iter(
        [
            "DELETE FROM orders WHERE status = 'late'",  # refused by the fence, never run
            "SELECT count(*) AS late_in_march FROM orders WHERE status = 'late' "
            "AND strftime('%m', shipped_at) = '03'",
        ]
    )

    def reply(request: dict[str, Any]) -> str:
        system = request["messages"][0]["content"]
        if "You route questions" in system:
            understood = {"intent": "count orders", "complexity": "aggregate", "ambiguous": False}
            return json.dumps({**understood, "strategy": "sql", "top_k": 5, "sub_questions": []})
        if "SQL SELECT" in system:
            return json.dumps({"database": "shop", "sql": next(statements), "description": "late orders"})
        return f"{shop.LATE_IN_MARCH} orders shipped late in March [1]."

    with OllamaServer("test", reply).serve() as server:
        stack = await _start(
            tmp_path,
            resources,
            llm={"enabled": True, "host": server.url, "model": "test"},
            verify={"llm_judge": False},
            sql={"databases": [{"name": "shop", "url": str(tmp_path / "shop.db")}]},
        )
        try:
            _, _, agent = _clients(stack)
            events, done = await _done(agent, QUESTION)
            trace = await agent.get_trace(done.trace_id)
        finally:
            await stack.stop()
    route = next(e for e in events if isinstance(e, d.RouteEvent))
    assert route.mode == d.SearchMode.SQL and route.classifier == "llm"
    refused, ran = trace["tool_calls"]
    assert refused["arguments"]["planner"] == "llm" and "only SELECT" in refused["error"]
    assert ran["result_count"] == 1 and "error" not in ran
    rephrase = next(r for r in server.requests if "was refused" in r["messages"][-1]["content"])
    assert "only SELECT is allowed" in rephrase["messages"][-1]["content"]
    assert done.generator == "llm:test" and not done.abstained
    assert done.citations[0].sql is not None and done.citations[0].sql.row_count == 1
    assert sqlite_unchanged(tmp_path / "shop.db")


def sqlite_unchanged(path: Path) -> bool:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM orders").fetchone()[0] == len(shop.ORDERS)


async def test_postgres_attached_with_a_password_from_the_environment(
    sql_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = postgres.unavailable_reason()
    if reason:
        pytest.skip(f"PostgreSQL cannot start here ({reason}); run scripts/install_postgres.sh")
    ingest, retrieve, agent = _clients(sql_stack)
    with postgres.PostgresServer() as server:
        shop.build_postgres(server.admin_url)
        monkeypatch.setenv("SHOP_RO_PASSWORD", postgres.RO_PASSWORD)
        url = f"postgresql://{postgres.RO_ROLE}:${{SHOP_RO_PASSWORD}}@127.0.0.1:{server.port}/{postgres.DATABASE}"
        db = await ingest.attach_database("pg", url, library="pg")
        assert db.dialect == "postgres" and ":***@" in db.url and postgres.RO_PASSWORD not in db.url
        [listed] = await retrieve.databases("pg")
        assert {t.name for t in listed.tables} == set(shop.TABLES)
        _, done = await _done(agent, QUESTION, library="pg")
        assert not done.abstained and f" is {shop.LATE_IN_MARCH} [1]" in done.answer
        assert done.citations[0].sql is not None and "EXTRACT(MONTH FROM" in done.citations[0].sql.query
        await ingest.detach_database("pg", library="pg")
