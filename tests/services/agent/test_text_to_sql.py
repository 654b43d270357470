"""The offline text-to-SQL planner on the shop dataset in real SQLite and DuckDB files: each shape it
claims to handle gives the answer computed here in Python; questions it cannot honour are declined."""

from __future__ import annotations

from collections import Counter

import pytest

from ragstack import domain as d
from ragstack.domain import SearchMode
from ragstack.sql import open_source
from services.agent.router import aggregate, route
from services.agent.text_to_sql import offline_plan, statement
from tests.tools import shop

LATE = [o for o in shop.ORDERS if o.status == "late"]


@pytest.fixture(scope="module", params=["sqlite", "duckdb"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> d.Database:
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "sqlite":
        shop.build_sqlite(folder / "shop.db")
        url = f"sqlite:///{folder / 'shop.db'}"
    else:
        shop.build_duckdb(folder / "shop.duckdb")
        url = f"duckdb:///{folder / 'shop.duckdb'}"
    source = open_source(url)
    tables = tuple(source.schema())
    # The retrieve service ranks tables by relevance; here the orders table comes first.
    tables = tuple(sorted(tables, key=lambda t: t.name != "orders"))
    return d.Database("shop", "default", source.dialect, url, "config", tables, (1.0,) + (0.0,) * 3)


def answer(database: d.Database, question: str) -> tuple[tuple[object, ...], ...]:
    plan = offline_plan(question, [database])
    assert plan is not None, question
    rows = open_source(database.url).query(plan.sql, 100, 5.0)
    return rows.rows


def test_counts_with_a_value_and_a_month(database: d.Database) -> None:
    assert answer(database, "How many orders shipped late in March?") == ((shop.LATE_IN_MARCH,),)


def test_sum_and_average_of_the_named_column(database: d.Database) -> None:
    [(total,)] = answer(database, "What is the total amount of late orders?")
    assert float(total) == pytest.approx(sum(o.amount for o in LATE))
    [(mean,)] = answer(database, "What is the average amount of orders shipped in 2024?")
    dated = [o.amount for o in shop.ORDERS if o.shipped_at]
    assert float(mean) == pytest.approx(sum(dated) / len(dated))


def test_extremes_and_comparisons(database: d.Database) -> None:
    [(top,)] = answer(database, "What is the highest amount of cancelled orders?")
    assert float(top) == max(o.amount for o in shop.ORDERS if o.status == "cancelled")
    [(n,)] = answer(database, "How many late orders have an amount over 100?")
    assert n == sum(1 for o in LATE if o.amount > 100)


def test_grouping(database: d.Database) -> None:
    rows = answer(database, "How many orders per status?")
    assert dict(rows) == dict(Counter(o.status for o in shop.ORDERS))


@pytest.mark.parametrize(
    "question",
    [
        "How many orders did French customers place?",  # a join the planner does not make
        "Which customer ordered the most teapots?",  # not an aggregate shape it knows
        "How many orders were refunded last week?",  # words it cannot account for
    ],
)
def test_declines_rather_than_guesses(database: d.Database, question: str) -> None:
    assert offline_plan(question, [database]) is None


def test_the_result_in_words() -> None:
    plan = offline_plan(
        "How many orders shipped late in March?",
        [d.Database("shop", "default", "sqlite", "", "config", (_orders_table(),), (1.0,))],
    )
    assert plan is not None and "status late" in plan.description and "March" in plan.description
    result = d.SqlResult("shop", "sqlite", plan.sql, ("count",), ((3,),), False)
    assert statement(plan, result, 20) == (
        "The number of orders with shipped_at in March and status late is 3."
    )


def _orders_table() -> d.Table:
    return d.Table(
        "orders",
        (
            d.Column("id", "INTEGER"),
            d.Column("status", "TEXT", ("shipped", "late", "pending")),
            d.Column("amount", "REAL"),
            d.Column("shipped_at", "DATE"),
        ),
    )


def test_the_router_sends_aggregates_to_sql_only_with_a_database() -> None:
    question = "How many orders shipped late in March?"
    assert aggregate(question) and not aggregate("What is reciprocal rank fusion?")
    assert route(question, SearchMode.AUTO, has_databases=True).mode == SearchMode.SQL
    assert route(question, SearchMode.AUTO, has_databases=False).mode == SearchMode.HYBRID
    assert (
        route("How does hybrid search work?", SearchMode.AUTO, has_databases=True).mode == SearchMode.HYBRID
    )
