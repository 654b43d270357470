"""The agent's SQL tool: find the relevant tables, write the statement (LLM, else the offline
planner), run it through the retrieve service's fence, and turn the result into evidence that cites
the database, the statement and the row count. A refused statement goes back to the LLM once with
the fence's reason; it never runs."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ragstack import domain as d
from ragstack.errors import RagstackError
from ragstack.llm import JsonChat
from ragstack.query_trace import ToolCall
from services.agent.text_to_sql import NEEDS_LLM, Plan, llm_plan, offline_plan, render, statement


class DatabasePort(Protocol):
    async def databases(self, library: str, question: str = "") -> list[d.Database]: ...
    async def sql(self, library: str, database: str, sql: str, max_rows: int = 0) -> d.SqlResult: ...


@dataclass
class SqlOutcome:
    """What the tool found: a hit to cite and the sentence that states the result, or why not."""

    hit: d.SearchHit | None = None
    source: d.SqlSource | None = None
    answer: str = ""  # the result in one sentence (the offline draft)
    notice: str = ""  # why there is no result, for the user
    calls: list[ToolCall] = field(default_factory=list)  # for the trace and the events


async def query_databases(
    question: str,
    library: str,
    port: DatabasePort,
    llm: JsonChat | None,
    answer_rows: int,
    databases: Sequence[d.Database] | None = None,
) -> SqlOutcome:
    out = SqlOutcome()
    found = [db for db in (databases or await port.databases(library, question)) if not db.error]
    if not found or not any(db.tables for db in found):
        out.notice = f"No readable database is attached to library {library!r}."
        return out
    refused: tuple[str, str] | None = None
    for _ in range(2 if llm is not None else 1):
        plan = await asyncio.to_thread(llm_plan, llm, question, found, refused) if llm is not None else None
        if plan is None:
            plan = offline_plan(question, found)
        if plan is None:
            out.notice = NEEDS_LLM
            return out
        start = time.perf_counter()
        call: ToolCall = {
            "tool": "sql",
            "arguments": {"database": plan.database, "sql": plan.sql, "planner": plan.planner},
        }
        out.calls.append(call)
        try:
            result = await port.sql(library, plan.database, plan.sql)
        except RagstackError as err:
            call.update(
                {
                    "result_count": 0,
                    "took_ms": round((time.perf_counter() - start) * 1000, 1),
                    "error": str(err),
                }
            )
            if getattr(err, "code", "") == "INVALID_ARGUMENT" and plan.planner == "llm":
                refused = (plan.sql, str(err))  # the LLM may rephrase once
                continue
            out.notice = f"The database query failed: {err}"
            return out
        call.update(
            {
                "result_count": len(result.rows),
                "truncated": result.truncated,
                "took_ms": round((time.perf_counter() - start) * 1000, 1),
                "ran": result.sql,
            }
        )
        return _evidence(out, plan, result, library, answer_rows, found)
    out.notice = "The database query was refused twice: " + (refused[1] if refused else "")
    return out


def _evidence(
    out: SqlOutcome,
    plan: Plan,
    result: d.SqlResult,
    library: str,
    answer_rows: int,
    databases: Sequence[d.Database],
) -> SqlOutcome:
    digest = hashlib.sha256(result.sql.encode()).hexdigest()[:12]
    url = next((db.url for db in databases if db.name == result.database), "")
    chunk = d.Chunk(
        chunk_id=f"sql:{result.database}:{digest}",
        document_id=f"sql:{result.database}",
        library=library,
        text=render(plan, result, answer_rows),
        heading_path=(result.database,),
        title=f"database {result.database}",
        source=url,
        media_type="application/sql",
    )
    out.hit = d.SearchHit(chunk=chunk, score=1.0, signals=(d.SignalScore("sql", float(len(result.rows)), 1),))
    out.source = d.SqlSource(result.database, result.sql, len(result.rows), result.truncated)
    out.answer = statement(plan, result, answer_rows).rstrip(".") + " [1]."
    return out
