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


def test_questions_that_chain_facts_read_more_passages_and_bridge() -> None:
    from services.agent.router import multi_hop

    chained = [
        "Which orchestra hired the violinist who taught Mara Quellen?",  # a relative clause
        "In what year was the bridge in the town where Tomas Brek grew up opened?",  # where
        "What language did the founder of the publisher of Lantern Weekly speak?",  # nested relations
        "Where was the architect of Hollin Hall's chapel trained?",  # a possessive inside a relation
        "Is Mara Quellen older than Tomas Brek?",  # two names
    ]
    single = [
        "What is reciprocal rank fusion?",
        "How does BM25 rank documents?",
        "When was Tesla founded?",
        "What is the capital of Norway?",  # one relation
    ]
    assert all(multi_hop(q) for q in chained), [q for q in chained if not multi_hop(q)]
    assert not any(multi_hop(q) for q in single), [q for q in single if multi_hop(q)]
    r = route(chained[1], SearchMode.AUTO, multi_hop_top_k=15)
    assert r.top_k == 15 and r.chains_facts
    plain = route(single[0], SearchMode.AUTO, multi_hop_top_k=15)
    assert plain.top_k == 0 and not plain.chains_facts  # the configured number, one search
    assert route(chained[1], SearchMode.AUTO).top_k == 0  # more hits off; the bridge stays
    explicit = route(chained[1], SearchMode.DENSE, multi_hop_top_k=15)
    assert explicit.top_k == 0 and not explicit.chains_facts  # an explicit mode wins
