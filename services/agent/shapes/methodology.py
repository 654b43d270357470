"""How something was done: the evidence's sentences on the procedure (Steps), its settings
(Settings) and its data (Data), quoted with their refs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from services.agent.generate import NumberedEvidence
from services.agent.shapes import signals
from services.agent.shapes.cells import MISSING, Section
from services.agent.shapes.datasets import dataset_names
from services.agent.shapes.pick import cited, ranked
from services.agent.shapes.quotes import Quote, quotes

PER_SECTION = 5  # the most items a section quotes


def methodology(question: str, evidence: Sequence[NumberedEvidence]) -> tuple[Section, ...]:
    """Steps, Settings and Data, each the sentences with the most cues for it (a sentence may serve
    more than one), in reading order; a section with none holds one NOT_STATED cell."""
    quoted = quotes(evidence)
    named = dataset_names(evidence)

    def data(q: Quote) -> float:
        return 2 * named(q.text) + signals.data(q.text)

    scorers: tuple[tuple[str, Callable[[Quote], float]], ...] = (
        ("Steps", lambda q: signals.step(q.text)),
        ("Settings", lambda q: signals.setting(q.text)),
        ("Data", data),
    )
    sections = []
    for title, score in scorers:
        best = [q for _, q in ranked(quoted, score, question)[:PER_SECTION]]
        best.sort(key=lambda q: (q.rank, q.position))
        sections.append(Section(title, tuple(cited(q, quoted) for q in best) or (MISSING,)))
    return tuple(sections)
