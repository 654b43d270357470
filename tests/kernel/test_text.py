import pytest

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


@pytest.mark.parametrize(
    "text",
    [
        "Tantivy stores positions [1]. ¡Los faros quemaban aceite!",  # Spanish opening marks
        "Tantivy stores positions [1]. „Leuchttürme brannten“, schreibt er.",
        "Tantivy stores positions [1]. « Les phares brûlaient », dit-il.",  # French spacing
        "Tantivy stores positions [1]. $5 million was spent.",  # a symbol starts one
        "Tantivy stores positions [1]… Lighthouses burned oil.",  # an ellipsis, then a capital
        "灯塔曾燃烧鲸油．Tantivy 存储位置[1]。",  # a full-width full stop
        "Lighthouses burned oil in Node.js. Tantivy stores positions [1].",  # a dotted word ends one
        "Lighthouses burned oil... `tantivy` stores positions [1].",  # code is no lower-case word
        "It rose in 2019. the moon is made of cheese.",
    ],
)
def test_an_answers_sentence_may_start_with_a_mark_or_a_symbol(text: str) -> None:
    assert len(split_sentences(text, any_start=True)) == 2


@pytest.mark.parametrize(
    "text",
    [
        "The meeting starts at 9 a.m. and lasts an hour [1].",
        "Acme Inc. reported a loss [1].",
        "As shown in Eq. 3, the loss decreases [1].",
        "Positionen werden z. B. gespeichert [1].",
        "В 2020 г. компания выросла [1].",
        'The docs say "stores positions ... for phrase queries" [1].',  # an ellipsis, then lower case
        "It was late… but the scenes were shot [1].",
        "See https://example.com/docs. for details [1].",  # after a URL, code or a version number
        "Version 1.2. is the latest [1].",
        "Call `index.search()`. then read the hits [1].",
        "価格は３．５ドルです[1]。",  # a full-width decimal point
    ],
)
def test_an_answers_sentence_goes_on_past_abbreviations_and_ellipses(text: str) -> None:
    assert split_sentences(text, any_start=True) == [text]


@pytest.mark.parametrize("any_start", [False, True], ids=["document", "answer"])
def test_a_sentence_may_end_with_an_abbreviation_before_a_word_that_starts_one(any_start: bool) -> None:
    text = (
        "Lighthouses spread across the U.S. The keepers lived on site. Records name Keller et al. It was "
        "a hoax. Schools, e.g. The Academy, trained them. Dr. Okafor and the U.S. Navy agreed. Keeper "
        "Anna F. Will and Kevin T. Do wrote 12. The rest is lost. How the U.S. Is Losing Its Lights."
    )
    assert split_sentences(text, any_start=any_start) == [
        "Lighthouses spread across the U.S.",
        "The keepers lived on site.",
        "Records name Keller et al.",
        "It was a hoax.",
        "Schools, e.g. The Academy, trained them.",  # e.g. introduces what follows
        "Dr. Okafor and the U.S. Navy agreed.",  # a title; a name after the abbreviation
        "Keeper Anna F. Will and Kevin T. Do wrote 12.",  # an initial before a name
        "The rest is lost.",
        "How the U.S. Is Losing Its Lights.",  # a title's next word is no sentence's start
    ]


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        (
            "Tides rose in the U.S.[1] The moon is cheese.",
            ["Tides rose in the U.S.[1]", "The moon is cheese."],
        ),
        (
            "Tides rose in the U.S. [1] The moon is cheese.",
            ["Tides rose in the U.S.", "[1] The moon is cheese."],
        ),
        ("Tides rose.[1][2] The moon is cheese.", ["Tides rose.[1][2]", "The moon is cheese."]),
        ("Tides rose in the U.S. [1] Navy ships came.", ["Tides rose in the U.S. [1] Navy ships came."]),
        ("E.g. The lamps burned oil [1].", ["E.g. The lamps burned oil [1]."]),
    ],
)
def test_an_answers_markers_after_a_stop_go_with_its_sentence(text: str, sentences: list[str]) -> None:
    """Markers straight after the stop end its sentence with it; after a space they lead the next
    one (the policy credits them to the sentence before); either way the next word decides."""
    assert split_sentences(text, any_start=True) == sentences


@pytest.mark.parametrize(
    "text",
    [
        "Am 3. Oktober 1990 trat der Vertrag in Kraft [1].",
        "Am 12. November 1990 fiel die Mauer nicht [1].",  # a month English shares, before a year
        "Im 19. Jahrhundert wuchs der Hafen [1].",
        "Den 3. oktober flyttede fyret [1].",
        "Majakka sammui 3. lokakuuta 1990 [1].",
        "Maják zhasl 3. října 1990 [1].",
    ],
)
def test_an_ordinal_before_a_month_or_century_ends_no_sentence(text: str) -> None:
    assert split_sentences(text, any_start=True) == [text]
    assert split_sentences(text) == [text]


@pytest.mark.parametrize(
    "text",
    [
        "The launch was flight 12. Major upgrades followed [1].",  # a word that begins like a month
        "He turned 12. January was cold [1].",  # English months are no ordinals' months
        "The vote was 52 to 48. November brought a recount [1].",  # nor, without a year, November
    ],
)
def test_a_number_before_a_capital_still_ends_a_sentence(text: str) -> None:
    assert len(split_sentences(text, any_start=True)) == len(split_sentences(text)) == 2


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
