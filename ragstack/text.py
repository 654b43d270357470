"""Text utilities shared by the services: sentence splitting, word normalisation, numbers."""

from __future__ import annotations

import re

# A sentence ends at . ! or ? followed by space and an upper-case letter, digit, quote or bracket;
# common abbreviations and initials do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Where an answer's sentence ends: the full stops, question and exclamation marks of scripts that
# put a space after them (Latin, Greek, Cyrillic; Devanagari's danda; Arabic, Urdu; Armenian;
# Ethiopic), those of scripts written without spaces (Chinese, Japanese), and what closes a sentence
# after its stop (quotes, brackets, emphasis).
STOPS = ".!?\u0964\u0965\u061f\u06d4\u0589\u1362"
WIDE_STOPS = "\u3002\uff01\uff1f\uff0e\uff61"
QUOTE_CLOSERS = "\"'\u201d\u2019\u00bb\u203a"  # a quotation's end (a lower-case word may go on after it)
CLOSERS = "\"')]*_\u201d\u2019\u300d\u300f\u00bb\u203a"  # what may come after its stop
_CLOSE = f"[{re.escape(CLOSERS)}]"
# An answer's sentences (`any_start`) may also start in lower case, in any script, after emphasis,
# code, a symbol or a Spanish opening mark, and end at any script's stop: the citation policy and
# the verifier judge an answer sentence by sentence, and a statement must not hide in the sentence
# before it for want of a capital. After a quotation's own stop, or an ellipsis, a lower-case word
# goes on with the same sentence (`_split_block` looks at the `soft` group's next letter).
OPENERS = "\"'([\u201c\u2018\u201e\u201a\u00ab\u2039\u00a1\u00bf*_`"  # what may come before its first letter
_OPENS = rf"(?:[{re.escape(OPENERS)}][ \u00a0\u202f]?)*"
_HARD = rf"(?<=[{STOPS}])(?<!\.\.\.)"
_ANY_BOUNDARY = re.compile(
    # markers written straight after the stop go with its sentence ("It grew.[1] The")
    rf"{_HARD}[)\]*_]*(?:\[[\w.,\s-]*\][)\]*_]*)*\s+(?={_OPENS}\S)"
    rf"|(?P<soft>(?:{_HARD}[)\]*_]*[{QUOTE_CLOSERS}]{_CLOSE}*|(?:(?<=\.\.\.)|(?<=\u2026)){_CLOSE}*)\s+)"
    rf"(?={_OPENS}\S)"
    # a full-width full stop between digits is a decimal point ("３．５")
    rf"|(?:(?<=[{WIDE_STOPS}])(?<![0-9\uff10-\uff19]\uff0e)){_CLOSE}*\s*(?=\S)"
)
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|al|Dr|Mr|Mrs|Ms|Prof|Fig|No|approx)\.|\b[A-Z]\.)$")
# An answer's sentence ends at none of these either: a single letter in any script (initials,
# "z. B.", "т. е."), letters with dots inside ("a.m.", "z.B."), and more short forms. A sentence
# that really ends in one runs on into the next, which the policy then judges with it.
_ANSWER_ABBREV = re.compile(
    r"(?:\b[^\W\d_]\.|\b(?:[^\W\d_]{1,2}\.){2,}|\b(?:Inc|Ltd|Co|Corp|Jr|Sr|St|Eq|Eqs|Sec|Ch|Vol|pp|p|ca|ed|eds"
    r"|ref|refs|resp|incl|viz|ibid|seq|Nr|bzw|usw|ej|Art|Abs|vgl|ggf|gr|op|cit)\.)$"
)
# Abbreviations that a sentence may end with ("grew in the U.S. The next year"): dotted letter
# groups and company or name suffixes; not those that introduce what follows (`e.g.`, `i.e.`), a
# single capital (an initial before a name: "George F. Will"), nor titles and labels (`Dr.`, `Fig.`).
_MAY_END = re.compile(
    r"(?:\b(?!(?i:e\.g|i\.e|z\.b|d\.h|u\.a|o\.ä|s\.o|v\.a)\.)(?:[^\W\d_]{1,2}\.){2,}"
    r"|\b(?:etc|al|Inc|Ltd|Co|Corp|Jr|Sr)\.)$"
)
# Words that start sentences, and seldom a name or a title's next word ("the U.S. Is Losing").
_STARTERS = frozenset(
    """The This That These Those It Its They Their There We Our He His She Her In On At For From But
    However When While If After Before During Although Since Most Many Some Each Both Such""".split()
)
# Citation markers between a stop and the next word (`U.S. [1] The`): part of neither.
_MARKERS = r"\[[\w.,\s-]*\]"
_FIRST_WORD = re.compile(rf"(?:\s|{_MARKERS}|[{re.escape(OPENERS)}])*(\w+)(\W|$)")
_TRAILING_MARKERS = re.compile(rf"(?:\s*{_MARKERS})+$")
# In the languages that write a day or a century with a full stop (German, the Nordic, Finnish,
# Czech, Slovak, Croatian), "3." before a month or century is an ordinal: no sentence ends there.
# A month English writes the same way in title case ("12. November brought") needs a year after it.
_ORDINAL = re.compile(r"(?:^|[\s(])\d{1,2}\.$")
_ORDINAL_OF = frozenset(
    """januar jänner februar feber märz marts april mai maj juni juli oktober dezember desember
    jahrhundert jahrhunderts jahrtausend jahrtausends tammikuuta helmikuuta maaliskuuta huhtikuuta
    toukokuuta kesäkuuta heinäkuuta elokuuta syyskuuta lokakuuta marraskuuta joulukuuta ledna února
    března dubna května června července srpna září října listopadu prosince januára februára marca
    apríla mája júna júla augusta septembra októbra novembra decembra siječnja veljače ožujka travnja
    svibnja lipnja srpnja kolovoza rujna listopada studenoga prosinca""".split()
)
_ORDINAL_IF_YEAR = frozenset("mars april august september november december".split())
_YEAR = re.compile(r"\s*\d{1,4}\b")
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.'-][A-Za-z0-9]+)*")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*(?:%|\b)")

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its of on or our so such than that the their them then there these they this those to was we were what
    when where which who whom why will with would you your""".split()
)


# Blank lines and list items end a sentence whatever precedes them.
_BLOCK_BREAK = re.compile(r"\n\s*\n|\n(?=[ \t]*(?:[-*+]|\d+[.)])[ \t])")


def split_sentences(text: str, keep_lines: bool = False, any_start: bool = False) -> list[str]:
    """Sentences of prose, whitespace-normalised, empty ones dropped. `keep_lines`: a line break
    inside a sentence stays one (spaces around it dropped), so that what stood on a line of its own
    can still be told apart (the chunker keeps them; see services/agent/generate.strips).
    `any_start`: an answer's sentences, which may start with any letter (see _ANY_BOUNDARY); a
    document's start with a capital or digit, which keeps its abbreviations and lists whole."""
    return [s for block in _BLOCK_BREAK.split(text) for s in _split_block(block, keep_lines, any_start)]


