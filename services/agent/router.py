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


# A name: capitalised words, with the small words names contain ("Bank of America", "Leonardo da Vinci").
_NAME = r"[A-Z0-9][\w'.&-]*(?:\s+(?:(?:of|the|de|da|del|la|le|von|van|du|y)\s+)?[A-Z0-9][\w'.&-]*)*"
_PAIR = re.compile(rf"((?:the\s+)?{_NAME})\s*,?\s+(?:and|or|vs\.?|versus)\s+((?:the\s+)?{_NAME})")
_COMPARE = re.compile(
    r"\b(?:compare|comparison|differ\w*|versus|vs\.?|both|same|either|neither|in common)\b"
    r"|^\s*(?:which|who)\b.*\b(?:\w+er|more|less|first|earlier|later)\b.*\bor\b",
    re.IGNORECASE,
)
_OPENERS = {
    "are",
    "were",
    "is",
    "was",
    "do",
    "did",
    "does",
    "which",
    "who",
    "what",
    "when",
    "where",
    "how",
    "in",
}


def comparison(question: str) -> tuple[str, str] | None:
    """The two sides of a comparison question ("Were A and B both ...?", "Which is older, A or B?"),
    or None when it is not one."""
    if not _COMPARE.search(question):
        return None
    first, _, rest = question.strip().partition(" ")
    body = rest if first.lower() in _OPENERS else question.strip()
    pairs = _PAIR.findall(body)
    if not pairs:
        return None
    a, b = pairs[-1]
    return (a, b) if a.lower() != b.lower() else None


# Counting, summing, averaging, extremes and breakdowns over records: a database's job when one is attached.
_AGGREGATE = re.compile(
    r"\bhow many\b|\bnumber of\b|\bcount\b|\btotal\b|\bsum of\b|\baverage\b|\bmean\b|\bmedian\b"
    r"|\b(?:maximum|minimum|highest|lowest|largest|smallest)\b|\b(?:per|for each)\s+\w+",
    re.IGNORECASE,
)


def aggregate(question: str) -> bool:
    """An aggregate question ("how many orders shipped late in March?")."""
    return bool(_AGGREGATE.search(question))


# A question that chains facts describes something instead of naming it: a relative clause ("the
# city where ...", "the band whose drummer ..."), or relations nested in one another ("the mother
# of the author of X", "X's founder's birthplace"). General English cues, not one set's templates;
# chosen on musique_train100 (README: Answers).
_CLAUSE = re.compile(r"\b(?:who|whom|which|that|whose|where|when)\b", re.IGNORECASE)
_RELATION = re.compile(r"\bof\b|\w's\b|\w'(?=\s)", re.IGNORECASE)


def multi_hop(question: str) -> bool:
    """Whether answering needs more than one passage: two names or more ("Were A and B ..."), a
    clause about something the question only describes, or two relations nested."""
    body = question.strip().split(" ", 1)[1] if " " in question.strip() else question
    names = {m.group(0) for m in re.finditer(_NAME, body) if len(m.group(0)) > 1}
    return len(names) >= 2 or bool(_CLAUSE.search(body)) or len(_RELATION.findall(body)) >= 2


def route(
    question: str, requested: SearchMode, has_databases: bool = False, multi_hop_top_k: int = 0
) -> RouteEvent:
    """The heuristic route. `multi_hop_top_k`: hits per search for a question that chains facts
    (0 keeps the configured number)."""
    if requested != SearchMode.AUTO:
        return RouteEvent(requested, "explicit", "mode set by the request")
    sides = comparison(question)
    if sides:
        a, b = sides
        return RouteEvent(
            SearchMode.HYBRID,
            "heuristic",
            "a comparison: one search per side, then the answer from both",
            (_side(question, a, b), _side(question, b, a)),
        )
    if has_databases and aggregate(question):
        return RouteEvent(
            SearchMode.SQL, "heuristic", "an aggregate question: SQL over the attached databases"
        )
    words = question.split()
    if _THEMES.search(question):
        return RouteEvent(
            SearchMode.GRAPH_GLOBAL, "heuristic", "a question about themes: community summaries"
        )
    if _IDENTIFIER.search(question) and len(words) <= 6:
        return RouteEvent(SearchMode.LEXICAL, "heuristic", "short query around an exact identifier")
    if multi_hop(question):
        return RouteEvent(
            SearchMode.HYBRID,
            "heuristic",
            "a question that chains facts: lexical and dense fused, more passages read, searched "
            "again from what the first search found",
            top_k=multi_hop_top_k,
            chains_facts=True,
        )
    return RouteEvent(SearchMode.HYBRID, "heuristic", "general question: lexical and dense fused")


def _side(question: str, keep: str, drop: str) -> str:
    """The question about one side: the other side's name taken out ("Were A of the same ...")."""
    text = re.sub(
        rf"\s*,?\s+(?:and|or|vs\.?|versus)\s+{re.escape(drop)}|{re.escape(drop)}\s*,?\s+(?:and|or|vs\.?|versus)\s+",
        " ",
        question,
        count=1,
    )
    text = re.sub(r"\s+([?.,!])", r"\1", " ".join(text.split()))
    return text if keep in text else f"{keep} {question}"
