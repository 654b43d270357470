"""Dataset, benchmark and corpus names in the evidence, with their sizes and use: rules, no LLM.

A name is a run of capitalised, CamelCase or acronym tokens ("PubTabNet", "PubTables-1M",
"MS MARCO", "SQuAD 2.0"). It counts as a dataset when the text says so next to it:

- strong cues: a collection noun right after it ("the PubTabNet data set", "the Brown corpus"), or
  before a list of names ("data sets: A, B and C", "a benchmark such as X"), or a size in data
  units right after it ("FinTabNet (113k samples)", "X consists of 10k images");
- weak cues ("trained on X", "evaluated on X") count only for a name that a strong cue names
  somewhere in the evidence: models are "trained on" representations and tasks too.

Words that label the document itself (Table, Figure, Section...), months and days never count, nor
does a lone capitalised word that opens a sentence (capitals there say nothing).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from services.agent.generate import NumberedEvidence
from services.agent.shapes.cells import DatasetMention
from services.agent.shapes.quotes import Quote, clauses, is_stopword, quotes

_TOKEN = r"(?:[A-Z][A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z0-9]*)(?:[-.][A-Za-z0-9]+)*"
_VERSION = r"(?:\s+(?:v?\d+\.\d+|(?:19|20)\d\d)(?![\w.]))?"
_NAME = rf"{_TOKEN}(?:\s+{_TOKEN}){{0,3}}{_VERSION}"
_CUE = (
    r"(?i:data[\s-]?sets?|datasets?|benchmarks?|corpus|corpora|collections?|treebanks?"
    r"|(?:training|train|validation|dev|test|evaluation)[\s-](?:sets?|splits?))"
)
_UNITS = (
    r"(?:images|tables|documents|docs|pages|samples|sentences|examples|instances|questions|queries|pairs"
    r"|tokens|words|articles|records|rows|videos|utterances|dialog(?:ue)?s|papers|files|hours|entries"
    r"|annotations|passages|texts|reviews|tweets|posts|abstracts|charts|forms|receipts|invoices|PDFs|scans"
    r"|photos|clips|speakers|languages)"
)
_SIZE = (
    r"(?:(?:about|approximately|approx\.|around|roughly|over|more than|nearly|almost|up to|~|≈)\s*)?"
    rf"(?!(?:19|20)\d\d\b)\d[\d,.]*\s*(?:[kKMB]|thousand|million|billion)?\s*(?:[a-z][a-z-]+\s+)?{_UNITS}"
    r"(?![\w-])"
)
_CITATION = r"(?:\s*\[[\d,\s–-]+\])?"

# NAME + cue noun: "the PubTabNet data set", "the European Social Survey (ESS) dataset"
_ABBREVIATION = r"\s*\((?P<{}>[A-Z][A-Za-z0-9-]*)\)"
_BEFORE_CUE = re.compile(
    rf"(?<![\w-])(?P<name>{_NAME})(?:{_ABBREVIATION.format('abbr')})?{_CITATION}\s+(?P<cue>{_CUE})(?![\w-])"
    rf"(?:{_ABBREVIATION.format('after')})?"
)
_PLURAL = re.compile(r"(?i)(?:s|corpora)$")
# what precedes the last of "A, B and C datasets": "A, B and "
_SEPARATOR_BEFORE = re.compile(r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)$")
_NAME_BEFORE = re.compile(rf"(?<![\w-])(?P<name>{_NAME}){_CITATION}$")
# cue noun + list of names: "data sets: A (1k images), B and C", "a data set like X"
_AFTER_CUE = re.compile(
    rf"(?<!\bwe )(?<!\bWe )(?<!\bto )(?<!\bthey )(?<!\bThey )(?<![\w-]){_CUE}"
    r"(?:\s*:\s*|\s*,?\s+(?:like|such as|including|called|named|namely|e\.g\.,?|i\.e\.,?)\s+)"
)
# cue noun + name, nothing between: "the dataset GitTables" (weak: "on this benchmark OTSL wins")
_AFTER_CUE_PLAIN = re.compile(rf"(?<!\bwe )(?<!\bWe )(?<![\w-]){_CUE}\s+(?=[A-Za-z])")
# weak cues: "trained only on X"
_WEAK = re.compile(
    r"(?<![\w-])(?i:trained|evaluated|tested|fine-?tuned|pre-?trained|benchmarked|validated|experiments?)"
    r"\s+(?:\w+ly\s+)?(?:(?:it|them|models?)\s+)?on\s+(?:the\s+)?"
)
# NAME consists of / contains SIZE
_HOLDS = re.compile(
    rf"(?<![\w-])(?P<name>{_NAME}){_CITATION}\s+(?:consists of|contains|comprises|includes|holds)\s+"
    rf"(?P<size>{_SIZE})"
)
_ITEM = re.compile(rf"(?P<name>{_NAME}){_CITATION}(?:\s*\((?P<paren>[^()]*)\))?{_CITATION}")
_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+")
_SIZE_RE = re.compile(_SIZE)
_SIZE_ALONE = re.compile(rf"^\s*(?P<size>{_SIZE})")

_STRUCTURAL = frozenset(
    """table tables tab figure figures fig section sections sec appendix chapter equation eq eqs
    algorithm listing page pages part step supplementary abstract introduction conclusion conclusions
    results result discussion method methods related work experiments experiment acknowledgements
    references note example annex theorem lemma definition proposition remark box dataset datasets
    data set sets corpus corpora benchmark benchmarks collection
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)

