"""A reproducibility checklist: code, data, hyper-parameters, hardware and evaluation, each the
evidence sentence that states it best, or NOT_STATED (missing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from services.agent.generate import NumberedEvidence
from services.agent.shapes import signals
from services.agent.shapes.cells import CHECKLIST, MISSING, ChecklistItem
from services.agent.shapes.datasets import dataset_names
from services.agent.shapes.pick import cited, ranked
from services.agent.shapes.quotes import Quote, quotes


def reproduce_checklist(question: str, evidence: Sequence[NumberedEvidence]) -> tuple[ChecklistItem, ...]:
    quoted = quotes(evidence)
    named = dataset_names(evidence)

    def data(q: Quote) -> float:
        cues = signals.data(q.text)
        names = named(q.text)
        return 2 * names + cues + 4 * signals.availability(q.text) if names or cues else 0

    scorers: dict[str, Callable[[Quote], float]] = {
        "Code": lambda q: signals.code(q.text),
        "Data": data,
        "Hyper-parameters": lambda q: signals.hyper_parameter(q.text),
        "Hardware": lambda q: signals.hardware(q.text),
        "Evaluation": lambda q: signals.evaluation(q.text),
    }
    items = []
    for item in CHECKLIST:
        best = ranked(quoted, scorers[item], question)
        items.append(ChecklistItem(item, cited(best[0][1], quoted) if best else MISSING))
    return tuple(items)
