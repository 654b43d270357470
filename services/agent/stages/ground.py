"""Ground: every sentence of the draft says what grounds it (generation.citation_policy). A sentence
cites the evidence (`[n]` with a ref the draft was given) or declares it is not from the documents;
one with neither is removed (lenient) or withholds the whole answer (strict). Applied to what is
delivered: the `delta` events carried the draft as it was written, `done.answer` is the answer."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragstack.query_trace import QueryTrace
from ragstack.text import citation_refs, declares_ungrounded, split_sentences
from services.agent.generate import NumberedEvidence


def grounded_text(text: str, evidence: Sequence[NumberedEvidence], policy: str, trace: QueryTrace) -> str:
    """An LLM's draft as delivered under `policy` (strict, lenient or keep): "" when withheld."""
    if policy == "keep":
        return text
    refs = {e.ref for e in evidence}
    ungrounded = [s for s in split_sentences(text) if not _grounded(s, refs)]
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
    return text.strip()


def _grounded(sentence: str, refs: set[str]) -> bool:
    cited = set(citation_refs(sentence))
    return (bool(cited) and cited <= refs) or declares_ungrounded(sentence)  # no made-up source


def _remove(text: str, sentence: str) -> str:
    """`text` without `sentence` (whitespace-normalised by the splitter, so matched word by word)."""
    pattern = r"\s*".join(re.escape(w) for w in sentence.split())
    return re.sub(r"[ \t]*" + pattern + r"[ \t]*", " ", text, count=1).replace("  ", " ")
