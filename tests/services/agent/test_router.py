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


def test_questions_that_chain_facts_read_more_passages() -> None:
    from services.agent.router import multi_hop

    chained = [
        "Which Canadian rock band released a song called Counterparts and had a drummer who was inducted?",
        "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?",
        "Is Scott Derrickson older than Ed Wood?",
    ]
    single = ["What is reciprocal rank fusion?", "How does BM25 rank documents?", "When was Tesla founded?"]
    assert all(multi_hop(q) for q in chained) and not any(multi_hop(q) for q in single)
    assert route(chained[1], SearchMode.AUTO, multi_hop_top_k=15).top_k == 15
    assert route(single[0], SearchMode.AUTO, multi_hop_top_k=15).top_k == 0  # the configured number
    assert route(chained[1], SearchMode.AUTO).top_k == 0  # off
    assert route(chained[1], SearchMode.DENSE, multi_hop_top_k=15).top_k == 0  # an explicit mode wins
