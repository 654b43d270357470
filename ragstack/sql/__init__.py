"""Databases as sources: read-only, parsed SQL over attached SQLite, PostgreSQL and DuckDB."""

from ragstack.sql.fence import DIALECTS, Fenced, SqlRefused, fence
from ragstack.sql.sources import Column, Rows, Source, SqlFailed, Table, open_source

__all__ = [
    "DIALECTS",
    "Column",
    "Fenced",
    "Rows",
    "Source",
    "SqlFailed",
    "SqlRefused",
    "Table",
    "fence",
    "open_source",
]
