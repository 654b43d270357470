"""Reads a BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ragstack.errors import InvalidArgument


@dataclass(frozen=True)
class BeirSet:
    name: str
    corpus: Path
    queries: dict[str, str]  # only the queries that have judgments in the split
    qrels: dict[str, dict[str, int]]  # query id -> document id -> relevance

    @property
    def library(self) -> str:
        return library_for(self.name)


def library_for(dataset: str) -> str:
    """The library a dataset's corpus is ingested into: its own, reused while unchanged."""
    return "beir-" + re.sub(r"[^A-Za-z0-9_.-]", "-", dataset)[:58]


def load(folder: Path, split: str) -> BeirSet:
    corpus = folder / "corpus.jsonl"
    queries_path = folder / "queries.jsonl"
    qrels_path = folder / "qrels" / f"{split}.tsv"
    for path in (corpus, queries_path, qrels_path):
        if not path.exists():
            splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
            hint = f" (splits here: {', '.join(splits)})" if path == qrels_path and splits else ""
            raise InvalidArgument(f"not a BEIR folder: {path} is missing{hint}")
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader, None)
        if header is None or header[:2] != ["query-id", "corpus-id"]:
            raise InvalidArgument(f"{qrels_path}: expected a header `query-id corpus-id score`")
        for row in reader:
            if len(row) >= 3:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with queries_path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                if str(obj["_id"]) in qrels:
                    queries[str(obj["_id"])] = str(obj["text"])
    missing = set(qrels) - set(queries)
    if missing:
        raise InvalidArgument(f"{len(missing)} judged queries have no text in {queries_path}")
    return BeirSet(folder.resolve().name, corpus, queries, qrels)