_SPACES = re.compile(r"[^\S\n]+")
_AROUND_BREAK = re.compile(r" ?\n[\s]*")


def _split_block(text: str, keep_lines: bool, any_start: bool) -> list[str]:
    flat = _AROUND_BREAK.sub("\n", _SPACES.sub(" ", text)).strip() if keep_lines else " ".join(text.split())
    if not flat:
        return []
    parts: list[str] = []
    start = 0
    for m in (_ANY_BOUNDARY if any_start else _BOUNDARY).finditer(flat):
        # The sentence keeps the quotes and brackets that close it (the boundary matched them):
        # the chunker builds chunks from these sentences, and `"Stop." He left` must stay so.
        # Its last words, without markers (not the whole sentence so far: a run of abbreviations
        # would copy it once for each).
        tail = _TRAILING_MARKERS.sub("", flat[max(start, m.end() - 40) : m.end()].rstrip()).rstrip(CLOSERS)
        if stop_of_words(tail, flat[m.end() : m.end() + 40], answer=any_start):
            continue
        if (
            any_start
            and _first_letter(flat, m.end()).islower()
            and (
                m.group("soft") is not None or _CODE_LIKE.search(flat[max(start, m.start() - 64) : m.start()])
            )
        ):
            continue
        candidate = flat[start : m.end()].strip()
        if candidate:
            parts.append(candidate)
        start = m.end()
    tail = flat[start:].strip()
    if tail:
        parts.append(tail)
    return parts