_STRONG_USE = re.compile(
    r"(?i)\b(?:(?:train|fine-?tun|pre-?train|evaluat|test|validat)\w*|benchmark(?:ed|ing))"
)
_WEAK_USE = re.compile(
    r"(?i)\b(?:use[ds]?|using|perform\w*|cho(?:se|sen|ose)|select\w*|appl(?:y|ied|ies)|report\w*"
    r"|measur\w*|comput\w*|experiment\w*|split\w*)\b"
)


def dataset_names(evidence: Sequence[NumberedEvidence]) -> Callable[[str], int]:
    """A counter of the evidence's datasets (`datasets`) that a text names."""
    patterns = [re.compile(rf"(?<![\w-]){re.escape(d.name)}(?![\w-])") for d in datasets(evidence)]
    return lambda text: sum(1 for p in patterns if p.search(text))


@dataclass(frozen=True)
class _Mention:
    key: str
    names: tuple[str, ...]  # how it is shown, then the ways the text writes it
    size: str
    used_for: str
    use: int  # how clearly used_for says how it is used: 2 trained/evaluated..., 1 used/chosen..., 0
    ref: str
    order: tuple[int, int, int]  # evidence rank, sentence, offset
    strong: bool


def datasets(evidence: Sequence[NumberedEvidence]) -> tuple[DatasetMention, ...]:
    """One entry per dataset named in the evidence, in order of first mention, with all the refs
    of the evidence that names it."""
    quoted = quotes(evidence)
    found = [m for q in quoted for m in _mentions(q)]
    confirmed = {m.key for m in found if m.strong}
    groups: dict[str, list[_Mention]] = {}
    for m in sorted(found, key=lambda m: m.order):
        if m.key in confirmed:
            groups.setdefault(m.key, []).append(m)
    return tuple(_merged(group, quoted) for group in groups.values())


def _merged(group: list[_Mention], quoted: Sequence[Quote]) -> DatasetMention:
    name = next(m.names[0] for m in group if m.strong)
    size = next((m.size for m in group if m.size), "")
    best = min(group, key=lambda m: (-m.use, m.order))
    written = sorted({n for m in group for n in m.names[1:]}, key=lambda n: (-len(n), n))
    pattern = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, written)) + r")(?![\w-])")
    named = [q for q in quoted if pattern.search(q.text)]
    refs = sorted({(m.order[0], m.ref) for m in group} | {(q.rank, q.ref) for q in named})
    used_for = best.used_for if best.use else ""
    return DatasetMention(name, size, used_for, tuple(dict.fromkeys(r for _, r in refs)))


@dataclass(frozen=True)
class _Found:
    name: str
    start: int
    size: str
    strong: bool
    suffix: str = ""  # a capitalised cue that ends the name: "Stanford Question Answering Dataset"
    alias: str = ""  # the abbreviation given in brackets: "SQuAD"

    @property
    def display(self) -> str:
        full = f"{self.name} {self.suffix}" if self.suffix else self.name
        return f"{full} ({self.alias})" if self.alias else full

    @property
    def key(self) -> str:
        return (self.alias or self.display).lower()


