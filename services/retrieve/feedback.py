"""Pseudo-relevance feedback: the first search's best hits are taken as relevant and the query is
moved towards them, on the lexical side by adding their characteristic terms (RM3, Lavrenko and
Croft 2001; Abdul-Jaleel et al. 2004), on the dense side by adding their mean vector (Rocchio 1971).
Pure functions over terms and vectors; the searcher fetches both from the stores."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np


def expansion_terms(
    feedback: Sequence[tuple[Sequence[str], float]],
    document_frequency: Mapping[str, int],
    documents: int,
    terms: int,
    stopwords: frozenset[str] = frozenset(),
) -> dict[str, float]:
    """The `terms` terms most typical of the feedback texts, with weights that sum to 1.

    `feedback`: each text's analysed terms and its first-search weight (normalised here to a
    distribution P(D|q)). A term's relevance-model probability is P(t|R) = sum over D of
    P(D|q) tf(t, D) / |D|; terms are picked by P(t|R) times idf, so that words every text
    has (not stopwords in this corpus' sense, but near enough) are not picked for being
    frequent, and weighted by P(t|R) alone: BM25 applies idf again when the term is searched.
    Terms in `stopwords`, numbers and single characters are never picked.
    """
    total = sum(max(w, 0.0) for _, w in feedback)
    if not feedback or terms <= 0 or documents <= 0:
        return {}
    relevance: dict[str, float] = {}
    for words, weight in feedback:
        if not words:
            continue
        share = (max(weight, 0.0) / total) if total > 0 else 1.0 / len(feedback)
        for term, count in Counter(words).items():
            if len(term) > 1 and not term.isdigit() and term not in stopwords:
                relevance[term] = relevance.get(term, 0.0) + share * count / len(words)

    def picked_by(term: str) -> tuple[float, str]:
        df = document_frequency.get(term, 0)
        idf = math.log(1 + (documents - df + 0.5) / (df + 0.5))
        return (-relevance[term] * idf, term)

    chosen = sorted(relevance, key=picked_by)[:terms]
    mass = sum(relevance[t] for t in chosen)
    return {t: relevance[t] / mass for t in chosen} if mass > 0 else {}


def rocchio(query: np.ndarray, feedback: Sequence[np.ndarray], weight: float) -> np.ndarray:
    """The query vector moved towards the feedback vectors' mean, by `weight` of the way (0: the
    query; 1: the mean), unit length again for cosine search."""
    if not feedback or weight <= 0:
        return query
    mean = np.mean(np.stack(feedback), axis=0)
    moved = (1.0 - weight) * query + weight * mean
    norm = float(np.linalg.norm(moved))
    return (moved / norm).astype(query.dtype) if norm > 0 else query
