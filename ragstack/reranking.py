"""Cross-encoder reranking with ONNX Runtime: any Hugging Face sequence-classification model,
exported with optimum (`ragstack models install cross-encoder --from DIR` does it): `model.onnx`
plus `tokenizer.json`.

Each (query, passage) pair is encoded together and scored by the model's logit (the last one when
the head has several classes); pairs are batched by length.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragstack import onnx


class CrossEncoder:
    def __init__(
        self,
        model_dir: Path,
        provider: str = "auto",
        batch_size: int = 32,
        max_length: int = 512,
        file: str = "model.onnx",
    ) -> None:
        """`file`: the model in `model_dir` to run (model.int8.onnx: its int8 weights, whose pairs
        run one at a time, several at once: ragstack.onnx.OnnxModel.run)."""
        self._model = onnx.load(
            model_dir,
            provider,
            max_length,
            "install one you have with `ragstack models install cross-encoder --from DIR`",
            file=file,
        )
        self.providers = self._model.providers
        self.batch_size = batch_size
        self.name = f"cross-encoder:{model_dir.name}" + ("" if file == "model.onnx" else f"/{file}")

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance logit per passage, in input order (higher is more relevant)."""
        return self.score_pairs([(query, p) for p in passages])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One relevance logit per (query, passage) pair, in input order."""
        out = np.zeros(len(pairs), dtype=np.float32)
        if not pairs:
            return out
        encodings = self._model.tokenizer.encode_batch(list(pairs))
        for idx, logits, _ in self._model.run(encodings, self.batch_size, self._model.outputs[0]):
            out[idx] = logits[:, -1] if logits.ndim == 2 else logits
        return out