def _mentions(q: Quote) -> list[_Mention]:
    text = q.text
    candidates = (*_before_cue(text), *_after_cue(text), *_holding(text), *_weak(text))
    found = [c for f in candidates if (c := _clean(f, text))]
    keys = {f.key for f in found}
    # A sentence that names one dataset and gives one size gives that dataset's size.
    sizes = [m.group(0) for m in _SIZE_RE.finditer(text)]
    alone = sizes[0] if len(keys) == 1 and len(sizes) == 1 else ""
    out = []
    for f in found:
        used_for, use = _use(text, f.start)
        order = (q.rank, q.position, f.start)
        names = tuple(n for n in (f.display, f.name, f.alias) if n)
        out.append(_Mention(f.key, names, f.size or alone, used_for, use, q.ref, order, f.strong))
    return out


def _before_cue(text: str) -> list[_Found]:
    out = []
    for m in _BEFORE_CUE.finditer(text):
        cue, alias = m.group("cue"), m.group("abbr") or m.group("after") or ""
        suffix = cue if cue[0].isupper() and not m.group("abbr") else ""
        out.append(_Found(m.group("name"), m.start("name"), "", True, suffix, alias))
        if _PLURAL.search(m.group("cue")):
            out.extend(_coordinated(text, m.start("name")))
    return out


def _coordinated(text: str, end: int) -> list[_Found]:
    """The names listed before the one at `end` that a plural cue follows ("A, B and C datasets")."""
    out: list[_Found] = []
    while len(out) < 8 and (separator := _SEPARATOR_BEFORE.search(text, 0, end)):
        name = _NAME_BEFORE.search(text, 0, separator.start())
        if not name:
            break
        out.append(_Found(name.group("name"), name.start("name"), "", True))
        end = name.start()
    return out


def _after_cue(text: str) -> list[_Found]:
    strong = [f for m in _AFTER_CUE.finditer(text) for f in _listed(text, m.end(), strong=True)]
    plain = [f for m in _AFTER_CUE_PLAIN.finditer(text) for f in _listed(text, m.end(), strong=False)]
    return strong + plain


def _weak(text: str) -> list[_Found]:
    return [f for m in _WEAK.finditer(text) for f in _listed(text, m.end(), strong=False)]


def _holding(text: str) -> list[_Found]:
    return [_Found(m.group("name"), m.start("name"), m.group("size"), True) for m in _HOLDS.finditer(text)]


def _listed(text: str, pos: int, strong: bool) -> list[_Found]:
    """The names listed from `pos` on ("A (1k images), B and C"); one given a size in data units
    in brackets after it counts as a dataset whatever cue precedes it."""
    out = []
    while item := _ITEM.match(text, pos):
        sized = _SIZE_ALONE.match(item.group("paren") or "")
        size = sized.group("size") if sized else ""
        out.append(_Found(item.group("name"), item.start("name"), size, strong or bool(size)))
        separator = _SEPARATOR.match(text, item.end())
        if not separator:
            break
        pos = separator.end()
    return out


def _clean(found: _Found, text: str) -> _Found | None:
    """The name without leading stopwords ("The", "Our"), or None when it is no dataset name:
    a label of the document (Table, Figure...), a month, an author ("Smith et al."), or one
    plain capitalised word opening the sentence."""
    tokens = found.name.split()
    start = found.start
    while tokens and is_stopword(tokens[0]):
        start = text.index(tokens[1], start + len(tokens[0])) if len(tokens) > 1 else start
        tokens = tokens[1:]
    if not tokens or any(t.lower().rstrip(".") in _STRUCTURAL for t in tokens):
        return None
    name = " ".join(tokens)
    if len(name) < 2 or re.match(r"\s*et\s+al\b", text[start + len(name) :]):
        return None
    opens = not re.search(r"[A-Za-z]", text[:start])
    plain = all(t[1:].islower() and t.isalpha() for t in tokens)
    if opens and plain:
        return None
    return replace(found, name=name, start=start)


def _use(text: str, offset: int) -> tuple[str, int]:
    """The clause of the sentence nearest the mention at `offset` that says how the data is used
    (trained, evaluated... scores 2; used, chosen... scores 1), and its score; ("", 0) if none."""
    spans = clauses(text)
    here = max((i for i, (a, _) in enumerate(spans) if a <= offset), default=0)
    best: tuple[int, int, int, int] | None = None  # distance, -score, after, index
    for i, (a, b) in enumerate(spans):
        clause = text[a:b]
        score = 2 if _STRONG_USE.search(clause) else 1 if _WEAK_USE.search(clause) else 0
        if score and abs(i - here) <= 3:
            key = (abs(i - here), -score, int(i > here), i)
            best = key if best is None or key < best else best
    if best is None:
        return "", 0
    a, b = spans[best[3]]
    return text[a:b].rstrip("."), -best[1]
