"""The attached databases as the retrieve service serves them: schemas introspected and reused for
`sql.schema_ttl_s`, tables ranked by relevance to a question (so the agent finds the right one), and
queries run through the fence with the configured caps."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from opentelemetry import trace

from ragstack import auth
from ragstack import domain as d
from ragstack.config import SqlConfig
from ragstack.embedding import Embedder
from ragstack.errors import InvalidArgument, Unavailable
from ragstack.stores.databases import DatabaseRegistry, Entry

tracer = trace.get_tracer("ragstack.retrieve")
_WORD = re.compile(r"[a-z0-9]+")


class Databases:
    def __init__(
        self,
        registry: DatabaseRegistry,
        cfg: SqlConfig,
        embedder: Embedder,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._cfg = cfg
        self._embedder = embedder
        self._clock = clock
        self._schemas: dict[tuple[str, str, str], tuple[float, d.Database]] = {}

    def _schema(self, entry: Entry) -> d.Database:
        key = (entry.library, entry.name, entry.url)
        cached = self._schemas.get(key)
        if cached and self._clock() - cached[0] < self._cfg.schema_ttl_s:
            return cached[1]
        found = self._registry.introspect(entry)
        if not found.error:  # an unreachable database is asked again next time
            self._schemas[key] = (self._clock(), found)
        return found

    async def list(self, library: str, question: str = "") -> list[d.Database]:
        """The library's databases the caller's ACL groups may query (the others are not listed)."""
        with tracer.start_as_current_span("retrieve.databases"):
            entries = self._registry.entries(library, auth.current().sees)
            found = [await asyncio.to_thread(self._schema, e) for e in entries]
            if question.strip():
                found = [await asyncio.to_thread(self._rank, db, question) for db in found]
        return found

    def _rank(self, db: d.Database, question: str) -> d.Database:
        """Tables by cosine similarity of their description to the question, plus a bonus for a
        table the question names (`orders` for "how many orders ...")."""
        if not db.tables:
            return db
        vectors = self._embedder.embed([question, *(t.describe() for t in db.tables)])
        words = set(_WORD.findall(question.lower()))
        scores = []
        for table, similarity in zip(db.tables, vectors[1:] @ vectors[0], strict=True):
            name = table.name.split(".")[-1].lower()
            named = bool({name, name.rstrip("s"), name + "s"} & words)
            scores.append(float(np.clip(similarity + (0.3 if named else 0.0), -1.0, 1.0)))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])
        return replace(db, tables=tuple(db.tables[i] for i in order), scores=tuple(scores[i] for i in order))

    async def sql(self, library: str, database: str, sql: str, max_rows: int) -> d.SqlResult:
        if not sql.strip():
            raise InvalidArgument("sql is empty")
        cap = max_rows or self._cfg.max_rows
        if not 0 < cap <= self._cfg.max_rows:
            raise InvalidArgument(f"max_rows {cap} is out of range 1..{self._cfg.max_rows} (sql.max_rows)")
        entry = self._registry.entry(library, database, auth.current().sees)  # hidden: not found
        source = self._registry.open(entry)
        start = time.perf_counter()
        with tracer.start_as_current_span("retrieve.sql", attributes={"database": entry.name}):
            schema = await asyncio.to_thread(self._schema, entry)
            if schema.error:
                raise Unavailable(f"database {entry.name!r}: {schema.error}")
            rows = await asyncio.to_thread(source.query, sql, cap, self._cfg.timeout_s, schema.tables)
        return d.SqlResult(
            database=entry.name,
            dialect=source.dialect,
            sql=rows.sql,
            columns=rows.columns,
            rows=rows.rows,
            truncated=rows.truncated,
            took_ms=(time.perf_counter() - start) * 1000,
        )
