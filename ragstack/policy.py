"""Every tuned number and word list of the answer path in one place, each with the data it was
chosen on.

A choice made by looking at a set's figures makes that set's figure in-sample, and the README says
so beside each figure. "By hand" means set once from first principles, not moved by any figure.
The tuning sets are `musique_train100`, BIPIA's train split, SciFact's train queries and the tuning
half of its `claims_train.csv` (`ragstack eval verify --part tune`); HotpotQA dev200, BIPIA's test
split, the other half of the claims and the project's own attack and email sets are for reporting.
Changing a value here changes the README's figures: re-run `make eval`.
"""

from __future__ import annotations

import re
from typing import Final

# --- Retrieval: defaults of RetrieveConfig ------------------------------------------------------
# Tuned on SciFact train (in-sample there) and, for fusion, HotpotQA dev200 too.
HEADING_BOOST = 0.5  # lexical weight of the heading path (which starts with the title); text is 1
FUSION: Final = "score"  # min-max normalised score fusion over reciprocal rank fusion
DENSE_WEIGHT = 0.5  # score fusion's weight of dense; lexical gets the rest
PROXIMITY_WEIGHT = 0.0  # lexical: neighbouring query words found near each other; off (no gain out of sample)
PROXIMITY_SLOP = 4  # words allowed between them

# --- Evidence grading (agent) --------------------------------------------------------------------
# By hand: dense similarity and question-word coverage weigh alike; the grade's bounds.
GRADE_SIMILARITY_WEIGHT = 0.5
CORRECT_FROM = 0.5
AMBIGUOUS_FROM = 0.3

# --- Extractive answers (agent) ------------------------------------------------------------------
# By hand.
MIN_STRIP_WORDS = 5  # shorter sentences are labels and list tails, not answers
KEEP_RELATIVE = 0.8  # a sentence is quoted when it scores at least this share of the best one
STRIP_SIMILARITY = 0.6  # a sentence's score: its similarity to the question,
STRIP_COVERAGE = 0.4  # the share of the question's content words it holds,
STRIP_HEADING = 0.1  # the share its section heading adds,
STRIP_RANK_PENALTY = 0.01  # less a little per rank of its evidence
# A heading, a table's header cell or a row's first cell in an LLM's answer is a name while it is
# this short; a longer one states something and must cite like a sentence (ragstack/answer_units.py).
LABEL_WORDS = 5
# An instruction inside a document (services/agent/instructions.py) is quoted, or shown to the
# LLM, only when it holds this share of the question's content words: the question is about it.
INSTRUCTION_OVERLAP = 0.5
MODALS = frozenset({"should", "must", "may", "might", "shall", "ought"})  # not what a question is about

# --- Multi-hop (agent): defaults of GenerationConfig ---------------------------------------------
# The evidence budget of a question that chains facts, first chosen on HotpotQA dev200; with bridge
# searches, recall on musique_train100 grows with it (12, 15, 20 hits: 0.63, 0.68, 0.72 of
# questions with every supporting paragraph, one ad-hoc run): 15 keeps an LLM prompt short.
MULTI_HOP_TOP_K = 15
BRIDGE_SEARCHES = 3  # tuned on musique_train100 (1 to 5 tried)

# --- Claim verification (verify service) ---------------------------------------------------------
# Tuned on the tuning half of SciFact's claims_train.csv (`eval verify --part tune`): the most
# precise of 0.5, 0.55, 0.6, 0.65 whose recall stays at 0.5 or more.
SUPPORT_THRESHOLD = 0.55
PARTIAL_THRESHOLD = 0.4  # by hand
CLAIM_SIMILARITY_WEIGHT = 0.5  # by hand: similarity and word coverage weigh alike
# By hand: how sure a verdict that a rule gave is. A number or a coded name missing from the cited
# evidence (or a number away from the closest sentence) is near-proof; a negation or a direction
# that differs from the closest sentence is a strong hint, not proof.
CONFIDENCE_MISSING_NUMBER = 0.95
CONFIDENCE_MISSING_NAME = 0.9
CONFIDENCE_CONTRADICTION = 0.6
# By hand: an answer's confidence mixes the supported share of its claims (a partial claim counts
# this much) with the evidence grade; a withheld answer's is capped.
PARTIAL_CLAIM_WEIGHT = 0.5
CONFIDENCE_CLAIMS_WEIGHT = 0.6  # the evidence grade gets the rest
ABSTAIN_CONFIDENCE_CAP = 0.25
# The direction of a change, in general English (not one field's verbs): a claim going one way
# cited to a sentence going only the other is not supported. Written by hand; words that are no
# change in the tuning half ("most", "up", "above", "cut") were taken out.
UP = re.compile(
    r"\b(?:increas\w*|ris(?:e|es|en|ing)|rose|rais(?:e|es|ed|ing)|grow(?:s|n|ing)?|grew|gain\w*|"
    r"higher|greater|larger|bigger|more|improv\w*|better|boost\w*|expand\w*|strengthen\w*|enhanc\w*|"
    r"accelerat\w*|faster|exceed\w*|positive\w*)\b",
    re.IGNORECASE,
)
DOWN = re.compile(
    r"\b(?:decreas\w*|fall(?:s|en|ing)?|fell|drop\w*|declin\w*|reduc\w*|lower\w*|less|fewer|smaller|"
    r"shrink\w*|shrank|shrunk|worse\w*|weaken\w*|diminish\w*|slow\w*|slower|los(?:e|es|s|ing)|lost|"
    r"negative\w*)\b",
    re.IGNORECASE,
)
# Negation: the grammatical negators only (by hand; "lack", "unable" and "fail to" were tried on the
# tuning half and refused more supported claims than contradicting ones).
NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|cannot|without)\b|n't\b",
    re.IGNORECASE,
)

# --- Knowledge graph extraction (ingest) ---------------------------------------------------------
# Fitted to SciFact's abstracts by reading the entities they gave (SciFact's graph is not in any
# README figure; HotpotQA's graph rows are out-of-sample for these lists).
# Statistics abbreviations that look like gene names.
NOT_TERMS = frozenset({"CI", "OR", "HR", "RR", "SD", "SE", "SEM", "IQR", "NS", "AM", "PM", "OK", "TV"})
# Section labels of structured abstracts, which NER takes for organisations.
SECTION_LABELS = frozenset(
    "background methods method results conclusions conclusion objective objectives introduction abstract "
    "purpose design setting findings interpretation discussion summary aim aims participants "
    "measurements context importance significance rationale".split()
)
