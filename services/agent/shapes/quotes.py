"""The quotable sentences of the evidence, verbatim, and the small text tests the shapes share.

Every quote is a substring of its evidence's text after whitespace normalisation, so a verifier can
find it in what it cites: `generate.strips` drops inline Markdown markup from the sentences it
returns, and a sentence that lost some is looked up again with the markup allowed back in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from ragstack.text import STOPWORDS, content_words, stem, words
from services.agent.generate import NumberedEvidence, strips


@dataclass(frozen=True)
class Quote:
    """A sentence of an evidence chunk, as the chunk writes it (whitespace normalised)."""

    ref: str
    rank: int  # of its evidence, 0 = best
    position: int  # within its chunk
    text: str
    title: str  # its document's title, else its source's file name
    words: frozenset[str]  # content words (stemmed)


def flat(text: str) -> str:
    return " ".join(text.split())


_MARKUP = r"(?:\*\*|__|`)*"


def _verbatim(sentence: str, chunk: str) -> str | None:
    """`sentence` as `chunk` (whitespace-normalised) writes it, or None when it is not there."""
    if sentence in chunk:
        return sentence
    pattern = _MARKUP + r"\s*".join(_MARKUP + re.escape(ch) for ch in sentence.replace(" ", "")) + _MARKUP
    found = re.search(pattern, chunk)
    return found.group(0) if found else None


def document_name(e: NumberedEvidence) -> str:
    chunk = e.hit.chunk
    return chunk.title or PurePath(chunk.source).name or chunk.document_id


def quotes(evidence: Sequence[NumberedEvidence]) -> list[Quote]:
    """The evidence's quotable sentences (`generate.strips`: no fragments, questions, table rows or
    code), in order of evidence rank and reading order."""
    by_ref = {e.ref: e for e in evidence}
    chunks = {e.ref: flat(e.hit.chunk.text) for e in evidence}
    out = []
    for s in strips(evidence):
        text = _verbatim(s.text, chunks[s.ref])
        if text is not None and not heading_like(text):
            out.append(Quote(s.ref, s.rank, s.position, text, document_name(by_ref[s.ref]), _words(text)))
    return out


_LEADERS = re.compile(r"(?:\.\s?){4,}")


def heading_like(text: str) -> bool:
    """A heading or a table-of-contents line, not a sentence: dot leaders, or no closing mark and
    most longer words capitalised ("Optimized Table Tokenization for Table Structure Recognition")."""
    if _LEADERS.search(text):
        return True
    if text.rstrip()[-1:] in ".!?\"')":
        return False
    long = [w for w in text.split() if len(w) > 3 and w[0].isalpha()]
    return bool(long) and sum(w[0].isupper() for w in long) >= 0.75 * len(long)


def _words(text: str) -> frozenset[str]:
    return frozenset(content_words(text))


_DERIVED = ("ability", "ibility", "ation", "ment", "ness", "able", "ible", "ity", "ion", "est", "er", "e")


def _root(word: str) -> str:
    """A stemmed word without one derivational ending, when four letters stay: scalability, scale
    and scalable meet in "scal"; faster and fast in "fast"."""
    for ending in _DERIVED:
        if word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: -len(ending)]
    return word


def close(a: str, b: str) -> bool:
    """Whether two stemmed words are close forms of each other: the same root, or one root begins
    the other and is at least five letters long (speed/speedup)."""
    if a == b:
        return True
    short, long = sorted((_root(a), _root(b)), key=len)
    return short == long or (len(short) >= 5 and long.startswith(short))


def covered(wanted: Iterable[str], have: Iterable[str]) -> int:
    """How many of the `wanted` words `have` holds, close forms counting."""
    have = list(have)
    return sum(1 for w in wanted if any(close(w, h) for h in have))


def phrase_words(text: str) -> frozenset[str]:
    """Content words of a name or an aspect; its stopwords alone when it has nothing else."""
    return _words(text) or frozenset(stem(w) for w in words(text) if w)


def mentions(text: str, name: str) -> bool:
    """Whether `text` names `name`: the phrase itself (case and spacing aside), or every content
    word of it in close forms."""
    if not name.strip():
        return False
    pattern = r"(?<!\w)" + r"\s+".join(re.escape(w) for w in name.split()) + r"(?!\w)"
    if re.search(pattern, text, re.IGNORECASE):
        return True
    wanted = phrase_words(name)
    return bool(wanted) and covered(wanted, _words(text)) == len(wanted)


def clauses(sentence: str) -> list[tuple[int, int]]:
    """Spans of the sentence's clauses: it is cut at `,` `;` `:` followed by a space, outside
    brackets, except at the commas of a list ("train, dev and test sets"); a span leaves out the
    spaces around it and the mark that cut it."""
    marks = _marks(sentence)
    spans: list[tuple[int, int]] = []
    start = 0
    for n, i in enumerate(marks):
        end = marks[n + 1] if n + 1 < len(marks) else len(sentence)
        if sentence[i] == "," and _listed(sentence[i + 1 : end]):
            continue
        spans.extend(_span(sentence, start, i))
        start = i + 1
    spans.extend(_span(sentence, start, len(sentence)))
    return spans


def _marks(sentence: str) -> list[int]:
    """Offsets of the `,` `;` `:` that may end a clause: followed by a space, outside brackets."""
    out, depth = [], 0
    for i, ch in enumerate(sentence):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif depth == 0 and ch in ",;:" and sentence[i + 1 : i + 2].isspace():
            out.append(i)
    return out


_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")


def _listed(segment: str) -> bool:
    """Whether what follows a comma is an item of a list: a word or two, or a few words that
    close it with "and"/"or" (brackets aside)."""
    tokens = [t for t in _BRACKETED.sub(" ", segment).split() if any(ch.isalnum() for ch in t)]
    return len(tokens) <= 2 or (len(tokens) <= 4 and any(t in ("and", "or") for t in tokens))


def _span(sentence: str, a: int, b: int) -> list[tuple[int, int]]:
    piece = sentence[a:b]
    lead = len(piece) - len(piece.lstrip())
    size = len(piece.strip())
    return [(a + lead, a + lead + size)] if size else []


def clause_at(sentence: str, offset: int) -> int:
    """The index of the clause of `clauses(sentence)` that holds `offset` (the nearest before it)."""
    spans = clauses(sentence)
    index = 0
    for i, (a, _) in enumerate(spans):
        if a <= offset:
            index = i
    return index


def is_stopword(word: str) -> bool:
    return word.lower() in STOPWORDS
