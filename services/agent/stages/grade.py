"""Grade: the evidence gathered, as a whole and against the whole question: what the draft is
written from. (Each search was graded as it ran, by the gather stage.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragstack import domain as d
from ragstack.query_trace import QueryTrace
from services.agent import grading
from services.agent.stages.gather import Gathered
from services.agent.stages.route import Routed


@dataclass(frozen=True)
class Evidence:
    hits: list[d.SearchHit]
    score: float
    grade: str
    from_several: bool = False  # put together from several searches: streamed once more, as a whole


async def grade_evidence(
    grader: grading.Grader, routed: Routed, gathered: Gathered, trace: QueryTrace
) -> Evidence:
    """A database result as it is; else every useful search's hits, taken in turn. When every
    search missed, the first one's hits stay as the sources (and nothing is drafted)."""
    evidence = await _evidence(grader, routed, gathered)
    trace.grade = {"grade": evidence.grade, "score": evidence.score, "hits": len(evidence.hits)}
    return evidence


async def _evidence(grader: grading.Grader, routed: Routed, gathered: Gathered) -> Evidence:
    if gathered.sql is not None and gathered.sql.hit is not None:
        return Evidence([gathered.sql.hit], 1.0, grading.CORRECT)
    searches = gathered.searches
    useful = [s.hits for s in searches if s.grade != grading.INCORRECT]
    if not useful:
        return Evidence(searches[0].hits if searches else [], 0.0, grading.INCORRECT)
    hits = _interleave(useful, routed.top_k * max(1, len(routed.event.sub_questions)))
    score = await grader.score(routed.question, hits)
    return Evidence(hits, score, grading.grade(score), from_several=len(searches) > 1)


def _interleave(lists: Sequence[Sequence[d.SearchHit]], limit: int) -> list[d.SearchHit]:
    """The hits of several searches taken in turn (each one's best first), each chunk once."""
    out: dict[str, d.SearchHit] = {}
    for rank in range(max((len(x) for x in lists), default=0)):
        for hits in lists:
            if rank < len(hits) and hits[rank].chunk.chunk_id not in out:
                out[hits[rank].chunk.chunk_id] = hits[rank]
    return list(out.values())[:limit]
