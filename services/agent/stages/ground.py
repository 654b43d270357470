"""Ground: every sentence of the draft says what grounds it (generation.citation_policy). A sentence
cites the evidence (`[n]` with a ref the draft was given) or declares it is not from the documents;
one with neither is removed (lenient) or withholds the whole answer (strict). The sentences are
those of the answer's units as the verifier reads them (ragstack/answer_units.py): each line, list
item and table cell on its own, and a heading or row name too long to be a name, so that no
Markdown structure lets an uncited statement ride on a cited one. Applied to what is delivered: the
`delta` events carried the draft as it was written, `done.answer` is the answer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragstack.answer_units import answer_units, is_name, says_not_stated
from ragstack.query_trace import QueryTrace
from ragstack.text import citation_refs, declares_ungrounded, split_sentences
from services.agent.generate import NumberedEvidence


def grounded_text(text: str, evidence: Sequence[NumberedEvidence], policy: str, trace: QueryTrace) -> str:
    """An LLM's draft as delivered under `policy` (strict, lenient or keep): "" when withheld."""
    if policy == "keep":
        return text
    refs = {e.ref for e in evidence}
    ungrounded = [
        sentence
        for unit in answer_units(text)
        if unit.kind != "label" or not is_name(unit.text)
        for sentence in split_sentences(unit.text)
        if not _grounded(sentence, refs)
    ]
    if not ungrounded:
        return text
    trace.ungrounded = ungrounded
    if policy == "strict":
        trace.no_draft_reason = (
            f"{len(ungrounded)} sentence(s) neither cite the documents nor say they are not from them "
            "(generation.citation_policy: strict)"
        )
        return ""
    for sentence in ungrounded:
        text = _remove(text, sentence)
    return _EMPTIED.sub("", text).strip()


def _grounded(sentence: str, refs: set[str]) -> bool:
    cited = set(citation_refs(sentence))
    return (
        (bool(cited) and cited <= refs)  # no made-up source
        or declares_ungrounded(sentence)
        or says_not_stated(sentence)  # a cell or item's "not stated": nothing claimed
    )


# A heading, quote or item marker whose text was removed.
_EMPTIED = re.compile(r"^[ \t]*(?:#{1,6}|>|[-*+]|\d+[.)])[ \t]*(?:\n|$)", re.MULTILINE)


def _remove(text: str, sentence: str) -> str:
    """`text` without `sentence` (whitespace-normalised by the splitter, so matched word by word)."""
    pattern = r"\s*".join(re.escape(w) for w in sentence.split())
    return re.sub(r"[ \t]*" + pattern + r"[ \t]*", " ", text, count=1).replace("  ", " ")
