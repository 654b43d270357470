"""A question to answer, as the caller put it: the input of every stage of the answer path."""

from __future__ import annotations

from dataclasses import dataclass

from ragstack import domain as d


@dataclass(frozen=True)
class Query:
    question: str  # as asked; retrieval works with the standalone question the route stage makes
    library: str
    mode: d.SearchMode
    top_k: int  # 0: the route's, else the configured default
    principal: str
    session_key: str  # "" outside a session
    memory: bool  # recall similar earlier questions, and remember this one once answered
    query_mode: d.QueryMode = d.QueryMode.AUTO  # the answer's shape; AUTO: the router's choice
