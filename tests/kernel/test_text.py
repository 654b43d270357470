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


def test_a_sentence_keeps_the_quotes_and_brackets_that_close_it() -> None:
    text = 'He said "stop." Then he left (see above.) The end (cf. Fig.) Two rose.'
    assert split_sentences(text) == [
        'He said "stop."',
        "Then he left (see above.)",
        "The end (cf. Fig.) Two rose.",  # an abbreviation before the bracket ends nothing
    ]
    assert split_sentences(text, keep_lines=True)[:2] == ['He said "stop."', "Then he left (see above.)"]


def test_an_answers_sentences_start_with_any_letter() -> None:
    text = "It works [1]. it also fails. **bold** too. Été 2019. e.g. this stays. 3.5 stays."
    # a document's sentence starts with an ASCII capital or a digit
    assert split_sentences(text) == [text.removesuffix(" 3.5 stays."), "3.5 stays."]
    assert split_sentences(text, any_start=True) == [
        "It works [1].",
        "it also fails.",
        "**bold** too.",
        "Été 2019.",
        "e.g. this stays.",  # abbreviations still end nothing
        "3.5 stays.",
    ]
    assert split_sentences('"Stop." and he left. 句一。句二！', any_start=True) == [
        '"Stop." and he left.',  # a quotation's full stop, then lower case: the sentence goes on
        "句一。",
        "句二！",
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
