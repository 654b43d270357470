"""Query modes (DocuMind's): what kind of answer a question wants. Each has its retrieval budget
(hits per search), context cap (evidence chunks the draft reads), answer shape and LLM instruction.
The offline shapes are in services/agent/shapes; DATASETS is always filled deterministically.

Without an LLM router the mode comes from the question's wording: general English cues written by
hand from the modes' definitions, tuned on no evaluation set."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragstack.domain import QueryMode


@dataclass(frozen=True)
class ModeSpec:
    top_k: int  # hits per search when neither the request nor the LLM router says; 0: configured
    context: int  # evidence chunks the draft reads; 0: every one gathered
    instruction: str  # added to the LLM's rules: the answer's shape


_CELLS = (
    "Every cell or item quotes or closely paraphrases the documents and ends with the number of the "
    'document it comes from in square brackets, like [1]. Where the documents say nothing, write "not '
    'stated" without a number.'
)
SPECS = {
    QueryMode.GENERAL: ModeSpec(0, 0, ""),
    QueryMode.COMPARE: ModeSpec(
        10,
        20,
        "Answer with a Markdown table instead of sentences: one row per thing the question compares "
        "(the first column names it), one column per aspect it asks about. " + _CELLS,
    ),
    QueryMode.METHODOLOGY: ModeSpec(
        10,
        12,
        "Answer with three short lists instead of sentences, under the headings ### Steps, ### Settings "
        "and ### Data: how it was done, with which parameters, on which data. " + _CELLS,
    ),
    QueryMode.DATASETS: ModeSpec(15, 30, ""),  # extracted, never written by the LLM
    QueryMode.REPRODUCE: ModeSpec(
        12,
        20,
        "Answer with a checklist instead of sentences, one line each: - Code: ..., - Data: ..., "
        "- Hyper-parameters: ..., - Hardware: ..., - Evaluation: ... . " + _CELLS,
    ),
}

_REPRODUCE = re.compile(r"\b(?:reproduc\w*|replicat\w*|re-?implement\w*|re-?run)\b", re.IGNORECASE)
# A comparison asked for, not a question that mentions a difference ("laws different from ...").
_COMPARE = re.compile(
    r"^\s*(?:please\s+)?(?:compare|contrast)\b|\bcomparison\s+(?:of|between)\b|\b(?:versus|vs\.?)\s"
    r"|\bdifferences?\s+between\b|\bhow\s+(?:do|does|did)\b.+\bdiffer\b",
    re.IGNORECASE,
)
_DATASETS = re.compile(
    r"\b(?:which|what)\b.{0,40}\b(?:datasets?|data\s+sets?|benchmarks?|corpus|corpora)\b"
    r"|\b(?:datasets?|data\s+sets?|benchmarks?|corpora)\s+(?:were|was|are|is)?\s*(?:used|named|mentioned)\b",
    re.IGNORECASE,
)
# How a piece of work was done: its methodology or set-up, or how it was trained, built, measured.
_METHOD = re.compile(
    r"\bmethodology\b|\b(?:experimental|training|evaluation)\s+(?:setup|set-up|design|settings?|protocol|procedure)\b"
    r"|\bhow\s+(?:was|were|did)\b.+\b(?:trained|built|measured|computed|evaluated|collected|obtained)\b",
    re.IGNORECASE,
)


def detect(question: str) -> tuple[QueryMode, str]:
    """The mode the wording asks for, and why."""
    for mode, cue, why in (
        (QueryMode.REPRODUCE, _REPRODUCE, "asks what reproducing the work needs"),
        (QueryMode.COMPARE, _COMPARE, "asks for a comparison"),
        (QueryMode.DATASETS, _DATASETS, "asks which datasets or benchmarks"),
        (QueryMode.METHODOLOGY, _METHOD, "asks how something was done"),
    ):
        if cue.search(question):
            return mode, why
    return QueryMode.GENERAL, ""
