from ragstack.text import content_words, numbers, split_sentences


def test_sentences_respect_abbreviations_and_decimals() -> None:
    text = (
        "BM25 uses k1 = 1.2 by default. It came from City University, e.g. the Okapi system. J. Doe agreed!"
    )
    assert split_sentences(text) == [
        "BM25 uses k1 = 1.2 by default.",
        "It came from City University, e.g. the Okapi system.",
        "J. Doe agreed!",
    ]


def test_list_items_and_blank_lines_end_sentences() -> None:
    text = "Intro without stop\n- first item. still first\n- second item\n\nNew paragraph"
    assert split_sentences(text) == [
        "Intro without stop",
        "- first item. still first",
        "- second item",
        "New paragraph",
    ]


def test_numbers_and_words() -> None:
    assert numbers("k = 60, 1,000 docs, 0.5 and 95% of 2009") == {"60", "1000", "0.5", "95%", "2009"}
    assert content_words("What is the BM25 score of it?") == {"bm25", "score"}
