"""What a sentence says about how work was done: procedure steps, settings and hyper-parameters,
data, code, hardware, evaluation. Each test counts its cues in a sentence (0: none)."""

from __future__ import annotations

import re

from ragstack.text import STOPWORDS

_STEP_VERB = re.compile(
    r"(?i)\b(?:train(?:ed|s)?|fine-?tun(?:e|ed|es)|pre-?train(?:ed|s)?|appl(?:y|ied|ies)|comput(?:e|ed|es)"
    r"|split(?:s)?|annotat(?:e|ed|es)|pick(?:ed|s)?|cho(?:se|sen|ose)|select(?:ed|s)?|evaluat(?:e|ed|es)"
    r"|pre-?process(?:ed|es)?|tokeni[sz](?:e|ed|es)|sampl(?:e|ed|es)|extract(?:ed|s)?|implement(?:ed|s)?"
    r"|initiali[sz](?:e|ed|es)|optimi[sz](?:e|ed|es)|measur(?:e|ed|es)|obtain(?:ed|s)?|run|ran"
    r"|collect(?:ed|s)?|filter(?:ed|s)?|label(?:l?ed|s)?|normali[sz](?:e|ed|es)|augment(?:ed|s)?"
    r"|replac(?:e|ed|es)|convert(?:ed|s)?|generat(?:e|ed|es)|perform(?:ed|s)?|use[ds]?|feed|fed"
    r"|encod(?:e|ed|es)|decod(?:e|ed|es)|remov(?:e|ed|es)|install(?:ed|s)?|configur(?:e|ed|es)"
    r"|insert(?:ed|s)?|tighten(?:ed|s)?|attach(?:ed|es)?|mount(?:ed|s)?|calibrat(?:e|ed|es)"
    r"|repeat(?:ed|s)?|report(?:ed|s)?|conduct(?:ed|s)?|merg(?:e|ed|es)|cluster(?:ed|s)?)\b"
)
_SEQUENCE = re.compile(
    r"(?i)(?:^|[.;:,]\s+|\b)(?:first(?:ly)?|second(?:ly)?|then|next|finally|afterwards|subsequently"
    r"|after\s+that|step\s+\d+)\b"
)
# An instruction: a verb that opens the sentence (after a sequence word, if any) and takes an
# object ("Mix the flour", "Then knead the dough", "Tighten all nuts").
_IMPERATIVE = re.compile(
    r"^(?:(?:first(?:ly)?|then|next|finally|afterwards|now|second(?:ly)?)\s*,?\s+)?(?P<verb>[A-Za-z]+)\s+"
    r"(?:the|a|an|all|each|every|your|it|them|this|these|those|both|any|some)\b",
    re.I,
)
_NOT_VERBS = frozenset(
    """after before during within without under over since unlike despite because although though
    unless until once about across against along among around behind below beneath beside between
    beyond inside near onto outside through throughout toward towards upon via also only even just
    both all each every such like here now thus hence however therefore note""".split()
)
_WE = re.compile(r"\b(?:[Ww]e|[Oo]ur)\b")
# A sentence that reports an outcome rather than what was done.
_RESULT = re.compile(
    r"(?i)\b(?:outperform\w*|achiev\w*|evident|results?\s+(?:show|are|is|indicate)\w*|presented\s+in"
    r"|shown\s+in|improv\w*|better|worse|advantage)\b"
)

_PARAMETER = re.compile(
    r"(?i)\b(?:learning[\s-]rates?|lr|batch[\s-]sizes?|epochs?|iterations?|training\s+steps|warm-?up"
    r"|weight[\s-]decay|dropout|momentum|optimi[sz]er|adamw?|sgd|threshold|temperature|seed|layers?"
    r"|heads?|hidden[\s-](?:size|units?|dim\w*)|dimensions?|embedding[\s-]size|beam[\s-](?:size|width)"
    r"|top-?k|top-?p|max(?:imum)?[\s-](?:length|tokens)|context[\s-](?:length|window)|window[\s-]size"
    r"|kernel[\s-]size|stride|regulari[sz]ation|chunk[\s-]size|alpha|beta|lambda|gamma)\b"
)
_ASSIGNMENT = re.compile(r"(?<![\w.])[A-Za-z_][\w-]*\s?=\s?-?\d[\d.,eE-]*")
_NUMBER = re.compile(r"(?<![\w.])\d[\d.,]*")
_QUANTITY = re.compile(
    r"(?<![\w.])\d[\d.,]*\s?(?:ms|sec|secs|seconds?|minutes?|hours?|days?|GHz|MHz|[KMGT]i?B|bits?|px|pixels"
    r"|mm|cm|°C|°F|epochs?|steps|iterations|layers|heads|tokens|dimensions|warm-?up\s+steps|GPUs?|cores?)"
    r"(?![\w])"
)

