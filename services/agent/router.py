"""Picks the retrieval strategy: an explicit mode always wins; otherwise a deterministic heuristic."""

from __future__ import annotations

import re

from ragstack.domain import RouteEvent, SearchMode

# Identifier-shaped tokens: snake_case, dotted.names, CamelCase, codes with digits, quoted strings.
_IDENTIFIER = re.compile(
    r"`[^`]+`|\"[^\"]+\"|\b\w+_\w+\b|\b\w+\.\w+\.\w+\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b[A-Z]{2,}-?\d+\b|\b0x[0-9a-f]+\b"
)

# Questions about the whole collection rather than a fact in it.
_THEMES = re.compile(
    r"\b(?:main|key|major|common|recurring|central)\s+(?:themes?|topics?|ideas?|subjects?)\b|\boverview\b"
    r"|\bwhat\s+(?:is|are)\s+(?:this|these|the)\s+(?:corpus|collection|documents?|library)\s+about\b"
    r"|\bsummari[sz]e\s+(?:the|all|these|this)\s+(?:corpus|collection|documents?|library)\b",
    re.IGNORECASE,
)


def route(question: str, requested: SearchMode) -> RouteEvent:
    if requested != SearchMode.AUTO:
        return RouteEvent(requested, "explicit", "mode set by the request")
    words = question.split()
    if _THEMES.search(question):
        return RouteEvent(
            SearchMode.GRAPH_GLOBAL, "heuristic", "a question about themes: community summaries"
        )
    if _IDENTIFIER.search(question) and len(words) <= 6:
        return RouteEvent(SearchMode.LEXICAL, "heuristic", "short query around an exact identifier")
    return RouteEvent(SearchMode.HYBRID, "heuristic", "general question: lexical and dense fused")