# A stop after a URL, a path, code or a dotted number, then a lower-case word: the sentence goes on
# ("see https://example.com/docs. for details", "version 1.2. is").
_CODE_LIKE = re.compile(r"(?:^|\s)[^\s\[\]]*(?:[/`]|\d\.\d)[^\s\[\]]*$")  # its last word; a marker is none


def _first_letter(text: str, at: int) -> str:
    """The first letter or digit from `at` on (past openers and spaces), or "" (also when a code
    span comes first: code is no word in lower case)."""
    for char in text[at : at + 16]:
        if char == "`":
            return ""
        if char.isalnum():
            return char
    return ""


def stop_of_words(text: str, after: str, answer: bool = False) -> bool:
    """Whether the stop that ends `text` belongs to its words, not to a sentence's end: that of an
    abbreviation or initial (`e.g.`, `Dr.`, `J.`), or of an ordinal before a month or century
    (`am 3. Oktober`); `after`: what follows the stop (its first word unfinished when it runs to
    the end: then no sentence is taken to end). One that a sentence may end with (`U.S.`, `etc.`,
    `Inc.`) does end it when a word that starts sentences follows (`The`, `It`), past any citation
    markers. `answer`: an answer's sentence, with more abbreviations (_ANSWER_ABBREV)."""
    tail = text[-24:]
    word, rest = _next_word(after)
    if _ORDINAL.search(tail):
        lower = word.lower()
        return lower in _ORDINAL_OF or (
            lower in _ORDINAL_IF_YEAR and (word.islower() or bool(_YEAR.match(rest)))
        )
    if not (_ABBREV.search(tail) or (answer and _ANSWER_ABBREV.search(tail))):
        return False
    return not (_MAY_END.search(tail) and word in _STARTERS)


def _next_word(text: str) -> tuple[str, str]:
    """The first whole word of `text`, past spaces, openers and citation markers, and what follows
    it; ("", "") when there is none, or when it runs to the end (it may go on)."""
    found = _FIRST_WORD.match(text)
    if found is None or not found.group(2):
        return "", ""
    return found.group(1), text[found.end(1) :]


def words(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return [w.lower() for w in _WORD.findall(text)]


_SUFFIXES = ("ically", "ation", "ings", "ing", "ally", "ies", "ied", "ed", "es", "ly", "al", "s")


def stem(word: str) -> str:
    """A light suffix stripper, so `typically` meets `typical` and `values` meets `value`.
    Short words and words with digits are left alone."""
    if len(word) <= 4 or any(ch.isdigit() for ch in word):
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    """Stemmed lower-cased words minus stopwords."""
    return {stem(w) for w in words(text) if w not in STOPWORDS}


def numbers(text: str) -> set[str]:
    """Numbers as written (thousands separators removed), e.g. {"512", "0.5", "60%"}."""
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


# How an answer's sentence says it is not from the documents (the citation policy's other way to
# declare what grounds a sentence): the agent's prompt asks for it, the grounding stage keeps such
# a sentence, and the verifier does not judge it as a claim about the documents.
NOT_FROM_DOCUMENTS = "(not from the documents)"
_DECLARED = re.compile(r"\(\s*not\s+from\s+the\s+documents\s*\)", re.IGNORECASE)


def declares_ungrounded(sentence: str) -> bool:
    return bool(_DECLARED.search(sentence))


# A citation marker in an answer: `[1]`, `[1, 3]`, `[doc-2]` (with the space before it); never the
# text of a Markdown link or image (`[here](url)`, `![x](url)`), which a quoted document may hold.
# One grammar for the agent's citation policy and the verifier's claims.
# (?<!\s): a match never starts inside a run of spaces (the one starting before them is the same
# match), so a long run is not scanned again from each of its positions.
CITATION_MARKER = re.compile(r"(?<!\s)\s*(?<!!)\[(\s*[\w.-]+(?:\s*,\s*[\w.-]+)*\s*)\](?!\()")


# Markers that open a sentence (`Text. [1] Next`) belong to the sentence before them.
LEADING_MARKERS = re.compile(rf"^(?:{CITATION_MARKER.pattern})+")


def citation_refs(text: str) -> list[str]:
    """The refs the text's citation markers name, in order."""
    return [r.strip() for m in CITATION_MARKER.finditer(text) for r in m.group(1).split(",")]