_DATA = re.compile(
    r"(?i)\b(?:data[\s-]?sets?|datasets?|corpus|corpora|benchmarks?|samples?|(?:training|test|validation"
    r"|dev|held-out|evaluation)[\s-](?:sets?|splits?|data)|splits?|annotat\w+|ground[\s-]truth)\b"
)

_URL = re.compile(r"(?i)\b(?:https?://\S+|(?:github|gitlab|bitbucket)\.(?:com|org)/\S+|huggingface\.co/\S+)")
_CODE = re.compile(
    r"(?i)\b(?:source\s+code|code|implementation|repository|scripts?|software|package|library)\b"
)
_RELEASED = re.compile(
    r"(?i)\b(?:available|released|release|open[\s-]sourced?|public(?:ly)?|published|provided|download\w*)\b"
)
_HARDWARE_STRONG = re.compile(
    r"(?i)\b(?:GPUs?|CPUs?|TPUs?|NVIDIA|AMD|Intel|Xeon|EPYC|Ryzen|A100|H100|H200|V100|P100|T4|L4|A10G?"
    r"|RTX|GTX|Tesla|Apple\s+M\d|graphics\s+cards?)\b"
)
_HARDWARE_WEAK = re.compile(
    r"(?i)\b(?:cores?|RAM|memory|VRAM|\d+\s?[GT]i?B|GHz|machines?|nodes?|servers?|cluster|laptop)\b"
)
_METRIC = re.compile(
    r"\b(?:[Aa]ccuracy|F1|F-?score|[Pp]recision|[Rr]ecall|BLEU|ROUGE(?:-\w+)?|METEOR|mAP|AP|TEDS?|[Ee]xact"
    r"\s+[Mm]atch|EM|[Pp]erplexity|AUC|ROC|MRR|n?DCG|nDCG|WER|CER|IoU|[Ee]rror\s+rates?|[Ll]atency"
    r"|[Tt]hroughput|[Ss]cores?|[Mm]etrics?)\b"
)
_PROTOCOL = re.compile(
    r"(?i)\b(?:evaluat\w*|test(?:ed|ing)?\s+(?:set|split|on)|cross-?validation|held-?out|metric\w*"
    r"|benchmark\w*|we\s+report|reported|measured|ablation)\b"
)


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(pattern.findall(text))


def imperative(text: str) -> bool:
    m = _IMPERATIVE.match(text)
    if not m:
        return False
    verb = m.group("verb").lower()
    return verb not in STOPWORDS and verb not in _NOT_VERBS and not verb.endswith("ly")


def step(text: str) -> int:
    """Procedure: a verb of doing (trained, applied, computed...) or an instruction ("Mix the
    flour"), more when "we" do it or it is put in sequence (first, then, finally); none for a
    sentence that reports an outcome."""
    verbs = _count(_STEP_VERB, text) + imperative(text)
    if not verbs or (_RESULT.search(text) and not _WE.search(text)):
        return 0
    return min(verbs, 3) + bool(_WE.search(text)) + bool(_SEQUENCE.search(text))


def setting(text: str) -> int:
    """Settings: parameter names with a number in the sentence, `name=value`, quantities with units."""
    parameters = _count(_PARAMETER, text) if _NUMBER.search(text) else 0
    return parameters + 2 * _count(_ASSIGNMENT, text) + _count(_QUANTITY, text)


def hyper_parameter(text: str) -> int:
    """Values of training settings: `name=value`, or a parameter name with a number."""
    assignments = _count(_ASSIGNMENT, text)
    parameters = _count(_PARAMETER, text) if _NUMBER.search(text) else 0
    return 2 * assignments + parameters if assignments or parameters else 0


def data(text: str) -> int:
    return _count(_DATA, text)


def code(text: str) -> int:
    """A repository address (3 each), or code said to be available, released... (2)."""
    urls = _count(_URL, text)
    released = 2 if _CODE.search(text) and _RELEASED.search(text) else 0
    return 3 * urls + released


def hardware(text: str) -> int:
    """Processor and accelerator names count 2, cores, memory and clock rates 1; at least 2 needed."""
    score = 2 * _count(_HARDWARE_STRONG, text) + _count(_HARDWARE_WEAK, text)
    return score if score >= 2 else 0


def evaluation(text: str) -> int:
    """Metrics named (1 each) and the protocol (evaluated, test set, we report...: 2 each), less
    for a sentence that reports an outcome; a metric is needed."""
    metrics = _count(_METRIC, text)
    if not metrics:
        return 0
    return max(1, metrics + 2 * _count(_PROTOCOL, text) - bool(_RESULT.search(text)))


def availability(text: str) -> int:
    return 1 if _RELEASED.search(text) else 0
