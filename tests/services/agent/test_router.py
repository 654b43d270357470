from ragstack.domain import SearchMode
from services.agent.router import route


def test_explicit_mode_wins() -> None:
    r = route("what is BM25?", SearchMode.DENSE)
    assert (r.mode, r.classifier) == (SearchMode.DENSE, "explicit")


def test_identifier_queries_go_lexical() -> None:
    for q in ("max_file_mb", "where is RetrieveService defined", "error ERR-1234"):
        assert route(q, SearchMode.AUTO).mode == SearchMode.LEXICAL, q


def test_questions_go_hybrid() -> None:
    r = route("How does reciprocal rank fusion combine rankings?", SearchMode.AUTO)
    assert (r.mode, r.classifier) == (SearchMode.HYBRID, "heuristic")


def test_theme_questions_go_graph_global() -> None:
    for q in ("What are the main themes of these documents?", "Give me an overview", "summarize the corpus"):
        assert route(q, SearchMode.AUTO).mode == SearchMode.GRAPH_GLOBAL, q
    assert route("What is the theme park's opening date?", SearchMode.AUTO).mode == SearchMode.HYBRID
