"""Fine-tunes a sentence-transformers embedder on (anchor, passage) pairs: in-batch negatives,
contrastive loss both ways. Run in the export's tool environment (torch, transformers), never
imported by RAGStack itself:

    python train_embedder.py BASE_DIR PAIRS.jsonl OUT_DIR SETTINGS_JSON

Prints one JSON line per progress report ({"step", "steps", "loss"}); OUT_DIR gets a
sentence-transformers folder (the base's pooling and normalisation modules, the tuned weights)
that optimum exports like the base.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModel, AutoTokenizer

# The sentence-transformers folder's own files, copied from the base: the tuned weights keep its
# pooling and normalisation, so optimum exports `sentence_embedding` as it does for the base.
_KEPT = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
    "2_Normalize",
)


def _embed(model: AutoModel, tokenizer: AutoTokenizer, texts: list[str], max_length: int) -> torch.Tensor:
    batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
    return torch.nn.functional.normalize(pooled, dim=-1)


def main(base: Path, pairs_file: Path, out: Path, settings: dict) -> None:
    torch.manual_seed(settings["seed"])
    torch.set_num_threads(settings["threads"] or torch.get_num_threads())
    rng = random.Random(settings["seed"])
    pairs = [tuple(json.loads(line)) for line in pairs_file.open(encoding="utf-8")]
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModel.from_pretrained(base)
    size = settings["batch_size"]
    steps = max(1, math.ceil(len(pairs) / size * settings["epochs"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["learning_rate"], weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    model.train()
    step, started, every = 0, time.monotonic(), max(1, steps // 50)
    while step < steps:
        rng.shuffle(pairs)
        for i in range(0, len(pairs) - 1, size):
            batch = pairs[i : i + size]
            if step >= steps or len(batch) < 2:  # a lone pair has no negative
                break
            anchors = _embed(model, tokenizer, [a for a, _ in batch], settings["anchor_length"])
            passages = _embed(model, tokenizer, [p for _, p in batch], settings["passage_length"])
            logits = anchors @ passages.T * settings["scale"]
            labels = torch.arange(len(batch))
            loss = (
                torch.nn.functional.cross_entropy(logits, labels)
                + torch.nn.functional.cross_entropy(logits.T, labels)
            ) / 2
            loss.backward()
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if step % every == 0 or step == steps:
                report = {"step": step, "steps": steps, "loss": round(float(loss), 4)}
                print(json.dumps({**report, "seconds": round(time.monotonic() - started, 1)}), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    for name in _KEPT:
        source = base / name
        if source.is_dir():
            shutil.copytree(source, out / name, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, out / name)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), json.loads(sys.argv[4]))
